/* The debug build's checks (src/base/lock.h, hp_assert): a lock taken
 * against its rank, released by a thread that does not hold it, or a "lock
 * held" function called without it, stops the process. These tests link the
 * debug objects (HP_DEBUG). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include "base/lock.h"

static hp_lock_t outer = HP_LOCK_INIT(HP_RANK_START);
static hp_lock_t inner = HP_LOCK_INIT(HP_RANK_REGION);
static hp_lock_t leaf = HP_LOCK_INIT(HP_RANK_EDATA);

Test(lock, in_rank_order) {
	hp_lock(&outer);
	hp_lock(&inner);
	hp_lock(&leaf);
	hp_lock_assert_held(&inner);
	hp_unlock(&leaf);
	hp_unlock(&inner);
	hp_unlock(&outer);
	cr_assert(hp_trylock(&inner));
	hp_unlock(&inner);
}

Test(lock, against_rank_order_aborts, .signal = SIGABRT) {
	hp_lock(&inner);
	hp_lock(&outer);
}

Test(lock, same_rank_twice_aborts, .signal = SIGABRT) {
	hp_lock(&leaf);
	hp_lock(&leaf);          /* a plain mutex would deadlock here */
}

Test(lock, assert_held_without_it_aborts, .signal = SIGABRT) {
	hp_lock_assert_held(&inner);
}

static void *unlock_other(void *arg) {
	hp_unlock(arg);
	return NULL;
}

Test(lock, unlock_by_another_thread_aborts, .signal = SIGABRT) {
	hp_lock(&inner);
	pthread_t t;
	pthread_create(&t, NULL, unlock_other, &inner);
	pthread_join(t, NULL);
}

/* A fork child's locks are free again, whatever the parent held. */
Test(lock, reinit_after_fork) {
	hp_lock(&outer);
	hp_lock(&inner);
	hp_lock_reinit(&outer);
	hp_lock_reinit(&inner);
	hp_lock(&outer);
	hp_lock(&inner);
	hp_unlock(&inner);
	hp_unlock(&outer);
}
