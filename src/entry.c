/*
 * The exported malloc family. Each fast path is one compare against
 * hp_threshold and a jump into jemalloc's own fast path; everything else
 * (start-up, the huge class, alignment and size checks that need errno)
 * goes through route.c.
 *
 * Lifetime learning (sample.c) adds to malloc and calloc a per-thread
 * byte countdown (it also sends a thread to look up promoted sites). free
 * and realloc test one range, the library's own reservation (the huge
 * class and the sampled objects), whose objects must go back to where they
 * came from; all else stays in its files.
 */
#include <errno.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include "internal.h"
#include "je.h"

HP_EXPORT void *malloc(size_t size) {
	if (hp_likely(size < hp_threshold)) {
		if (hp_unlikely((hp_sample_left -= (int64_t)size) < 0))
			return hp_lifetime_alloc(size,
			    (uintptr_t)__builtin_return_address(0), false);
		return hp_je_malloc(size);
	}
	return hp_alloc_slow(size, 0, false);
}

HP_EXPORT void free(void *p) {
	if (hp_unlikely(hp_owned(p)))
		hp_free_owned(p);
	else
		hp_je_free(p);
}

HP_EXPORT void *calloc(size_t n, size_t size) {
	size_t total;
	if (hp_unlikely(__builtin_mul_overflow(n, size, &total))) {
		errno = ENOMEM;
		return NULL;
	}
	if (hp_likely(total < hp_threshold)) {
		if (hp_unlikely((hp_sample_left -= (int64_t)total) < 0))
			return hp_lifetime_alloc(total,
			    (uintptr_t)__builtin_return_address(0), true);
		return hp_je_calloc(n, size);
	}
	return hp_alloc_slow(total, 0, true);
}

HP_EXPORT void *realloc(void *p, size_t size) {
	/* realloc(p, 0) frees p, as in glibc: jemalloc's zero_realloc:free. */
	if (hp_likely(size < hp_threshold && !hp_owned(p)))
		return hp_je_realloc(p, size);
	return hp_realloc_slow(p, size);
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
	return hp_alloc_slow(size, align, false);
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
	return hp_je_malloc_usable_size(p);
}

HP_EXPORT int malloc_trim(size_t pad) {
	(void)pad;
	if (!hp_init())
		return 0;
	int saved = errno;
	int ret = hp_purge_all();
	errno = saved;
	return ret;
}
