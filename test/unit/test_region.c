/* Unit tests of the huge-class reservation (src/region.c): the per-2 MiB
 * page bitmap, and carving, release and reuse against real mappings. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "huge/huge.h"

/* The policy these tests run under (hp_conf is base/conf.c's). */
__attribute__((constructor)) static void policy(void) {
	hp_conf.large_threshold = 1 << 20;
	hp_conf.backing = HP_BACKING_THP;
	hp_conf.hugetlb_page = HP_HUGE;
}

static hp_hpage_t fresh(void) {
	hp_hpage_t pg;
	memset(pg.released, 0xff, sizeof pg.released);
	memset(pg.dirty, 0, sizeof pg.dirty);
	pg.nreleased = HP_SUBPAGES;
	return pg;
}

Test(hpage, reuse_then_release_whole_page_needs_zap) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 0, 512, zero);
	cr_assert_eq(pg.nreleased, 0);
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		cr_assert_eq(zero[w], 0, "fresh memory needs no zeroing");
	cr_assert_not(hp_hpage_release(&pg, 0, 200));
	cr_assert_eq(pg.nreleased, 200);
	cr_assert(hp_hpage_release(&pg, 200, 312), "empty and dirty: zap");
	cr_assert_eq(pg.nreleased, 512);
	/* Until the zap is done, the page stays dirty: reuse would zero. */
	hp_hpage_reuse(&pg, 0, 512, zero);
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		cr_assert_eq(zero[w], ~0ull, "not zapped yet: all stale");
}

Test(hpage, partial_reuse_zeroes_only_stale_subpages) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 10, 100, zero);      /* subpages 10..109 dirty */
	hp_hpage_reuse(&pg, 300, 10, zero);      /* keeps the page live */
	cr_assert_not(hp_hpage_release(&pg, 10, 100), "300..309 still live");
	/* Reusing 0..59: 10..59 are stale, 0..9 were never written. */
	hp_hpage_reuse(&pg, 0, 60, zero);
	cr_assert_eq(zero[0], ((1ull << 50) - 1) << 10);
	for (unsigned w = 1; w < HP_SUBWORDS; w++)
		cr_assert_eq(zero[w], 0);
	cr_assert_eq(pg.nreleased, 512 - 70);
	/* Once everything is released the page is empty and dirty: zap. */
	cr_assert_not(hp_hpage_release(&pg, 0, 60));
	cr_assert(hp_hpage_release(&pg, 300, 10));
}

Test(hpage, release_is_idempotent_and_counts_once) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 0, 512, zero);
	cr_assert_not(hp_hpage_release(&pg, 64, 64));
	cr_assert_not(hp_hpage_release(&pg, 64, 64));
	cr_assert_eq(pg.nreleased, 64);
	cr_assert_not(hp_hpage_release(&pg, 63, 3));   /* only 63 is new */
	cr_assert_eq(pg.nreleased, 65);
	/* A word boundary run and the last subpage. */
	cr_assert_not(hp_hpage_release(&pg, 511, 1));
	cr_assert_eq(pg.released[7] >> 63, 1);
	cr_assert_eq(pg.nreleased, 66);
}

static long rss_kb_of(const void *p) {
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	unsigned long a, b;
	long kb = -1, in = 0;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, ' ') >
		    strchr(line, '-'))
			in = (uintptr_t)p >= a && (uintptr_t)p < b;
		else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/* The huge class's page counters now; the debug build (this one) also
 * recounts every page and asserts the kept totals agree. */
static hp_arena_stats_t scan(void) {
	hp_arena_stats_t st = {0};
	hp_region_scan(&st);
	return st;
}

Test(region, carve_release_reuse) {
	hp_sys_t sys;
	hp_backing_probe(&sys);
	uintptr_t zone, ll;
	size_t zone_size, ll_size;
	cr_assert(hp_region_init((size_t)1 << 32, false, 0, &ll, &ll_size, &zone,
	    &zone_size));
	cr_assert_eq(zone_size, 0);
	cr_assert_eq(ll_size, 0);
	cr_assert_eq(hp_region.base % HP_HUGE, 0);
	cr_assert_eq(hp_region.size, (size_t)1 << 32);
	/* 3 MiB committed: maps 2 huge pages, touches none yet. */
	char *a = hp_region_alloc(3 << 20, HP_PAGE, true);
	cr_assert_eq((uintptr_t)a, hp_region.base);
	cr_assert(hp_region_contains(a) && !hp_region_contains(&a));
	cr_assert_eq(hp_region.pages[0].map, HP_MAP_THP, "mapped on commit");
	cr_assert_eq(hp_region.pages[1].map, HP_MAP_THP);
	cr_assert_eq(hp_region.pages[2].map, HP_MAP_NONE);
	hp_arena_stats_t st = scan();      /* page 0 full, page 1 half */
	cr_assert_eq(st.mapped_bytes, 2 * HP_HUGE);
	cr_assert_eq(st.thp_bytes, 2 * HP_HUGE);
	cr_assert_eq(st.pages_full, 1);
	cr_assert_eq(st.pages_partial, 1);
	cr_assert_eq(st.stranded_bytes, 1 << 20, "page 1's free half");
	char *b = hp_region_alloc(1 << 20, HP_PAGE, true);
	st = scan();
	cr_assert_eq(st.pages_full, 2);
	cr_assert_eq(st.stranded_bytes, 0);
	cr_assert_eq(b, a + (3 << 20), "contiguous");
	char *u = hp_region_alloc(4 << 20, HP_PAGE, false);
	cr_assert_eq(hp_region.pages[2].map, HP_MAP_NONE, "uncommitted: unmapped");
	cr_assert(hp_region_reuse(u, 1 << 20));
	cr_assert_eq(hp_region.pages[2].map, HP_MAP_THP);
	cr_assert_eq(hp_region.pages[3].map, HP_MAP_NONE);
	memset(a, 0x77, 4 << 20);
	long full = rss_kb_of(a);
	cr_assert_geq(full, 4 * 1024);
	/* Releasing [1 MiB, 3 MiB) leaves both pages partly live: nothing
	 * goes back. */
	hp_region_release(a + (1 << 20), 2 << 20);
	cr_assert_eq(rss_kb_of(a), full);
	st = scan();      /* pages 0 and 1 half free, and page 2 (u's) */
	cr_assert_eq(st.stranded_bytes, 3 << 20);
	cr_assert_eq(st.pages_partial, 3);
	/* Releasing [0, 1 MiB) empties page 0: it goes back. */
	hp_region_release(a, 1 << 20);
	cr_assert_leq(rss_kb_of(a), full - 2048);
	st = scan();
	cr_assert_eq(st.pages_released, 1);
	cr_assert_eq(st.pages_partial, 2, "page 0 gone; pages 1 and 2 half");
	/* Reusing [1 MiB, 3 MiB): page 1's stale subpages come back zeroed,
	 * page 0's were given back and read as zero. */
	hp_region_reuse(a + (1 << 20), 2 << 20);
	for (size_t i = 1 << 20; i < (3u << 20); i += 4096)
		cr_assert_eq(a[i], 0, "offset %zu", i);
	scan();
	cr_assert_null(hp_region_alloc((size_t)1 << 33, HP_PAGE, true),
	    "beyond the reservation");
	char *c = hp_region_alloc(HP_HUGE, HP_HUGE, true);
	cr_assert_eq((uintptr_t)c % HP_HUGE, 0, "aligned carve");
	scan();
}

/* The long-lived class's range: whole 64 MiB blocks, an eighth of the
 * region, between the region and the zone, all inside the owned range. */
Test(region, long_lived_range_between_region_and_zone) {
	uintptr_t zone, ll;
	size_t zone_size, ll_size;
	cr_assert(hp_region_init((size_t)1 << 32, true, HP_LL_SHARE, &ll,
	    &ll_size, &zone, &zone_size));
	cr_assert_eq(ll % HP_LL_ALIGN, 0, "%#lx", (unsigned long)ll);
	cr_assert_eq(ll_size % HP_LL_ALIGN, 0);
	cr_assert_geq(ll_size, ((size_t)1 << 32) / HP_LL_SHARE - HP_LL_ALIGN);
	cr_assert_leq(ll_size, ((size_t)1 << 32) / HP_LL_SHARE);
	cr_assert_eq(hp_region.base + hp_region.size, ll, "the region ends "
	    "where the class starts");
	cr_assert_leq(ll + ll_size, zone);
	cr_assert_eq(zone + zone_size, hp_owned_base + hp_owned_size);
	cr_assert(hp_owned((void *)ll) && hp_owned((void *)(ll + ll_size - 1)));
	cr_assert(!hp_region_contains((void *)ll));
	cr_assert_eq(hp_region.size % HP_HUGE, 0);
}

/* Runs broken() in a child whose stderr is read back, and checks that it
 * died of SIGABRT after hp_assert_fail's message (base/log.c) naming
 * expr, in function fn. */
static void assert_trips(void (*broken)(void), const char *expr,
    const char *fn) {
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		broken();
		_exit(0);
	}
	close(fds[1]);
	char out[1024], want[256];
	size_t n = 0;
	ssize_t r;
	while (n < sizeof out - 1 && (r = read(fds[0], out + n,
	    sizeof out - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(fds[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	snprintf(want, sizeof want, "assertion failed: %s (", expr);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the child "
	    "ended with status %#x, not SIGABRT; it said: %s", st, out);
	cr_assert(strstr(out, want) != NULL && strstr(out, fn) != NULL,
	    "not %s in %s: %s", want, fn, out);
}

/* A page whose count of released parts is 12 short of its bitmap's:
 * released whole, it would still count 12 parts live, never read as
 * empty, and never go back to the kernel. The debug build stops at the
 * first call that sees it. */
static void count_short_of_the_bitmap(void) {
	hp_hpage_t pg;
	uint64_t zero[HP_SUBWORDS];
	memset(&pg, 0, sizeof pg);
	memset(pg.released, 0xff, sizeof pg.released);
	pg.nreleased = HP_SUBPAGES;
	hp_hpage_reuse(&pg, 0, 100, zero);
	pg.nreleased -= 12;                     /* the broken invariant */
	if (!hp_hpage_release(&pg, 0, 100))
		fprintf(stderr, "not given back: %u of %u parts released\n",
		    (unsigned)pg.nreleased, (unsigned)HP_SUBPAGES);
}

Test(region, page_count_short_of_its_bitmap_aborts) {
	assert_trips(count_short_of_the_bitmap, "hp_hpage_valid(pg)",
	    ", hp_hpage_release)");
}

/* The debug build's checks on ranges and page indexes. */
Test(region, release_of_a_foreign_range_aborts, .signal = SIGABRT) {
	uintptr_t zone, ll;
	size_t zone_size, ll_size;
	cr_assert(hp_region_init((size_t)1 << 30, false, 0, &ll, &ll_size, &zone,
	    &zone_size));
	char *a = hp_region_alloc(HP_HUGE, HP_PAGE, true);
	cr_assert_not_null(a);
	hp_region_release(a + HP_HUGE, HP_PAGE);   /* never handed out */
}

Test(region, subpages_past_the_page_abort, .signal = SIGABRT) {
	hp_hpage_t pg;
	memset(&pg, 0, sizeof pg);
	hp_hpage_release(&pg, 500, 20);
}

/* hp_popcount64 by the POPCNT instruction (where os.c finds it) and by
 * the portable count, against the compiler's, on edge and random words. */
Test(hpage, popcount_both_ways) {
	uint64_t r = 0x9e3779b97f4a7c15ull;
	hp_os_probe_cpu();
	bool cpu = hp_os_have_popcnt;
	for (int way = 0; way < 2; way++) {
		hp_os_have_popcnt = way == 0 ? false : cpu;
		static const uint64_t edge[] = {0, ~0ull, 1, 1ull << 63,
		    0x8000000000000001ull, ~1ull, 0x5555555555555555ull};
		for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
			cr_assert_eq(hp_popcount64(edge[i]),
			    (unsigned)__builtin_popcountll(edge[i]), "%#lx",
			    (unsigned long)edge[i]);
		for (int i = 0; i < 100000; i++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			uint64_t x = r & (r >> (i % 64));   /* sparse and dense */
			cr_assert_eq(hp_popcount64(x),
			    (unsigned)__builtin_popcountll(x), "%#lx",
			    (unsigned long)x);
		}
	}
	hp_os_have_popcnt = cpu;
}
