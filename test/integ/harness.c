#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness.h"

extern char **environ;

const char *hp_path(const char *name) {
	static char buf[8][PATH_MAX + 256];
	static int slot;
	char *out = buf[slot++ % 8];
	const char *dir = getenv("HP_BUILD");
	char exe[PATH_MAX];
	if (dir == NULL) {       /* the test binary lives in build/ */
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		exe[n > 0 ? n : 0] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		dir = exe;
	}
	snprintf(out, PATH_MAX + 256, "%s/%s", dir, name);
	return out;
}

static char *slurp(int fd, size_t *len) {
	off_t n = lseek(fd, 0, SEEK_END);
	char *s = malloc((size_t)(n > 0 ? n : 0) + 1);
	*len = (size_t)(pread(fd, s, (size_t)(n > 0 ? n : 0), 0) > 0 ? n : 0);
	s[*len] = '\0';
	close(fd);
	return s;
}

hp_proc_t hp_start(const char *const *argv, const char *const *env,
    bool preload, const char *stdin_path) {
	int out = memfd_create("out", MFD_CLOEXEC),
	    err = memfd_create("err", MFD_CLOEXEC);
	char preload_env[PATH_MAX + 16];
	snprintf(preload_env, sizeof preload_env, "LD_PRELOAD=%s",
	    hp_path("libhugepreload.so"));
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		unsetenv("LD_PRELOAD");
		unsetenv("HUGEPRELOAD_CONF");
		/* Criterion's own: a Criterion binary run from here would take
		 * itself for one of this runner's workers. */
		unsetenv("BXFI_MAP");
		if (preload)
			putenv(preload_env);
		for (; env && *env; env++)
			putenv((char *)*env);
		if (stdin_path) {
			int in = open(stdin_path, O_RDONLY);
			dup2(in, 0);
		}
		dup2(out, 1);
		dup2(err, 2);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return (hp_proc_t){pid, out, err};
}

hp_run_t hp_wait(hp_proc_t p) {
	hp_run_t r = {0};
	int st = 0;
	waitpid(p.pid, &st, 0);
	r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r.out = slurp(p.out, &r.out_len);
	r.err = slurp(p.err, &r.err_len);
	return r;
}

hp_run_t hp_run(const char *const *argv, const char *const *env, bool preload,
    const char *stdin_path) {
	return hp_wait(hp_start(argv, env, preload, stdin_path));
}

void hp_run_free(hp_run_t *r) {
	free(r->out);
	free(r->err);
}

double hp_kv(const hp_run_t *r, const char *key) {
	size_t k = strlen(key);
	for (const char *p = r->out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, key, k) == 0 && p[k] == '=')
			return atof(p + k + 1);
	cr_assert_fail("no '%s=' in the output of a helper:\n%s\nstderr:\n%s",
	    key, r->out, r->err);
	return 0;
}

int hp_err_lines(const hp_run_t *r) {
	int n = 0;
	for (const char *p = r->err; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		n += strncmp(p, "hugepreload: ", 13) == 0;
	return n;
}

/* "always [madvise] never" -> "madvise"; a plain number stays as it is. */
void hp_knob_read(const char *path, char *out, size_t n) {
	char buf[128] = "";
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = '\0';
		fclose(f);
	}
	char *lb = strchr(buf, '['), *rb = lb ? strchr(lb, ']') : NULL;
	if (lb && rb) {
		*rb = '\0';
		memmove(buf, lb + 1, strlen(lb + 1) + 1);
	}
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(out, n, "%s", buf);
}

static bool write_knob(const char *path, const char *value) {
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return false;
	bool ok = fputs(value, f) >= 0;
	return (fclose(f) == 0) && ok;
}

bool hp_knob_set(hp_knob_t *k, const char *path, const char *value) {
	if (!k->saved) {
		char old[sizeof k->old];
		hp_knob_read(path, old, sizeof old);
		if (old[0] == '\0')
			return false;        /* absent or unreadable: not ours */
		snprintf(k->path, sizeof k->path, "%s", path);
		memcpy(k->old, old, sizeof old);
		k->saved = true;
	}
	return write_knob(path, value);
}

void hp_knob_require(hp_knob_t *k, const char *path, const char *value) {
	if (access(path, F_OK) != 0)
		cr_skip_test("this host has no %s", path);
	if (!hp_knob_set(k, path, value))
		cr_skip_test("could not set %s to %s here: %s", path, value,
		    strerror(errno));
}

void hp_knob_restore(hp_knob_t *k) {
	if (k->saved && !write_knob(k->path, k->old))
		fprintf(stderr, "could not restore %s to %s\n", k->path, k->old);
	k->saved = false;
}

void hp_require_gib_pages(void) {
	if (access("/sys/kernel/mm/hugepages/hugepages-1048576kB", F_OK) != 0)
		cr_skip_test("no 1 GiB pages here: no hugepages-1048576kB in "
		    "/sys/kernel/mm/hugepages (the CPU lacks pdpe1gb, or the "
		    "kernel does not offer them)");
}

/* Runs a shell script with HP (the command), B (the build directory), T
 * (a temporary directory, removed after) and two helpers: until_ok CMD
 * retries CMD every 0.1 s for up to 60 s (conditions are polled, never
 * raced against a fixed sleep); start CMD runs CMD in the background with
 * its output in $T/out and sets pid and child from its pid= and child=
 * lines. */
hp_run_t hp_script(const char *body, const char *conf) {
	char s[16384], env0[300];
	snprintf(s, sizeof s, "HP=%s; B=%s; T=$(mktemp -d); "
	    "trap 'rm -rf $T' EXIT; "
	    "until_ok() { i=0; until \"$@\"; do i=$((i + 1)); "
	    "[ $i -lt 600 ] || { echo \"timed out: $*\" >&2; return 1; }; "
	    "sleep 0.1; done; }; "
	    "start() { \"$@\" > $T/out & until_ok grep -q '^child=' $T/out; "
	    "pid=$(sed -n 's/^pid=//p' $T/out); "
	    "child=$(sed -n 's/^child=//p' $T/out); }; %s",
	    hp_path("hugepreload"), hp_path(""), body);
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf ? conf : "");
	const char *env[] = {env0, NULL};
	const char *argv[] = {"/bin/sh", "-c", s, NULL};
	return hp_run(argv, env, false, NULL);
}

void hp_assert_requests_small(const hp_run_t *r) {
	cr_assert_eq(hp_kv(r, "requests_small_frac"), 1, "%s", r->out);
	cr_assert_leq(hp_kv(r, "requests_huge_frac"),
	    hp_kv(r, "requests_hg_frac"), "%s", r->out);
	cr_assert_leq(hp_kv(r, "requests_hg_frac"), 0.2, "%s", r->out);
}
