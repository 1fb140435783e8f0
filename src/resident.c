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
 * once. The pages' states are copied a chunk at a time under region_lock
 * (hp_region_view) and the kernel is asked without it, so the pass holds
 * the lock for microseconds whatever the heap's size; a page that changes
 * between the two is counted as it was a moment before.
 *
 * Runs only under the stats refresh lock (stats.c).
 */
#include <string.h>
#include "internal.h"

#define CHUNK 64                      /* pages, 128 MiB, per kernel call */

typedef struct {
	uintptr_t first;                  /* the chunk's first page */
	hp_page_view_t v[CHUNK];
	uint64_t resident, huge, in_use, stranded, free_resident;
} scan_t;

/* Bits [from, from + n) of a page's held map that are set. */
static unsigned held_in(const uint64_t *held, unsigned from, unsigned n) {
	unsigned count = 0;
	while (n > 0) {
		unsigned w = from / 64, b = from % 64;
		unsigned take = 64 - b < n ? 64 - b : n;
		uint64_t mask = take == 64 ? ~0ull : ((1ull << take) - 1) << b;
		count += (unsigned)__builtin_popcountll(held[w] & mask);
		from += take;
		n -= take;
	}
	return count;
}

static void on_run(void *ctx, uintptr_t start, uintptr_t end, bool huge) {
	scan_t *s = ctx;
	uintptr_t hp = start & ~(uintptr_t)(HP_HUGE - 1);
	for (; hp < end; hp += HP_HUGE) {
		size_t i = (hp - s->first) >> HP_HUGE_SHIFT;
		if (i >= CHUNK)
			break;
		const hp_page_view_t *v = &s->v[i];
		uintptr_t a = start > hp ? start : hp;
		uintptr_t e = end < hp + HP_HUGE ? end : hp + HP_HUGE;
		unsigned from = (unsigned)((a - hp) >> HP_PAGE_SHIFT);
		unsigned n = (unsigned)((e - a) >> HP_PAGE_SHIFT);
		unsigned held = held_in(v->held, from, n);
		uint64_t bytes = (uint64_t)n << HP_PAGE_SHIFT;
		s->resident += bytes;
		if (huge && v->may_be_huge)
			s->huge += bytes;
		s->in_use += (uint64_t)held << HP_PAGE_SHIFT;
		uint64_t free_part = (uint64_t)(n - held) << HP_PAGE_SHIFT;
		if (v->nheld > 0)
			s->stranded += free_part;
		else
			s->free_resident += free_part;
	}
}

bool hp_resident_scan(hp_arena_stats_t *a) {
	static scan_t s;                  /* 37 KiB: not on a host's stack */
	uintptr_t end = hp_region_mapped_end();
	memset(&s, 0, sizeof s);
	for (uintptr_t first = hp_region.base; first < end;
	    first += (uintptr_t)CHUNK << HP_HUGE_SHIFT) {
		unsigned n = (unsigned)((end - first) >> HP_HUGE_SHIFT);
		if (n > CHUNK)
			n = CHUNK;
		memset(s.v, 0, sizeof s.v);
		hp_region_view(first, n, s.v);
		bool any = false, huge_ok = false;
		for (unsigned i = 0; i < n; i++) {
			any |= s.v[i].mapped;
			huge_ok |= s.v[i].may_be_huge;
		}
		if (!any)
			continue;
		s.first = first;
		if (!hp_os_resident(first, first + ((uintptr_t)n << HP_HUGE_SHIFT),
		    huge_ok, on_run, &s))
			return false;
	}
	hp_assert(s.resident == s.in_use + s.stranded + s.free_resident);
	a->resident_bytes = s.resident;
	a->resident_huge_bytes = s.huge;
	a->in_use_bytes = s.in_use;
	a->stranded_bytes = s.stranded;
	a->free_resident_bytes = s.free_resident;
	return true;
}
