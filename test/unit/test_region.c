/* src/huge/region.c, the huge-class reservation: carving, release and
 * reuse against real mappings, and the page counters hp_region_scan
 * reports against what was carved and what the kernel holds. (Its pages'
 * bitmaps are test_hpage.c's.) */
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
	if (!hp_backing_thp_usable())
		cr_skip_test("THP is off on this host ('never')");
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

/* ---- the counters ---------------------------------------------------- */

#define PART ((size_t)HP_PAGE)

/* A 1 GiB region backed as asked; false if THP was asked and the host
 * has it off (the test then skips). */
static bool region_of(hp_backing_t backing) {
	hp_sys_t sys;
	uintptr_t zone, ll;
	size_t zone_size, ll_size;
	hp_conf.backing = backing;
	hp_backing_probe(&sys);
	if (backing == HP_BACKING_THP && !hp_backing_thp_usable())
		return false;
	cr_assert(hp_region_init((size_t)1 << 30, false, 0, &ll, &ll_size, &zone,
	    &zone_size));
	return true;
}

/* The 4 KiB parts of the 2 MiB page at hp that the kernel holds. */
static unsigned kernel_parts(const char *hp) {
	return hp_os_huge_resident((uintptr_t)hp);
}

static uint64_t hist_sum(const hp_arena_stats_t *st) {
	uint64_t n = 0;
	for (unsigned i = 0; i < HP_HIST_BUCKETS; i++)
		n += st->live_hist[i];
	return n;
}

/* On 4 KiB pages a released part goes back at once, so what the counters
 * call resident is exactly the live parts, and the kernel agrees once
 * they are written. */
Test(region, counters_follow_carving_on_4k_pages) {
	region_of(HP_BACKING_NONE);
	size_t live = 5 * (HP_HUGE / 2) + 3 * PART;  /* pages 0, 1 and 259 parts */
	char *a = hp_region_alloc(live, HP_PAGE, true);
	cr_assert_not_null(a);
	memset(a, 1, live);
	hp_arena_stats_t st = scan();
	cr_assert_eq(hp_region.pages[2].map, HP_MAP_4K);
	cr_assert_eq(st.mapped_bytes, 3 * HP_HUGE);
	cr_assert_eq(st.small_page_bytes, 3 * HP_HUGE);
	cr_assert_eq(st.thp_bytes, 0);
	cr_assert_eq(st.resident_bytes, live);
	cr_assert_eq(st.resident_huge_bytes, 0);
	cr_assert_eq(st.pages_full, 2);
	cr_assert_eq(st.pages_partial, 1);
	cr_assert_eq(st.pages_empty_resident, 0);
	cr_assert_eq(st.stranded_bytes, 0, "4 KiB pages strand nothing");
	cr_assert_eq(st.live_hist[9], 2, "full pages: the last tenth");
	cr_assert_eq(st.live_hist[259 * HP_HIST_BUCKETS / 513], 1);
	cr_assert_eq(hist_sum(&st), 3);
	cr_assert_eq(kernel_parts(a) + kernel_parts(a + HP_HUGE) +
	    kernel_parts(a + 2 * HP_HUGE), live / PART);
	/* 128 parts of page 0 back: at once, page 0 is partial now. */
	hp_region_release(a + (1 << 20), 128 * PART);
	st = scan();
	cr_assert_eq(st.resident_bytes, live - 128 * PART);
	cr_assert_eq(kernel_parts(a), 384);
	cr_assert_eq(st.pages_full, 1);
	cr_assert_eq(st.pages_partial, 2);
	cr_assert_eq(st.live_hist[384 * HP_HIST_BUCKETS / 513], 1);
	cr_assert_eq(st.purges_refused, 0);
	cr_assert_eq(st.pages_released, 0, "nothing went back whole");
	/* Taken again: counted resident as handed out (dirty stands for
	 * touched), held by the kernel once written. */
	cr_assert(hp_region_reuse(a + (1 << 20), 128 * PART));
	st = scan();
	cr_assert_eq(st.resident_bytes, live);
	cr_assert_eq(st.pages_full, 2);
	memset(a + (1 << 20), 2, 128 * PART);
	cr_assert_eq(kernel_parts(a), 512);
	/* All of it back: three pages given back whole, still mapped. */
	hp_region_release(a, live);
	st = scan();
	cr_assert_eq(st.pages_released, 3);
	cr_assert_eq(st.resident_bytes, 0);
	cr_assert_eq(st.pages_full + st.pages_partial + st.pages_empty_resident, 0);
	cr_assert_eq(hist_sum(&st), 0);
	cr_assert_eq(st.mapped_bytes, 3 * HP_HUGE);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(kernel_parts(a + i * HP_HUGE), 0, "page %d", i);
}

/*
 * Random releases and reuses over 8 carved pages on 4 KiB pages, against
 * a flag per part: the counters (which the debug build also recounts page
 * by page at every scan) and the kernel's resident parts agree with it
 * after every step.
 */
#define NPAGES 8
#define NPARTS (NPAGES * HP_SUBPAGES)
static bool model_live[NPARTS];

Test(region, counters_match_a_model_of_random_runs) {
	region_of(HP_BACKING_NONE);
	char *a = hp_region_alloc(NPAGES * HP_HUGE, HP_PAGE, true);
	cr_assert_not_null(a);
	memset(a, 1, NPAGES * HP_HUGE);
	for (unsigned i = 0; i < NPARTS; i++)
		model_live[i] = true;
	uint64_t r = 0x13198a2e03707344ull, released = 0;
	for (int step = 0; step < 300; step++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		unsigned first = (unsigned)(r % NPARTS);
		unsigned n = 1 + (unsigned)((r >> 16) % ((r >> 32) % 4 == 0 ?
		    1200 : 90));
		if (first + n > NPARTS)
			n = NPARTS - first;
		char *p = a + first * PART;
		if ((r >> 40) % 2) {
			bool was[NPAGES] = {0}, now[NPAGES] = {0};
			for (unsigned i = 0; i < NPARTS; i++)
				was[i / HP_SUBPAGES] |= model_live[i];
			hp_region_release(p, n * PART);
			for (unsigned i = first; i < first + n; i++)
				model_live[i] = false;
			for (unsigned i = 0; i < NPARTS; i++)
				now[i / HP_SUBPAGES] |= model_live[i];
			for (unsigned g = 0; g < NPAGES; g++)
				released += was[g] && !now[g];
		} else {
			cr_assert(hp_region_reuse(p, n * PART));
			memset(p, 3, n * PART);
			for (unsigned i = first; i < first + n; i++)
				model_live[i] = true;
		}
		hp_arena_stats_t st = scan();
		uint64_t live = 0, full = 0, partial = 0;
		for (unsigned g = 0; g < NPAGES; g++) {
			unsigned k = 0;
			for (unsigned i = 0; i < HP_SUBPAGES; i++)
				k += model_live[g * HP_SUBPAGES + i];
			cr_assert_eq(kernel_parts(a + g * HP_HUGE), k,
			    "step %d, page %u", step, g);
			live += k;
			full += k == HP_SUBPAGES;
			partial += k != 0 && k != HP_SUBPAGES;
		}
		cr_assert_eq(st.resident_bytes, live * PART, "step %d", step);
		cr_assert_eq(st.pages_full, full, "step %d", step);
		cr_assert_eq(st.pages_partial, partial, "step %d", step);
		cr_assert_eq(hist_sum(&st), full + partial, "step %d", step);
		cr_assert_eq(st.pages_released, released, "step %d", step);
		cr_assert_eq(st.mapped_bytes, NPAGES * HP_HUGE);
	}
}

/*
 * strand_limit: on THP pages the free parts of a partly live page stay
 * resident (stranded) until hp_region_enforce splits the emptiest pages,
 * fewest live parts first, until what is stranded is within the limit.
 */
Test(region, enforce_splits_emptiest_pages_first) {
	if (!region_of(HP_BACKING_THP))
		cr_skip_test("THP is off on this host ('never')");
	char *a = hp_region_alloc(4 * HP_HUGE, HP_PAGE, true);
	cr_assert_not_null(a);
	memset(a, 1, 4 * HP_HUGE);
	/* Live parts: page 0 51, page 1 256, page 2 461, page 3 all. */
	static const unsigned keep[4] = {51, 256, 461, 512};
	for (int g = 0; g < 3; g++)
		hp_region_release(a + g * HP_HUGE + keep[g] * PART,
		    (HP_SUBPAGES - keep[g]) * PART);
	hp_arena_stats_t st = scan();
	size_t stranded = (461 + 256 + 51) * PART;
	cr_assert_eq(st.stranded_bytes, stranded);
	cr_assert_eq(st.purges_refused, 3, "THP pages are not split on free");
	cr_assert_eq(st.pages_partial, 3);
	cr_assert_eq(st.pages_full, 1);
	cr_assert_eq(st.resident_bytes, 4 * HP_HUGE, "resident whole");
	for (int g = 0; g < 4; g++)
		cr_assert_eq(kernel_parts(a + g * HP_HUGE), 512, "page %d", g);
	/* Within the limit: nothing to do. */
	cr_assert_eq(hp_region_enforce(stranded), stranded);
	cr_assert_eq(scan().pages_split, 0);
	/* Over it: page 0 (the emptiest) is not enough, page 1 is next;
	 * page 2, the fullest, stays whole. */
	cr_assert_eq(hp_region_enforce(300 * PART), 51 * PART);
	st = scan();
	cr_assert_eq(st.pages_split, 2);
	cr_assert(hp_region.pages[0].split && hp_region.pages[1].split);
	cr_assert_not(hp_region.pages[2].split);
	cr_assert_eq(st.stranded_bytes, 51 * PART, "page 2's free parts");
	cr_assert_eq(st.resident_bytes, (51 + 256) * PART + 2 * HP_HUGE);
	cr_assert_eq(kernel_parts(a), 51, "page 0's free parts went back");
	cr_assert_eq(kernel_parts(a + HP_HUGE), 256);
	cr_assert_eq(kernel_parts(a + 2 * HP_HUGE), 512);
	for (unsigned i = 0; i < 51; i++)
		cr_assert_eq(a[i * PART], 1, "live parts keep their bytes");
	/* A split page that empties goes back whole and is huge again. */
	hp_region_release(a, 51 * PART);
	st = scan();
	cr_assert_eq(st.pages_released, 1);
	cr_assert_not(hp_region.pages[0].split);
	cr_assert_eq(kernel_parts(a), 0);
	/* A limit of 0 splits the last partial THP page too. */
	cr_assert_eq(hp_region_enforce(0), 0);
	st = scan();
	cr_assert_eq(st.pages_split, 3);
	cr_assert_eq(st.stranded_bytes, 0);
	cr_assert_eq(kernel_parts(a + 2 * HP_HUGE), 461);
}
