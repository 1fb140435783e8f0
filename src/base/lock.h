/*
 * The library's own locks, with their ranks written down. A thread takes
 * locks in increasing rank only; debug builds (make check-debug) check it
 * on every acquisition, and check that functions documented "lock held"
 * are called with it held. Release builds compile to plain mutexes.
 *
 * Rank  Lock                            Held around
 *  1    huge/huge.c start_lock          arena creation: jemalloc's locks,
 *                                       the hooks
 *  2    core/stats.c refresh_lock       jemalloc's mallctl, hp_region_scan
 *  3    lifetime/sample.c sample_lock   dl_iterate_phdr (the loader's lock)
 *  4    lifetime/site.c site_lock       the site, key and sample tables only
 *       ---- jemalloc's own locks come here ----
 *  8    huge/region.c hp_region_lock    the huge class's page states,
 *                                       mmap/madvise
 *  9    lifetime/sample.c zone_lock     the sample zone's bump pointer
 * 10    je/edata.c edata_lock           the descriptor pages
 * 11    je/jemap.c jemap_lock           the ranges of jemalloc's own mappings
 * 12    mmap/mmap.c mmap_lock           the program's advised reservations
 * 13    longlived/llpages.c lock        the long-lived class's page bitmaps
 * 14    lifetime/catchup.c lock         its queue (also taken under site_lock)
 * 15    je/collapse.c lock              the collapsed ranges (in
 *                                       jemalloc's madvise), madvise
 * Ranks 8 to 15 are leaves, taken inside jemalloc's extent code with
 * nothing taken under them; only fork's prepare handlers hold them
 * together (core/init.c), in this order. Rank 1 is held across a fork
 * as well, taken first in jemalloc's prepare handler (je/jefork.c's
 * hook), as a start holds it across mallctl. Rank 15 is also tried (never
 * waited for) under one of jemalloc's bin locks (je/jefill.c).
 *
 * Each thread counts the mutexes it holds, these and jemalloc's (whose
 * pthread_mutex_lock, trylock and unlock scripts/embed-jemalloc sends to
 * hp_mutex_*): what runs at exit asks hp_locks_held() before it takes
 * any, since exit called from a signal handler may have interrupted this
 * thread inside one (lifetime/profile.c, core/report.c).
 */
#ifndef HP_LOCK_H
#define HP_LOCK_H

#include <pthread.h>
#include "base/base.h"

#pragma GCC visibility push(hidden)

enum {
	HP_RANK_START = 1,
	HP_RANK_REFRESH = 2,
	HP_RANK_SAMPLE = 3,
	HP_RANK_SITE = 4,
	HP_RANK_REGION = 8,
	HP_RANK_ZONE = 9,
	HP_RANK_EDATA = 10,
	HP_RANK_JEMAP = 11,
	HP_RANK_MMAP = 12,
	HP_RANK_LLPAGES = 13,
	HP_RANK_CATCHUP = 14,
	HP_RANK_COLLAPSE = 15,
};

typedef struct {
	pthread_mutex_t m;
	unsigned rank;
#ifdef HP_DEBUG
	int owner;               /* thread id of the holder, 0 if none */
#endif
} hp_lock_t;

#define HP_LOCK_INIT(r) {.m = PTHREAD_MUTEX_INITIALIZER, .rank = (r)}

#ifdef HP_DEBUG
void hp_lock_acquired(hp_lock_t *l);
void hp_lock_releasing(hp_lock_t *l);
void hp_lock_check_order(const hp_lock_t *l);
void hp_lock_assert_held(const hp_lock_t *l);
#else
#define hp_lock_acquired(l) ((void)(l))
#define hp_lock_releasing(l) ((void)(l))
#define hp_lock_check_order(l) ((void)(l))
#define hp_lock_assert_held(l) ((void)(l))
#endif

/* pthread_mutex_lock, trylock and unlock, counted in this thread's
 * hp_locks_held() (the count is up before the mutex is taken and down
 * after it is released: a signal in between finds it held). */
int hp_mutex_lock(pthread_mutex_t *m);
int hp_mutex_trylock(pthread_mutex_t *m);
int hp_mutex_unlock(pthread_mutex_t *m);
/* How many of the library's and jemalloc's mutexes this thread holds (or
 * is taking or releasing). Nonzero at exit: exit interrupted this thread
 * inside the allocator, and a lock it waited for could be its own. */
unsigned hp_locks_held(void);
/* In a fork child: the forking thread holds none (each lock is made anew
 * by the child handlers, ours and jemalloc's, rather than released). */
void hp_locks_forked(void);

static inline void hp_lock(hp_lock_t *l) {
	hp_lock_check_order(l);
	hp_mutex_lock(&l->m);
	hp_lock_acquired(l);
}

/* True if taken. No order check: a failed try cannot deadlock. */
static inline bool hp_trylock(hp_lock_t *l) {
	if (hp_mutex_trylock(&l->m) != 0)
		return false;
	hp_lock_acquired(l);
	return true;
}

static inline void hp_unlock(hp_lock_t *l) {
	hp_lock_releasing(l);
	hp_mutex_unlock(&l->m);
}

/* At exit: the lock if this thread holds no lock at all and another
 * thread lets go of it within about a second (it could be stopped for
 * good inside the allocator, in a signal handler of its own); false if
 * not taken. */
bool hp_lock_at_exit(hp_lock_t *l);

/* In a fork child: the lock is free again (the forking thread, the only
 * one left, may have held it across fork). */
void hp_lock_reinit(hp_lock_t *l);

#pragma GCC visibility pop

#endif
