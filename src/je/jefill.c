/*
 * Where a promoted site's cache is filled: the holes its learning left.
 *
 * While a site is learned, its objects go to the small class, and
 * catch-up collapses the 2 MiB ranges they fill onto huge pages
 * (lifetime/catchup.c, je/collapse.c). Once the program frees some of
 * them (Redis overwriting a key frees the old value), their slots are
 * holes in slabs on huge pages that only the small class's own objects
 * of that size could take; the site's new objects, promoted, go to the
 * huge arena, and the holes stay: 16.7 MB of the small class's 38.4 MB
 * in use held 21.7 MB live in Redis after 2M SETs over 2M random keys
 * (with keys that are not overwritten, 43.7 MB in use held 43.9 MB).
 *
 * jemalloc fills a thread cache's bin from one arena's bin: its current
 * slab, then its nonfull slabs, oldest first, then a new slab. tcache.c's
 * one call of that fill comes here (scripts/embed-jemalloc). For the
 * huge arena's caches (the promoted sites'), the bin of the thread's own
 * automatic arena is looked at first, under its lock: its nonfull slabs
 * that lie wholly in a collapsed range (looked for among WALK of them at
 * most, from the oldest: the oldest need not be such) give the cache
 * their free slots, taken as jemalloc's fill takes them. Without such a
 * slab, the huge arena fills the cache as before, and a walk that found
 * none makes the next few fills of that bin skip it (BACKOFF_MAX).
 *
 * jemalloc's caches hold objects of any arena (a flush sends each to its
 * own), and so does the huge arena's: its objects are in the huge
 * class's region or in the small class's collapsed ranges, and free
 * finds each class by address (core/route.c).
 *
 * Built against jemalloc's internal headers, as jetc.c is. Includes
 * jemalloc's headers only, none of the library's.
 */
#include <jemalloc/internal/jemalloc_preamble.h>
#include <jemalloc/internal/jemalloc_internal_includes.h>
#include <hp_je_layout.h>

_Static_assert(sizeof(tsd_t) == HP_JE_TSD_SIZE, "jemalloc's thread state in "
    "these headers is not the embedded archive's");

#define HP_HIDDEN __attribute__((visibility("hidden")))

HP_HIDDEN void hp_je_fill_small(tsdn_t *tsdn, arena_t *arena,
    cache_bin_t *cache_bin, cache_bin_info_t *cache_bin_info, szind_t binind,
    unsigned nfill);
HP_HIDDEN void hp_je_fill_holes_for(unsigned ind);
/* je/collapse.c: whether any range is known collapsed, its lock (if it
 * is free), and whether [start, end) lies in one collapsed range (the
 * lock held). */
HP_HIDDEN bool hp_collapsed_any(void);
HP_HIDDEN bool hp_collapsed_trylock(void);
HP_HIDDEN void hp_collapsed_unlock(void);
HP_HIDDEN bool hp_collapsed_holds(uintptr_t start, uintptr_t end);

/* The huge arena's index, set once it is made; ~0u before. */
static unsigned holes_for = ~0u;

void hp_je_fill_holes_for(unsigned ind) {
	__atomic_store_n(&holes_for, ind, __ATOMIC_RELEASE);
}

/* Fills the empty cache bin with up to nfill free slots of small's bin
 * from its nonfull slabs that lie wholly in a collapsed range: the heap's
 * root, then its subtrees depth first, WALK slabs looked at most (those
 * past a stack of DEPTH pending are left out), PICK slabs taken at most,
 * until their free slots make nfill. Taken as jemalloc's own fill takes
 * them (arena.c: the slab's bitmap, its free count, the bin's nonfull
 * heap and statistics). The collapse lock is only tried inside the bin's
 * (it is held across madvise calls): taken, it is a leaf; busy, nothing
 * is walked. The count filled; *walked: slabs looked at. small is an
 * automatic arena: a full slab of one is on no list, and the program
 * cannot reset or destroy it. */
#define WALK  256
#define DEPTH 64
#define PICK  32
static unsigned fill_from_holes(tsdn_t *tsdn, arena_t *small,
    cache_bin_t *cache_bin, cache_bin_info_t *info, szind_t binind,
    unsigned nfill, unsigned *walked) {
	const bin_info_t *bin_info = &bin_infos[binind];
	bin_t *bin = arena_bin_choose(tsdn, small, binind, NULL);
	edata_t *todo[DEPTH], *pick[PICK];
	unsigned n = 0, m = 0, npick = 0, free_slots = 0;
	malloc_mutex_lock(tsdn, &bin->lock);
	edata_t *root = edata_heap_first(&bin->slabs_nonfull);
	if (root != NULL && hp_collapsed_trylock()) {
		todo[n++] = root;
		while (n > 0 && m < WALK && free_slots < nfill && npick < PICK) {
			edata_t *s = todo[--n];
			uintptr_t a = (uintptr_t)edata_addr_get(s);
			m++;
			if (hp_collapsed_holds(a, a + edata_size_get(s))) {
				pick[npick++] = s;
				free_slots += edata_nfree_get(s);
			}
			phn_link_t *l = &s->heap_link.link;
			if (l->next != NULL && s != root && n < DEPTH)
				todo[n++] = l->next;
			if (l->lchild != NULL && n < DEPTH)
				todo[n++] = l->lchild;
		}
		hp_collapsed_unlock();
	}
	*walked = m;
	unsigned filled = 0;
	if (npick > 0) {
		CACHE_BIN_PTR_ARRAY_DECLARE(ptrs, nfill);
		cache_bin_init_ptr_array_for_fill(cache_bin, info, &ptrs, nfill);
		for (unsigned j = 0; j < npick && filled < nfill; j++) {
			edata_t *s = pick[j];
			unsigned nfree = edata_nfree_get(s);
			unsigned cnt = nfree < nfill - filled ? nfree :
			    nfill - filled;
			assert(cnt > 0 && s != bin->slabcur);
			edata_heap_remove(&bin->slabs_nonfull, s);
			slab_data_t *d = edata_slab_data_get(s);
			uintptr_t base = (uintptr_t)edata_addr_get(s);
			for (unsigned i = 0; i < cnt; i++)
				ptrs.ptr[filled + i] = (void *)(base +
				    bin_info->reg_size * bitmap_sfu(d->bitmap,
				    &bin_info->bitmap_info));
			edata_nfree_sub(s, cnt);
			filled += cnt;
			/* A full slab of an automatic arena is on no list. */
			if (edata_nfree_get(s) > 0)
				edata_heap_insert(&bin->slabs_nonfull, s);
			else if (config_stats)
				bin->stats.nonfull_slabs--;
		}
		if (config_stats) {
			bin->stats.nmalloc += filled;
			bin->stats.nrequests += cache_bin->tstats.nrequests;
			bin->stats.curregs += filled;
			bin->stats.nfills++;
			cache_bin->tstats.nrequests = 0;
		}
		cache_bin_finish_fill(cache_bin, info, &ptrs, filled);
	}
	malloc_mutex_unlock(tsdn, &bin->lock);
	assert(filled <= nfill && (filled > 0) == (npick > 0));
	return filled;
}

/* After a walk of nonfull slabs found none in a collapsed range, this
 * thread's fills of that bin skip the walk 1, 3, 7, ... 63 times, doubling
 * while walks keep failing. (A bin with no nonfull slab costs a lock and a
 * look, and a busy collapse lock a try: no skip.) */
#define BACKOFF_MAX 6
static __thread __attribute__((tls_model("initial-exec"))) uint8_t
    backoff[SC_NBINS], skip[SC_NBINS];

static bool fill_from_holes_backoff(tsdn_t *tsdn, arena_t *small,
    cache_bin_t *cache_bin, cache_bin_info_t *info, szind_t binind,
    unsigned nfill) {
	if (skip[binind] > 0) {
		skip[binind]--;
		return false;
	}
	unsigned walked = 0;
	if (fill_from_holes(tsdn, small, cache_bin, info, binind, nfill,
	    &walked) > 0) {
		backoff[binind] = 0;
		return true;
	}
	if (walked == 0)       /* no nonfull slab, or the collapse lock busy */
		return false;
	if (backoff[binind] < BACKOFF_MAX)
		backoff[binind]++;
	skip[binind] = (uint8_t)((1u << backoff[binind]) - 1);
	return false;
}

void hp_je_fill_small(tsdn_t *tsdn, arena_t *arena, cache_bin_t *cache_bin,
    cache_bin_info_t *cache_bin_info, szind_t binind, unsigned nfill) {
	if (arena_ind_get(arena) == __atomic_load_n(&holes_for,
	    __ATOMIC_ACQUIRE) && !tsdn_null(tsdn) && hp_collapsed_any()) {
		arena_t *small = tsd_arena_get(tsdn_tsd(tsdn));
		if (small != NULL && small != arena && arena_is_auto(small) &&
		    fill_from_holes_backoff(tsdn, small, cache_bin,
		    cache_bin_info, binind, nfill)) {
			arena_decay_tick(tsdn, small);
			return;
		}
	}
	arena_cache_bin_fill_small(tsdn, arena, cache_bin, cache_bin_info,
	    binind, nfill);
}
