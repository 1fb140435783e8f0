/* Hugepage-aware purging: whole free 2 MiB pages go back, by decay alone
 * or at once on malloc_trim(0); no huge page is ever split. */
#include <criterion/criterion.h>
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
