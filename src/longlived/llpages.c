#define _GNU_SOURCE
/*
 * The long-lived class's pages (the THP arena of longlived.c). mimalloc
 * commits with mprotect and decommits with madvise(MADV_DONTNEED) in
 * 64 KiB spans, through the library's exported mprotect and madvise,
 * which send calls on this range here. A decommitted span is only marked
 * free in its 2 MiB page's bitmap (hp_hpage_t, as the huge class keeps
 * them), and a 2 MiB page goes back to the kernel when all of it is free:
 * the class never splits a huge page, except under strand_limit, which
 * gives back the free parts of the emptiest pages as the huge class's
 * does (hp_llpages_enforce). mimalloc never takes decommitted memory as
 * zeroed (its pages' is_zero_init is never set in 2.0.x), and a span
 * kept resident stays read-write, so recommitting it needs no system
 * call. With THP off (the arena on 4 KiB pages) nothing is kept: every
 * call goes to the kernel.
 */
#include <string.h>
#include <sys/mman.h>
#include "longlived/longlived.h"
#include "base/lock.h"

static hp_lock_t lock = HP_LOCK_INIT(HP_RANK_LLPAGES);
uintptr_t hp_llpages_base;
size_t hp_llpages_size;                 /* 0: calls pass through */
static hp_hpage_t *pages;
static size_t hi;                       /* pages [0, hi) set up */
static uint64_t n_released, n_split;

static hp_hpage_t *page_of(uintptr_t a) {
	hp_assert(a - hp_llpages_base < hp_llpages_size);
	return &pages[(a - hp_llpages_base) >> HP_HUGE_SHIFT];
}

bool hp_llpages_init(uintptr_t base, size_t size) {
	size_t n = size >> HP_HUGE_SHIFT;
	size_t meta = (n * sizeof *pages + HP_PAGE - 1) & ~(HP_PAGE - 1);
	void *p = hp_os_mmap(NULL, meta, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return false;
	hp_assert(size != 0 && ((base | size) & (HP_HUGE - 1)) == 0);
	pages = p;
	hp_llpages_base = base;
	__atomic_store_n(&hp_llpages_size, size, __ATOMIC_RELEASE);
	return true;
}

/* Pages up to the one holding end - 1 set up: never committed, all free. */
static void reach(uintptr_t end) {
	hp_lock_assert_held(&lock);
	size_t want = ((end - 1 - hp_llpages_base) >> HP_HUGE_SHIFT) + 1;
	hp_assert(want <= hp_llpages_size >> HP_HUGE_SHIFT);
	for (; hi < want; hi++) {
		memset(pages[hi].released, 0xff, sizeof pages[hi].released);
		memset(pages[hi].dirty, 0, sizeof pages[hi].dirty);
		pages[hi].nreleased = HP_SUBPAGES;
		pages[hi].map = HP_MAP_NONE;
	}
}

/* The subpages [*first, *first + *n) of page hp inside [a, e). */
static void span(uintptr_t hp, uintptr_t a, uintptr_t e, unsigned *first,
    unsigned *n) {
	uintptr_t lo = hp > a ? hp : a, top = e < hp + HP_HUGE ? e : hp + HP_HUGE;
	hp_assert(lo <= top && top - hp <= HP_HUGE);
	*first = (unsigned)((lo - hp) >> HP_PAGE_SHIFT);
	*n = (unsigned)((top - lo) >> HP_PAGE_SHIFT);
}

static bool inside(uintptr_t a, size_t len) {
	return ((a | len) & (HP_PAGE - 1)) == 0 && len != 0 &&
	    a - hp_llpages_base < hp_llpages_size &&
	    len <= hp_llpages_size - (a - hp_llpages_base);
}

int hp_llpages_mprotect(void *addr, size_t len, int prot) {
	uintptr_t a = (uintptr_t)addr, e = a + len;
	if (!inside(a, len))
		return hp_os_mprotect(addr, len, prot);
	hp_lock(&lock);
	reach(e);
	bool mapped = prot == (PROT_READ | PROT_WRITE);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); mapped && hp < e; hp += HP_HUGE)
		mapped = page_of(hp)->map != HP_MAP_NONE;
	int r = mapped ? 0 : hp_os_mprotect(addr, len, prot);
	if (r == 0)
		for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < e; hp += HP_HUGE) {
			unsigned first, n;
			uint64_t zero[HP_SUBWORDS];
			span(hp, a, e, &first, &n);
			hp_hpage_t *pg = page_of(hp);
			hp_assert((size_t)(pg - pages) < hi);     /* set up */
			if (prot == (PROT_READ | PROT_WRITE)) {
				hp_hpage_reuse(pg, first, n, zero);
				if (pg->map == HP_MAP_NONE)
					pg->map = HP_MAP_THP;
			} else if (prot == PROT_NONE && first == 0 &&
			    n == HP_SUBPAGES) {
				hp_hpage_release(pg, 0, HP_SUBPAGES);
				memset(pg->dirty, 0, sizeof pg->dirty);
				pg->map = HP_MAP_NONE;
			}
		}
	hp_unlock(&lock);
	return r;
}

/* split: the page is a THP page being split (hp_hpage_purge). */
static void purge_parts(uintptr_t hp, hp_hpage_t *pg, bool split) {
	hp_lock_assert_held(&lock);
	hp_assert(pg == page_of(hp));
	hp_hpage_purge(hp, pg, split);
}

static void zap(uintptr_t from, uintptr_t to) {
	hp_lock_assert_held(&lock);
	if (from == to || hp_os_madvise((void *)from, to - from,
	    MADV_DONTNEED) != 0)
		return;
	for (uintptr_t hp = from; hp < to; hp += HP_HUGE) {
		hp_hpage_t *pg = page_of(hp);
		hp_assert(pg->nreleased == HP_SUBPAGES);    /* empty, whole */
		memset(pg->dirty, 0, sizeof pg->dirty);
		if (pg->split)           /* empty again: huge again */
			hp_os_madvise((void *)hp, HP_HUGE, MADV_HUGEPAGE);
		pg->split = false;
		n_released++;
	}
}

int hp_llpages_madvise(void *addr, size_t len, int advice) {
	uintptr_t a = (uintptr_t)addr, e = a + len;
	if ((advice != MADV_DONTNEED && advice != MADV_FREE) || !inside(a, len))
		return hp_os_madvise(addr, len, advice);
	hp_lock(&lock);
	reach(e);
	hp_assert(hi > (e - 1 - hp_llpages_base) >> HP_HUGE_SHIFT);   /* set up */
	uintptr_t run = 0, run_end = 0;
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < e; hp += HP_HUGE) {
		unsigned first, n;
		span(hp, a, e, &first, &n);
		hp_hpage_t *pg = page_of(hp);
		if (hp_hpage_release(pg, first, n)) {
			if (hp != run_end) {     /* batch runs of empty pages */
				zap(run, run_end);
				run = hp;
			}
			run_end = hp + HP_HUGE;
		} else if (pg->split && pg->nreleased < HP_SUBPAGES) {
			purge_parts(hp, pg, false);   /* no huge page to keep */
		}
	}
	zap(run, run_end);
	hp_unlock(&lock);
	return 0;
}

static unsigned stale_parts(const hp_hpage_t *pg) {
	unsigned n = 0;
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		n += (unsigned)hp_popcount64(pg->released[w] & pg->dirty[w]);
	return n;
}

/* Stranded: free parts kept resident in a page that holds live parts. */
static size_t stranded_of(const hp_hpage_t *pg) {
	if (pg->map == HP_MAP_NONE || pg->nreleased == 0 ||
	    pg->nreleased == HP_SUBPAGES)
		return 0;
	return pg->split ? 0 : (size_t)stale_parts(pg) << HP_PAGE_SHIFT;
}

/* The class's page counters into *a (stranded bytes, pages by state and
 * live tenth, pages given back and split). */
void hp_llpages_scan(hp_arena_stats_t *a) {
	if (hp_llpages_size == 0)
		return;
	hp_lock(&lock);
	for (size_t i = 0; i < hi; i++) {
		const hp_hpage_t *pg = &pages[i];
		hp_assert(hp_hpage_valid(pg));
		if (pg->map == HP_MAP_NONE || pg->nreleased == HP_SUBPAGES)
			continue;
		unsigned live = HP_SUBPAGES - pg->nreleased;
		if (pg->nreleased == 0)
			a->pages_full++;
		else
			a->pages_partial++;
		a->live_hist[live * HP_HIST_BUCKETS / (HP_SUBPAGES + 1)]++;
		a->stranded_bytes += stranded_of(pg);
	}
	a->pages_released = n_released;
	a->pages_split = n_split;
	hp_unlock(&lock);
}

/* strand_limit: while more than limit bytes are stranded, split the
 * emptiest pages, giving back their free parts. Returns what is left. */
size_t hp_llpages_enforce(size_t limit) {
	if (hp_llpages_size == 0)
		return 0;
	hp_lock(&lock);
	size_t total = 0;
	for (size_t i = 0; i < hi; i++)
		total += stranded_of(&pages[i]);
	for (unsigned tenth = 0; tenth < HP_HIST_BUCKETS && total > limit;
	    tenth++)
		for (size_t i = 0; i < hi && total > limit; i++) {
			hp_hpage_t *pg = &pages[i];
			size_t s = stranded_of(pg);
			unsigned live = HP_SUBPAGES - pg->nreleased;
			if (s == 0 || live * HP_HIST_BUCKETS / (HP_SUBPAGES + 1) !=
			    tenth)
				continue;
			uintptr_t hp = hp_llpages_base + (i << HP_HUGE_SHIFT);
			/* Stranded: mapped, live and free parts, not split yet. */
			hp_assert(!pg->split && pg->map != HP_MAP_NONE && s <= total);
			purge_parts(hp, pg, pg->map == HP_MAP_THP);
			/* Or khugepaged would collapse it again. */
			hp_os_madvise((void *)hp, HP_HUGE, MADV_NOHUGEPAGE);
			pg->split = true;
			n_split++;
			total -= s;
		}
	hp_unlock(&lock);
	return total;
}

void hp_llpages_prefork(void) {
	hp_lock(&lock);
}

void hp_llpages_postfork_parent(void) {
	hp_unlock(&lock);
}

void hp_llpages_postfork_child(void) {
	hp_lock_reinit(&lock);
}
