/*
 * Catch-up: the small objects a site allocated while it was being learned.
 *
 * A site is promoted lifetime_ms after its first samples; what it
 * allocated meanwhile stays where it went, in the small class on 4 KiB
 * pages (W3: 431 to 681 MiB of its 7.9 GiB, about lifetime_ms of its
 * allocation). Each sample of a small size notes where the sampling
 * thread's next object of that size goes (hp_catchup_probe); when a site
 * is promoted and its key placed on huge pages, the 2 MiB ranges its live
 * samples noted are queued here (sample.c), and the maintenance thread
 * collapses each range that lies in jemalloc's data and is resident
 * but for at most HOLES pages into one huge page: MADV_HUGEPAGE,
 * MADV_COLLAPSE, then MADV_NOHUGEPAGE again, so that nothing new faults
 * in huge there. Such a range takes at most 32 KiB (1.6%) more memory as
 * one huge page (jemalloc leaves a page or two of a range it fills
 * untouched), and its objects stay where they are.
 *
 * The small class gives memory back 4 KiB at a time, and MADV_DONTNEED of
 * part of a huge page would leave all of it allocated on the kernel's
 * deferred-split queue (see hp_hpage_purge). So jemalloc's madvise calls
 * come here (scripts/embed-jemalloc): a purge that touches a collapsed
 * range is first advised MADV_FREE, which splits the page, and the
 * range's huge pages are forgotten. If the set of collapsed ranges ever
 * overflowed, every purge is advised MADV_FREE first.
 *
 * jemalloc keeps the small class's address space (retain), so a range it
 * held when checked is still its own when advised; were it unmapped
 * meanwhile, the calls fail (ENOMEM) and nothing is counted.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>
#include "internal.h"
#include "je.h"
#include "lock.h"

#define QUEUE    4096            /* 2 MiB ranges waiting: 8 GiB */
#define HOLES    8               /* pages of a range that may be missing */
#define DONE_MAX 1024            /* runs of collapsed ranges */

static hp_lock_t lock = HP_LOCK_INIT(HP_RANK_CATCHUP);
static uintptr_t queue[QUEUE];   /* under lock */
static unsigned nqueue;
static hp_range_t done_r[DONE_MAX];
static hp_ranges_t done = {done_r, 0, DONE_MAX, false};   /* under lock */
static unsigned ndone;           /* done.n, or 1 once it overflowed:
                                    read without the lock */

/* Where this thread's next object of size goes in the small class: the
 * slot its jemalloc thread cache hands out next (allocated and freed at
 * once, it is handed out again next). 0 above the slab sizes. */
uintptr_t hp_catchup_probe(size_t size) {
	if (size > HP_CATCHUP_MAX_SIZE)
		return 0;
	void *q = hp_je_malloc(size ? size : 1);
	if (q == NULL)
		return 0;
	hp_je_free(q);
	return (uintptr_t)q;
}

/* A promoted site's sample noted addr. */
void hp_catchup_queue(uintptr_t addr) {
	if (addr == 0)
		return;
	hp_lock(&lock);
	if (nqueue < QUEUE)
		queue[nqueue++] = addr & ~(uintptr_t)(HP_HUGE - 1);
	else
		hp_lifetime_counts.caught_up_dropped++;
	hp_unlock(&lock);
}

static int cmp(const void *a, const void *b) {
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static bool collapse(uintptr_t r) {
	void *p = (void *)r;
	if (hp_os_madvise(p, HP_HUGE, MADV_HUGEPAGE) != 0)
		return false;
	bool ok = hp_os_madvise(p, HP_HUGE, MADV_COLLAPSE) == 0;
	hp_os_madvise(p, HP_HUGE, MADV_NOHUGEPAGE);
	return ok;
}

/* The maintenance thread: collapses what was queued since its last pass. */
void hp_catchup_run(void) {
	static uintptr_t work[QUEUE];   /* the maintenance thread's own */
	hp_lock(&lock);
	unsigned n = nqueue;
	for (unsigned i = 0; i < n; i++)
		work[i] = queue[i];
	nqueue = 0;
	hp_unlock(&lock);
	qsort(work, n, sizeof *work, cmp);
	for (unsigned i = 0; i < n; i++) {
		uintptr_t r = work[i];
		if (i > 0 && r == work[i - 1])
			continue;
		if (!hp_jemap_data(r, r + HP_HUGE) ||
		    hp_os_huge_resident(r) < HP_SUBPAGES - HOLES) {
			hp_lifetime_counts.caught_up_skipped++;
			continue;
		}
		if (!collapse(r)) {
			hp_lifetime_counts.caught_up_failed++;
			continue;
		}
		hp_lifetime_counts.caught_up++;
		hp_lock(&lock);
		hp_ranges_add(&done, r, r + HP_HUGE);
		__atomic_store_n(&ndone, done.overflow ? 1 : done.n,
		    __ATOMIC_RELEASE);
		hp_unlock(&lock);
	}
}

/* jemalloc's madvise (scripts/embed-jemalloc renames its calls to this;
 * nothing of ours calls it). */
__attribute__((visibility("hidden"))) int hp_je_madvise(void *addr,
    size_t len, int advice);
int hp_je_madvise(void *addr, size_t len, int advice) {
	if ((advice == MADV_DONTNEED || advice == MADV_FREE) &&
	    __atomic_load_n(&ndone, __ATOMIC_ACQUIRE) != 0) {
		uintptr_t s = (uintptr_t)addr & ~(uintptr_t)(HP_HUGE - 1);
		uintptr_t e = ((uintptr_t)addr + len + HP_HUGE - 1) &
		    ~(uintptr_t)(HP_HUGE - 1);
		hp_lock(&lock);
		bool split = done.overflow || hp_ranges_touch(&done, s, e);
		if (split) {
			hp_ranges_del(&done, s, e);
			__atomic_store_n(&ndone, done.overflow ? 1 : done.n,
			    __ATOMIC_RELEASE);
		}
		hp_unlock(&lock);
		if (split && advice == MADV_DONTNEED)
			hp_os_madvise(addr, len, MADV_FREE);
	}
	return hp_os_madvise(addr, len, advice);
}

void hp_catchup_prefork(void) {
	hp_lock(&lock);
}

void hp_catchup_postfork_parent(void) {
	hp_unlock(&lock);
}

void hp_catchup_postfork_child(void) {
	hp_lock_reinit(&lock);
}
