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
 * This file includes jemalloc's headers only, none of the library's:
 * the two sets name things alike.
 */
#include <jemalloc/internal/jemalloc_preamble.h>
#include <jemalloc/internal/jemalloc_internal_includes.h>
#include <jemalloc/internal/emap.h>
#include <jemalloc/internal/sz.h>
#include <jemalloc/internal/thread_event.h>
#include <hp_je_layout.h>

_Static_assert(sizeof(emap_t) == HP_JE_EMAP_SIZE, "jemalloc's address map "
    "in these headers is not the embedded archive's (LG_VADDR?)");
_Static_assert(sizeof(tsd_t) == HP_JE_TSD_SIZE, "jemalloc's thread state in "
    "these headers is not the embedded archive's");

#define HP_HIDDEN __attribute__((visibility("hidden")))

HP_HIDDEN void *hp_je_tc_try_malloc(size_t size, unsigned tc);
HP_HIDDEN bool hp_je_tc_try_free(void *p, unsigned tc);

/* The cache made as explicit cache tc, or NULL while jemalloc has none
 * there (destroyed, or flushed by tcache.flush and to be made again). */
static inline tcache_t *explicit_cache(unsigned tc) {
	tcache_t *t = tcaches[tc].tcache;
	return (uintptr_t)t > (uintptr_t)TCACHES_ELM_NEED_REINIT ? t : NULL;
}

/* mallocx(size, MALLOCX_ARENA(a) | MALLOCX_TCACHE(tc)) when cache tc's
 * bin of size's class holds an object, and it can be taken as jemalloc's
 * malloc fast path takes one from the thread's own cache; NULL, and
 * nothing done, when not: then mallocx itself. The bin's objects came
 * from arena a, or for the huge arena's caches from the holes jefill.c
 * found in the small class (jemalloc frees each to its own arena). */
void *hp_je_tc_try_malloc(size_t size, unsigned tc) {
	tsd_t *tsd = tsd_get(false);
	if (unlikely(size > SC_LOOKUP_MAXCLASS || tsd == NULL))
		return NULL;
	szind_t ind;
	size_t usize;
	sz_size2index_usize_fastpath(size, &ind, &usize);
	uint64_t allocated, threshold;
	te_malloc_fastpath_ctx(tsd, &allocated, &threshold);
	uint64_t after = allocated + usize;
	tcache_t *tcache = explicit_cache(tc);
	/* An event due, or the thread not nominal (threshold 0). */
	if (unlikely(after >= threshold || tcache == NULL))
		return NULL;
	cache_bin_t *bin = &tcache->bins[ind];
	bool ok;
	void *ret = cache_bin_alloc_easy(bin, &ok);
	if (!ok)
		ret = cache_bin_alloc(bin, &ok);
	if (unlikely(!ok))
		return NULL;
	thread_allocated_set(tsd, after);
	if (config_stats)
		bin->tstats.nrequests++;
	return ret;
}

/* dallocx(p, MALLOCX_TCACHE(tc)) when p is a slab's object and cache
 * tc's bin of its class has room, done as jemalloc's free fast path does
 * it into the thread's own cache; false, and nothing done, when not. */
bool hp_je_tc_try_free(void *p, unsigned tc) {
	tsd_t *tsd = tsd_get(false);
	emap_alloc_ctx_t ctx;
	if (unlikely(tsd == NULL) || emap_alloc_ctx_try_lookup_fast(tsd,
	    &arena_emap_global, p, &ctx) || unlikely(!ctx.slab))
		return false;
	uint64_t deallocated, threshold;
	te_free_fastpath_ctx(tsd, &deallocated, &threshold);
	uint64_t after = deallocated + sz_index2size(ctx.szind);
	tcache_t *tcache = explicit_cache(tc);
	if (unlikely(after >= threshold || tcache == NULL) ||
	    !cache_bin_dalloc_easy(&tcache->bins[ctx.szind], p))
		return false;
	*tsd_thread_deallocatedp_get(tsd) = after;
	return true;
}
