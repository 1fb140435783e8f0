/*
 * hugepreload enable UNIT [--conf K:V,...] [--root DIR]
 * hugepreload disable UNIT [--root DIR]
 *
 * Write and remove the systemd drop-in that runs UNIT under the library:
 * DIR/etc/systemd/system/UNIT.service.d/hugepreload.conf (DIR "" unless
 * --root, as systemctl's), made from the installed hugepreload.conf with
 * the library's path as this command finds it and, with --conf, that
 * policy (a '%' in them written "%%", which systemd makes '%' again). Then systemd is reloaded where it runs (/run/systemd/system
 * exists, and no --root); elsewhere a line says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli.h"

#define DROPIN "hugepreload.conf"

typedef struct {
	char unit[256];            /* with its suffix: nginx.service */
	const char *conf;          /* --conf, or NULL */
	const char *root;          /* --root, or "" */
	char dir[PATH_MAX], file[PATH_MAX + 32];
} unit_t;

/* systemd's unit name characters; a name without a type is a service. */
static int parse(int argc, char **argv, bool enable, unit_t *u) {
	memset(u, 0, sizeof *u);
	u->root = "";
	const char *name = NULL;
	for (int i = 2; i < argc; i++) {
		if (enable && strcmp(argv[i], "--conf") == 0) {
			if (i + 1 == argc)
				return hp_cli_bad("--conf needs key:value items");
			u->conf = argv[++i];
		} else if (strcmp(argv[i], "--root") == 0) {
			if (i + 1 == argc || argv[i + 1][0] != '/')
				return hp_cli_bad("--root needs an absolute directory");
			u->root = argv[++i];
		} else if (argv[i][0] == '-') {
			return hp_cli_bad("unknown option '%s' to %s", argv[i],
			    argv[1]);
		} else if (name != NULL) {
			return hp_cli_bad("%s takes one unit, not also '%s'",
			    argv[1], argv[i]);
		} else {
			name = argv[i];
		}
	}
	if (name == NULL)
		return hp_cli_bad("%s needs a unit (a service name)", argv[1]);
	size_t len = strlen(name);
	if (len == 0 || len > 200 || strspn(name, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.@\\") != len)
		return hp_cli_bad("'%s' is not a unit name", name);
	static const char *const others[] = {".socket", ".target", ".timer",
	    ".mount", ".automount", ".path", ".slice", ".scope", ".device",
	    ".swap", NULL};
	for (int i = 0; others[i] != NULL; i++) {
		size_t olen = strlen(others[i]);
		if (len > olen && strcmp(name + len - olen, others[i]) == 0)
			return hp_cli_bad("'%s' is not a service: only services "
			    "run programs", name);
	}
	bool service = len > 8 && strcmp(name + len - 8, ".service") == 0;
	snprintf(u->unit, sizeof u->unit, "%s%s", name, service ? "" :
	    ".service");
	snprintf(u->dir, sizeof u->dir, "%s/etc/systemd/system/%s.d", u->root,
	    u->unit);
	snprintf(u->file, sizeof u->file, "%s/" DROPIN, u->dir);
	if (u->conf && strpbrk(u->conf, "\n\"\\ ") != NULL)
		return hp_cli_bad("--conf '%s': no spaces, quotes, backslashes "
		    "or newlines in a policy", u->conf);
	return 0;
}

/* systemctl daemon-reload where systemd runs; a line where it does not. */
static int reload(const unit_t *u, const char *done) {
	if (u->root[0] != '\0' || access("/run/systemd/system", F_OK) != 0) {
		printf("%s %s; systemd is not running here%s: no daemon-reload "
		    "(run \"systemctl daemon-reload && systemctl restart %s\" "
		    "where it runs)\n", done, u->file, u->root[0] ? " (--root)" :
		    " (no /run/systemd/system)", u->unit);
		return 0;
	}
	pid_t c = fork();
	if (c == 0) {
		execlp("systemctl", "systemctl", "daemon-reload", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (c < 0 || waitpid(c, &st, 0) < 0 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		fprintf(stderr, "hugepreload: %s %s, but systemctl daemon-reload "
		    "failed\n", done, u->file);
		return 1;
	}
	printf("%s %s; systemd reloaded: \"systemctl restart %s\" applies it\n",
	    done, u->file, u->unit);
	return 0;
}

static int mkdirs(const char *path) {
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int failed(const char *what, const char *path) {
	int err = errno;
	fprintf(stderr, "hugepreload: cannot %s %s: %s%s\n", what, path,
	    strerror(err), err == EACCES || err == EPERM || err == EROFS ?
	    " (permission: run it as root)" : "");
	return 1;
}

/* A value in a unit file: systemd expands %-specifiers there, so a '%'
 * (stats_file:/var/log/hp.%p) is written "%%" to reach the program. */
static void put_value(FILE *f, const char *key, const char *v) {
	fprintf(f, "Environment=%s=", key);
	for (; *v; v++)
		fputs(*v == '%' ? "%%" : (char[]){*v, '\0'}, f);
	fputc('\n', f);
}

int hp_cli_enable(int argc, char **argv) {
	unit_t u;
	int rc = parse(argc, argv, true, &u);
	if (rc != 0)
		return rc;
	char tmpl[PATH_MAX], lib[PATH_MAX + 64];
	const char *where;
	if (!hp_cli_share(DROPIN, tmpl, sizeof tmpl)) {
		fprintf(stderr, "hugepreload: no %s installed (make install, or "
		    "the package)\n", DROPIN);
		return 1;
	}
	if (!hp_cli_library(lib, sizeof lib, &where)) {
		fprintf(stderr, "hugepreload: no libhugepreload.so installed, "
		    "beside the command or in its build tree\n");
		return 1;
	}
	FILE *in = fopen(tmpl, "re");
	if (in == NULL)
		return failed("read", tmpl);
	if (mkdirs(u.dir) != 0) {
		fclose(in);
		return failed("create", u.dir);
	}
	char tmp[PATH_MAX + 64];
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", u.file, (int)getpid());
	FILE *out = fopen(tmp, "wex");
	if (out == NULL) {
		fclose(in);
		return failed("write", tmp);
	}
	char line[1024];
	while (fgets(line, sizeof line, in)) {
		if (strncmp(line, "Environment=LD_PRELOAD=", 23) == 0)
			put_value(out, "LD_PRELOAD", lib);
		else if (u.conf && strncmp(line, "Environment=HUGEPRELOAD_CONF=",
		    29) == 0)
			put_value(out, "HUGEPRELOAD_CONF", u.conf);
		else
			fputs(line, out);
	}
	fclose(in);
	bool ok = fflush(out) == 0 && fsync(fileno(out)) == 0;
	ok = fclose(out) == 0 && ok;
	if (!ok || chmod(tmp, 0644) != 0 || rename(tmp, u.file) != 0) {
		rc = failed("write", u.file);
		unlink(tmp);
		return rc;
	}
	return reload(&u, "wrote");
}

int hp_cli_disable(int argc, char **argv) {
	unit_t u;
	int rc = parse(argc, argv, false, &u);
	if (rc != 0)
		return rc;
	if (unlink(u.file) != 0) {
		if (errno == ENOENT) {
			fprintf(stderr, "hugepreload: %s is not enabled (no %s)\n",
			    u.unit, u.file);
			return 1;
		}
		return failed("remove", u.file);
	}
	rmdir(u.dir);                   /* if nothing else is in it */
	return reload(&u, "removed");
}
