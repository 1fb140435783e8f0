/* src/base/thread.c: the thread block. Every thread starts with its
 * credits at 0 and the empty cache (hp_no_cache) in place of one of the
 * huge arena's: its initial image holds the address, which the loader
 * relocates before it copies the image into a thread's block. */
#include <criterion/criterion.h>
#include <pthread.h>
#include "base/base.h"

static void assert_fresh(const hp_thread_t *t) {
	cr_assert_eq(t->huge_cache, HP_NO_CACHE);
	cr_assert_null(t->shard);
	cr_assert_eq(t->budget, 0);
	cr_assert_eq(t->ra_gen, 0);
	for (unsigned i = 0; i < HP_SLOTS; i++)
		cr_assert_eq(t->slots[i], 0, "slot %u", i);
}

Test(thread, the_first_thread_starts_fresh) {
	assert_fresh(&hp_thread);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static hp_thread_t seen;
static bool have;

static void *copy_block(void *arg) {
	(void)arg;
	pthread_mutex_lock(&lock);
	seen = hp_thread;
	have = true;
	pthread_cond_signal(&done);
	pthread_mutex_unlock(&lock);
	return NULL;
}

Test(thread, a_new_thread_gets_a_fresh_block) {
	hp_thread.slots[7] = 42;
	hp_thread.huge_cache = NULL;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, copy_block, NULL), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert(have);
	assert_fresh(&seen);
}

/* The empty cache is zeroes: every bin reads as empty and full. */
Test(thread, the_empty_cache_is_zeroes) {
	for (unsigned i = 0; i < HP_NO_CACHE_SIZE; i++)
		cr_assert_eq(hp_no_cache[i], 0, "byte %u", i);
	cr_assert_eq((uintptr_t)hp_no_cache % 64, 0);
}
