/* Wrappers (src/lifetime/site.c): a long-lived index and churny request
 * buffers of the same size, both allocated through one malloc wrapper
 * (xmalloc), or through a wrapper of it (xdup) beside a churny direct
 * caller of xmalloc, the churny traffic first (lifetime.c's wrapped and
 * wrapped2). The index must land on huge pages (in hg mappings; the
 * kernel's page flags say huge) and the request buffers in the small
 * class (on 4 KiB pages in nh mappings but for the few in ranges
 * catch-up collapsed: hp_assert_requests_small), under both long_lived
 * settings; and a profile recorded so replays the same. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"

/* lifetime_ms:100 and a warm-up of 1 s (the program's default 2.5 s
 * waits out the default 250 ms): ten times the time a sample needs to
 * turn long-lived. */
static hp_run_t wrapped(const char *mode, const char *conf) {
	char env0[600];
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=lifetime_ms:100,%s", conf);
	const char *env[] = {env0, "LT_WARMUP_S=1", NULL};
	const char *argv[] = {hp_path("lifetime"), mode, "2000000", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1, "%s", r.out);
	/* Index nodes made after the warm-up: on huge pages, in hg
	 * mappings (THP) or hugetlb ones (the pool, if another program left
	 * one reserved); request buffers: hp_assert_requests_small. */
	cr_assert_geq(hp_kv(&r, "late_nodes_huge_frac"), 0.9, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "late_nodes_hg_frac") +
	    hp_kv(&r, "late_nodes_hugetlb_frac"), 0.9, "%s", r.out);
	hp_assert_requests_small(&r);
	return r;
}

/* A counter of the exit print's lifetime group ("lifetime_NAME  N"). */
static double lifetime_counter(const hp_run_t *r, const char *name) {
	char key[64];
	snprintf(key, sizeof key, "\nlifetime_%s ", name);
	const char *p = strstr(r->err, key);
	cr_assert_not_null(p, "no %s in:\n%s", key + 1, r->err);
	return atof(p + strlen(key));
}

static void learn(const char *mode, const char *setting, double wrappers) {
	char conf[200];
	snprintf(conf, sizeof conf, "lifetime:learn,long_lived:%s,"
	    "stats_print:true", setting);
	hp_run_t r = wrapped(mode, conf);
	/* At least: the request buffers kept live at the end are another
	 * caller of request_buf_w, long-lived beside its churny one, and
	 * may make its call a wrapper's too. */
	cr_assert_geq(lifetime_counter(&r, "wrappers"), wrappers, "%s", r.err);
	/* The index's site and the request site(s) behind them, at least. */
	cr_assert_geq(lifetime_counter(&r, "wrapped_sites"), wrappers + 1,
	    "%s", r.err);
	cr_assert_eq(lifetime_counter(&r, "sites_promoted"), 1, "%s", r.err);
	hp_run_free(&r);
}

Test(malloc_wrapper, one_wrapper_mimalloc) {
	learn("wrapped", "mimalloc", 1);
}

Test(malloc_wrapper, one_wrapper_jemalloc) {
	learn("wrapped", "jemalloc", 1);
}

/* xmalloc's key (three callers: xdup, and the scratch buffers'), and
 * xdup's call behind it (two: the index's, the requests'). */
Test(malloc_wrapper, a_wrapper_of_a_wrapper_mimalloc) {
	learn("wrapped2", "mimalloc", 2);
}

Test(malloc_wrapper, a_wrapper_of_a_wrapper_jemalloc) {
	learn("wrapped2", "jemalloc", 2);
}

/* Recorded, the profile holds the wrappers' strides (frames with @N);
 * replayed with no sampling at all, the index goes to huge pages from
 * the start and the requests stay small. */
Test(malloc_wrapper, a_recorded_profile_replays_the_wrappers) {
	char prof[128], conf[300];
	snprintf(prof, sizeof prof, "/tmp/hp-wrapper.%d.prof", (int)getpid());
	snprintf(conf, sizeof conf, "lifetime:learn,lifetime_record:%s", prof);
	hp_run_t a = wrapped("wrapped2", conf);
	hp_run_free(&a);
	FILE *f = fopen(prof, "r");
	cr_assert_not_null(f);
	char line[4096];
	unsigned strided = 0;
	while (fgets(line, sizeof line, f))
		strided += strchr(line, '@') != NULL;
	fclose(f);
	cr_assert_geq(strided, 3, "sites with their strides");
	snprintf(conf, sizeof conf, "lifetime:replay,lifetime_profile:%s,"
	    "stats_print:true", prof);
	hp_run_t r = wrapped("wrapped2", conf);
	unlink(prof);
	cr_assert_eq(lifetime_counter(&r, "samples"), 0, "%s", r.err);
	cr_assert_geq(lifetime_counter(&r, "wrappers"), 2, "%s", r.err);
	cr_assert_geq(hp_kv(&r, "first_node_huge_frac"), 1, "placed from the "
	    "first node: %s", r.out);
	hp_run_free(&r);
}

/* hugepreload stat, live: each wrapper found, where it is (the lifetime
 * program's module and an offset in xmalloc or xdup) and the sites behind
 * it, in text, JSON and Prometheus (promcheck.py's rules). */
Test(malloc_wrapper, stat_shows_each_wrapper) {
	hp_run_t r = hp_script(
	    "start env LD_PRELOAD=${B}libhugepreload.so ${B}lifetime wrapped2 "
	    "2000000 hold; "
	    "ready() { $HP stat $pid > $T/s 2>/dev/null && "
	    "test \"$(grep -c '^lifetime_wrapper ' $T/s)\" -ge 2; }; "
	    "until_ok ready; grep -E '^lifetime_wrapper ' $T/s; "
	    "echo lifetime_wrappers=$(awk '$1 == \"lifetime_wrappers\" "
	    "{print $2}' $T/s); "
	    "$HP stat $pid --json | python3 -c 'import json, sys; "
	    "w = json.load(sys.stdin)[\"lifetime\"][\"wrapper\"]; "
	    "print(\"json_wrappers=%d\\njson_sites=%d\\njson_levels=%d\" % "
	    "(len(w), sum(x[\"sites\"] for x in w), "
	    "sum(x[\"level\"] for x in w)))'; "
	    "$HP stat $pid --prometheus > $T/p; python3 ${B}promcheck.py < $T/p; "
	    "echo prom_wrappers=$(grep -c '^hugepreload_lifetime_wrapper_sites{' "
	    "$T/p); kill $pid; wait", "lifetime:learn");
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	/* xmalloc's key (level 0) and xdup's call behind it (level 1). */
	const char *l0 = strstr(r.out, "sites, level 0, at /");
	const char *l1 = strstr(r.out, "sites, level 1, at /");
	cr_assert(l0 && l1, "%s", r.out);
	cr_assert(strstr(l0, "/lifetime+0x") && strstr(l1, "/lifetime+0x"),
	    "%s", r.out);
	/* Two at least (the live request buffers at the end may make a
	 * third, behind xdup's call from request_buf_w2), each shown once in
	 * every format. */
	double n = hp_kv(&r, "lifetime_wrappers");
	cr_assert_geq(n, 2, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "json_wrappers"), n, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "json_levels"), 1, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "json_sites"), 5, "3 behind xmalloc's, 2 behind "
	    "xdup's at least: %s", r.out);
	cr_assert_eq(hp_kv(&r, "prom_wrappers"), n, "%s", r.out);
	cr_assert(strstr(r.out, "ok "), "promcheck: %s%s", r.out, r.err);
	hp_run_free(&r);
}
