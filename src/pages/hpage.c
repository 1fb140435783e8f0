/*
 * One 2 MiB page's 4 KiB parts (hp_hpage_t): which are released (free)
 * and which dirty (handed out since the page was last given back, so
 * possibly resident). The huge class's region (huge/region.c) and the
 * long-lived class's pages (longlived/llpages.c) keep one per page and
 * call these under their own locks.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include "pages/pages.h"

HP_STATIC_ASSERT(HP_SUBPAGES == HP_SUBWORDS * 64, "a bitmap bit per subpage");
HP_STATIC_ASSERT(HP_SUBPAGES <= UINT16_MAX, "nreleased counts subpages");

/* The mask of subpages [first, first + n) in 64-bit word w. */
static inline uint64_t sub_mask(unsigned first, unsigned n, unsigned w) {
	unsigned lo = w * 64, a = first > lo ? first : lo;
	unsigned b = first + n < lo + 64 ? first + n : lo + 64;
	if (a >= b)
		return 0;
	return b - a == 64 ? ~(uint64_t)0 :
	    (((uint64_t)1 << (b - a)) - 1) << (a - lo);
}

/* The words that subpages [first, first + n) touch: [*w0, *w1). A commit
 * of one slab is one word of eight (jemalloc's slab commits come here
 * once per slab: a 2 KiB object's slab is 4 KiB). */
static inline void sub_words(unsigned first, unsigned n, unsigned *w0,
    unsigned *w1) {
	*w0 = first / 64;
	*w1 = n == 0 ? *w0 : (first + n + 63) / 64;
}

#ifdef HP_DEBUG
bool hp_hpage_valid(const hp_hpage_t *pg) {
	unsigned n = 0;
	for (unsigned w = 0; w < HP_SUBWORDS; w++) {
		n += hp_popcount64(pg->released[w]);
		if (~pg->released[w] & ~pg->dirty[w])
			return false;
	}
	return n == pg->nreleased;
}

/* Never set up: a 1 GiB page's 2 MiB parts not carved yet. */
static bool blank(const hp_hpage_t *pg) {
	uint64_t any = 0;
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		any |= pg->released[w] | pg->dirty[w];
	return any == 0 && pg->nreleased == 0;
}
#endif

bool hp_hpage_release(hp_hpage_t *pg, unsigned first, unsigned n) {
	unsigned w0, w1;
	hp_assert(first + n <= HP_SUBPAGES);
	hp_assert(hp_hpage_valid(pg));
	sub_words(first, n, &w0, &w1);
	for (unsigned w = w0; w < w1; w++) {
		uint64_t m = sub_mask(first, n, w);
		pg->nreleased += (uint16_t)hp_popcount64(m & ~pg->released[w]);
		pg->released[w] |= m;
	}
	hp_assert(pg->nreleased <= HP_SUBPAGES && hp_hpage_valid(pg));
	if (pg->nreleased < HP_SUBPAGES)
		return false;
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		if (pg->dirty[w] != 0)
			return true;
	return false;
}

/* Called once an empty page really went back: it reads as zero now. */
void hp_hpage_zapped(hp_hpage_t *pg) {
	/* Empty, or a 1 GiB page's part not carved yet (huge/region.c). */
	hp_assert((pg->nreleased == HP_SUBPAGES && hp_hpage_valid(pg)) ||
	    blank(pg));
	memset(pg->dirty, 0, sizeof pg->dirty);
}

void hp_hpage_reuse(hp_hpage_t *pg, unsigned first, unsigned n,
    uint64_t *zero) {
	unsigned w0, w1;
	hp_assert(first + n <= HP_SUBPAGES);
	hp_assert(hp_hpage_valid(pg));
	sub_words(first, n, &w0, &w1);
	memset(zero, 0, HP_SUBWORDS * sizeof *zero);
	for (unsigned w = w0; w < w1; w++) {
		uint64_t m = sub_mask(first, n, w);
		uint64_t was = m & pg->released[w];
		zero[w] = was & pg->dirty[w];
		pg->nreleased -= (uint16_t)hp_popcount64(was);
		pg->released[w] &= ~m;
		pg->dirty[w] |= m;
	}
	hp_assert(hp_hpage_valid(pg));
}

void hp_hpage_purge(uintptr_t hp, hp_hpage_t *pg, bool split) {
	uint64_t stale[HP_SUBWORDS];
	hp_assert((hp & (HP_HUGE - 1)) == 0 && hp_hpage_valid(pg));
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		stale[w] = pg->released[w] & (split ? ~0ull : pg->dirty[w]);
	for (unsigned i = 0, j; i < HP_SUBPAGES; i = j) {
		for (j = i + 1; hp_hpage_bit(stale, i) && j < HP_SUBPAGES && hp_hpage_bit(stale, j);
		    j++)
			;
		if (!hp_hpage_bit(stale, i))
			continue;
		void *run = (void *)(hp + ((size_t)i << HP_PAGE_SHIFT));
		size_t len = (size_t)(j - i) << HP_PAGE_SHIFT;
		if (split)
			hp_os_madvise(run, len, MADV_FREE);
		if (hp_os_madvise(run, len, MADV_DONTNEED) == 0)
			for (unsigned k = i; k < j; k++)
				pg->dirty[k / 64] &= ~((uint64_t)1 << (k % 64));
	}
	hp_assert(hp_hpage_valid(pg));     /* only released parts made clean */
}

