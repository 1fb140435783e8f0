/* The long-lived class (src/longlived/longlived.c): promoted small objects
 * in mimalloc heaps over the class's own range, beside jemalloc's path
 * (long_lived:jemalloc); the pool first; threads and fork; mimalloc's
 * options; libmimalloc absent or already the program's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "hugepreload.h"

#define POOL_2M "/proc/sys/vm/nr_hugepages"
#define MI_LIB "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"

static hp_knob_t pool;
static void restore(void) {
	hp_knob_restore(&pool);
}

static hp_run_t run_env(const char *const *argv, const char *conf,
    const char *extra) {
	char env0[600];
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf);
	const char *env[] = {env0, extra, NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1, "%s", r.out);
	return r;
}

/* Learning here is the means to promote the index site: with
 * lifetime_ms:100 and a warm-up of 1 s (LT_WARMUP_S), ten times the time
 * a sample needs to turn long-lived, as test_wrapper.c's runs learn (the
 * program's default 2.5 s waits out the default 250 ms: 1.5 s more a
 * run). Every check of where the nodes and the request buffers went, and
 * of the class's counters, is made as before; learning's own defaults are
 * test_lifetime.c's. */
#define LEARN "lifetime:learn,lifetime_ms:100"
#define WARMUP "LT_WARMUP_S=1"

static hp_run_t index_run(const char *conf) {
	const char *argv[] = {hp_path("lifetime"), "index", "2000000", NULL};
	return run_env(argv, conf, WARMUP);
}

/* A counter of the class at exit: the third column of a text line. */
static double ll_counter(const hp_run_t *r, const char *name) {
	const char *head = strstr(r->err, "long_lived\n");
	cr_assert(head != NULL, "no long_lived column in:\n%s", r->err);
	const char *p = strstr(head, name);
	cr_assert(p != NULL, "no %s in:\n%s", name, r->err);
	double a, b, c;
	cr_assert_eq(sscanf(p + strlen(name), "%lf %lf %lf", &a, &b, &c), 3);
	return c;
}

/* The class's range, from the verbose line. */
static void ll_range(const hp_run_t *r, unsigned long *lo, unsigned long *hi) {
	const char *p = strstr(r->err, "long-lived class: mimalloc");
	cr_assert(p != NULL, "no class line in:\n%s", r->err);
	p = strstr(p, " at 0x");
	cr_assert(p != NULL, "%s", r->err);
	cr_assert_eq(sscanf(p, " at %lx-%lx", lo, hi), 2, "%s", r->err);
}

/* Index nodes on huge pages in hg mappings, request buffers in the small
 * class (hp_assert_requests_small). */
static void placed_right(const hp_run_t *r) {
	cr_assert_geq(hp_kv(r, "late_nodes_huge_frac"), 0.9, "%s", r->out);
	cr_assert_geq(hp_kv(r, "late_nodes_hg_frac"), 0.9, "%s", r->out);
	hp_assert_requests_small(r);
}

Test(longlived, index_in_the_class_requests_in_nh) {
	hp_run_t r = index_run(LEARN ",long_lived:mimalloc,verbose:true,"
	    "stats_print:true");
	placed_right(&r);
	unsigned long lo, hi;
	ll_range(&r, &lo, &hi);
	unsigned long at = (unsigned long)hp_kv(&r, "late_nodes_at");
	cr_assert(at >= lo && at < hi, "a late node at %#lx, the class at "
	    "%#lx-%#lx", at, lo, hi);
	/* 1.5 million nodes after warm-up, 48 B each: mimalloc's. */
	cr_assert_geq(ll_counter(&r, "allocations "), 1000000, "%s", r.err);
	cr_assert_geq(ll_counter(&r, "live_bytes "), 48.0 * 1000000);
	cr_assert_geq(ll_counter(&r, "resident_huge_bytes "),
	    ll_counter(&r, "live_bytes "), "the kernel's huge bytes of the "
	    "range hold the live ones");
	cr_assert_eq(hp_err_lines(&r), 2, "the policy line and the class's "
	    "only:\n%s", r.err);
	/* jemalloc's "stats.allocated" counts the class's objects too. */
	cr_assert_geq(hp_kv(&r, "allocated"), 2000000 * 48.0, "%s", r.out);
	hp_run_free(&r);
}

/* The long-lived class in use before any huge-class request starts the
 * huge class's threads, not its arena: the first huge-class request after
 * that still makes the arena, and is the huge class's (the program's
 * 64 MiB request; its 16 MiB array stays under this threshold). */
Test(longlived, huge_class_after_the_long_lived_class) {
	hp_run_t r = index_run(LEARN ",long_lived:mimalloc,"
	    "large_threshold:64m");
	placed_right(&r);
	cr_assert_eq(hp_kv(&r, "big_class"), HUGEPRELOAD_CLASS_HUGE, "%s",
	    r.out);
	hp_run_free(&r);
}

Test(longlived, jemalloc_setting_keeps_the_huge_arena) {
	hp_run_t r = index_run(LEARN ",long_lived:jemalloc,stats_print:true");
	placed_right(&r);
	cr_assert_null(strstr(r.err, "long_lived\n"), "no class column:\n%s",
	    r.err);
	cr_assert_geq(hp_kv(&r, "allocated"), 2000000 * 48.0, "%s", r.out);
	cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
	hp_run_free(&r);
}

/* The handback program under a profile that promotes the index site:
 * nodes freed by their own thread, then by another thread's, are never
 * handed to the request site (all request buffers small-class, nh);
 * nodes_huge_frac_min fails if the profile missed the site. */
static void handback(const char *setting) {
	char prof[128], conf[400];
	snprintf(prof, sizeof prof, "/tmp/hp-ll-%s.%d.prof", setting,
	    (int)getpid());
	snprintf(conf, sizeof conf, LEARN ",long_lived:%s,lifetime_record:%s",
	    setting, prof);
	hp_run_t a = index_run(conf);
	hp_run_free(&a);
	snprintf(conf, sizeof conf, "lifetime:replay,long_lived:%s,"
	    "lifetime_profile:%s", setting, prof);
	const char *argv[] = {hp_path("lifetime"), "handback", "8", NULL};
	hp_run_t r = run_env(argv, conf, NULL);
	unlink(prof);
	cr_assert_eq(hp_kv(&r, "nodes_huge_frac_min"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "requests_not_small"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "requests_not_nh"), 0, "%s", r.out);
	cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
	hp_run_free(&r);
}

Test(longlived, freed_objects_never_reach_another_site) {
	handback("mimalloc");
}

Test(longlived, freed_objects_never_reach_another_site_jemalloc) {
	handback("jemalloc");
}

/* A profile that promotes the index site, in prof: the replays that use
 * it (crossfork, release) check where the index nodes went, so a profile
 * that did not promote the site fails them. */
static void record(char *prof, size_t n, const char *tag) {
	char conf[300];
	snprintf(prof, n, "/tmp/hp-ll-%s.%d.prof", tag, (int)getpid());
	snprintf(conf, sizeof conf, LEARN ",lifetime_record:%s", prof);
	hp_run_t a = index_run(conf);
	hp_run_free(&a);
}

/* lifetime crossfork 8 BEFORE AFTER under a replay of a profile that
 * promotes the index site (recorded first), long_lived:mimalloc. */
static hp_run_t crossfork(const char *before, const char *after,
    const char *extra) {
	char prof[128], conf[400];
	record(prof, sizeof prof, "fork");
	snprintf(conf, sizeof conf, "lifetime:replay,long_lived:mimalloc,"
	    "lifetime_profile:%s,stats_print:true%s", prof, extra);
	const char *argv[] = {hp_path("lifetime"), "crossfork", "8", before,
	    after, NULL};
	hp_run_t r = run_env(argv, conf, NULL);
	unlink(prof);
	cr_assert_eq(hp_kv(&r, "forks_failed"), 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "nodes_huge_frac"), 1, "%s", r.out);
	return r;
}

/* 8 threads make promoted nodes and free each other's while the main
 * thread forks 20 children that free and make them too. */
Test(longlived, threads_free_across_and_fork) {
	hp_run_t r = crossfork("0", "0", "");
	cr_assert_geq(hp_kv(&r, "sets"), 8, "%s", r.out);
	cr_assert_geq(ll_counter(&r, "frees "), 8 * 20000.0, "%s", r.err);
	hp_run_free(&r);
}

/* A 2 MiB pool of n pages (put back by restore), or the test skipped. */
static void require_pool(const char *n) {
	hp_knob_require(&pool, POOL_2M, n);
	char buf[32];
	hp_knob_read(POOL_2M, buf, sizeof buf);
	if (atol(buf) != atol(n))
		cr_skip_test("the kernel reserved %s huge pages of the %s asked "
		    "for (memory too fragmented)", buf, n);
}

/* The class's first arena, in MiB from the pool (the verbose line). */
static long class_pool_mib(const hp_run_t *r) {
	const char *p = strstr(r->err, " MiB from the hugetlb pool, the rest");
	cr_assert(p != NULL, "%s", r->err);
	while (p > r->err && p[-1] != '(')
		p--;
	return atol(p);
}

/* crossfork with a 128-page pool and blocks of the huge class (BEFORE
 * MiB made before the class starts, AFTER MiB once it has): 20 forks of
 * a parent whose 8 threads keep writing the class's objects. The class
 * takes 32 MiB of the pool, every child reads the sets exactly, in none
 * was the class's pool arena copied (it is hugetlb there too), and in
 * huge_copies of them part of the blocks was. */
static void fork_with_pool(const char *before, const char *after,
    long huge_copies) {
	require_pool("128");
	hp_run_t r = crossfork(before, after, ",verbose:true");
	cr_assert_eq(class_pool_mib(&r), 32, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "forks_class_copied"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "forks_huge_copied"), huge_copies, "%s", r.out);
	hp_run_free(&r);
}

/* The huge class holds 40 pages (80 MiB) of the 128 when the class
 * starts: the class takes (88 - 40) / 2 pages, 32 MiB in whole arena
 * blocks, which leaves the pool as many available pages as the process
 * holds: no fork copies any of them, and every child reads the sets
 * exactly. (Half of what was free, 64 MiB, left 56 for 72 held: each
 * fork copied the class's arena first, with its threads writing.) */
Test(longlived, fork_copies_none_of_the_class_pages, .fini = restore) {
	fork_with_pool("80", "0", 0);
}

/* 20 MiB more in the huge class once the class has started: the pool
 * then has fewer available pages than the process holds, and each fork
 * copies some of the huge class's pages (which jemalloc's locks keep
 * still) and none of the long-lived class's, whose records and objects
 * the threads keep writing. (Copied first, the class's arena was not
 * hugetlb in any of the 20 children.) */
Test(longlived, fork_copies_the_huge_class_pages_first, .fini = restore) {
	fork_with_pool("80", "20", 20);
}

/* With a pool of 64 pages the class maps half of what is free, less
 * what the huge class holds, when it starts (whole 32 MiB arena blocks)
 * and fills them before THP. */
Test(longlived, pool_pages_first, .fini = restore) {
	require_pool("64");
	hp_run_t r = index_run(LEARN ",long_lived:mimalloc,stats_print:true,"
	    "verbose:true");
	/* hugetlb areas have no "hg" flag: they are huge pages anyway. */
	cr_assert_geq(hp_kv(&r, "late_nodes_huge_frac"), 0.9, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "late_nodes_hg_frac") + hp_kv(&r,
	    "late_nodes_hugetlb_frac"), 0.9, "%s", r.out);
	hp_assert_requests_small(&r);
	cr_assert(strstr(r.err, " MiB from the hugetlb pool, the rest THP)"),
	    "%s", r.err);
	long mib = class_pool_mib(&r);
	cr_assert_geq(mib, 32, "no pool pages taken:\n%s", r.err);
	cr_assert_eq(mib % 32, 0);
	cr_assert_eq(hp_kv(&r, "promoted_first_hugetlb_frac"), 1, "the first "
	    "promoted node is not on a hugetlb page:\n%s", r.out);
	cr_assert_gt(hp_kv(&r, "late_nodes_hugetlb_frac"), 0, "%s", r.out);
	cr_assert_eq(ll_counter(&r, "hugetlb_2m_bytes "), mib << 20);
	cr_assert_geq(ll_counter(&r, "fallbacks_pool_empty "), 1, "the pool "
	    "arena filled, then THP:\n%s", r.err);
	/* Its full heap set ENOMEM; the mallocs that then succeeded did not
	 * pass it on. */
	cr_assert_eq(hp_kv(&r, "errno_changed"), 0, "%s", r.out);
	cr_assert_gt(ll_counter(&r, "thp_bytes "), 0);
	hp_run_free(&r);
}

static hp_run_t release_run(const char *prof, const char *keep,
    const char *extra) {
	char conf[400];
	snprintf(conf, sizeof conf, "lifetime:replay,long_lived:mimalloc,"
	    "lifetime_profile:%s,maintain_ms:100,decay_ms:0,%s", prof, extra);
	const char *argv[] = {hp_path("lifetime"), "release", keep, NULL};
	hp_run_t r = run_env(argv, conf, NULL);
	cr_assert_eq(hp_kv(&r, "huge_frac"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "arenas"), 3, "%s", r.out);
	return r;
}

/* Freed, the class's memory goes back in whole huge pages: with every
 * node freed nothing is split and almost nothing stays; with one node of
 * every 4096 kept (one per 192 KiB) and strand_limit:100%, nothing is split and the free
 * parts stay stranded beside them, counted; with strand_limit:0 the
 * emptiest pages are split until nothing is stranded, and the kernel
 * split the pages themselves: no kept node is still in a THP page. */
Test(longlived, memory_goes_back_in_whole_huge_pages) {
	char prof[128];
	record(prof, sizeof prof, "release");
	hp_run_t r = release_run(prof, "0", "strand_limit:100%");
	cr_assert_gt(hp_kv(&r, "ll_released"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "ll_split"), 0, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "ll_resident"), 4 << 20, "all freed:\n%s",
	    r.out);
	hp_run_free(&r);
	r = release_run(prof, "4096", "strand_limit:100%");
	cr_assert_eq(hp_kv(&r, "ll_split"), 0, "%s", r.out);
	cr_assert_gt(hp_kv(&r, "ll_stranded"), 0, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "ll_resident_huge"), hp_kv(&r, "ll_stranded"),
	    "stranded parts are in huge pages:\n%s", r.out);
	/* kpageflags can tell: unsplit, the kept nodes are in THP pages. */
	cr_assert_gt(hp_kv(&r, "kept_in_thp"), 0, "%s", r.out);
	/* jemalloc's stats.active counts the class's resident pages. */
	cr_assert_geq(hp_kv(&r, "active"), hp_kv(&r, "ll_resident"), "%s",
	    r.out);
	hp_run_free(&r);
	r = release_run(prof, "4096", "strand_limit:0");
	unlink(prof);
	cr_assert_gt(hp_kv(&r, "ll_split"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "ll_stranded"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "kept_in_thp"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* mimalloc's options that would split huge pages are held, one line
 * each the user set; those it needs not are left alone. The two runs go
 * at once, on THP (backing:thp), so that together they cannot empty a
 * hugetlb pool the host keeps, which would say so in a line. */
Test(longlived, mimalloc_options_held) {
	const char *argv[] = {hp_path("lifetime"), "index", "2000000", NULL};
	/* No catch-up (maintain_ms an hour), as in test_lifetime.c's
	 * broken_profiles: the two programs at once. */
	const char *conf = "HUGEPRELOAD_CONF=" LEARN ",long_lived:mimalloc,"
	    "backing:thp,maintain_ms:3600000";
	const char *env0[] = {conf, WARMUP, "MIMALLOC_PAGE_RESET=1", NULL};
	const char *env1[] = {conf, WARMUP, "MIMALLOC_ALLOW_DECOMMIT=1", NULL};
	hp_proc_t p0 = hp_start(argv, env0, true, NULL);
	hp_proc_t p1 = hp_start(argv, env1, true, NULL);
	hp_run_t r = hp_wait(p0), r1 = hp_wait(p1);
	cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1, "%s", r.out);
	placed_right(&r);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "MIMALLOC_PAGE_RESET=1 ignored: the long-lived "
	    "class keeps it at 0"), "%s", r.err);
	hp_run_free(&r);
	cr_assert_eq(r1.code, 0, "exit %d\n%s%s", r1.code, r1.out, r1.err);
	cr_assert_eq(hp_kv(&r1, "data_ok"), 1, "%s", r1.out);
	cr_assert_eq(hp_err_lines(&r1), 0, "what it would set anyway is "
	    "not reported:\n%s", r1.err);
	hp_run_free(&r1);
}

/* Without libmimalloc (hidden in a mount namespace) the class stays on
 * jemalloc's path, said in one line, and placement is the same. */
Test(longlived, without_libmimalloc) {
	if (access(MI_LIB, R_OK) != 0)
		cr_skip_test("%s is not installed", MI_LIB);
	hp_run_t r = hp_script(
	    "unshare -m sh -c \"mount --bind /dev/null " MI_LIB " && "
	    "exec env LD_PRELOAD=$B/libhugepreload.so " WARMUP " $B/lifetime "
	    "index 2000000\"", LEARN ",long_lived:mimalloc,stats_print:true");
	if (r.code != 0 && strstr(r.err, "unshare"))
		cr_skip_test("no mount namespace here: %s", r.err);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	placed_right(&r);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "the long-lived class stays on jemalloc: "),
	    "%s", r.err);
	cr_assert_null(strstr(r.err, "long_lived\n"), "%s", r.err);
	hp_run_free(&r);
}

/* A program that has libmimalloc loaded itself keeps it to itself. */
Test(longlived, program_with_its_own_libmimalloc) {
	if (access(MI_LIB, R_OK) != 0)
		cr_skip_test("%s is not installed", MI_LIB);
	char pre[300];
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s %s", hp_path("libhugepreload.so"),
	    MI_LIB);
	const char *argv[] = {hp_path("lifetime"), "index", "2000000", NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=" LEARN ",long_lived:mimalloc",
	    pre, WARMUP, NULL};
	hp_run_t r = hp_run(argv, env, false, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	placed_right(&r);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "stays on jemalloc: the program has loaded "
	    "libmimalloc.so.2 itself"), "%s", r.err);
	hp_run_free(&r);
}

/* hugepreload stat of a program holding the index: the class's counters
 * are the kernel's figures for its range (smaps, read by the command), in
 * text, JSON and Prometheus. */
Test(longlived, counters_match_smaps) {
	hp_run_t r = hp_script(
	    "start env LD_PRELOAD=${B}libhugepreload.so " WARMUP " ${B}lifetime "
	    "index 2000000 hold; "
	    "ready() { $HP stat $pid > $T/s 2>/dev/null && "
	    "grep -q '^smaps of the long-lived' $T/s; }; until_ok ready; "
	    "grep -E '^(smaps of the long-lived|allocations|live_bytes)' $T/s; "
	    "$HP stat $pid --json | python3 -c 'import json, sys; "
	    "d = json.load(sys.stdin); k = d[\"kernel\"]; "
	    "a = d[\"arenas\"][\"long_lived\"]; "
	    "print(\"json_resident=%d\\njson_kernel=%d\\njson_huge=%d\\n"
	    "json_kernel_huge=%d\" % (a[\"resident_bytes\"], "
	    "k[\"long_lived_range_resident_bytes\"], a[\"resident_huge_bytes\"], "
	    "k[\"long_lived_range_huge_bytes\"]))'; "
	    "$HP stat $pid --prometheus > $T/p; python3 ${B}promcheck.py < $T/p; "
	    "echo prom_series=$(grep -c 'arena=\"long_lived\"' $T/p); "
	    "kill $pid; wait", LEARN ",long_lived:mimalloc");
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	unsigned long res, huge, cres, chuge;
	const char *l = strstr(r.out, "smaps of the long-lived class's range:");
	cr_assert(l && sscanf(l, "smaps of the long-lived class's range: "
	    "resident %lu, on huge pages %lu (counted: %lu, %lu)", &res, &huge,
	    &cres, &chuge) == 4, "%s", r.out);
	cr_assert_geq(res, 48ul * 1000000, "%s", r.out);
	cr_assert_eq(res, cres, "smaps and the counter differ:\n%s", r.out);
	cr_assert_eq(huge, chuge, "%s", r.out);
	cr_assert_geq(huge, res / 10 * 9, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "json_resident"), hp_kv(&r, "json_kernel"));
	cr_assert_eq(hp_kv(&r, "json_huge"), hp_kv(&r, "json_kernel_huge"));
	cr_assert_geq(hp_kv(&r, "prom_series"), 10, "%s", r.out);
	cr_assert(strstr(r.out, "ok "), "promcheck: %s%s", r.out, r.err);
	hp_run_free(&r);
}

/* The class's own counts are its objects': with objects of every kind of
 * mimalloc page below large_threshold (8 B to 1000 KiB), made by the main
 * thread and by 4 others, freed, reallocated and freed across threads,
 * live_bytes is the sum of malloc_usable_size of those left and
 * allocations less frees is their number. With 80 threads too, more
 * than the counters' 64 shards (src/base/tally.c), so that threads share
 * them. The site is promoted from a recording of the same program. */
Test(longlived, counters_are_the_objects) {
	char prof[128], conf[300];
	snprintf(prof, sizeof prof, "/tmp/hp-ll-sizes.%d.prof", (int)getpid());
	const char *rec[] = {hp_path("lifetime"), "sizes", "4", NULL};
	snprintf(conf, sizeof conf, "lifetime:learn,lifetime_record:%s", prof);
	hp_run_t r = run_env(rec, conf, NULL);
	hp_run_free(&r);
	/* The two replays go at once, on THP, so that together they cannot
	 * empty a hugetlb pool the host keeps. */
	char env0[400];
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=lifetime:replay,"
	    "long_lived:mimalloc,lifetime_profile:%s,maintain_ms:100,"
	    "backing:thp", prof);
	const char *env[] = {env0, NULL};
	static const char *const threads[] = {"4", "80"};
	hp_proc_t p[2];
	for (int i = 0; i < 2; i++) {
		const char *argv[] = {hp_path("lifetime"), "sizes", threads[i],
		    NULL};
		p[i] = hp_start(argv, env, true, NULL);
	}
	hp_run_t rs[2] = {hp_wait(p[0]), hp_wait(p[1])};
	unlink(prof);
	for (int i = 0; i < 2; i++) {
		r = rs[i];
		cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
		cr_assert_eq(hp_kv(&r, "data_ok"), 1, "%s", r.out);
		cr_assert_eq(hp_kv(&r, "in_class"), hp_kv(&r, "objects"), "%s",
		    r.out);
		cr_assert_eq(hp_kv(&r, "ll_fallbacks"), 0, "%s", r.out);
		cr_assert_eq(hp_kv(&r, "ll_objects"), hp_kv(&r, "in_class"),
		    "%s threads:\n%s", threads[i], r.out);
		cr_assert_gt(hp_kv(&r, "usable_bytes"), 100e6, "%s", r.out);
		cr_assert_eq(hp_kv(&r, "ll_live"), hp_kv(&r, "usable_bytes"),
		    "%s threads:\n%s", threads[i], r.out);
		hp_run_free(&r);
	}
}

/* The key: both values, and a bad one reported on one line with the
 * default kept. */
Test(longlived, key_values) {
	const char *argv[] = {hp_path("policy"), NULL};
	const char *good[][2] = {{"long_lived:jemalloc", "long_lived:jemalloc"},
	    {"long_lived:mimalloc", "long_lived:mimalloc"},
	    {"lifetime:learn", "long_lived:jemalloc"}};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		char env0[200];
		snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", good[i][0]);
		const char *env[] = {env0, NULL};
		hp_run_t r = hp_run(argv, env, true, NULL);
		cr_assert_eq(r.code, 0);
		cr_assert(strstr(r.out, good[i][1]), "%s: %s", good[i][0], r.out);
		cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
		hp_run_free(&r);
	}
	const char *bad[] = {"long_lived:tcmalloc", "long_lived:", "long_lived:1",
	    "long_lived:MIMALLOC"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char env0[200];
		snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", bad[i]);
		const char *env[] = {env0, NULL};
		hp_run_t r = hp_run(argv, env, true, NULL);
		cr_assert_eq(r.code, 0);
		cr_assert(strstr(r.out, "long_lived:jemalloc"), "%s", r.out);
		cr_assert_eq(hp_err_lines(&r), 1, "%s: %s", bad[i], r.err);
		cr_assert(strstr(r.err, "long_lived"), "%s", r.err);
		hp_run_free(&r);
	}
}
