/* The backing chain: hugetlbfs pool, then THP, then 4 KiB; 1 GiB pages;
 * MADV_COLLAPSE; release to the pool; fork with the pool used up. Each
 * test sets the kernel knobs it needs and puts them back in .fini. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include "harness.h"

#define POOL_2M "/proc/sys/vm/nr_hugepages"
#define POOL_1G "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"

static hp_knob_t pool, gib, thp, defrag;
static void restore(void) {
	hp_knob_restore(&pool);
	hp_knob_restore(&gib);
	hp_knob_restore(&thp);
	hp_knob_restore(&defrag);
}

/* A pool of exactly n 2 MiB pages, or the test is skipped: the kernel may
 * not find that many free 2 MiB blocks. */
static void set_pool(const char *n) {
	hp_knob_require(&pool, POOL_2M, n);
	char buf[32];
	hp_knob_read(POOL_2M, buf, sizeof buf);
	if (atol(buf) != atol(n))
		cr_skip_test("the kernel reserved %s huge pages of the %s asked "
		    "for (memory too fragmented)", buf, n);
}

static hp_run_t place(const char *conf, const char *mib) {
	char env0[200];
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf);
	const char *env[] = {env0, NULL};
	const char *argv[] = {hp_path("place_large"), mib, NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	cr_assert_eq(hp_kv(&r, "class"), 2);
	return r;
}

Test(chain, pool_pages_first, .fini = restore) {
	set_pool("64");
	hp_run_t r = place("verbose:true", "64");
	cr_assert_geq(hp_kv(&r, "vma_hugetlb_kb"), 65536, "not on hugetlb:\n%s",
	    r.out);
	cr_assert_eq(hp_kv(&r, "kernel_page_kb"), 2048);
	cr_assert_geq(hp_kv(&r, "pool_free_before") - hp_kv(&r,
	    "pool_free_after"), 32, "HugePages_Free did not fall");
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "huge class on hugetlb 2m (pool 64 free of 64)"),
	    "%s", r.err);
	/* Freed and trimmed: every page it took is back in the pool. */
	cr_assert_eq(hp_kv(&r, "pool_free_after_trim"),
	    hp_kv(&r, "pool_free_before"));
	hp_run_free(&r);
}

Test(chain, thp_without_pool, .fini = restore) {
	set_pool("0");
	hp_run_t r = place("verbose:true", "64");
	cr_assert_eq(hp_kv(&r, "vma_hugetlb_kb"), 0);
	cr_assert_geq(hp_kv(&r, "thp_bytes"), 0.9 * hp_kv(&r, "size"));
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "huge class on thp, then 4k"), "%s", r.err);
	hp_run_free(&r);
}

Test(chain, small_pages_without_pool_or_thp, .fini = restore) {
	set_pool("0");
	hp_knob_require(&thp, THP_ENABLED, "never");
	hp_run_t r = place("verbose:true", "64");
	cr_assert_eq(hp_kv(&r, "vma_hugetlb_kb"), 0);
	cr_assert_eq(hp_kv(&r, "thp_bytes"), 0);
	cr_assert_eq(hp_kv(&r, "kernel_page_kb"), 4);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "no thp (THP never), 4k"), "%s", r.err);
	hp_run_free(&r);
}

Test(chain, backing_thp_skips_the_pool, .fini = restore) {
	set_pool("64");
	hp_run_t r = place("backing:thp", "64");
	cr_assert_eq(hp_kv(&r, "vma_hugetlb_kb"), 0);
	cr_assert_geq(hp_kv(&r, "thp_bytes"), 0.9 * hp_kv(&r, "size"));
	cr_assert_eq(hp_kv(&r, "pool_free_after"), 64);
	hp_run_free(&r);
}

Test(chain, backing_hugetlb_says_when_the_pool_is_empty, .fini = restore) {
	set_pool("0");
	hp_run_t r = place("backing:hugetlb", "64");
	cr_assert_geq(hp_kv(&r, "thp_bytes"), 0.9 * hp_kv(&r, "size"));
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "backing:hugetlb, but no 2 MiB hugetlb pool is "
	    "reserved"), "%s", r.err);
	hp_run_free(&r);
	/* With a pool, used up: the pool is named with its size. */
	set_pool("8");
	r = place("backing:hugetlb", "64");
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "the 2 MiB hugetlb pool (8 pages) has no free "
	    "pages"), "%s", r.err);
	hp_run_free(&r);
}

/* No pool configured: whatever THP does and however much the huge class
 * maps, no message speaks of a pool as if there were one (with THP never,
 * the one line says that none is reserved). */
Test(chain, no_pool_no_pool_message, .fini = restore) {
	set_pool("0");
	const char *modes[] = {"always", "madvise", "never"};
	for (int i = 0; i < 3; i++) {
		hp_knob_require(&thp, THP_ENABLED, modes[i]);
		hp_run_t r = place("backing:auto", "900");
		cr_assert(strstr(r.err, "free pages") == NULL &&
		    strstr(r.err, "pool (") == NULL, "THP %s:\n%s", modes[i],
		    r.err);
		cr_assert_leq(hp_err_lines(&r), i == 2, "THP %s:\n%s", modes[i],
		    r.err);
		hp_run_free(&r);
	}
}

/* Opens of the pool's free_hugepages while pool_later N 0 runs under
 * CONF, counted by strace; -1 if strace is missing. */
static int sysfs_reads(const char *conf, const char *n) {
	char trace[64], env0[200];
	snprintf(trace, sizeof trace, "/tmp/hp-sysfs.%d", (int)getpid());
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf);
	const char *env[] = {env0, NULL};
	const char *argv[] = {"strace", "-f", "-qq", "-e", "trace=openat", "-o",
	    trace, hp_path("pool_later"), n, "0", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	if (r.code == 127 || strstr(r.err, "No such file")) {
		hp_run_free(&r);
		return -1;
	}
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "blocks"), atol(n));
	hp_run_free(&r);
	FILE *f = fopen(trace, "r");
	cr_assert_not_null(f);
	char line[512];
	int reads = 0;
	while (fgets(line, sizeof line, f))
		reads += strstr(line, "hugepages-2048kB/free_hugepages") != NULL;
	fclose(f);
	unlink(trace);
	return reads;
}

/* With no pool, new runs of the huge class read nothing from sysfs (the
 * start-up probe reads the pool once); with a pool, each reads its free
 * pages. */
Test(chain, sysfs_read_only_when_a_pool_can_exist, .fini = restore) {
	set_pool("0");
	int none = sysfs_reads("backing:auto", "32");
	if (none < 0)
		cr_skip_test("strace is not installed (scripts/setup-deps "
		    "installs it)");
	cr_assert_leq(none, 1, "%d reads of free_hugepages with no pool", none);
	set_pool("8");
	int some = sysfs_reads("backing:auto", "32");
	cr_assert_geq(some, 32, "%d reads with a pool of 8 pages", some);
}

/* A pool reserved while the program runs is used by its next new runs,
 * within a maintenance pass or so (maintain_ms:50; polled, up to 10 s). */
Test(chain, pool_reserved_later_is_used, .fini = restore) {
	set_pool("0");
	const char *env[] = {"HUGEPRELOAD_CONF=maintain_ms:50", NULL};
	const char *argv[] = {hp_path("pool_later"), "4", "16", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	char buf[32];
	hp_knob_read(POOL_2M, buf, sizeof buf);
	if (r.code == 3)
		cr_skip_test("could not write %s here", POOL_2M);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	if (atol(buf) != 16)
		cr_skip_test("the kernel reserved %s huge pages of the 16 asked "
		    "for (memory too fragmented)", buf);
	cr_assert_eq(hp_kv(&r, "hugetlb_used"), 1, "%s", r.out);
	hp_run_free(&r);
}

/* 4 threads write 1 GiB each in 8 MiB pieces while a 64-page pool runs
 * dry: no SIGBUS, every byte right, one warning. */
Test(chain, pool_runs_dry_mid_run, .fini = restore) {
	set_pool("64");
	const char *argv[] = {hp_path("pool_threads"), "1024", "8", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
	cr_assert_eq(hp_kv(&r, "bad"), 0);
	cr_assert_gt(hp_kv(&r, "hugetlb_kb"), 0, "the pool was not used");
	cr_assert_gt(hp_kv(&r, "anon_huge_kb"), 0, "nothing moved to THP");
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	hp_run_free(&r);
}

Test(chain, gib_page, .fini = restore) {
	hp_require_gib_pages();
	hp_knob_require(&gib, POOL_1G, "1");
	char buf[32];
	hp_knob_read(POOL_1G, buf, sizeof buf);
	if (atol(buf) < 1)
		cr_skip_test("the kernel could not reserve a 1 GiB page now");
	hp_run_t r = place("hugetlb_size:1g", "900");
	cr_assert_eq(hp_kv(&r, "kernel_page_kb"), 1048576, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "vma_hugetlb_kb"), 1048576, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "gib_free_after_trim"), 1, "not given back");
	hp_run_free(&r);
}

Test(collapse, huge_right_after_first_write_with_defrag_never,
    .fini = restore) {
	set_pool("0");
	hp_knob_require(&defrag, THP_DEFRAG, "never");
	hp_run_t r = place("collapse:true", "64");
	cr_assert_geq(hp_kv(&r, "thp_bytes"), 0.9 * hp_kv(&r, "size"),
	    "%.0f of %.0f", hp_kv(&r, "thp_bytes"), hp_kv(&r, "size"));
	hp_run_free(&r);
}

/* Where faults get no huge page at all (THP never), only collapse does. */
Test(collapse, does_what_faults_cannot, .fini = restore) {
	set_pool("0");
	hp_knob_require(&thp, THP_ENABLED, "never");
	hp_knob_require(&defrag, THP_DEFRAG, "never");
	hp_run_t r = place("collapse:false", "64");
	cr_assert_eq(hp_kv(&r, "thp_bytes"), 0, "control");
	hp_run_free(&r);
	r = place("collapse:true", "64");
	cr_assert_geq(hp_kv(&r, "thp_bytes"), 0.9 * hp_kv(&r, "size"));
	hp_run_free(&r);
}

/* hugetlb pages go back whole, and only whole: every other 3 MiB block
 * freed, then malloc_trim. */
Test(release, hugetlb_pages_back_to_the_pool, .fini = restore) {
	set_pool("64");
	const char *argv[] = {hp_path("nosplit"), "40", "3072", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	double before = hp_kv(&r, "before_hugetlb_kb");
	double after = hp_kv(&r, "after_hugetlb_kb");
	cr_assert_gt(before, 0);
	cr_assert_lt(after, before);
	cr_assert_eq((long)(before - after) % 2048, 0);
	cr_assert_eq(hp_kv(&r, "pool_free_after") - hp_kv(&r, "pool_free_before"),
	    (before - after) / 2048, "HugePages_Free did not rise as much");
	hp_run_free(&r);
}

/* The Redis BGSAVE pattern with the pool used up. The control maps the
 * same memory with plain mmap(MAP_HUGETLB): its child dies of SIGBUS. */
Test(fork, child_reads_while_parent_writes_with_pool_full,
    .fini = restore) {
	set_pool("64");
	const char *ctl[] = {hp_path("forkcow"), "raw", "8", NULL};
	hp_run_t c = hp_run(ctl, NULL, false, NULL);
	cr_assert_eq(c.code, 0, "%s", c.err);
	cr_assert_eq(hp_kv(&c, "pool_avail_before_fork"), 0);
	cr_assert_eq(hp_kv(&c, "child_signal"), 7, "control: expected SIGBUS");
	hp_run_free(&c);

	const char *argv[] = {hp_path("forkcow"), "malloc", "8", NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "pool_avail_before_fork"), 0, "pool not full:\n%s",
	    r.out);
	cr_assert_gt(hp_kv(&r, "hugetlb_kb_before_fork"), 0);
	cr_assert_eq(hp_kv(&r, "child_signal"), 0, "child killed by %.0f",
	    hp_kv(&r, "child_signal"));
	cr_assert_eq(hp_kv(&r, "child_exit"), 0, "child saw changed data");
	cr_assert_eq(hp_kv(&r, "parent_bad"), 0);
	/* The parent's own memory stays on the pool's pages (the copy made
	 * for the child may fault in a reserved, untouched one). */
	cr_assert_geq(hp_kv(&r, "hugetlb_kb_after_fork"),
	    hp_kv(&r, "hugetlb_kb_before_fork"), "%s", r.out);
	hp_run_free(&r);
}
