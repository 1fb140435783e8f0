/* jemalloc's API in a program linked with -ljemalloc (as Redis is), run
 * under the library: it describes and serves the library's heap, not the
 * program's own, unused, jemalloc. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The sum of every "PREFIX.case=N" line of r's output, and the cases
 * that were not 0 (into bad, n bytes) for the message. */
static long long sum_of(const hp_run_t *r, const char *prefix, char *bad,
    size_t n) {
	long long total = 0;
	size_t len = strlen(prefix), used = 0;
	bad[0] = '\0';
	for (const char *l = r->out; l != NULL && *l; ) {
		const char *eq = strchr(l, '='), *nl = strchr(l, '\n');
		if (strncmp(l, prefix, len) == 0 && l[len] == '.' && eq != NULL &&
		    (nl == NULL || eq < nl)) {
			long long v = atoll(eq + 1);
			total += v;
			if (v != 0 && used < n) {
				int w = snprintf(bad + used, n - used, " %.*s",
				    (int)((nl ? nl : eq + strlen(eq)) - l), l);
				used += w > 0 ? (size_t)w : 0;
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return total;
}

/* "jeapi zero" without the library (jemalloc's own answers, all 0: the
 * control) and under it; the sum of PREFIX's cases must be 0 in both. */
static void zero_cases_hold(const char *prefix, const char *what) {
	const char *argv[] = {hp_path("jeapi"), "zero", NULL};
	for (int preload = 0; preload < 2; preload++) {
		hp_run_t r = hp_run(argv, NULL, preload, NULL);
		cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
		cr_assert_null(strstr(r.out, "rallocx_failed"), "%s", r.out);
		char bad[1024];
		long long n = sum_of(&r, prefix, bad, sizeof bad);
		cr_assert_eq(n, 0, "%s %s: %lld (%s)", preload ? "under the "
		    "library" : "under jemalloc", what, n, bad);
		hp_run_free(&r);
	}
}

/* Issue 30, defect 1: rallocx(p, n, MALLOCX_ZERO) copied min(old request,
 * n) and zeroed the rest (6 bytes lost from mallocx(1) to 2, 1,023 from
 * 64,512 to 64,513): the old bytes are kept up to the old usable size,
 * and everything past it up to the new usable size is zero, with and
 * without an alignment, in the small class's small and large sizes and
 * the huge class's. */
Test(jeapi, rallocx_zero_keeps_the_old_usable_size) {
	zero_cases_hold("lost", "old bytes lost");
	zero_cases_hold("nonzero", "new bytes not zero");
}

/* Issue 30, defect 1: rallocx with MALLOCX_ZERO or an alignment of 16 or
 * more always moved and copied; an aligned object whose usable size is
 * already the new size's stays where it is, as under jemalloc (small,
 * large and huge-class sizes). */
Test(jeapi, rallocx_stays_in_place_as_jemalloc) {
	zero_cases_hold("moved", "moved though it fits in place");
}

/* Issue 30, defect 2: mallocx(n, MALLOCX_ALIGN(a) | MALLOCX_ZERO) with a
 * >= 16 zeroed n bytes, not the usable size (4,032 non-zero bytes inside
 * sallocx over 64 allocations of 1 byte). */
Test(jeapi, mallocx_align_zero_zeroes_the_usable_size) {
	zero_cases_hold("mallocx_nonzero", "non-zero bytes inside sallocx");
}

/* Issue 30, defect 1, in the long-lived class: objects of a promoted site
 * (lifetime:learn, long_lived:mimalloc), resized by rallocx with
 * MALLOCX_ZERO and alignments within the class, out of it and into the
 * huge class: the old bytes kept up to the smaller usable size, the new
 * ones zero, the alignment held (8 bytes were lost shrinking 48 to 40). */
Test(jeapi, rallocx_zero_in_the_long_lived_class) {
	const char *argv[] = {hp_path("jeapi"), "ll", NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=lifetime:learn,"
	    "long_lived:mimalloc", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_geq(hp_kv(&r, "promoted"), 900, "the node site was not "
	    "promoted:\n%s", r.out);
	cr_assert_eq(hp_kv(&r, "mimalloc_loaded"), 1, "the long-lived class "
	    "is not in use:\n%s%s", r.out, r.err);
	const char *what[] = {"lost", "nonzero", "misaligned"};
	for (int i = 0; i < 3; i++) {
		char bad[1024];
		long long n = sum_of(&r, what[i], bad, sizeof bad);
		cr_assert_eq(n, 0, "%s: %lld (%s)", what[i], n, bad);
	}
	hp_run_free(&r);
}

/* jemalloc's MALLOC_CONF=experimental_infallible_new:true: a failed
 * operator new goes to jemalloc's safety-check abort, not to bad_alloc or
 * nullptr, under the library as under libjemalloc.so.2 (cxxops' first
 * impossible new then ends the program with SIGABRT and jemalloc's
 * message; without the option it exits 0). */
Test(jeapi, infallible_new_aborts_as_jemalloc) {
	const char *argv[] = {hp_path("cxxops"), NULL};
	const char *on[] = {"MALLOC_CONF=experimental_infallible_new:true",
	    NULL};
	const char *je[] = {"MALLOC_CONF=experimental_infallible_new:true",
	    "LD_PRELOAD=libjemalloc.so.2", NULL};
	hp_run_t plain = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(plain.code, 0, "%s%s", plain.out, plain.err);
	hp_run_t j = hp_run(argv, je, false, NULL);
	hp_run_t r = hp_run(argv, on, true, NULL);
	cr_assert_eq(j.code, 128 + 6, "under jemalloc: %d\n%s", j.code, j.err);
	cr_assert_eq(r.code, 128 + 6, "under the library: %d\n%s%s", r.code,
	    r.out, r.err);
	cr_assert(strstr(r.err, "<jemalloc>: Allocation failed"), "%s", r.err);
	hp_run_free(&plain);
	hp_run_free(&j);
	hp_run_free(&r);
}

/* Arenas of the program's own, made, used (their objects freed with
 * MALLOCX_TCACHE_NONE) and destroyed 3,000 times while the maintenance
 * thread refreshes the counters every 10 ms: nothing reads an arena
 * being destroyed, no object outlives its arena in the thread's cache,
 * and such an arena's objects count in mallinfo2. */
Test(jeapi, program_arenas_destroyed_while_counted) {
	const char *argv[] = {hp_path("jeapi"), "destroy", "3000", NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=maintain_ms:10", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
	cr_assert_eq(hp_kv(&r, "arena_counted"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "destroyed"), 3000, "%s", r.out);
	hp_run_free(&r);
}
