/* Placement, as /proc/self/smaps and /proc/kpageflags show it. */
#include <criterion/criterion.h>
#include "harness.h"

static hp_knob_t thp;
static void restore(void) { hp_knob_restore(&thp); }

static void check_large(const char *const *env, bool huge_expected) {
	const char *argv[] = {hp_path("place_large"), "64", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	if (huge_expected) {
		cr_assert_eq(hp_kv(&r, "class"), 2);
		cr_assert_eq(hp_kv(&r, "hg"), 1, "64 MiB not in an hg mapping");
		cr_assert_geq(hp_kv(&r, "thp_bytes"), 0.9 * hp_kv(&r, "size"),
		    "AnonHugePages cover %.0f of %.0f bytes",
		    hp_kv(&r, "thp_bytes"), hp_kv(&r, "size"));
	} else {
		cr_assert_eq(hp_kv(&r, "hg"), 0);
		cr_assert_eq(hp_kv(&r, "thp_bytes"), 0);
	}
	hp_run_free(&r);
}

Test(placement, large_on_thp) {
	check_large(NULL, true);
}

Test(placement, large_without_library_is_not_huge) {
	const char *argv[] = {hp_path("place_large"), "64", NULL};
	hp_run_t r = hp_run(argv, NULL, false, NULL);
	cr_assert_eq(r.code, 0);
	cr_assert_eq(hp_kv(&r, "hg"), 0);
	cr_assert_eq(hp_kv(&r, "thp_bytes"), 0, "THP is madvise: glibc gets none");
	hp_run_free(&r);
}

/* Placement by size: lifetime:off, so that a slow run cannot see the
 * objects' one site promoted (lifetime learning has its own tests). */
static void check_small(void) {
	const char *argv[] = {hp_path("place_small"), "1000000", "64", NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=lifetime:off", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	cr_assert_eq(hp_kv(&r, "unmapped"), 0);
	cr_assert_eq(hp_kv(&r, "class_small_all"), 1);
	cr_assert_eq(hp_kv(&r, "nh_all"), 1, "a 64 B object outside an nh mapping");
	cr_assert_eq(hp_kv(&r, "anon_huge_kb"), 0);
	cr_assert_eq(hp_kv(&r, "thp_bytes"), 0);
	hp_run_free(&r);
	/* With 100,000 objects the pointer array is small too, and then
	 * nothing in the process is on huge pages: the huge arena (and its
	 * metadata) is made only with the first huge-class allocation. */
	argv[1] = "100000";
	r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "hg_any"), 0);
	cr_assert_eq(hp_kv(&r, "process_huge_kb"), 0);
	hp_run_free(&r);
}

Test(placement, small_on_4k_nohugepage) {
	check_small();
}

Test(placement, small_on_4k_with_thp_always, .fini = restore) {
	hp_knob_require(&thp, THP_ENABLED, "always");
	/* Control: jemalloc without our policy gets huge pages here. */
	const char *ctl_env[] = {"LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", NULL};
	const char *argv[] = {hp_path("place_small"), "1000000", "64", NULL};
	hp_run_t c = hp_run(argv, ctl_env, false, NULL);
	cr_assert_eq(c.code, 0);
	cr_assert_gt(hp_kv(&c, "thp_bytes"), 0,
	    "control: THP=always should give plain jemalloc huge pages");
	hp_run_free(&c);
	check_small();
}

Test(placement, backing_none_keeps_large_on_4k, .fini = restore) {
	hp_knob_require(&thp, THP_ENABLED, "always");
	const char *env[] = {"HUGEPRELOAD_CONF=backing:none", NULL};
	const char *argv[] = {hp_path("place_large"), "64", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "class"), 2);
	cr_assert_eq(hp_kv(&r, "nh"), 1);
	cr_assert_eq(hp_kv(&r, "thp_bytes"), 0);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	hp_run_free(&r);
}

Test(placement, thp_never_falls_back_to_4k_and_says_so, .fini = restore) {
	hp_knob_require(&thp, THP_ENABLED, "never");
	const char *argv[] = {hp_path("place_large"), "64", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	cr_assert_eq(hp_kv(&r, "thp_bytes"), 0);
	cr_assert_eq(hp_err_lines(&r), 1, "want one warning, got:\n%s", r.err);
	cr_assert(strstr(r.err, "never"), "%s", r.err);
	hp_run_free(&r);
}
