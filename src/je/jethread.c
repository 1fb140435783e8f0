/*
 * The library's own thread (the maintenance thread, core/maint.c) in
 * jemalloc: bound to arena 0 before jemalloc first sees it. Left to
 * itself, jemalloc binds a new thread to the least loaded automatic
 * arena, and makes a new one while any index is free and every arena
 * made has a thread: in a program with a few threads the maintenance
 * thread, which allocates almost nothing, then holds an arena of its own
 * (its base, bins and extent sets, about 90 KiB written, and 40 KiB more
 * of statistics at each stats refresh). Bound first, the thread shares
 * arena 0 with the program's first thread; what jemalloc does at the
 * thread's exit (each binding counted down) is unchanged.
 *
 * Built against jemalloc's internal headers, as jetc.c is (the binding is
 * what jemalloc's own arena_bind does, which it does not export).
 *
 * This file includes jemalloc's headers only, none of the library's.
 */
#include <jemalloc/internal/jemalloc_preamble.h>
#include <jemalloc/internal/jemalloc_internal_includes.h>

#define HP_HIDDEN __attribute__((visibility("hidden")))

HP_HIDDEN bool hp_je_thread_bind_arena0(void);

/* true when the calling thread is now bound to arena 0 for both its
 * objects and jemalloc's metadata; false, and nothing done, when jemalloc
 * had bound it already (then it keeps that arena), is not booted, or
 * binds threads to per-CPU arenas. */
bool hp_je_thread_bind_arena0(void) {
	/* Per-CPU arenas (MALLOC_CONF percpu_arena): the thread takes its
	 * CPU's, which exists whoever runs there, and jemalloc moves it (and
	 * its cache, which a binding made here would not yet have) whenever
	 * it runs on another CPU. */
	if (!tsd_booted_get() || (have_percpu_arena &&
	    PERCPU_ARENA_ENABLED(opt_percpu_arena)))
		return false;
	/* The minimal state: no thread cache and no arena chosen yet. The
	 * thread's first full fetch (its first malloc or mallctl) makes the
	 * cache, over the arena bound here. */
	tsd_t *tsd = tsd_fetch_min();
	if (tsd_arena_get(tsd) != NULL || tsd_iarena_get(tsd) != NULL)
		return false;
	arena_t *a0 = arena_get(tsd_tsdn(tsd), 0, false);
	if (a0 == NULL)
		return false;
	arena_nthreads_inc(a0, false);
	arena_nthreads_inc(a0, true);
	tsd_arena_set(tsd, a0);
	tsd_iarena_set(tsd, a0);
	/* The bin shard of each size class, as arena_bind picks it. */
	unsigned shard = atomic_fetch_add_u(&a0->binshard_next, 1,
	    ATOMIC_RELAXED);
	tsd_binshards_t *bins = tsd_binshardsp_get(tsd);
	for (unsigned i = 0; i < SC_NBINS; i++)
		bins->binshard[i] = (uint8_t)(shard % bin_infos[i].n_shards);
	return true;
}
