/*
 * The counters a promoted allocation and its free move (how many objects
 * and bytes lifetime placed, the long-lived class's live bytes and
 * calls), in shards of their own cache lines, summed when read.
 *
 * One process-wide counter that every thread bumps is one cache line
 * that each promoted allocation takes from the other cores, so threads
 * allocating at one promoted site would slow each other down at every
 * call (scripts/bench-mtpromoted; docs/benchmarks.md has the figures). A
 * thread takes a shard at its first count, in turn; the counts stay
 * atomic, so threads that share one (more threads than shards) count
 * right (plain stores were no faster where the shard is a thread's
 * own), and nothing is kept per thread that its exit or a fork would
 * have to fold: a figure is the sum over the shards.
 */
#include <stdint.h>
#include "base/base.h"

hp_shard_t hp_shards[HP_SHARDS];
static unsigned taken;

hp_shard_t *hp_shard_take(void) {
	hp_assert(hp_thread.shard == NULL);      /* a thread takes one, once */
	unsigned i = __atomic_fetch_add(&taken, 1, __ATOMIC_RELAXED);
	return hp_thread.shard = &hp_shards[i % HP_SHARDS];
}

/* The shards are read one by one, not at one instant: an object made on a
 * shard already read and freed on one not yet read shows its free without
 * its allocation, so a difference can read below zero while threads
 * count. Clamped: 0 then. */
uint64_t hp_tally_sum(hp_tally_t t) {
	hp_assert(t < HP_TALLY_N);
	uint64_t sum = 0;
	for (unsigned i = 0; i < HP_SHARDS; i++)
		sum += __atomic_load_n(&hp_shards[i].v[t], __ATOMIC_RELAXED);
	return sum > INT64_MAX ? 0 : sum;
}
