/*
 * The exported malloc family. malloc and calloc take the request from the
 * credit of the caller's slot (lifetime/slot.c) and go on into jemalloc's
 * own fast path; the one test sends start-up, the huge class, sampling
 * and the slots of promoted sites to the slow path (core/route.c). free
 * and realloc compare the pointer with the start of the library's own
 * reservation (the huge class and the sampled objects), whose objects
 * must go back to where they came from. Everything else (alignment, size
 * checks that need errno) goes through core/route.c.
 *
 * The fast paths keep no frame, and malloc's and free's run jemalloc's
 * own steps in line (je/jefast.c, put here by link-time optimisation), so
 * that each adds only its test to jemalloc's cost: the slot, the
 * credits' thread-local offset, the subtraction and its branch for
 * malloc; a compare and its branch for free. docs/benchmarks.md lists
 * the instructions and measures them.
 */
#include <errno.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include "core/core.h"
#include "je/je.h"

/* Out of line, so that the fast paths keep no frame for errno's call. */
static __attribute__((noinline, cold)) void *enomem(void) {
	errno = ENOMEM;
	return NULL;
}

HP_EXPORT void *malloc(size_t size) {
	SLOT_TAKE(size, slow);
	return hp_je_fast_malloc(size);
slow:
	return hp_route_slot_malloc(size, HP_CALLER_RA());
}

/* An object of the owned range: a promoted site's goes into this
 * thread's cache of the huge arena in line (hp_route_free_owned's first
 * step), the rest to its class (hp_route_free_rest). */
HP_EXPORT void free(void *p) {
	if (hp_likely(!hp_maybe_owned(p)))
		hp_je_fast_free(p);
	else if (!hp_region_holds_owned(p) || !hp_huge_free_try(p))
		hp_route_free_rest(p);
}

HP_EXPORT void *calloc(size_t n, size_t size) {
	size_t total;
	if (hp_unlikely(__builtin_mul_overflow(n, size, &total)))
		return enomem();
	SLOT_TAKE(total, slow);
	return hp_je_calloc(n, size);
slow:
	return hp_route_slot(total, HP_CALLER_RA(), true);
}

HP_EXPORT void *realloc(void *p, size_t size) {
	/* realloc(p, 0) frees p, as in glibc: jemalloc's zero_realloc:free. */
	if (hp_likely(size < hp_threshold && !hp_maybe_owned(p)))
		return hp_je_realloc(p, size);
	return hp_route_realloc(p, size);
}

HP_EXPORT void *reallocarray(void *p, size_t n, size_t size) {
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, total);
}

/* align: a power of two. */
static void *aligned(size_t align, size_t size) {
	if (size < hp_threshold)
		return align <= HP_MALLOC_ALIGN ? hp_je_malloc(size) :
		    hp_je_memalign(align, size);
	return hp_route_alloc(size, align, false);
}

HP_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	int saved = errno;
	void *p = aligned(align, size);
	errno = saved;               /* POSIX: errno is not ours to set */
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

HP_EXPORT void *aligned_alloc(size_t align, size_t size) {
	if (align == 0 || (align & (align - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(align, size);
}

HP_EXPORT void *memalign(size_t align, size_t size) {
	/* glibc: a larger alignment cannot be a power of two; a smaller
	 * one that is not is rounded up to the next. */
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if (align & (align - 1))
		align = (size_t)1 << (64 - __builtin_clzll(align));
	return aligned(align ? align : 1, size);
}

HP_EXPORT void *valloc(size_t size) {
	return aligned(HP_PAGE, size);
}

HP_EXPORT void *pvalloc(size_t size) {
	if (size > SIZE_MAX - HP_PAGE) {
		errno = ENOMEM;
		return NULL;
	}
	size_t rounded = (size + HP_PAGE - 1) & ~(HP_PAGE - 1);
	return aligned(HP_PAGE, rounded ? rounded : HP_PAGE);
}

HP_EXPORT size_t malloc_usable_size(void *p) {
	if (hp_unlikely(hp_maybe_owned(p)))
		return hp_route_usable(p);
	return hp_je_malloc_usable_size(p);
}

HP_EXPORT int malloc_trim(size_t pad) {
	(void)pad;
	if (!hp_init())
		return 0;
	int saved = errno;
	int ret = hp_maint_trim();
	errno = saved;
	return ret;
}
