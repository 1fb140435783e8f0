/*
 * Lock ranks and ownership, checked in debug builds (see lock.h for the
 * order). Each thread keeps a mask of the ranks it holds.
 */
#define _GNU_SOURCE
#include <unistd.h>
#include "lock.h"

#ifdef HP_DEBUG
static HP_TLS unsigned held;     /* bit r: a lock of rank r is held */
#endif

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
