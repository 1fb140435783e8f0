/*
 * The fast path's one test: per-thread byte credits, one per slot, a slot
 * being the low byte of the malloc call's return address.
 *
 * malloc and calloc subtract the request from their slot's credit and go
 * on to jemalloc while it stays above zero (entry.c: four instructions and
 * the tail jump). A credit never exceeds large_threshold - 1, so the same
 * test sends every huge-class request here; and it is at most a quarter of
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
 * comes here and starts the library.
 */
#include <errno.h>
#include <stdint.h>
#include "internal.h"
#include "je.h"

/* Named by SLOT_TAKE's asm, which link-time optimisation does not see:
 * "used" keeps it under its name. */
__attribute__((used)) HP_TLS uint64_t hp_slots[HP_SLOTS];
/* Slots this thread has credited (the rest hold 0). */
static HP_TLS uint64_t credited[HP_SLOTS / 64];
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
	__atomic_store_n(&credit, c, __ATOMIC_RELAXED);
}

/* A key was placed on huge pages (on) or taken off. Site lock held. */
void hp_slot_pin(uintptr_t key, bool on) {
	uint16_t *n = &slot_keys[(uint8_t)key];
	hp_assert(on || *n > 0);
	__atomic_store_n(n, *n + (on ? 1 : -1), __ATOMIC_RELAXED);
}

static void *slot_alloc(size_t size, uintptr_t ret, bool zero);

/* errno as it was, unless the allocation fails: start-up, unwinding and
 * the huge class make system calls that may set it. */
void *hp_slot_alloc(size_t size, uintptr_t ret, bool zero) {
	int saved = errno;
	void *p = slot_alloc(size, ret, zero);
	if (p != NULL)
		errno = saved;
	return p;
}

static void *slot_alloc(size_t size, uintptr_t ret, bool zero) {
	unsigned i = (uint8_t)ret;
	uint64_t bit = (uint64_t)1 << (i % 64), *word = &credited[i / 64];
	/* The credit before this call: the fast path took size from it. */
	uint64_t left = hp_slots[i] + size;
	/* hp_threshold is 0 until start-up has set up everything these paths
	 * use (init.c stores it last but one): hp_init is called only then,
	 * or for a huge-class request. */
	if (hp_unlikely(size >= __atomic_load_n(&hp_threshold,
	    __ATOMIC_ACQUIRE)) && (!hp_init() || size >= hp_threshold)) {
		/* Inside start-up: credits stay 0 until it is done. */
		hp_slots[i] = left;
		return hp_alloc_slow(size, 0, zero);
	}
	/* Bytes this slot served since it was credited, this call's too. */
	uint64_t c = credit;
	uint64_t used = size + ((*word & bit) && left < c ? c - left : 0);
	bool pinned = __atomic_load_n(&slot_keys[i], __ATOMIC_RELAXED) != 0;
	if (pinned) {
		hp_slots[i] = 0;
		*word &= ~bit;
	} else {
		hp_slots[i] = c;
		*word |= bit;
	}
	return hp_lifetime_alloc(size, ret, zero, used, pinned);
}
