/*
 * The routing decision, off the fast path: which class serves a request
 * that the entry points could not send straight to the small class, and
 * where an object of the owned range goes back to. A call that succeeds
 * leaves errno as it found it, whatever the system calls under it did.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "je.h"

static void *small_alloc(size_t size, size_t align, bool zero) {
	if (align > HP_MALLOC_ALIGN)         /* zero: the usable size */
		return zero ? hp_je_mallocx(size ? size : 1, MALLOCX_ALIGN(align) |
		    MALLOCX_ZERO) : hp_je_memalign(align, size);
	return zero ? hp_je_calloc(1, size) : hp_je_malloc(size);
}

void *hp_alloc_slow(size_t size, size_t align, bool zero) {
	int saved = errno;
	void *p = !hp_init() || size < hp_threshold ?
	    small_alloc(size, align, zero) : hp_huge_alloc(size, align, zero);
	if (p != NULL)
		errno = saved;
	return p;
}

void hp_free_owned(void *p) {
	int saved = errno;
	if (hp_zone_contains(p))
		hp_lifetime_free(p);
	else if (hp_region_contains(p))
		hp_huge_free(p);
	else if (hp_ll_contains(p))
		hp_ll_free(p);
	else
		hp_je_free(p);           /* above the reservation: see
		                            hp_maybe_owned() */
	errno = saved;
}

static void *realloc_slow(void *p, size_t size);

size_t hp_usable_size(const void *p) {
	return hp_ll_contains(p) ? hp_ll_usable(p) :
	    hp_je_malloc_usable_size((void *)p);
}

void *hp_realloc_slow(void *p, size_t size) {
	int saved = errno;
	void *q = realloc_slow(p, size);
	if (q != NULL || size == 0)
		errno = saved;
	return q;
}

static void *realloc_slow(void *p, size_t size) {
	if (p == NULL)
		return hp_alloc_slow(size, 0, false);
	if (size == 0) {                     /* glibc: free, return NULL */
		free(p);
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
	size_t old = hp_usable_size(p);
	memcpy(q, p, old < size ? old : size);
	free(p);
	return q;
}
