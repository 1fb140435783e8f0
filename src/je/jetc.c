/*
 * jemalloc's own fast paths, with an explicit thread cache: what its
 * malloc and free do for the thread's automatic cache (a size class
 * looked up, the allocation events counted, one object popped from or
 * pushed to a cache bin), done for a cache made with "tcache.create".
 * jemalloc's mallocx and dallocx take a general path for such a cache
 * (245 instructions a pair, where malloc and free take 80.54 with the
 * loop that counts them: docs/benchmarks.md); a promoted site's objects,
 * which go to the huge arena through a cache of their own per thread
 * (huge/huge.c), take these.
 *
 * Built against the internal headers of the jemalloc the library embeds:
 * Debian's source package of the same version, configured with Debian's
 * options (scripts/jemalloc-headers), so every structure these inline
 * functions read has the layout of the archive's; the sizes of the
 * address map and of the thread's state are checked against the
 * archive's objects (hp_je_layout.h), so a mismatch stops the build.
 * Whatever the fast path does not cover (a size past the lookup table,
 * an event due, the thread not yet nominal, a bin empty or full, an
 * object not on a slab) is left to jemalloc's own mallocx and dallocx:
 * each function here says whether it did the work, and does nothing when
 * it did not.
 *
 * This file includes jemalloc's headers, and of the library's only its
 * two that name nothing jemalloc names (je/jetsd.h, base/nocache.h).
 */
#include <jemalloc/internal/jemalloc_preamble.h>
#include <jemalloc/internal/jemalloc_internal_includes.h>
#include <jemalloc/internal/emap.h>
#include <jemalloc/internal/sz.h>
#include <jemalloc/internal/thread_event.h>
#include "je/jetsd.h"
#include "base/nocache.h"

_Static_assert(sizeof(emap_t) == HP_JE_EMAP_SIZE, "jemalloc's address map "
    "in these headers is not the embedded archive's (LG_VADDR?)");

#define HP_HIDDEN __attribute__((visibility("hidden")))

HP_HIDDEN void *hp_je_tc_of(unsigned tc);
HP_HIDDEN bool hp_je_tc_try_malloc(void *tc, size_t size, size_t max,
    void **out);
HP_HIDDEN bool hp_je_tc_try_free(void *tc, void *p);

/* An all-zero cache (base/nocache.h's hp_no_cache) is empty and full to
 * the two paths below: each bin's head and marks read 0, and neither
 * reads through the head before comparing its low bits with the marks. */
_Static_assert(sizeof(tcache_t) <= HP_NO_CACHE_SIZE, "hp_no_cache is "
    "smaller than a jemalloc thread cache");
_Static_assert(HP_CACHE_MAX == SC_LOOKUP_MAXCLASS, "HP_CACHE_MAX is not "
    "the last size of jemalloc's lookup table");

/* The cache made as explicit cache tc, or NULL while jemalloc has none
 * there (destroyed, or flushed by tcache.flush and to be made again). */
void *hp_je_tc_of(unsigned tc) {
	tcache_t *t = tcaches[tc].tcache;
	return (uintptr_t)t > (uintptr_t)TCACHES_ELM_NEED_REINIT ? t : NULL;
}

/* mallocx(size, MALLOCX_ARENA(a) | MALLOCX_TCACHE(id)), tc being the
 * cache of that id (hp_je_tc_of), when tc's bin of size's class holds an
 * object and it can be taken as jemalloc's malloc fast path takes one
 * from the thread's own cache: into *out, and true; false, and nothing
 * done, when not: then mallocx itself. tc is not NULL (hp_no_cache
 * for none); a request over max (at most HP_CACHE_MAX) is left alone.
 * The bin's objects came from arena a, or for the huge arena's caches
 * from the holes jefill.c found in the small class (jemalloc frees each
 * to its own arena). */
inline __attribute__((always_inline)) bool hp_je_tc_try_malloc(void *tc,
    size_t size, size_t max, void **out) {
	__seg_fs tsd_t *t = hp_je_tsd();
	if (unlikely(size > max))
		return false;
	assert(max <= SC_LOOKUP_MAXCLASS);
	uintptr_t ind = sz_size2index_lookup_impl(size);
	uint64_t after = HP_TSD(t, thread_allocated) +
	    sz_index2size_lookup_impl(ind);
	/* An event due, or the thread not nominal (threshold 0). */
	if (unlikely(after >= HP_TSD(t, thread_allocated_next_event_fast)))
		return false;
	cache_bin_t *bin = &((tcache_t *)tc)->bins[ind];
	void **head = bin->stack_head;
	uint16_t low = (uint16_t)(uintptr_t)head;
	if (unlikely(low == bin->low_bits_low_water)) {
		if (unlikely(low == bin->low_bits_empty))
			return false;
		bin->low_bits_low_water = (uint16_t)(uintptr_t)(head + 1);
	}
	*out = *head;
	bin->stack_head = head + 1;
	HP_TSD(t, thread_allocated) = after;
	if (config_stats)
		bin->tstats.nrequests++;
	return true;
}

/* dallocx(p, MALLOCX_TCACHE(id)), tc being that id's cache, when p is a
 * slab's object and tc's bin of its class has room, done as jemalloc's
 * free fast path does it into the thread's own cache; false, and
 * nothing done, when not. */
inline __attribute__((always_inline)) bool hp_je_tc_try_free(void *tc,
    void *p) {
	__seg_fs tsd_t *t = hp_je_tsd();
	uintptr_t ind;
	if (unlikely(!hp_je_slab_ind(t, p, &ind)))
		return false;
	cache_bin_t *bin = &((tcache_t *)tc)->bins[ind];
	return HP_JE_DALLOC(t, bin, p, ind);
}
