/*
 * Catch-up: the small objects a site allocated while it was being learned.
 *
 * A site is promoted lifetime_ms after its first samples; what it
 * allocated meanwhile stays where it went, in the small class on 4 KiB
 * pages (about lifetime_ms of its allocation: docs/lifetime.md has the
 * figures). Each sample of a small size notes where the sampling
 * thread's next object of that size goes (hp_catchup_probe); when a site
 * is promoted and its key placed on huge pages, the 2 MiB ranges its live
 * samples noted are queued here (sample.c), and the maintenance thread
 * collapses each range that lies in jemalloc's data and is resident
 * but for at most HOLES pages into one huge page: MADV_HUGEPAGE and
 * MADV_COLLAPSE; the range keeps its MADV_HUGEPAGE (a mapping of its own
 * in smaps, flagged hg) until jemalloc purges part of it (je/collapse.c).
 * Such a range takes at most 32 KiB (1.6%) more memory as one huge page
 * (jemalloc leaves a page or two of a range it fills untouched), and its
 * objects stay where they are: the site's,
 * and the few of other sites of the same size that the thread's cache
 * put among them while it was learned. Those are why a churny site's
 * objects can be found on a huge page; freed, their pages go back 4 KiB
 * at a time all the same (the purge splits the range first).
 *
 * Pages mapped to the shared zero page do not count as resident. At most
 * PASS_MAX ranges are collapsed a pass (each copies 2 MiB with the
 * process's mappings locked); the rest wait for the next. After each,
 * the thread rests as long as it took (REST_MAX at most), so that what
 * queued behind it goes before the next; and a pass spends maintain_ms
 * at most on collapses and rests, so that a slow collapse (direct
 * compaction under memory pressure) does not hold back the rest of the
 * pass (the counters, strand_limit) for long: what is left waits for the
 * next pass.
 *
 * je/collapse.c collapses a range, and splits it again before jemalloc
 * purges part of it.
 *
 * jemalloc keeps the small class's address space (its opt.retain), so a
 * range it held when checked is still its own when advised; with
 * MALLOC_CONF retain:false, nothing is collapsed (counted as skipped).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include "lifetime/lifetime.h"
#include "je/je.h"
#include "base/lock.h"

#define QUEUE    4096            /* a set of 2 MiB ranges waiting: at most
                                    three quarters full (6 GiB) */
#define PASS_MAX 512             /* collapsed a pass at most: 1 GiB */
#define HOLES    8               /* pages of a range that may be missing */
#define REST_MAX 50000000ull     /* ns: the longest rest after a collapse */

static hp_lock_t lock = HP_LOCK_INIT(HP_RANK_CATCHUP);
static uintptr_t queue[QUEUE];   /* open addressing, 0 free; under lock */
static unsigned nqueue;

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

static size_t slot_of(uintptr_t r) {
	return (size_t)(((r >> 21) * 0x9e3779b97f4a7c15ull) >> 40) &
	    (QUEUE - 1);
}

/* Adds range r to the queue, once. Lock held. */
static void insert(uintptr_t r) {
	hp_lock_assert_held(&lock);
	hp_assert(r != 0 && (r & (HP_HUGE - 1)) == 0);
	size_t i = slot_of(r);
	while (queue[i] != 0 && queue[i] != r)
		i = (i + 1) & (QUEUE - 1);
	if (queue[i] == r)
		return;
	if (nqueue >= QUEUE * 3 / 4) {
		hp_site_counts.caught_up_dropped++;
		return;
	}
	queue[i] = r;
	nqueue++;
	hp_assert(nqueue <= QUEUE * 3 / 4);  /* a free slot ends each probe */
}

/* A promoted site's sample noted addr: its 2 MiB range. */
void hp_catchup_queue(uintptr_t addr) {
	hp_site_assert_locked();
	if (addr == 0)
		return;
	hp_lock(&lock);
	insert(addr & ~(uintptr_t)(HP_HUGE - 1));
	hp_unlock(&lock);
}

static int cmp(const void *a, const void *b) {
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* jemalloc keeps the small class's address space unless MALLOC_CONF
 * says retain:false; without it a range checked could be unmapped and
 * mapped again by the program before it is advised. */
static bool retained(void) {
	return hp_je_opt_retain();
}

/* After a collapse that took ns: as long again, so that the program's
 * faults (and its reads of the range, whose page table entry was cleared
 * meanwhile), queued behind the collapse's hold of its mappings, go
 * before the next one. */
static void rest(uint64_t ns) {
	hp_assert(ns <= REST_MAX);
	struct timespec t = {(time_t)(ns / 1000000000u),
	    (long)(ns % 1000000000u)};
	nanosleep(&t, NULL);
}

/* The maintenance thread: collapses what was queued, PASS_MAX ranges a
 * pass at most (each copies 2 MiB with the program's mappings locked). */
void hp_catchup_run(void) {
	static uintptr_t work[QUEUE];   /* the maintenance thread's own */
	unsigned n = 0;
	hp_lock(&lock);
	for (size_t i = 0; i < QUEUE; i++)
		if (queue[i] != 0) {
			work[n++] = queue[i];
			queue[i] = 0;
		}
	hp_assert(n == nqueue);              /* the count is the queue's */
	nqueue = 0;
	hp_unlock(&lock);
	/* Not under the lock: qsort may call malloc, and jemalloc's madvise
	 * takes it. */
	qsort(work, n, sizeof *work, cmp);
	if (n > PASS_MAX) {
		hp_lock(&lock);
		for (unsigned i = PASS_MAX; i < n; i++)   /* the next pass's */
			insert(work[i]);
		hp_unlock(&lock);
		n = PASS_MAX;
	}
	hp_assert(n <= PASS_MAX);
	bool go = n > 0 && retained();
	uint64_t budget = (uint64_t)hp_conf.maintain_ms * 1000000u, spent = 0;
	unsigned i;
	for (i = 0; i < n && spent < budget; i++) {
		uintptr_t r = work[i];
		if (!go || !hp_jemap_data(r, r + HP_HUGE) ||
		    hp_os_huge_resident(r) < HP_SUBPAGES - HOLES)
			hp_site_counts.caught_up_skipped++;
		else {
			uint64_t t0 = hp_os_clock_ns(CLOCK_MONOTONIC);
			if (hp_collapse(r))
				hp_site_counts.caught_up++;
			else
				hp_site_counts.caught_up_failed++;
			uint64_t took = hp_os_clock_ns(CLOCK_MONOTONIC) - t0;
			rest(took < REST_MAX ? took : REST_MAX);
			/* The time the pass really took, slow collapses whole. */
			spent += hp_os_clock_ns(CLOCK_MONOTONIC) - t0;
		}
	}
	if (i < n) {                         /* the next pass's */
		hp_lock(&lock);
		for (; i < n; i++)
			insert(work[i]);
		hp_unlock(&lock);
	}
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
