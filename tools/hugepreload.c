/*
 * hugepreload: run a program under the library, or read a running one's
 * counters.
 *
 *   hugepreload [--conf K:V,...] [--verbose] -- CMD ARGS...
 *   hugepreload stat PID [--json|--prometheus] [--watch SECONDS] [--dir D]
 *   hugepreload stat --gc [--dir D]
 *   hugepreload --help
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "stats_print.h"

static void usage(FILE *f) {
	fprintf(f,
	    "usage: hugepreload [--conf K:V,...] [--verbose] -- CMD [ARGS...]\n"
	    "       hugepreload stat PID [--json|--prometheus] [--watch SECONDS]"
	    " [--dir DIR]\n"
	    "       hugepreload stat --gc [--dir DIR]\n\n"
	    "The first form runs CMD with libhugepreload.so preloaded (before any\n"
	    "LD_PRELOAD already set) and HUGEPRELOAD_CONF set, and exits with\n"
	    "CMD's status. --conf items are added after any HUGEPRELOAD_CONF in\n"
	    "the environment (later items win); --verbose adds verbose:true.\n\n"
	    "stat reads a running program's counters from DIR/hugepreload.PID\n"
	    "(DIR: the stats_dir of HUGEPRELOAD_CONF, else /dev/shm) without\n"
	    "signalling or pausing it; --gc removes files left by processes that\n"
	    "are gone.\n\nHUGEPRELOAD_CONF keys (key:value, comma-separated):\n");
	for (int i = 0; hp_conf_help[i][0] != NULL; i++)
		fprintf(f, "  %-16s %s (default %s)\n  %-16s   %s\n",
		    hp_conf_help[i][0], hp_conf_help[i][1], hp_conf_help[i][2], "",
		    hp_conf_help[i][3]);
}

/* The library beside this binary. */
static void library_path(char *out, size_t n) {
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[len > 0 ? len : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(out, n, "%s/libhugepreload.so", exe);
}

static int run(int argc, char **argv) {
	const char *conf = NULL;
	int verbose = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--conf") == 0 && i + 1 < argc)
			conf = argv[++i];
		else if (strcmp(argv[i], "--verbose") == 0)
			verbose = 1;
		else {
			fprintf(stderr, "hugepreload: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i + 1 >= argc) {
		usage(stderr);
		return 2;
	}
	char lib[PATH_MAX + 32], preload[3 * PATH_MAX], hc[8192];
	library_path(lib, sizeof lib);
	if (access(lib, R_OK) != 0) {
		fprintf(stderr, "hugepreload: %s: %s\n", lib, strerror(errno));
		return 127;
	}
	const char *old = getenv("LD_PRELOAD");
	snprintf(preload, sizeof preload, "%s%s%s", lib, old && *old ? " " : "",
	    old ? old : "");
	setenv("LD_PRELOAD", preload, 1);
	const char *env = getenv("HUGEPRELOAD_CONF");
	snprintf(hc, sizeof hc, "%s%s%s%s%s", env ? env : "",
	    env && *env && conf ? "," : "", conf ? conf : "",
	    verbose && ((env && *env) || conf) ? "," : "",
	    verbose ? "verbose:true" : "");
	if (hc[0] != '\0')
		setenv("HUGEPRELOAD_CONF", hc, 1);
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "hugepreload: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}

/* stats_dir from HUGEPRELOAD_CONF, as the library would read it. */
static void default_dir(char *out, size_t n) {
	hp_conf_t c;
	hp_conf_defaults(&c);
	const char *env = getenv("HUGEPRELOAD_CONF");
	if (env)
		hp_conf_parse(&c, env, NULL, NULL);
	snprintf(out, n, "%s", c.stats_dir);
}

/* Reads the stats file into *st (read, not mapped: a file someone else
 * truncates cannot fault us); 0 if it is not one. *sb: the file read. */
static int load(const char *path, hp_stats_t *st, struct stat *sb) {
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	hp_stats_t buf;
	uint64_t seq;
	int ok = 0;
	if (fstat(fd, sb) == 0 && S_ISREG(sb->st_mode))
		for (int tries = 0; tries < 1000 && !ok; tries++) {
			if (tries)
				sched_yield();
			ok = pread(fd, &buf, sizeof buf, 0) == (ssize_t)sizeof buf &&
			    !(buf.seq & 1) && pread(fd, &seq, sizeof seq,
			    offsetof(hp_stats_t, seq)) == (ssize_t)sizeof seq &&
			    seq == buf.seq;
		}
	close(fd);
	return ok && hp_stats_copy(&buf, st);
}

/* Is the process that wrote st still running (same pid, same start)? */
static int alive(const hp_stats_t *st) {
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%lld/stat", (long long)st->pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p && strtoull(p + 1, NULL, 10) == st->start_ticks;
}

static void to_stdout(void *ctx, const char *s, size_t n) {
	(void)ctx;
	fwrite(s, 1, n, stdout);
}

static int gc(const char *dir) {
	DIR *d = opendir(dir);
	if (d == NULL) {
		fprintf(stderr, "hugepreload: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	struct dirent *e;
	int removed = 0;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "hugepreload.", 12) != 0)
			continue;
		char path[PATH_MAX + 256], proc[64];
		hp_stats_t st;
		struct stat sb, now;
		long pid = strtol(e->d_name + 12, NULL, 10);
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (load(path, &st, &sb)) {
			if (alive(&st))
				continue;
		} else {
			/* Unreadable (its process died mid-write, say): judge by
			 * the pid in its name. */
			snprintf(proc, sizeof proc, "/proc/%ld", pid);
			if (pid <= 0 || access(proc, F_OK) == 0 ||
			    lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
				continue;
		}
		/* Still the file judged, not one a new process made since. */
		if (lstat(path, &now) != 0 || now.st_ino != sb.st_ino ||
		    now.st_dev != sb.st_dev)
			continue;
		if (unlink(path) == 0) {
			printf("removed %s (pid %ld is not running)\n", path, pid);
			removed++;
		}
	}
	closedir(d);
	printf("%d stale file%s removed\n", removed, removed == 1 ? "" : "s");
	return 0;
}

static int stat_cmd(int argc, char **argv) {
	hp_format_t fmt = HP_FMT_TEXT;
	double watch = 0;
	long pid = 0;
	int do_gc = 0;
	char dir[PATH_MAX];
	default_dir(dir, sizeof dir);
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			fmt = HP_FMT_JSON;
		else if (strcmp(argv[i], "--prometheus") == 0)
			fmt = HP_FMT_PROM;
		else if (strcmp(argv[i], "--watch") == 0 && i + 1 < argc)
			watch = atof(argv[++i]);
		else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			snprintf(dir, sizeof dir, "%s", argv[++i]);
		else if (strcmp(argv[i], "--gc") == 0)
			do_gc = 1;
		else if ((pid = strtol(argv[i], NULL, 10)) <= 0) {
			usage(stderr);
			return 2;
		}
	}
	if (do_gc)
		return gc(dir);
	if (pid <= 0) {
		usage(stderr);
		return 2;
	}
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/hugepreload.%ld", dir, pid);
	for (int frames = 0;; frames++) {
		hp_stats_t st;
		struct stat sb;
		int got = load(path, &st, &sb);
		if (!got && frames > 0 && access(path, F_OK) != 0) {
			printf("hugepreload: pid %ld has exited\n", pid);
			return 0;
		}
		if (!got) {
			fprintf(stderr, "hugepreload: no counters for pid %ld in %s "
			    "(not running under hugepreload, not using its huge "
			    "class yet, or stats_dir:off)\n", pid, dir);
			return 1;
		}
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		hp_stats_meta_t m = {alive(&st), (double)now.tv_sec +
		    now.tv_nsec / 1e9 - (double)st.updated_ns / 1e9};
		hp_stats_format(&st, &m, fmt, to_stdout, NULL);
		fflush(stdout);
		if (!m.alive) {
			fprintf(stderr, "hugepreload: pid %ld is not running: %s is "
			    "left from it (hugepreload stat --gc removes it)\n", pid,
			    path);
			return 3;
		}
		if (watch <= 0)
			return 0;
		struct timespec t = {(time_t)watch,
		    (long)((watch - (double)(time_t)watch) * 1e9)};
		nanosleep(&t, NULL);
	}
}

int main(int argc, char **argv) {
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "stat") == 0)
		return stat_cmd(argc, argv);
	return run(argc, argv);
}
