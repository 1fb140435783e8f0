/* Threads, fork, dlopen and start-up, under the library. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
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

/* A second thread that allocates starts the threads (jemalloc's
 * background thread ends the purge of an arena at each thread's exit);
 * a fork child, single-threaded, starts none when it allocates, also
 * when the thread that forked had not allocated before. */
Test(safety, threads_start_with_a_second_thread_not_in_a_fork_child) {
	const char *argv[] = {hp_path("lazythread"), "threads", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_geq(hp_kv(&r, "threads_after_second"), 2, "%s", r.out);
	hp_run_free(&r);
	const char *fargv[] = {hp_path("lazythread"), "fork", NULL};
	r = hp_run(fargv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "ok"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "child_threads"), 1, "%s", r.out);
	hp_run_free(&r);
}

/* Allocating past a 1 GiB reservation falls back to 4 KiB pages with one
 * warning; growing a huge block past it moves the block; nothing is lost. */
Test(safety, huge_class_out_of_space_falls_back) {
	const char *env[] = {"HUGEPRELOAD_CONF=reserve:1g", NULL};
	const char *argv[] = {hp_path("exhaust"), "16", "100", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "failed"), 0);
	cr_assert_gt(hp_kv(&r, "huge"), 0);
	cr_assert_gt(hp_kv(&r, "small"), 0, "nothing fell back:\n%s", r.out);
	cr_assert_eq(hp_kv(&r, "realloc_ok"), 1);
	cr_assert_eq(hp_kv(&r, "realloc_class"), 1, "moved to the small class");
	cr_assert_eq(hp_kv(&r, "bad"), 0);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "falling back to 4 KiB pages"), "%s", r.err);
	hp_run_free(&r);
}

Test(safety, allocations_during_startup) {
	const char *argv[] = {hp_path("boot"), NULL};
	run_ok(argv, "bad", 0);
}
