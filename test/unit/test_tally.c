/* src/base/tally.c: counters kept in shards, a thread's shard taken in
 * turn at its first count, summed when read. */
#include <criterion/criterion.h>
#include <pthread.h>
#include "base/base.h"

/* A thread takes a shard at its first count and keeps it. */
Test(tally, a_thread_keeps_its_shard) {
	cr_assert_null(hp_thread.shard);
	hp_shard_t *s = hp_shard();
	cr_assert_eq(s, &hp_shards[0], "the first taken is the first");
	cr_assert_eq(hp_shard(), s);
	cr_assert_eq(hp_thread.shard, s);
}

/* A figure is the sum over the shards; a difference counts modulo 2^64. */
Test(tally, shards_are_summed) {
	for (unsigned i = 0; i < HP_SHARDS; i++)
		hp_tally(&hp_shards[i], HP_TALLY_PLACED_BYTES, i + 1);
	cr_assert_eq(hp_tally_sum(HP_TALLY_PLACED_BYTES),
	    HP_SHARDS * (HP_SHARDS + 1) / 2);
	cr_assert_eq(hp_tally_sum(HP_TALLY_PLACED), 0, "counters apart");
	hp_tally(&hp_shards[3], HP_TALLY_PLACED_BYTES, (uint64_t)-10);
	cr_assert_eq(hp_tally_sum(HP_TALLY_PLACED_BYTES),
	    HP_SHARDS * (HP_SHARDS + 1) / 2 - 10);
	/* Made on one shard, freed on another. */
	hp_tally(&hp_shards[1], HP_TALLY_LL_LIVE, 4096);
	hp_tally(&hp_shards[60], HP_TALLY_LL_LIVE, (uint64_t)-4096);
	cr_assert_eq(hp_tally_sum(HP_TALLY_LL_LIVE), 0);
	cr_assert_eq(hp_shards[60].v[HP_TALLY_LL_LIVE], (uint64_t)-4096);
}

/* Read while threads count, a free can be seen without its allocation:
 * a sum below zero reads as 0, not as 2^64 - n. */
Test(tally, below_zero_reads_zero) {
	hp_tally(&hp_shards[0], HP_TALLY_LL_LIVE, 100);
	hp_tally(&hp_shards[1], HP_TALLY_LL_LIVE, (uint64_t)-150);
	cr_assert_eq(hp_tally_sum(HP_TALLY_LL_LIVE), 0);
	hp_tally(&hp_shards[2], HP_TALLY_LL_LIVE, 50);
	cr_assert_eq(hp_tally_sum(HP_TALLY_LL_LIVE), 0);
	hp_tally(&hp_shards[2], HP_TALLY_LL_LIVE, 1);
	cr_assert_eq(hp_tally_sum(HP_TALLY_LL_LIVE), 1);
}

/*
 * More threads than shards, all counting at once: the sums are exact,
 * and the shards were taken in turn (thread n of the order in which they
 * took theirs has shard n % HP_SHARDS), so each holds the counts of the
 * threads that share it.
 */
#define THREADS (2 * HP_SHARDS + 3)
#define ADDS    20000
static pthread_barrier_t go;

static void *counter(void *arg) {
	(void)arg;
	pthread_barrier_wait(&go);
	for (int k = 0; k < ADDS; k++) {
		hp_tally(hp_shard(), HP_TALLY_LL_NMALLOC, 1);
		hp_tally(hp_shard(), HP_TALLY_LL_LIVE, 48);
		if (k % 2)
			hp_tally(hp_shard(), HP_TALLY_LL_LIVE, (uint64_t)-48);
	}
	return hp_shard();
}

Test(tally, threads_past_the_shards_count_exactly) {
	pthread_t t[THREADS];
	cr_assert_eq(pthread_barrier_init(&go, NULL, THREADS), 0);
	for (int i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, counter, NULL), 0);
	unsigned on[HP_SHARDS] = {0};
	for (int i = 0; i < THREADS; i++) {
		void *s;
		pthread_join(t[i], &s);
		on[(hp_shard_t *)s - hp_shards]++;
	}
	pthread_barrier_destroy(&go);
	cr_assert_eq(hp_tally_sum(HP_TALLY_LL_NMALLOC), (uint64_t)THREADS * ADDS);
	cr_assert_eq(hp_tally_sum(HP_TALLY_LL_LIVE),
	    (uint64_t)THREADS * ADDS / 2 * 48);
	for (unsigned i = 0; i < HP_SHARDS; i++) {
		unsigned want = THREADS / HP_SHARDS + (i < THREADS % HP_SHARDS);
		cr_assert_eq(on[i], want, "shard %u: %u threads", i, on[i]);
		cr_assert_eq(hp_shards[i].v[HP_TALLY_LL_NMALLOC],
		    (uint64_t)want * ADDS, "shard %u", i);
	}
	cr_assert_null(hp_thread.shard, "this thread counted nothing");
}

/* Threads that share one shard (more threads than shards) count right:
 * the counts are atomic, not a thread's own. The two start together, each
 * spinning until the other runs, so that their counting overlaps. */
#define SHARERS 2
#define SHARED_ADDS 1000000
static unsigned ready;

static void *sharer(void *arg) {
	hp_thread.shard = arg;
	__atomic_add_fetch(&ready, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < SHARERS)
		__builtin_ia32_pause();
	for (int k = 0; k < SHARED_ADDS; k++) {
		hp_tally(hp_shard(), HP_TALLY_PLACED, 1);
		hp_tally(hp_shard(), HP_TALLY_PLACED_BYTES, (uint64_t)k);
		/* One count per call, as each malloc makes its own: the
		 * compiler may not fold them into one. */
		__asm__ volatile("" ::: "memory");
	}
	return NULL;
}

Test(tally, threads_sharing_a_shard_count_exactly) {
	/* Rounds, on shards of their own: a host busy elsewhere may run the
	 * two one after the other in one round, hardly in all. */
	for (unsigned round = 0; round < 5; round++) {
		hp_shard_t *s = &hp_shards[7 + round];
		pthread_t t[SHARERS];
		ready = 0;
		for (int i = 0; i < SHARERS; i++)
			cr_assert_eq(pthread_create(&t[i], NULL, sharer, s), 0);
		for (int i = 0; i < SHARERS; i++)
			pthread_join(t[i], NULL);
		cr_assert_eq(s->v[HP_TALLY_PLACED], (uint64_t)SHARERS *
		    SHARED_ADDS, "round %u", round);
		cr_assert_eq(s->v[HP_TALLY_PLACED_BYTES], (uint64_t)SHARERS *
		    SHARED_ADDS * (SHARED_ADDS - 1) / 2, "round %u", round);
	}
	cr_assert_eq(hp_tally_sum(HP_TALLY_PLACED), 5ull * SHARERS * SHARED_ADDS);
}
