/*
 * The huge-class reservation: one PROT_NONE range, 2 MiB aligned, that
 * the huge arenas' extent hooks carve from the bottom up. Pages are made
 * accessible in whole 2 MiB units, and a per-2 MiB bitmap tracks which
 * 4 KiB subpages jemalloc holds, so that memory goes back to the kernel
 * only in whole huge pages: the allocator never splits one.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include "internal.h"

hp_region_t hp_region;
static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;

#define HP_RESERVE_MIN ((size_t)1 << 30)   /* halve down to this */

static uintptr_t align_up(uintptr_t x, size_t a) {
	return (x + a - 1) & ~(uintptr_t)(a - 1);
}

bool hp_region_init(size_t want) {
	for (size_t size = want; size >= HP_RESERVE_MIN; size >>= 1) {
		/* PROT_NONE is not charged to the commit limit; mprotect()
		 * charges each part as it is made accessible. */
		char *raw = mmap(NULL, size + HP_HUGE, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (raw == MAP_FAILED)
			continue;
		uintptr_t base = align_up((uintptr_t)raw, HP_HUGE);
		size_t head = base - (uintptr_t)raw;
		if (head)
			munmap(raw, head);
		munmap((char *)base + size, HP_HUGE - head);

		size_t meta = align_up((size >> HP_HUGE_SHIFT) *
		    sizeof(hp_hpage_t), HP_PAGE);
		void *pages = mmap(NULL, meta, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (pages == MAP_FAILED) {
			munmap((void *)base, size);
			return false;
		}
		hp_region.pages = pages;
		hp_region.bump = hp_region.mapped_end = base;
		hp_region.base = base;
		hp_region.size = size;
		return true;
	}
	return false;
}

/* Masks of subpages [first, first + n) in each 64-bit word. */
static void sub_masks(unsigned first, unsigned n, uint64_t m[HP_SUBWORDS]) {
	for (unsigned w = 0; w < HP_SUBWORDS; w++) {
		unsigned lo = w * 64, a = first > lo ? first : lo;
		unsigned b = first + n < lo + 64 ? first + n : lo + 64;
		if (a >= b)
			m[w] = 0;
		else if (b - a == 64)
			m[w] = ~(uint64_t)0;
		else
			m[w] = (((uint64_t)1 << (b - a)) - 1) << (a - lo);
	}
}

bool hp_hpage_release(hp_hpage_t *pg, unsigned first, unsigned n) {
	uint64_t m[HP_SUBWORDS];
	sub_masks(first, n, m);
	for (unsigned w = 0; w < HP_SUBWORDS; w++) {
		pg->nreleased += (uint16_t)__builtin_popcountll(m[w] &
		    ~pg->released[w]);
		pg->released[w] |= m[w];
	}
	if (pg->nreleased < HP_SUBPAGES)
		return false;
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		if (pg->dirty[w] != 0)
			return true;
	return false;
}

/* Called once an empty page really went back: it reads as zero now. */
static void hpage_zapped(hp_hpage_t *pg) {
	memset(pg->dirty, 0, sizeof pg->dirty);
}

void hp_hpage_reuse(hp_hpage_t *pg, unsigned first, unsigned n,
    uint64_t *zero) {
	uint64_t m[HP_SUBWORDS];
	sub_masks(first, n, m);
	for (unsigned w = 0; w < HP_SUBWORDS; w++) {
		uint64_t was = m[w] & pg->released[w];
		zero[w] = was & pg->dirty[w];
		pg->nreleased -= (uint16_t)__builtin_popcountll(was);
		pg->released[w] &= ~m[w];
		pg->dirty[w] |= m[w];
	}
}

static hp_hpage_t *page_of(uintptr_t a) {
	return &hp_region.pages[(a - hp_region.base) >> HP_HUGE_SHIFT];
}

/* The subpages [*first, *first + *n) of 2 MiB page hp inside [a, e). */
static void span(uintptr_t hp, uintptr_t a, uintptr_t e, unsigned *first,
    unsigned *n) {
	uintptr_t lo = hp > a ? hp : a, hi = e < hp + HP_HUGE ? e : hp + HP_HUGE;
	*first = (unsigned)((lo - hp) >> HP_PAGE_SHIFT);
	*n = (unsigned)((hi - lo) >> HP_PAGE_SHIFT);
}

static bool bit(const uint64_t *m, unsigned i) {
	return (m[i / 64] >> (i % 64)) & 1;
}

static void reuse_locked(uintptr_t a, size_t len) {
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < a + len; hp += HP_HUGE) {
		unsigned first, n;
		uint64_t zero[HP_SUBWORDS];
		span(hp, a, a + len, &first, &n);
		hp_hpage_reuse(page_of(hp), first, n, zero);
		/* jemalloc takes decommitted memory back as zeroed; subpages
		 * that stayed resident inside a live huge page are not. */
		for (unsigned i = first, j; i < first + n; i = j) {
			for (j = i + 1; bit(zero, i) && j < first + n &&
			    bit(zero, j); j++)
				;
			if (bit(zero, i))
				memset((void *)(hp + ((size_t)i << HP_PAGE_SHIFT)),
				    0, (size_t)(j - i) << HP_PAGE_SHIFT);
		}
	}
}

void *hp_region_alloc(size_t size, size_t align, bool commit) {
	void *ret = NULL;
	if (align < HP_PAGE)
		align = HP_PAGE;
	pthread_mutex_lock(&region_lock);
	uintptr_t start = align_up(hp_region.bump, align), end = start + size;
	if (end < start || end > hp_region.base + hp_region.size)
		goto out;
	if (end > hp_region.mapped_end) {
		uintptr_t new_end = align_up(end, HP_HUGE);
		if (!hp_backing_map((void *)hp_region.mapped_end,
		    new_end - hp_region.mapped_end))
			goto out;
		for (uintptr_t hp = hp_region.mapped_end; hp < new_end;
		    hp += HP_HUGE) {
			hp_hpage_t *pg = page_of(hp);
			memset(pg->released, 0xff, sizeof pg->released);
			memset(pg->dirty, 0, sizeof pg->dirty);
			pg->nreleased = HP_SUBPAGES;
		}
		hp_region.mapped_end = new_end;
	}
	hp_region.bump = end;
	if (commit)
		reuse_locked(start, size);
	ret = (void *)start;
out:
	pthread_mutex_unlock(&region_lock);
	return ret;
}

/* Gives back the run [zap, end) of empty pages. Their dirty bits are
 * cleared only once that worked: until then they may hold old bytes, and
 * a fork child that copies them sees them as dirty still. */
static void zap_run(uintptr_t zap, uintptr_t end) {
	if (!hp_backing_zap((void *)zap, end - zap))
		return;                  /* reuse will zero them instead */
	for (uintptr_t hp = zap; hp < end; hp += HP_HUGE)
		hpage_zapped(page_of(hp));
}

void hp_region_release(void *addr, size_t len) {
	uintptr_t a = (uintptr_t)addr, zap = 0, zap_end = 0;
	pthread_mutex_lock(&region_lock);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < a + len; hp += HP_HUGE) {
		unsigned first, n;
		span(hp, a, a + len, &first, &n);
		if (!hp_hpage_release(page_of(hp), first, n))
			continue;
		if (hp != zap_end) {             /* batch adjacent pages */
			if (zap_end)
				zap_run(zap, zap_end);
			zap = hp;
		}
		zap_end = hp + HP_HUGE;
	}
	if (zap_end)
		zap_run(zap, zap_end);
	pthread_mutex_unlock(&region_lock);
}

void hp_region_reuse(void *addr, size_t len) {
	pthread_mutex_lock(&region_lock);
	reuse_locked((uintptr_t)addr, len);
	pthread_mutex_unlock(&region_lock);
}

void hp_region_atfork_child(void) {
	pthread_mutex_init(&region_lock, NULL);
}
