/* Threads, fork, dlopen and start-up, under the library. */
#include <criterion/criterion.h>
#include "harness.h"

static void run_ok(const char *const *argv, const char *key, double want) {
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s exited %d\n%s%s", argv[0], r.code, r.out,
	    r.err);
	cr_assert_eq(hp_kv(&r, key), want);
	cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
	hp_run_free(&r);
}

Test(safety, eight_threads_cross_thread_frees) {
	const char *argv[] = {hp_path("threads"), "200000", NULL};
	run_ok(argv, "bad", 0);
}

Test(safety, fork_from_multithreaded_program) {
	const char *argv[] = {hp_path("forkmt"), "50", NULL};
	run_ok(argv, "failed", 0);
}

Test(safety, dlopen_library_that_allocates) {
	const char *argv[] = {hp_path("dlopen"), hp_path("libdlalloc.so"), NULL};
	run_ok(argv, "bad", 0);
}

Test(safety, no_thread_until_the_huge_class_is_used) {
	const char *argv[] = {hp_path("lazythread"), NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "threads_small_only"), 1);
	cr_assert_geq(hp_kv(&r, "threads_after_huge"), 2, "no decay thread");
	hp_run_free(&r);
}

Test(safety, allocations_during_startup) {
	const char *argv[] = {hp_path("boot"), NULL};
	run_ok(argv, "bad", 0);
}
