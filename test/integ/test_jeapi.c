/* jemalloc's API in a program linked with -ljemalloc (as Redis is), run
 * under the library: it describes and serves the library's heap, not the
 * program's own, unused, jemalloc. */
#include <criterion/criterion.h>
#include <string.h>
#include "harness.h"

Test(jeapi, linked_program_sees_the_library_heap) {
	const char *argv[] = {hp_path("jeapi"), NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "version=hugepreload ") &&
	    strstr(r.out, "(jemalloc 5.3"), "%s", r.out);
	long long req = hp_kv(&r, "requested"), got = hp_kv(&r, "allocated");
	/* 100 B takes a 112 B class: within 10% of what was asked. */
	cr_assert(got >= req && got <= req + req / 10,
	    "stats.allocated %lld for %lld requested", got, req);
	cr_assert_geq(hp_kv(&r, "active"), got);
	/* stats.resident is the heap's share of the kernel's RSS: all of it
	 * but the program's own pages (text, libraries, stack: under 16 MiB
	 * here), also once freed parts of huge pages stay resident beside
	 * live ones, which jemalloc's own figure leaves out. */
	const char *when[][2] = {{"resident", "rss_full_kb"},
	    {"resident_stranded", "rss_stranded_kb"}};
	for (int i = 0; i < 2; i++) {
		double res = hp_kv(&r, when[i][0]), rss = hp_kv(&r, when[i][1]) *
		    1024;
		cr_assert(res <= rss && res >= rss - (16 << 20),
		    "%s %.0f beside RSS %.0f\n%s", when[i][0], res, rss, r.out);
	}
	const char *ok[] = {"zero_ok", "align_ok", "huge_ok", "rallocx_ok",
	    "sallocx_ok", "xallocx_ok"};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
		cr_assert_eq(hp_kv(&r, ok[i]), 1, "%s\n%s", ok[i], r.out);
	cr_assert_eq(hp_kv(&r, "nallocx_100"), 112);
	/* The arena purge gives memory back, like malloc_trim. */
	cr_assert_lt(hp_kv(&r, "rss_after_purge_kb"),
	    hp_kv(&r, "rss_before_purge_kb") / 2, "%s", r.out);
	cr_assert_gt(hp_kv(&r, "stats_print_bytes"), 1000);
	cr_assert_lt(hp_kv(&r, "allocated_after"), 1 << 20);
	hp_run_free(&r);
}

/* mallctl's opt.* are the options in force: MALLOC_CONF's, and over them
 * the library's (thp:never, zero_realloc:free, dirty_decay_ms from
 * decay_ms); writing an option fails as in jemalloc (EPERM). */
Test(jeapi, opt_values_as_in_force) {
	const char *argv[] = {hp_path("jeapi"), NULL};
	const char *env[] = {"MALLOC_CONF=thp:always,zero_realloc:alloc",
	    "HUGEPRELOAD_CONF=decay_ms:1234", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "\nopt_thp=never\n"), "%s", r.out);
	cr_assert(strstr(r.out, "\nopt_zero_realloc=free\n"), "%s", r.out);
	cr_assert_eq(hp_kv(&r, "opt_dirty_decay_ms"), 1234);
	cr_assert_eq(hp_kv(&r, "opt_write"), 1 /* EPERM */);
	/* The overrides are named on stderr, one line each. */
	cr_assert(strstr(r.err, "thp") && strstr(r.err, "zero_realloc"), "%s",
	    r.err);
	hp_run_free(&r);
}
