/* The program's own mmap calls (src/mmap.c), as smaps shows them: with
 * THP "madvise", large anonymous private mappings get huge pages under the
 * library and none without; every call behaves as the kernel's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"

static hp_knob_t thp, defrag;
static void restore(void) {
	hp_knob_restore(&thp);
	hp_knob_restore(&defrag);
}

/* THP in "madvise" mode, defrag "madvise": advice is what decides. */
static void madvise_mode(void) {
	hp_knob_require(&thp, THP_ENABLED, "madvise");
	hp_knob_require(&defrag, THP_DEFRAG, "madvise");
}

static hp_run_t progmap(const char *mode, const char *conf, bool preload) {
	const char *argv[] = {hp_path("progmap"), mode, NULL};
	const char *env[] = {conf, NULL};
	hp_run_t r = hp_run(argv, conf ? env : NULL, preload, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	return r;
}

Test(mmap, large_mapping_on_huge_pages, .fini = restore) {
	madvise_mode();
	hp_run_t r = progmap("big", NULL, true);
	cr_assert_eq(hp_kv(&r, "big_aligned"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "big_hg"), 1, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "big_huge_pct"), 90, "%s", r.out);
	hp_run_free(&r);
	r = progmap("big", NULL, false);
	cr_assert_eq(hp_kv(&r, "big_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "big_huge_pct"), 0, "without: %s", r.out);
	hp_run_free(&r);
}

/* munmap of a 4 KiB hole, mremap of the part below, mprotect of a 2 MiB-
 * unaligned range, MADV_DONTNEED of 4 KiB, and calls that fail: the same
 * results, errno and bytes with and without the library. */
Test(mmap, parts_behave_as_without_the_library, .fini = restore) {
	madvise_mode();
	hp_run_t a = progmap("ops", NULL, false);
	hp_run_t b = progmap("ops", NULL, true);
	cr_assert_str_eq(b.out, a.out);
	cr_assert(strstr(a.out, "munmap_hole=0\nmremap_grow=1\n"
	    "mremap_new_zero=1\nmprotect_unaligned=0\nmprotect_data=1\n"
	    "dontneed=0\ndontneed_zero=1\ndontneed_neighbours=1\n"), "%s", a.out);
	cr_assert(strstr(a.out, "errno_kept_on_success=1"), "%s", a.out);
	hp_run_free(&a);
	hp_run_free(&b);
}

/* A PROT_NONE reservation committed later, by mprotect and by
 * mmap(MAP_FIXED): both parts on huge pages once written. */
Test(mmap, reservation_committed_later, .fini = restore) {
	madvise_mode();
	hp_run_t r = progmap("reserve", NULL, true);
	cr_assert_geq(hp_kv(&r, "mprotect_huge_pct"), 90, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "fixed_huge_pct"), 90, "%s", r.out);
	hp_run_free(&r);
	r = progmap("reserve", NULL, false);
	cr_assert_eq(hp_kv(&r, "mprotect_huge_pct"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "fixed_huge_pct"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* File, MAP_SHARED and small mappings are left alone. */
Test(mmap, others_untouched, .fini = restore) {
	madvise_mode();
	hp_run_t r = progmap("untouched", NULL, true);
	cr_assert_eq(hp_kv(&r, "file_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "small_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "file_huge_pct") + hp_kv(&r, "shared_huge_pct") +
	    hp_kv(&r, "small_huge_pct"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* mmap_threshold: off leaves every mapping alone; a threshold above the
 * mapping leaves it alone too; a bad value is reported and the default
 * kept. */
Test(mmap, threshold_values, .fini = restore) {
	madvise_mode();
	hp_run_t r = progmap("big", "HUGEPRELOAD_CONF=mmap_threshold:off", true);
	cr_assert_eq(hp_kv(&r, "big_hg"), 0, "%s", r.out);
	hp_run_free(&r);
	r = progmap("big", "HUGEPRELOAD_CONF=mmap_threshold:512m", true);
	cr_assert_eq(hp_kv(&r, "big_hg"), 0, "%s", r.out);
	hp_run_free(&r);
	r = progmap("big", "HUGEPRELOAD_CONF=mmap_threshold:256m", true);
	cr_assert_eq(hp_kv(&r, "big_hg"), 1, "%s", r.out);
	hp_run_free(&r);
	r = progmap("big", "HUGEPRELOAD_CONF=mmap_threshold:1m", true);
	cr_assert_eq(hp_kv(&r, "big_hg"), 1, "default kept: %s", r.out);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "mmap_threshold"), "%s", r.err);
	hp_run_free(&r);
}

/* Python's mmap module: a private 1 GiB anonymous buffer, written, is on
 * huge pages under the library and not without. (A MAP_SHARED one, the
 * module's default, is shared memory, left alone: its THP is the kernel's
 * shmem_enabled setting.) */
Test(mmap, python_private_buffer, .fini = restore) {
	madvise_mode();
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("no /usr/bin/python3 (Debian's python3)");
	const char *argv[] = {"/usr/bin/python3", hp_path("pymap.py"), "private",
	    NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_geq(hp_kv(&r, "anon_huge_kb"), 0.9 * hp_kv(&r, "rss_kb"),
	    "%s", r.out);
	hp_run_free(&r);
	r = hp_run(argv, NULL, false, NULL);
	cr_assert_eq(hp_kv(&r, "anon_huge_kb"), 0, "without: %s", r.out);
	hp_run_free(&r);
}

/* No address space for the alignment's 2 MiB of slack (RLIMIT_AS): the
 * mapping is made as asked and works, and one line says so. */
Test(mmap, no_room_to_align_maps_as_asked) {
	const char *argv[] = {hp_path("progmap"), "unaligned", NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=stats_print:true", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "mapped"), 1, "%s", r.out);
	cr_assert(strstr(r.err, "could not place a 67108864-byte mapping 2 MiB-"
	    "aligned"), "%s", r.err);
	const char *u = strstr(r.err, "mmap_unaligned");
	long n = -1;
	cr_assert(u && sscanf(u, "mmap_unaligned %ld", &n) == 1 && n == 1,
	    "%s", r.err);
	hp_run_free(&r);
}
