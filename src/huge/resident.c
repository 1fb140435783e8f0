/*
 * The huge class's memory as the kernel holds it. jemalloc commits what it
 * hands out, but a page is resident only once the program writes it: 100
 * MiB malloc'd and 10 MiB written is about 10 MiB in memory, and a
 * committed huge page that was never touched is not one at all. So the
 * resident figures come from the kernel (hp_os_resident: PAGEMAP_SCAN, or
 * mincore), 4 KiB part by part, and each resident part is one of:
 *   in use         jemalloc holds it (live objects, its free space among
 *                  them, its cache of dirty extents);
 *   stranded       free, on a huge page that has parts in use;
 *   free resident  free, on a page with no part in use (a page not yet
 *                  given back, or the rest of a 1 GiB page).
 * Their sum is the region's resident bytes, exactly: each part is counted
 * once. The kernel is asked first, without region_lock, 128 MiB at a
 * time; then the states of the pages with resident parts, and only those,
 * are copied under the lock (hp_region_view), so the lock is held in
 * proportion to what is resident, a chunk at a time. A page that changes
 * between the two is counted as it was a moment before. With mincore (no
 * PAGEMAP_SCAN) a fully resident page counts as huge only if its state
 * says it may be (THP not split, or hugetlb).
 *
 * Runs only under the stats refresh lock (core/stats.c).
 */
#include <string.h>
#include "huge/huge.h"

#define CHUNK 64                      /* pages, 128 MiB, per kernel call */
#define RUNS  1024                    /* runs held before they are counted */

typedef struct {
	uintptr_t start, end;
	bool huge;
} run_t;

typedef struct {
	uintptr_t first;                  /* the chunk's first page */
	unsigned npages;
	hp_page_view_t v[CHUNK];
	run_t runs[RUNS];
	unsigned nruns;
	uint64_t resident, huge, in_use, stranded, free_resident;
} scan_t;

/* Bits [from, from + n) of a page's held map that are set. */
static unsigned held_in(const uint64_t *held, unsigned from, unsigned n) {
	unsigned count = 0;
	while (n > 0) {
		unsigned w = from / 64, b = from % 64;
		unsigned take = 64 - b < n ? 64 - b : n;
		uint64_t mask = take == 64 ? ~0ull : ((1ull << take) - 1) << b;
		count += (unsigned)hp_popcount64(held[w] & mask);
		from += take;
		n -= take;
	}
	return count;
}

/* Counts one resident run, on pages whose views are in s->v. */
static void count_run(scan_t *s, const run_t *r) {
	uintptr_t hp = r->start & ~(uintptr_t)(HP_HUGE - 1);
	for (; hp < r->end; hp += HP_HUGE) {
		size_t i = (hp - s->first) >> HP_HUGE_SHIFT;
		if (i >= s->npages)
			break;
		const hp_page_view_t *v = &s->v[i];
		uintptr_t a = r->start > hp ? r->start : hp;
		uintptr_t e = r->end < hp + HP_HUGE ? r->end : hp + HP_HUGE;
		unsigned from = (unsigned)((a - hp) >> HP_PAGE_SHIFT);
		unsigned n = (unsigned)((e - a) >> HP_PAGE_SHIFT);
		unsigned held = held_in(v->held, from, n);
		/* The view is the page's state, whole, at one moment. */
		hp_assert(v->nheld == held_in(v->held, 0, HP_SUBPAGES) &&
		    held <= n && n != 0);
		uint64_t bytes = (uint64_t)n << HP_PAGE_SHIFT;
		s->resident += bytes;
		if (r->huge && v->may_be_huge)
			s->huge += bytes;
		s->in_use += (uint64_t)held << HP_PAGE_SHIFT;
		uint64_t free_part = (uint64_t)(n - held) << HP_PAGE_SHIFT;
		if (v->nheld > 0)
			s->stranded += free_part;
		else
			s->free_resident += free_part;
	}
}

/* Counts the runs held: the states of the pages they touch (only those:
 * a heap mostly not resident costs the lock little) copied under the
 * lock, then each run counted. */
static void flush(scan_t *s) {
	if (s->nruns == 0)
		return;
	uint64_t pages = 0;
	hp_assert(s->nruns <= RUNS && s->npages <= CHUNK);
	for (unsigned k = 0; k < s->nruns; k++) {
		size_t i = (s->runs[k].start - s->first) >> HP_HUGE_SHIFT;
		size_t j = (s->runs[k].end - 1 - s->first) >> HP_HUGE_SHIFT;
		for (; i <= j && i < s->npages; i++)
			pages |= 1ull << i;
	}
	hp_region_view(s->first, pages, s->v);
	for (unsigned k = 0; k < s->nruns; k++)
		count_run(s, &s->runs[k]);
	s->nruns = 0;
}

static void on_run(void *ctx, uintptr_t start, uintptr_t end, bool huge) {
	scan_t *s = ctx;
	/* In address order, disjoint, inside the chunk asked about: each
	 * resident part is counted once. */
	hp_assert(start < end && start >= s->first && end <= s->first +
	    ((uintptr_t)s->npages << HP_HUGE_SHIFT) && (s->nruns == 0 ||
	    start >= s->runs[s->nruns - 1].end) && ((start | end) &
	    (HP_PAGE - 1)) == 0);
	if (s->nruns == RUNS)
		flush(s);
	s->runs[s->nruns++] = (run_t){start, end, huge};
}

bool hp_resident_scan(hp_arena_stats_t *a) {
	static scan_t s;                  /* 29 KiB: not on a host's stack */
	uintptr_t end = hp_region_mapped_end();
	/* The counts only: a view or run is read only once written for
	 * this chunk, and zeroing the arrays would make all 29 KiB resident
	 * in a program whose huge class is empty. */
	s.resident = s.huge = s.in_use = s.stranded = s.free_resident = 0;
	for (uintptr_t first = hp_region.base; first < end;
	    first += (uintptr_t)CHUNK << HP_HUGE_SHIFT) {
		unsigned n = (unsigned)((end - first) >> HP_HUGE_SHIFT);
		s.first = first;
		s.npages = n > CHUNK ? CHUNK : n;
		s.nruns = 0;
		/* The kernel first, without the lock: pages with nothing
		 * resident need no state. */
		if (!hp_os_resident(first, first + ((uintptr_t)s.npages <<
		    HP_HUGE_SHIFT), true, on_run, &s))
			return false;
		flush(&s);
	}
	hp_assert(s.resident == s.in_use + s.stranded + s.free_resident);
	a->resident_bytes = s.resident;
	a->resident_huge_bytes = s.huge;
	a->in_use_bytes = s.in_use;
	a->stranded_bytes = s.stranded;
	a->free_resident_bytes = s.free_resident;
	return true;
}
