/* The program cannot tell the library is there, but by where its memory
 * lives: no descriptor, signal disposition, environment change, errno
 * value or (before the huge class is used) thread of the library's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"

/* A run of sidefx with stdin, stdout and stderr closed (closed: true) or
 * as the harness gives them, started; sidefx_wait reads its report back. */
typedef struct {
	char out[32];
	hp_proc_t p;
} sidefx_t;

static void sidefx_start(sidefx_t *s, const char *conf, bool preload,
    bool closed) {
	char cmd[512], env0[320];
	snprintf(s->out, sizeof s->out, "/tmp/hp-sidefx-XXXXXX");
	int fd = mkstemp(s->out);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(cmd, sizeof cmd, "exec %s %s%s", hp_path("sidefx"), s->out,
	    closed ? " 0<&- 1>&- 2>&-" : "");
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf);
	const char *env[] = {env0, NULL};
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	s->p = hp_start(argv, env, preload, NULL);
}

static hp_run_t sidefx_wait(sidefx_t *s, char *report, size_t n) {
	hp_run_t r = hp_wait(s->p);
	FILE *f = fopen(s->out, "r");
	size_t got = f ? fread(report, 1, n - 1, f) : 0;
	report[got] = '\0';
	if (f)
		fclose(f);
	unlink(s->out);
	return r;
}

/* The value of "key=value" in a report; fails the test if absent. */
static const char *field(const char *report, const char *key, char *buf,
    size_t n) {
	char k[64];
	snprintf(k, sizeof k, "%s=", key);
	const char *p = strstr(report, k);
	cr_assert(p && (p == report || p[-1] == '\n'), "no %s in:\n%s", key,
	    report);
	p += strlen(k);
	size_t len = strcspn(p, "\n");
	snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
	return buf;
}

static void same_as_without(const char *conf, bool closed) {
	char base[4096], with[4096], a[1024], b[1024];
	sidefx_t s0, s1;                /* without and with: at once */
	sidefx_start(&s0, "", false, closed);
	sidefx_start(&s1, conf, true, closed);
	hp_run_t r0 = sidefx_wait(&s0, base, sizeof base);
	hp_run_t r1 = sidefx_wait(&s1, with, sizeof with);
	cr_assert_eq(r0.code, 0, "sidefx without the library: exit %d\n%s",
	    r0.code, r0.err);
	cr_assert_eq(r1.code, 0, "sidefx under '%s': exit %d\n%s", conf,
	    r1.code, r1.err);
	const char *keys[] = {"errno_at_main", "fds_before", "fds_after",
	    "sig_before", "sig_after", "env_same", "threads_small", "badf0",
	    "badf1", "badf2", "memalign", "usable_ok"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		cr_assert_str_eq(field(with, keys[i], b, sizeof b),
		    field(base, keys[i], a, sizeof a),
		    "%s under '%s'%s: %s with the library, %s without",
		    keys[i], conf, closed ? " (stdio closed)" : "", b, a);
	cr_assert_str_eq(field(with, "errno_changed", b, sizeof b), "0",
	    "allocator calls that succeeded but changed errno, under '%s'",
	    conf);
	if (closed) {
		cr_assert_str_eq(field(with, "fds_after", b, sizeof b),
		    field(with, "fds_before", a, sizeof a));
		cr_assert_str_eq(field(with, "badf0", b, sizeof b), "1");
	}
	hp_run_free(&r0);
	hp_run_free(&r1);
}

/* Started with fd 0, 1 and 2 closed, sampled many times and using the huge
 * class, the program still finds 0, 1 and 2 closed (libunwind's pipe once
 * took them), and /proc/self/fd lists what it lists without the library.
 * Sampled this often, the debug build's churn is slow enough that a stall
 * of the host once let its objects live past lifetime_ms's 250: the site
 * was promoted, the huge class started its threads before sidefx counted
 * them (threads_small 2), as it should for objects that live that long;
 * at 60 s nothing of the churn can. */
Test(invisible, closed_stdio_stays_closed) {
	same_as_without("", true);
	same_as_without("lifetime_sample:4k,lifetime_sample_rate:0,"
	    "lifetime_ms:60000", true);
}

Test(invisible, closed_stdio_with_collapse_stats_and_profile) {
	same_as_without("collapse:true", true);
	same_as_without("stats_print:true", true);
	same_as_without("lifetime_record:/tmp/hp-invisible.%p", true);
	int rc = system("rm -f /tmp/hp-invisible.*");
	(void)rc;
}

Test(invisible, open_stdio_same_descriptors_signals_environment) {
	same_as_without("", false);
	same_as_without("lifetime:off", false);
	same_as_without("lifetime:replay", false);
}
