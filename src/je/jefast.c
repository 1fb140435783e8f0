/*
 * jemalloc's own malloc and free fast paths, for the exported malloc and
 * free (api/entry.c), which inline these (link-time optimisation) after
 * their own test, so that a call costs that test and what jemalloc's
 * fast path costs, without a second jump.
 *
 * The steps are jemalloc 5.3's (imalloc_fastpath and free_fastpath in
 * its jemalloc.c and jemalloc_internal_inlines_c.h): the size class
 * looked up, the thread's allocation events counted against their
 * threshold (0 while the thread is not nominal, so that one compare also
 * sends start-up and a thread's end to the general path), one object
 * popped from or pushed to the thread's own cache bin, and the bin's
 * request count kept. What they do not cover (a size past the lookup
 * table, an event due, a bin empty or full, a pointer whose leaf is not
 * in the thread's address-map cache or not on a slab) goes to jemalloc's
 * own general paths, malloc_default and free_default, as its malloc and
 * free send it.
 *
 * The thread's state is read as jetsd.h reads it, one %fs-relative
 * operand a field. Built against jemalloc's internal headers
 * (scripts/jemalloc-headers), as jetc.c; of the library's headers it
 * includes je/jetsd.h alone, which names nothing jemalloc names.
 */
#include <jemalloc/internal/jemalloc_preamble.h>
#include <jemalloc/internal/jemalloc_internal_includes.h>
#include <jemalloc/internal/emap.h>
#include <jemalloc/internal/sz.h>
#include "je/jetsd.h"

#define HP_HIDDEN __attribute__((visibility("hidden")))

/* jemalloc's general paths (jemalloc.c; free_default has no declaration
 * in its headers). */
void free_default(void *ptr);

HP_HIDDEN void *hp_je_fast_malloc(size_t size);
HP_HIDDEN void hp_je_fast_free(void *p);
HP_HIDDEN void *hp_je_op_malloc(size_t size);
HP_HIDDEN void hp_je_op_free(void *p);
HP_HIDDEN void hp_je_op_sized_free(void *p, size_t size);

#define TSD(t, n) HP_TSD(t, n)
#define BIN(t, ind) (TSD(t, tcache).bins[ind])

/* fastpath_success_finish: the object taken, the bytes counted. */
static inline void alloc_done(__seg_fs tsd_t *t, __seg_fs cache_bin_t *bin,
    void **head, uint64_t after) {
	bin->stack_head = head + 1;
	TSD(t, thread_allocated) = after;
	if (config_stats)
		bin->tstats.nrequests++;
}

/* The bin's head at its low-water mark: cache_bin_alloc's case, out of
 * line so that the common case's code is not merged with it. */
static __attribute__((noinline)) void *alloc_low_water(size_t size,
    uintptr_t ind, uint64_t after) {
	__seg_fs tsd_t *t = hp_je_tsd();
	cache_bin_t __seg_fs *bin = &BIN(t, ind);
	void **head = bin->stack_head;
	if (unlikely((uint16_t)(uintptr_t)head == bin->low_bits_empty))
		return malloc_default(size);
	bin->low_bits_low_water = (uint16_t)(uintptr_t)(head + 1);
	alloc_done(t, bin, head, after);
	return *head;
}

static inline __attribute__((always_inline)) void *fast_malloc(size_t size) {
	__seg_fs tsd_t *t = hp_je_tsd();
	if (unlikely(size > SC_LOOKUP_MAXCLASS))
		return malloc_default(size);
	uintptr_t ind = sz_size2index_lookup_impl(size);
	uint64_t after = TSD(t, thread_allocated) + sz_index2size_lookup_impl(ind);
	/* An event due, or the thread not nominal (threshold 0). */
	if (unlikely(after >= TSD(t, thread_allocated_next_event_fast)))
		return malloc_default(size);
	/* cache_bin_alloc_easy, then cache_bin_alloc: the object below the
	 * head is read first (the stack's memory is always there); the bin
	 * is empty when the head is at its low-water mark and that mark is
	 * at the empty position. Each way ends on its own, so that the
	 * common one computes the bin's place once. */
	cache_bin_t __seg_fs *bin = &BIN(t, ind);
	void **head = bin->stack_head;
	void *ret = *head;
	uint16_t low = (uint16_t)(uintptr_t)head;
	if (likely(low != bin->low_bits_low_water)) {
		alloc_done(t, bin, head, after);
		return ret;
	}
	return alloc_low_water(size, ind, after);
}

/* p, of class ind, onto the thread's own cache bin (jetsd.h). */
static inline __attribute__((always_inline)) bool dalloc_to_bin(
    __seg_fs tsd_t *t, void *p, uintptr_t ind) {
	cache_bin_t __seg_fs *bin = &BIN(t, ind);
	return HP_JE_DALLOC(t, bin, p, ind);
}

static inline __attribute__((always_inline)) void fast_free(void *p) {
	__seg_fs tsd_t *t = hp_je_tsd();
	uintptr_t ind;
	if (unlikely(!hp_je_slab_ind(t, p, &ind)) ||
	    unlikely(!dalloc_to_bin(t, p, ind)))
		free_default(p);
}

/* jemalloc's sdallocx fast path (free_fastpath with the size given): the
 * size class from the size, without the address map's lookup. A size
 * past the lookup table, or a page-aligned object (which may be a
 * profiling sample, whose class is not its request's; NULL is one), takes
 * fast_free instead; what the bin cannot take, sdallocx's general path. */
void sdallocx_default(void *ptr, size_t size, int flags);

static inline __attribute__((always_inline)) void fast_sized_free(void *p,
    size_t size) {
	__seg_fs tsd_t *t = hp_je_tsd();
	if (unlikely(size > SC_LOOKUP_MAXCLASS ||
	    ((uintptr_t)p & PAGE_MASK) == 0))
		fast_free(p);
	else if (unlikely(!dalloc_to_bin(t, p,
	    sz_size2index_lookup_impl(size))))
		sdallocx_default(p, size, 0);
}

/* Each pair has one caller: the exported malloc and free inline theirs
 * (one call each, so link-time optimisation inlines it); C++'s operators,
 * several callers, call the other out of line. no_icf: folded into one,
 * the two would have several callers and neither would be inlined. */
void *hp_je_fast_malloc(size_t size) {
	return fast_malloc(size);
}

void hp_je_fast_free(void *p) {
	fast_free(p);
}

__attribute__((no_icf)) void *hp_je_op_malloc(size_t size) {
	return fast_malloc(size);
}

__attribute__((no_icf)) void hp_je_op_free(void *p) {
	fast_free(p);
}

void hp_je_op_sized_free(void *p, size_t size) {
	fast_sized_free(p, size);
}
