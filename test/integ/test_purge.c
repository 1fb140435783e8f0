/* Hugepage-aware purging: whole free 2 MiB pages go back, by decay alone
 * or at once on malloc_trim(0); no huge page is ever split. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

Test(purge, frees_whole_pages_and_splits_none) {
	const char *argv[] = {hp_path("nosplit"), "64", "3072", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	/* Every resident byte of the huge mappings is still in a huge page:
	 * nothing was split to give back part of one. */
	cr_assert_eq(hp_kv(&r, "after_rss_kb"), hp_kv(&r, "after_huge_kb"),
	    "split: rss %.0f kB, huge %.0f kB", hp_kv(&r, "after_rss_kb"),
	    hp_kv(&r, "after_huge_kb"));
	cr_assert_geq(hp_kv(&r, "live_thp_bytes"), hp_kv(&r, "live_bytes"));
	/* Every whole 2 MiB page inside a freed block went back. */
	cr_assert_geq(hp_kv(&r, "whole_free_pages"), 16);
	cr_assert_geq(hp_kv(&r, "before_rss_kb") - hp_kv(&r, "after_rss_kb"),
	    2048 * hp_kv(&r, "whole_free_pages"), "only %.0f kB returned of "
	    "%.0f whole free pages", hp_kv(&r, "before_rss_kb") -
	    hp_kv(&r, "after_rss_kb"), hp_kv(&r, "whole_free_pages"));
	hp_run_free(&r);
}

Test(purge, decay_returns_rss_without_trim) {
	const char *argv[] = {hp_path("rss_return"), "decay", "32", "16", "20", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_geq(hp_kv(&r, "peak_kb") - hp_kv(&r, "start_kb"), 500 * 1024);
	double back = hp_kv(&r, "back_s");
	cr_assert(back >= 0 && back <= 15, "RSS back after %.2f s (start %.0f, "
	    "end %.0f kB)", back, hp_kv(&r, "start_kb"), hp_kv(&r, "end_kb"));
	hp_run_free(&r);
}

Test(purge, decay_runs_in_a_fork_child) {
	const char *argv[] = {hp_path("rss_return"), "forkdecay", "32", "16",
	    "20", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	double back = hp_kv(&r, "back_s");
	cr_assert(back >= 0 && back <= 15, "child's RSS back after %.2f s",
	    back);
	hp_run_free(&r);
}

Test(purge, malloc_trim_returns_rss_at_once) {
	const char *argv[] = {hp_path("rss_return"), "trim", "32", "16", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "trim_ret"), 1);
	cr_assert_eq(hp_kv(&r, "back_s") >= 0, 1, "end %.0f kB, start %.0f kB",
	    hp_kv(&r, "end_kb"), hp_kv(&r, "start_kb"));
	hp_run_free(&r);
}

Test(purge, decay_ms_never_keeps_pages_until_trim) {
	const char *env[] = {"HUGEPRELOAD_CONF=decay_ms:-1", NULL};
	const char *argv[] = {hp_path("rss_return"), "decay", "8", "16", "2", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
	cr_assert_lt(hp_kv(&r, "back_s"), 0, "decay_ms:-1 must not purge");
	cr_assert_geq(hp_kv(&r, "end_kb") - hp_kv(&r, "start_kb"), 100 * 1024);
	hp_run_free(&r);
}

Test(purge, decay_ms_zero_purges_on_free) {
	const char *env[] = {"HUGEPRELOAD_CONF=decay_ms:0", NULL};
	const char *argv[] = {hp_path("rss_return"), "decay", "8", "16", "5", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
	cr_assert(hp_kv(&r, "back_s") >= 0, "end %.0f kB", hp_kv(&r, "end_kb"));
	hp_run_free(&r);
}

/* jemalloc's extent descriptors (one per 4 KiB slab at the peak, 16 MiB
 * here) go back with the slabs they described: only those of the slabs
 * still in use stay. jemalloc's own cache would keep all 16 MiB. The
 * program reports once RSS and the descriptors are down to the bounds
 * below, or after 60 s. */
Test(purge, small_class_descriptors_go_back) {
	/* lifetime:off: the survivors' site is long-lived, and learned it
	 * would go to the huge class; this is the small class's test. */
	const char *env[] = {"HUGEPRELOAD_CONF=decay_ms:1000,lifetime:off", NULL};
	const char *argv[] = {hp_path("strand"), "small", "512", "60", "8192",
	    "2048", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "intact"), 1);
	cr_assert_geq(hp_kv(&r, "rss_peak_kb") - hp_kv(&r, "rss_start_kb"),
	    512 * 1024);
	double excess = hp_kv(&r, "rss_end_kb") - hp_kv(&r, "rss_start_kb") -
	    hp_kv(&r, "live_kb");
	cr_assert_leq(excess, 8 * 1024, "%.0f kB over live: %s", excess, r.out);
	cr_assert_geq(hp_kv(&r, "descriptors_released_bytes"), 8 << 20,
	    "%s", r.out);
	cr_assert_leq(hp_kv(&r, "descriptors_resident_bytes"), 2 << 20,
	    "%s", r.out);
	cr_assert_geq(hp_kv(&r, "descriptors_live"), hp_kv(&r, "kept"));
	hp_run_free(&r);
}

/* No address space for the descriptors' reservation (ulimit -v): jemalloc's
 * own cache serves, and says so in the counters; nothing else changes. */
Test(purge, descriptors_fall_back_to_jemalloc) {
	const char *argv[] = {"/bin/sh", "-c", "ulimit -v 700000; exec \"$0\" "
	    "small 64 0", hp_path("strand"), NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=stats_print:true", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "intact"), 1);
	cr_assert_eq(hp_err_lines(&r), 1, "only the huge class's line: %s",
	    r.err);
	const char *f = strstr(r.err, "\ndescriptors_fallbacks");
	unsigned long long n = 0;
	cr_assert(f && sscanf(f, " descriptors_fallbacks %llu", &n) == 1, "%s",
	    r.err);
	cr_assert_gt(n, 1000, "%s", r.err);
	f = strstr(r.err, "\ndescriptors_live");
	cr_assert(f && sscanf(f, " descriptors_live %llu", &n) == 1 && n == 0,
	    "%s", r.err);
	hp_run_free(&r);
}

/* Short-lived threads do not fault their arena back in, thread after
 * thread: a thread's exit does not purge its arena (src/je/jeexit.c;
 * jemalloc purges every dirty page of an arena whenever the last thread
 * using it exits, unless its background threads are on, and they are
 * not yet here: huge/huge.c), and a new thread's 32 KiB of cache bins
 * are cleared with memset, not purged and faulted in again
 * (src/je/jezero.c). 1,000 threads, the minor faults per thread over the
 * last 500 (the kernel's count): 28.14 under Debian's jemalloc, and under
 * the library before either; 0.01 to 0.07 with both. Under MALLOC_CONF
 * background_thread:false nothing else would ever purge an arena its
 * threads left, and a thread's exit purges it again, as under jemalloc:
 * its pages are faulted back (20 to 30 per thread). */
Test(purge, short_lived_threads_keep_their_arena) {
	const char *argv[] = {hp_path("shortlived"), "1000", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	double ours = hp_kv(&r, "faults_per_thread");
	hp_run_free(&r);
	const char *env[] = {"LD_PRELOAD=/usr/lib/x86_64-linux-gnu/"
	    "libjemalloc.so.2", NULL};
	r = hp_run(argv, env, false, NULL);
	double je = r.code == 0 ? hp_kv(&r, "faults_per_thread") : -1;
	hp_run_free(&r);
	const char *off[] = {"MALLOC_CONF=background_thread:false", NULL};
	r = hp_run(argv, off, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	double purged = hp_kv(&r, "faults_per_thread");
	hp_run_free(&r);
	cr_log_info("faults per thread: %.2f, jemalloc's %.2f, with "
	    "background_thread:false %.2f", ours, je, purged);
	cr_assert_leq(ours, 1, "%.2f faults per short-lived thread (jemalloc "
	    "alone: %.2f)", ours, je);
	cr_assert_geq(purged, 5, "background_thread:false: %.2f faults per "
	    "thread, so its arena was not purged at its exit", purged);
}

/* calloc over memory just freed is zero on both sides of jezero.c's
 * memset limit (ranges of 128 KiB: requests up to 112 KiB) and in the
 * huge class, and enough of it came from the freed blocks on each side
 * (else the test would not see the recycled paths). */
Test(purge, calloc_over_freed_blocks_is_zero) {
	const char *argv[] = {hp_path("zeroed"), NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "bad"), 0, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "reused_memset"), 32, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "reused_purged"), 32, "%s", r.out);
	hp_run_free(&r);
}
