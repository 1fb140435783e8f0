/*
 * The fast path's one test: per-thread byte credits, one per slot, a slot
 * being the low byte of the malloc call's return address.
 *
 * malloc and calloc subtract the request from their slot's credit and go
 * on to jemalloc while it stays above zero (api/entry.c). A credit never
 * exceeds large_threshold - 1, so the same test sends every huge-class
 * request to the slow path (core/route.c); and it is at most a quarter of
 * the mean sampling interval, so this slow path also paces sampling. A
 * slot that some promoted key falls in is given no credit: every call of
 * that slot comes here and is looked up by its return address, and every
 * other slot stays on the fast path whatever is promoted. So an unpromoted
 * site pays for a promotion elsewhere only if it shares the promoted key's
 * low byte (one slot in 256 per promoted key), and a promoted site is
 * looked up within one credit, less than a sampling interval, of its own
 * allocations.
 *
 * Before start-up is done every credit is 0, so the first allocation
 * takes the slow path (core/route.c) and starts the library.
 */
#include <stdint.h>
#include "lifetime/lifetime.h"

/* The credits are hp_thread.slots (base.h's thread block, which
 * SLOT_TAKE's asm names): hp_slots. */
/* Slots this thread has credited (the rest hold 0): in its block. */
#define credited (hp_thread.credited)
/* Promoted keys per slot, from site.c; written under the site lock. */
static uint16_t slot_keys[HP_SLOTS];
static uint64_t credit;          /* per slot, set once at start-up */

HP_STATIC_ASSERT(HP_SLOTS == 256, "a slot is the return address's low byte");

/* threshold: hp_threshold (SIZE_MAX without the huge class); pace: the
 * mean sampling interval, or 0 when nothing is sampled. */
void hp_slot_init(size_t threshold, size_t pace) {
	uint64_t c = threshold - 1;
	if (c > (uint64_t)1 << 62)   /* any request above takes the slow
	                                path, which fails it as jemalloc would */
		c = (uint64_t)1 << 62;
	if (pace != 0 && pace / 4 < c)
		c = pace / 4 ? pace / 4 : 1;
	/* Every request of the huge class overdraws any credit. */
	hp_assert(threshold == 0 || c < threshold);
	__atomic_store_n(&credit, c, __ATOMIC_RELAXED);
}

uint64_t hp_slot_wrapper[HP_SLOTS];

/* ret's key became a wrapper's (on) or stopped being one; a slot holds
 * the first of its wrappers. Site lock held. */
void hp_slot_wrap(uintptr_t ret, int32_t stride, bool on) {
	uint64_t *w = &hp_slot_wrapper[(uint8_t)ret];
	hp_assert(ret != 0 && ret <= HP_WRAP_RET && stride > 0 &&
	    stride <= HP_STRIDE_MAX && stride % 8 == 0);
	if (on && *w == 0)
		__atomic_store_n(w, ret | (uint64_t)(stride / 8) << 48,
		    __ATOMIC_RELEASE);
	else if (!on && (*w & HP_WRAP_RET) == ret)
		__atomic_store_n(w, 0, __ATOMIC_RELEASE);
}

/* A key was placed on huge pages (on) or taken off. Site lock held. */
void hp_slot_pin(uintptr_t key, bool on) {
	uint16_t *n = &slot_keys[(uint8_t)key];
	hp_assert(on ? *n < UINT16_MAX : *n > 0);
	__atomic_store_n(n, *n + (on ? 1 : -1), __ATOMIC_RELAXED);
}

/* The fast path took size from slot i and found it run out: the credit
 * starts again (none for a pinned slot, whose every call comes back to be
 * looked up). Returns the bytes the slot served since it was last
 * credited, this call's included: the sampler's count. */
uint64_t hp_slot_refill(unsigned i, size_t size, bool *pinned) {
	hp_assert(i < HP_SLOTS);
	uint64_t bit = (uint64_t)1 << (i % 64), *word = &credited[i / 64];
	/* The credit before this call: the fast path took size from it. */
	uint64_t left = hp_slots[i] + size;
	uint64_t c = credit;
	uint64_t used = size + ((*word & bit) && left < c ? c - left : 0);
	*pinned = __atomic_load_n(&slot_keys[i], __ATOMIC_RELAXED) != 0;
	if (*pinned) {
		hp_slots[i] = 0;
		*word &= ~bit;
	} else {
		hp_slots[i] = c;
		*word |= bit;
	}
	hp_assert(hp_slots[i] <= c);
	return used;
}

/* Whether slot i is pinned and this thread holds no credit in it: then
 * the fast path took size from a credit of 0, every call of the slot
 * comes back, and a call's used bytes are its own (hp_slot_refill's
 * answer, without its work). */
bool hp_slot_pinned(unsigned i) {
	hp_assert(i < HP_SLOTS);
	return (credited[i / 64] & (uint64_t)1 << (i % 64)) == 0 &&
	    __atomic_load_n(&slot_keys[i], __ATOMIC_RELAXED) != 0;
}

/* After hp_slot_pinned: the credit is 0 again, as hp_slot_refill sets
 * it for a pinned slot. Not always -size before: a signal handler's
 * allocation from the same slot, between the fast path's subtraction and
 * this, subtracts its own size too. */
void hp_slot_settle(unsigned i) {
	hp_assert(i < HP_SLOTS);
	hp_slots[i] = 0;
}

/* The request goes elsewhere (start-up, the huge class): the slot gets
 * back what the fast path took, and its credit stands as it was. */
void hp_slot_undo(unsigned i, size_t size) {
	hp_assert(i < HP_SLOTS);
	hp_slots[i] += size;
}
