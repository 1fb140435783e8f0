/* The program's own mmap calls (src/mmap/mmap.c), as smaps shows them: with
 * THP "madvise", large anonymous private mappings get huge pages under the
 * library and none without; every call behaves as the kernel's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"

static hp_knob_t thp, defrag, shmem;
static void restore(void) {
	hp_knob_restore(&thp);
	hp_knob_restore(&defrag);
	hp_knob_restore(&shmem);
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

/* File mappings, private and MAP_SHARED, and small ones are left alone. */
Test(mmap, others_untouched, .fini = restore) {
	madvise_mode();
	hp_run_t r = progmap("untouched", NULL, true);
	cr_assert_eq(hp_kv(&r, "file_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_file_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "small_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "file_huge_pct") + hp_kv(&r,
	    "shared_file_huge_pct") + hp_kv(&r, "small_huge_pct"), 0, "%s",
	    r.out);
	hp_run_free(&r);
}

/* Anonymous MAP_SHARED memory (shared memory, Python's mmap.mmap(-1, n)):
 * advised, so with shmem_enabled "advise" it is on huge pages under the
 * library and not without; with "never" the advice changes nothing and
 * the program runs the same. Shared with a child either way. */
Test(mmap, shared_anonymous_advised, .fini = restore) {
	madvise_mode();
	hp_knob_require(&shmem, THP_SHMEM, "advise");
	hp_run_t r = progmap("shared", NULL, true);
	cr_assert_eq(hp_kv(&r, "shared_hg"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_aligned"), 1, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "shared_huge_pct"), 90, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_by_child"), 1, "%s", r.out);
	hp_run_free(&r);
	r = progmap("shared", NULL, false);
	cr_assert_eq(hp_kv(&r, "shared_hg"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_huge_pct"), 0, "without: %s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_by_child"), 1, "%s", r.out);
	hp_run_free(&r);
	hp_knob_require(&shmem, THP_SHMEM, "never");
	r = progmap("shared", NULL, true);
	cr_assert_eq(hp_kv(&r, "shared_huge_pct"), 0, "never: %s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_by_child"), 1, "%s", r.out);
	hp_run_free(&r);
}

/* Calls the kernel refuses (19 of them: zero length, neither private nor
 * shared, an unknown flag under MAP_SHARED_VALIDATE, a bad fd, unaligned
 * offsets, MAP_FIXED at an unaligned address, MAP_FIXED_NOREPLACE over a
 * mapping, lengths too large, a hugetlb size that does not exist, a write
 * mapping of a read-only file, a directory, and bad munmap, mprotect,
 * mremap and madvise calls): each fails, with the same errno as without
 * the library. */
Test(mmap, refused_calls_as_the_kernel, .fini = restore) {
	madvise_mode();
	hp_run_t a = progmap("errors", NULL, false);
	hp_run_t b = progmap("errors", NULL, true);
	cr_assert_str_eq(b.out, a.out);
	int cases = 0;
	for (const char *l = a.out; (l = strchr(l, '=')) != NULL; l++)
		cases += strncmp(l, "=1 errno=", 9) == 0;
	cr_assert_geq(cases, 19, "every case refused: %s", a.out);
	cr_assert_null(strstr(a.out, "errno=0"), "%s", a.out);
	hp_run_free(&a);
	hp_run_free(&b);
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

/* Python's mmap module: a 1 GiB anonymous buffer, written, private and
 * as the module makes it by default (MAP_SHARED: shared memory, which
 * needs shmem_enabled "advise"), is on huge pages under the library and
 * not without (the two runs at once). */
static void python_buffer(const char *kind) {
	madvise_mode();
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("no /usr/bin/python3 (Debian's python3)");
	const char *argv[] = {"/usr/bin/python3", hp_path("pymap.py"), kind,
	    NULL};
	hp_proc_t with = hp_start(argv, NULL, true, NULL);
	hp_proc_t without = hp_start(argv, NULL, false, NULL);
	hp_run_t r = hp_wait(with), r0 = hp_wait(without);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_geq(hp_kv(&r, "huge_kb"), 0.9 * hp_kv(&r, "rss_kb"),
	    "%s", r.out);
	hp_run_free(&r);
	cr_assert_eq(hp_kv(&r0, "huge_kb"), 0, "without: %s", r0.out);
	hp_run_free(&r0);
}

Test(mmap, python_private_buffer, .fini = restore) {
	python_buffer("private");
}

Test(mmap, python_default_buffer, .fini = restore) {
	hp_knob_require(&shmem, THP_SHMEM, "advise");
	python_buffer("default");
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

/* hugepreload stat, from outside: the mmap section counts the program's
 * mappings (one private, one shared) and their bytes, and the kernel's
 * figures for them (smaps: resident, and on huge pages, AnonHugePages
 * and ShmemPmdMapped) are the ones the program's own smaps shows; the
 * Prometheus exposition passes the format check. The mapping counters
 * are published as each mapping is advised (polled all the same), and
 * the program, which never used the huge class, has no thread of the
 * library's. */
Test(mmap, stat_shows_the_programs_mappings, .fini = restore) {
	madvise_mode();
	hp_knob_require(&shmem, THP_SHMEM, "advise");
	char s[4096];
	snprintf(s, sizeof s, "HP=%s; B=%s; T=$(mktemp -d); "
	    "trap 'rm -rf $T; kill $pid 2>/dev/null' EXIT; "
	    "$HP -- ${B}progmap hold > $T/out & "
	    "i=0; until grep -q '^child=' $T/out; do i=$((i + 1)); "
	    "[ $i -lt 600 ] || exit 9; sleep 0.1; done; "
	    "pid=$(sed -n 's/^pid=//p' $T/out); "
	    "i=0; until $HP stat $pid --json > $T/j 2>/dev/null && "
	    "grep -q '\"shared\": 1' $T/j; do i=$((i + 1)); "
	    "[ $i -lt 600 ] || exit 8; sleep 0.1; done; "
	    "awk '/^[0-9a-f]+-[0-9a-f]+ / { hg = 0 } "
	    "/^Rss:/ { r = $2 } /^(AnonHugePages|ShmemPmdMapped):/ { h += $2 } "
	    "/^VmFlags:.* hg/ { rss += r } "
	    "END { print \"smaps_hg_rss_kb=\" rss }' /proc/$pid/smaps; "
	    "python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); "
	    "m, k = j[\"mmap\"], j[\"kernel\"]; "
	    "print(\"mappings=%%d\\nshared=%%d\\nadvised=%%d\\nshared_bytes=%%d\\n"
	    "resident=%%d\\nhuge=%%d\" %% (m[\"mappings\"], m[\"shared\"], "
	    "m[\"advised_bytes\"], m[\"shared_bytes\"], "
	    "k[\"mmap_resident_bytes\"], k[\"mmap_huge_bytes\"]))' $T/j; "
	    "$HP stat $pid --prometheus | python3 ${B}promcheck.py; "
	    "echo threads=$(ls /proc/$pid/task | wc -l)",
	    hp_path("hugepreload"), hp_path(""));
	const char *argv[] = {"/bin/sh", "-c", s, NULL};
	hp_run_t r = hp_run(argv, NULL, false, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	double mib256 = 256 << 20;
	cr_assert_geq(hp_kv(&r, "mappings"), 1, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "advised"), mib256, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "shared"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "shared_bytes"), mib256, "%s", r.out);
	/* Both written mappings, and nothing the program did not advise. */
	cr_assert_geq(hp_kv(&r, "resident"), 2 * mib256, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "resident"), 1024 * hp_kv(&r,
	    "smaps_hg_rss_kb"), "%s", r.out);
	cr_assert_geq(hp_kv(&r, "huge"), 0.9 * hp_kv(&r, "resident"), "%s",
	    r.out);
	cr_assert(strstr(r.out, "ok "), "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "threads"), 1, "%s", r.out);
	hp_run_free(&r);
}
