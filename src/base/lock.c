/*
 * Lock ranks and ownership, checked in debug builds (see lock.h for the
 * order). Each thread keeps a mask of the ranks it holds.
 */
#define _GNU_SOURCE
#include <time.h>
#include <unistd.h>
#include "base/lock.h"

#ifdef HP_DEBUG
static HP_TLS unsigned held;     /* bit r: a lock of rank r is held */
#endif
static HP_TLS unsigned nheld;    /* hp_locks_held() */

/* The signal fences keep the count's updates where they are written,
 * around the calls: a handler that runs in between sees it up. */
static inline int counted(int (*take)(pthread_mutex_t *), pthread_mutex_t *m) {
	nheld++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	int r = take(m);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (r != 0)
		nheld--;
	return r;
}

int hp_mutex_lock(pthread_mutex_t *m) {
	return counted(pthread_mutex_lock, m);
}

int hp_mutex_trylock(pthread_mutex_t *m) {
	return counted(pthread_mutex_trylock, m);
}

int hp_mutex_unlock(pthread_mutex_t *m) {
	int r = pthread_mutex_unlock(m);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* Never below 0 (a lock released that was made anew, say): a count
	 * that wrapped would skip the work at exit for good. */
	hp_assert(r != 0 || nheld > 0);
	if (r == 0 && nheld > 0)
		nheld--;
	return r;
}

unsigned hp_locks_held(void) {
	return nheld;
}

void hp_locks_forked(void) {
	nheld = 0;
}

bool hp_lock_at_exit(hp_lock_t *l) {
	if (nheld != 0)
		return false;
	for (int ms = 0; ms < 1000; ms++) {
		if (hp_trylock(l))
			return true;
		struct timespec t = {0, 1000000};
		nanosleep(&t, NULL);
	}
	return false;
}

void hp_lock_reinit(hp_lock_t *l) {
#ifdef HP_DEBUG
	/* Held by this thread in the parent, under the parent's thread id. */
	if (l->owner != 0)
		held &= ~(1u << l->rank);
	l->owner = 0;
#endif
	pthread_mutex_init(&l->m, NULL);
}

#ifdef HP_DEBUG
void hp_lock_check_order(const hp_lock_t *l) {
	hp_assert(l->rank > 0 && l->rank < 32);
	/* Every lock held must rank below this one. */
	hp_assert((held >> l->rank) == 0);
}

void hp_lock_acquired(hp_lock_t *l) {
	hp_assert(l->owner == 0);
	l->owner = gettid();
	held |= 1u << l->rank;
}

void hp_lock_releasing(hp_lock_t *l) {
	hp_assert(l->owner == gettid());
	l->owner = 0;
	held &= ~(1u << l->rank);
}

void hp_lock_assert_held(const hp_lock_t *l) {
	hp_assert(l->owner == gettid());
}
#endif
