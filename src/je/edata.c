/*
 * jemalloc's extent descriptors, on pages that go back to the kernel.
 *
 * jemalloc describes every extent, each slab of small objects included, by
 * a 128-byte edata_t from its "base" allocator, which never returns memory:
 * descriptors freed as slabs are purged wait in a cache, resident for the
 * life of the process. A peak of 2 GiB in 4 KiB slabs leaves 64 MiB of
 * them behind, more than everything else the process keeps.
 *
 * The build (scripts/embed-jemalloc) sends jemalloc's calls of
 * edata_cache_get/put here and keeps its own functions, as
 * hp_je_edata_cache_get/put, for what this file cannot serve. Descriptors
 * come from 4 KiB pages of a reservation of their own, lowest address
 * first, so free ones gather on whole pages; pages with no descriptor in
 * use go back to the kernel (MADV_DONTNEED), BATCH at a time. Descriptors
 * jemalloc took from its own cache go back there.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "je/je.h"
#include "base/lock.h"

#define DESC_SIZE  128      /* sizeof(edata_t), and its alignment: the
                               build checks both in jemalloc's code */
#define PER_PAGE   (HP_PAGE / DESC_SIZE)                 /* 32 */
#define MAX_PAGES  ((size_t)1 << 18)   /* 1 GiB: 8 Mi descriptors */
#define BATCH      32                  /* empty pages held before a discard */

/* jemalloc's own cache (renamed by the build). */
void *hp_je_edata_cache_get(void *tsdn, void *cache);
void hp_je_edata_cache_put(void *tsdn, void *cache, void *edata);

/* A page's record. Free descriptors are linked through their first byte,
 * which holds 1 + the next one's slot (0 ends the list). */
typedef struct {
	uint8_t free;         /* 1 + the first given-back slot, or 0 */
	uint8_t nfree;        /* free: given back, and never handed out */
	uint8_t used;         /* slots handed out since the page was fresh */
	uint8_t queued;       /* in empty[] */
} page_t;
#define CHUNK      (HP_PAGE / sizeof(page_t))  /* pages committed at once */

static hp_lock_t edata_lock = HP_LOCK_INIT(HP_RANK_EDATA);
static char *data;           /* MAX_PAGES pages, PROT_NONE past committed */
static page_t *info;         /* one per page, committed with it */
static size_t committed;     /* pages */
static bool failed;          /* no reservation: jemalloc's cache serves */
static unsigned backoff;     /* a commit failed: gets before the next try */
static uint64_t avail[MAX_PAGES / 64];     /* pages with a free descriptor */
static uint64_t summary[MAX_PAGES / 4096]; /* avail words that are not 0 */
static size_t hint;          /* summary words below this are all 0 */
static uint32_t empty[BATCH];              /* distinct pages that went all
                                              free since the last discard */
static unsigned nempty;
hp_edata_counts_t hp_edata_counts;         /* under the lock */

static void set_avail(size_t i) {
	hp_lock_assert_held(&edata_lock);
	hp_assert(i < committed + CHUNK && i < MAX_PAGES && info[i].nfree > 0);
	avail[i / 64] |= 1ull << (i % 64);
	summary[i / 4096] |= 1ull << (i / 64 % 64);
	if (i / 4096 < hint)
		hint = i / 4096;
}

static void clear_avail(size_t i) {
	hp_lock_assert_held(&edata_lock);
	hp_assert(i < committed && info[i].nfree == 0);
	avail[i / 64] &= ~(1ull << (i % 64));
	if (avail[i / 64] == 0)
		summary[i / 4096] &= ~(1ull << (i / 64 % 64));
}

/* The lowest page with a free descriptor, or MAX_PAGES. */
static size_t first_avail(void) {
	for (; hint < MAX_PAGES / 4096; hint++) {
		if (summary[hint] == 0)
			continue;
		size_t w = hint * 64 + (size_t)__builtin_ctzll(summary[hint]);
		size_t i = w * 64 + (size_t)__builtin_ctzll(avail[w]);
		hp_assert(avail[w] != 0 && i < committed && info[i].nfree > 0);
		return i;
	}
	return MAX_PAGES;
}

/* The next CHUNK pages, and their page records, made usable. */
static bool commit(void) {
	hp_lock_assert_held(&edata_lock);
	hp_assert(committed % CHUNK == 0 && committed <= MAX_PAGES);
	if (data == NULL) {
		size_t len = MAX_PAGES * (HP_PAGE + sizeof(page_t));
		char *p = hp_os_mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		    MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return false;
		hp_os_madvise(p, len, MADV_NOHUGEPAGE);
		info = (page_t *)(p + MAX_PAGES * HP_PAGE);
		__atomic_store_n(&data, p, __ATOMIC_RELEASE);
	}
	if (committed == MAX_PAGES)
		return false;
	char *d = data + committed * HP_PAGE;
	page_t *pi = info + committed;
	if (hp_os_mprotect(d, CHUNK * HP_PAGE, PROT_READ | PROT_WRITE) != 0 ||
	    hp_os_mprotect(pi, CHUNK * sizeof *pi, PROT_READ | PROT_WRITE) != 0)
		return false;
	for (size_t i = committed; i < committed + CHUNK; i++) {
		info[i].nfree = PER_PAGE;
		set_avail(i);
	}
	committed += CHUNK;
	return true;
}

static void give_back(size_t first, size_t n) {
	hp_lock_assert_held(&edata_lock);
	hp_assert(first + n <= committed &&
	    hp_edata_counts.resident_bytes >= n * HP_PAGE);
	if (n == 0 || hp_os_madvise(data + first * HP_PAGE, n * HP_PAGE,
	    MADV_DONTNEED) != 0)
		return;
	for (size_t j = first; j < first + n; j++) {
		hp_assert(info[j].nfree == PER_PAGE && info[j].used != 0);
		info[j].free = info[j].used = 0;
	}
	hp_edata_counts.resident_bytes -= n * HP_PAGE;
	hp_edata_counts.released_bytes += n * HP_PAGE;
}

/* Gives back the pages in empty[] that are still all free and were
 * touched: sorted, one madvise per run of neighbours. */
static void discard(void) {
	hp_lock_assert_held(&edata_lock);
	hp_assert(nempty <= BATCH);
	for (unsigned k = 1; k < nempty; k++)      /* BATCH at most: insertion */
		for (unsigned j = k; j > 0 && empty[j - 1] > empty[j]; j--) {
			uint32_t t = empty[j];
			empty[j] = empty[j - 1];
			empty[j - 1] = t;
		}
	size_t first = 0, n = 0;
	for (unsigned k = 0; k < nempty; k++) {
		size_t i = empty[k];
		info[i].queued = 0;
		if (info[i].nfree != PER_PAGE || info[i].used == 0)
			continue;                  /* in use again, or untouched */
		if (n != 0 && i == first + n) {
			n++;
			continue;
		}
		give_back(first, n);
		first = i, n = 1;
	}
	give_back(first, n);
	nempty = 0;
}

#ifdef HP_DEBUG
/* Every committed page counted again: descriptors in use, and pages
 * touched since they were fresh (resident), as the counters have them. */
static bool counts_agree(void) {
	uint64_t live = 0, touched = 0;
	for (size_t i = 0; i < committed; i++) {
		live += PER_PAGE - info[i].nfree;
		touched += info[i].used != 0;
	}
	return live == hp_edata_counts.live &&
	    touched * HP_PAGE == hp_edata_counts.resident_bytes;
}
#endif

void *hp_edata_get(void *tsdn, void *cache) {
#ifdef HP_EDATA_JEMALLOC
	/* scripts/bench-embedding's other build: what any public route to
	 * jemalloc gives, its descriptors in its own never-freed cache. */
	return hp_je_edata_cache_get(tsdn, cache);
#endif
	hp_lock(&edata_lock);
	size_t i = first_avail();
	if (i == MAX_PAGES && !failed && (backoff == 0 || --backoff == 0)) {
		if (commit())
			i = first_avail();
		else if (data == NULL || committed == MAX_PAGES)
			failed = true;
		else
			backoff = 4096;        /* mprotect refused (commit limit) */
	}
	if (i == MAX_PAGES) {
		hp_edata_counts.fallbacks++;
		hp_unlock(&edata_lock);
		return hp_je_edata_cache_get(tsdn, cache);
	}
	page_t *pg = &info[i];
	char *d = data + i * HP_PAGE;
	/* Free: the slots never handed out and the list given back. */
	hp_assert(i < committed && pg->nfree > 0 && pg->nfree <= PER_PAGE &&
	    pg->used <= PER_PAGE && pg->nfree >= PER_PAGE - pg->used &&
	    (pg->free != 0 || pg->nfree == PER_PAGE - pg->used));
	if (pg->free != 0) {
		hp_assert(pg->free <= pg->used);
		d += (pg->free - 1) * DESC_SIZE;
		pg->free = *(uint8_t *)d;
	} else {
		if (pg->used == 0)
			hp_edata_counts.resident_bytes += HP_PAGE;
		d += pg->used++ * DESC_SIZE;
	}
	if (--pg->nfree == 0)
		clear_avail(i);
	hp_edata_counts.live++;
	hp_assert(hp_edata_counts.live <= committed * PER_PAGE);
	hp_unlock(&edata_lock);
	return d;
}

void hp_edata_put(void *tsdn, void *cache, void *d) {
	uintptr_t base = (uintptr_t)__atomic_load_n(&data, __ATOMIC_ACQUIRE);
	size_t i = (size_t)((uintptr_t)d - base) >> HP_PAGE_SHIFT;
	if (base == 0 || i >= MAX_PAGES) {      /* not ours: jemalloc's */
		hp_je_edata_cache_put(tsdn, cache, d);
		return;
	}
	hp_lock(&edata_lock);
	page_t *pg = &info[i];
	/* A descriptor this file handed out, given back once. */
	hp_assert(i < committed && ((uintptr_t)d & (DESC_SIZE - 1)) == 0 &&
	    ((uintptr_t)d & (HP_PAGE - 1)) / DESC_SIZE < pg->used &&
	    pg->nfree < PER_PAGE && hp_edata_counts.live > 0);
	*(uint8_t *)d = pg->free;
	pg->free = (uint8_t)(1 + ((uintptr_t)d & (HP_PAGE - 1)) / DESC_SIZE);
	if (pg->nfree++ == 0)
		set_avail(i);
	hp_edata_counts.live--;
	if (pg->nfree == PER_PAGE && !pg->queued) {
		pg->queued = 1;
		empty[nempty++] = (uint32_t)i;
		if (nempty == BATCH)
			discard();
	}
	hp_unlock(&edata_lock);
}

/* Gives back the pages that went all free since the last batch (the
 * maintenance thread, malloc_trim). */
void hp_edata_trim(void) {
	hp_lock(&edata_lock);
	hp_assert(counts_agree());
	discard();
	hp_unlock(&edata_lock);
}

/* Taken after jemalloc's own fork handlers, which hold every lock its
 * threads may hold on their way here (core/init.c). */
void hp_edata_prefork(void) {
	hp_lock(&edata_lock);
}

void hp_edata_postfork_parent(void) {
	hp_unlock(&edata_lock);
}

void hp_edata_postfork_child(void) {
	hp_lock_reinit(&edata_lock);
}
