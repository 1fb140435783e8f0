/*
 * The routing decision, off the fast path: which class serves a request
 * that the entry points could not send straight to the small class, and
 * where an object of the owned range goes back to. The lifetime layer
 * decides (a slot's credit, a sample, a promoted key); this file places:
 * the small class, the huge class, or a promoted site's class. A call
 * that succeeds leaves errno as it found it, whatever the system calls
 * under it did.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "core/core.h"
#include "je/je.h"

static void *small_alloc(size_t size, size_t align, bool zero) {
	if (align > HP_MALLOC_ALIGN)         /* zero: the usable size */
		return zero ? hp_je_mallocx(size ? size : 1, MALLOCX_ALIGN(align) |
		    MALLOCX_ZERO) : hp_je_memalign(align, size);
	return zero ? hp_je_calloc(1, size) : hp_je_malloc(size);
}

void *hp_route_alloc(size_t size, size_t align, bool zero) {
	int saved = errno;
	void *p = !hp_init() || size < hp_threshold ?
	    small_alloc(size, align, zero) : hp_huge_alloc(size, align, zero);
	if (p != NULL)
		errno = saved;
	return p;
}

/* Each class's free asserts that the pointer is in its range; the three
 * ranges are disjoint parts of the owned range. hp_route_free_rest: what
 * the huge cache's step (free(), hp_route_free_owned) did not take. */
__attribute__((noinline)) void hp_route_free_rest(void *p) {
	int saved = errno;
	hp_assert(hp_maybe_owned(p));
	if (hp_zone_contains(p))
		hp_sample_free(p);
	else if (hp_region_contains(p))
		hp_huge_free(p);
	else if (hp_ll_contains(p))
		hp_ll_free(p);
	else {
		/* Above the reservation (see hp_maybe_owned()): jemalloc's. A
		 * pointer inside it but in no class's range is no object. */
		hp_assert(!hp_owned(p));
		hp_je_free(p);
	}
	errno = saved;
}

/* A promoted site's object goes into this thread's cache of the huge
 * arena when it can (no errno to keep, nothing else to test); the rest
 * out of line, so that this keeps no frame. free() does the same in
 * line. */
void hp_route_free_owned(void *p) {
	if (hp_likely(hp_region_holds_owned(p)) && hp_huge_free_try(p))
		return;
	hp_route_free_rest(p);
}

static void *realloc_slow(void *p, size_t size);

size_t hp_route_usable(const void *p) {
	return hp_ll_contains(p) ? hp_ll_usable(p) :
	    hp_je_malloc_usable_size((void *)p);
}

void *hp_route_realloc(void *p, size_t size) {
	int saved = errno;
	void *q = realloc_slow(p, size);
	if (q != NULL || size == 0)
		errno = saved;
	return q;
}

static void *realloc_slow(void *p, size_t size) {
	if (p == NULL)
		return hp_route_alloc(size, 0, false);
	if (size == 0) {                     /* glibc: free, return NULL */
		hp_free(p);
		return NULL;
	}
	bool ready = hp_init();
	bool was_huge = hp_region_contains(p);
	bool to_huge = ready && size >= hp_threshold;
	/* A long-lived object stays in its class while it stays small. */
	if (hp_ll_contains(p) && !to_huge) {
		void *q = hp_ll_realloc(p, size);
		if (q != NULL)
			return q;
	}
	/* A sampled object always moves: free() ends its sample, and the new
	 * object is an ordinary one. */
	if (!was_huge && !to_huge && !hp_zone_contains(p) && !hp_ll_contains(p))
		return hp_je_realloc(p, size);
	if (was_huge && to_huge) {
		void *q = hp_huge_realloc(p, size);
		if (q != NULL || size > PTRDIFF_MAX)
			return q;
		/* The huge class is full: move, with hp_huge_alloc's fallback. */
	}
	/* Across classes (or out of huge space): move, keeping the data. */
	void *q = to_huge ? hp_huge_alloc(size, 0, false) : hp_je_malloc(size);
	if (q == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	size_t old = hp_route_usable(p);
	memcpy(q, p, old < size ? old : size);
	hp_free(p);
	return q;
}

/* ---- the slot's slow path ------------------------------------------- */

/* A placed object: the counters. */
static inline void *placed_done(void *p, size_t size) {
	/* On huge pages: the long-lived class's, the huge class's, or a hole in
	 * the small class's collapsed ranges (je/jefill.c). */
	hp_assert(hp_ll_contains(p) || hp_huge_small_home(p));
	hp_shard_t *s = hp_shard();
	hp_tally(s, HP_TALLY_PLACED_BYTES, size);
	hp_tally(s, HP_TALLY_PLACED, 1);
	return p;
}

/* A promoted site's small object: the long-lived class, else the huge
 * class's small sizes; NULL if neither can take it. tried: placed_ll or
 * placed_huge has asked the class's common path (the long-lived class's
 * first heap, or the huge class when there is no long-lived class) and
 * it could not take the object: it is not asked again. Marked busy: a
 * class's first call makes its arena and threads, whose own allocations
 * must not come back here. */
static void *place_promoted(size_t size, bool zero, bool tried) {
	void *p = NULL;
	hp_assert(!hp_sample_busy);
	hp_sample_busy_set(true);
	if (hp_ll_size != 0)
		p = hp_ll_alloc_rest(size, zero, tried);
	if (p == NULL && (hp_ll_size != 0 || !tried))
		p = hp_huge_small(size, zero);
	hp_sample_busy_set(false);
	return p != NULL ? placed_done(p, size) : NULL;
}

static void *slot_alloc(size_t size, const uintptr_t *ra, bool zero) {
	uintptr_t ret = *ra;
	unsigned i = (uint8_t)ret;
	/* hp_threshold is 0 until start-up has set up everything these paths
	 * use (init.c stores it last but one): hp_init is called only then,
	 * or for a huge-class request. */
	if (hp_unlikely(size >= __atomic_load_n(&hp_threshold,
	    __ATOMIC_ACQUIRE)) && (!hp_init() || size >= hp_threshold)) {
		/* Inside start-up: credits stay 0 until it is done. */
		hp_slot_undo(i, size);
		return hp_route_alloc(size, 0, zero);
	}
	if (hp_unlikely(!hp_huge_thread_seen))
		hp_huge_thread_first();
	bool pinned;
	uint64_t used = hp_slot_refill(i, size, &pinned);
	void *p = hp_sample_take(size, ret, zero, used);
	if (p != NULL)
		return p;
	if (pinned && !hp_sample_busy && hp_key_placed(ret, (const char *)ra) &&
	    (p = place_promoted(size, zero, false)) != NULL)
		return p;
	return small_alloc(size, 0, zero);
}

/* A promoted site's object, or the small class's when neither class on
 * huge pages can take it (tried: as place_promoted's). */
static __attribute__((noinline)) void *placed_slow(size_t size, bool zero,
    bool tried) {
	int saved = errno;
	void *p = place_promoted(size, zero, tried);
	if (p == NULL)
		p = small_alloc(size, 0, zero);
	if (p != NULL)
		errno = saved;
	return p;
}

/* The same, its common case first, each class's in a function of its
 * own so that each keeps the fewest registers: the long-lived class's
 * first heap, or the huge class's small sizes; what that could not take,
 * placed_slow's, with errno as this call found it (a full mimalloc heap
 * sets ENOMEM). */
static __attribute__((noinline)) void *placed_ll(size_t size, bool zero) {
	hp_assert(!hp_sample_busy && hp_ll_size != 0);
	if (hp_unlikely(size >= hp_threshold)) {   /* see route_slot */
		hp_sample_unskip(size);
		return hp_route_alloc(size, 0, zero);
	}
	int *e = &errno, saved = *e;
	bool tried;
	void *p = hp_ll_alloc_fast(size, zero, &tried);
	*e = saved;
	return hp_likely(p != NULL) ? placed_done(p, size) :
	    placed_slow(size, zero, tried);
}

static __attribute__((noinline)) void *placed_huge(size_t size, bool zero) {
	hp_assert(!hp_sample_busy && hp_ll_size == 0);
	if (hp_unlikely(size >= hp_threshold)) {   /* see route_slot */
		hp_sample_unskip(size);
		return hp_route_alloc(size, 0, zero);
	}
	int *e = &errno, saved = *e;
	hp_sample_busy_set(true);     /* see place_promoted */
	void *p = hp_huge_small(size, zero);
	hp_sample_busy_set(false);
	*e = saved;
	return hp_likely(p != NULL) ? placed_done(p, size) :
	    placed_slow(size, zero, true);
}

static __attribute__((noinline)) void *slot_slow(size_t size,
    const uintptr_t *ra, bool zero) {
	int saved = errno;
	void *p = slot_alloc(size, ra, zero);
	if (p != NULL)
		errno = saved;
	return p;
}

/* A promoted site's object: the huge class's from this thread's cache of
 * the huge arena (a thread that has one has its shard: hp_huge_small;
 * the cache takes nothing while a long-lived class serves promoted sites:
 * hp_huge_promoted_elsewhere), else the long-lived class's, else
 * through the huge arena. In line in
 * the slot path, which keeps no frame. A request of the huge class
 * (route_slot does not test) is too large for the cache, and placed_ll
 * and placed_huge send it there. */
static inline __attribute__((always_inline)) void *placed(size_t size,
    bool zero) {
	void *p;
	if (hp_likely(!zero) && hp_likely(hp_huge_small_try(size, &p))) {
		hp_shard_t *s = hp_thread.shard;
		hp_assert(s != NULL && hp_ll_size == 0 && hp_huge_small_home(p));
		hp_tally(s, HP_TALLY_PLACED_BYTES, size);
		hp_tally(s, HP_TALLY_PLACED, 1);
		return p;
	}
	if (hp_ll_size != 0)
		return placed_ll(size, zero);
	return placed_huge(size, zero);
}

/* The same, the decision noted first (hp_ra_note); out of line, so that
 * the slot path keeps no frame. */
static __attribute__((noinline)) void *placed_noted(size_t size, bool zero,
    uintptr_t ret) {
	hp_ra_note(ret);
	return placed(size, zero);
}

/* malloc's and calloc's slow path: the caller's slot ran out of credit
 * (api/entry.c), ra being where the call's return address is kept. errno
 * as it was, unless the allocation fails: start-up, unwinding and the
 * huge class make system calls that may set it. Out of line: the entry
 * points' fast paths keep no frame.
 *
 * A pinned slot (a promoted key falls in it) sends every call here. Its
 * common case, a small request, no sample due, takes the key's decision
 * (this thread's note of it, else the lookup) and goes on with no frame
 * of its own: to jemalloc's own malloc, or to the promoted site's class.
 * The rest is slot_slow's, as before. */
static inline __attribute__((always_inline)) void *route_slot(size_t size,
    const uintptr_t *ra, bool zero) {
	uintptr_t ret = *ra;
	unsigned i = (uint8_t)ret;
	/* A site this thread found placed, its key unchanged since, the
	 * thread not busy (hp_ra_hit sees that too). A note means start-up
	 * is done; a request of the huge class is not tested for here but
	 * where placed() sends it, which gives the sampler its bytes back:
	 * as slot_alloc would, the credit ends at 0 (the slot is pinned, and
	 * this thread held none there), and the budget is as it was. */
	if (hp_likely(hp_ra_hit(ret))) {
		if (hp_likely(hp_sample_skip(size))) {
			hp_slot_settle(i);
			return placed(size, zero);
		}
	} else if (size < __atomic_load_n(&hp_threshold, __ATOMIC_ACQUIRE) &&
	    !hp_sample_busy && hp_slot_pinned(i) && hp_sample_skip(size)) {
		hp_slot_settle(i);
		if (hp_key_placed(ret, (const char *)ra))
			return placed_noted(size, zero, ret);
		return zero ? hp_je_calloc(1, size) : hp_je_malloc(size);
	}
	return slot_slow(size, ra, zero);
}

__attribute__((noinline)) void *hp_route_slot(size_t size,
    const uintptr_t *ra, bool zero) {
	return route_slot(size, ra, zero);
}

/* The same for malloc, which never zeroes: no test of it. */
__attribute__((noinline)) void *hp_route_slot_malloc(size_t size,
    const uintptr_t *ra) {
	return route_slot(size, ra, false);
}
