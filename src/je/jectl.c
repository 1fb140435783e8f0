/*
 * What the library asks of jemalloc without going through mallctl: an
 * arena made at start, its decay, the counters the stats refresh reads,
 * and one option read. (Its background threads are started through
 * mallctl: started without ctl's lock, a fork at that moment left the
 * forking thread's count of locks held (base/lock.c) short in 11 and 15
 * of 40 runs of the debug build's test/progs/forkmt, against 1 and 2 of
 * 40 through mallctl, and 2 of 40 before any of this.)
 *
 * jemalloc's mallctl sets up its ctl on first use, and ctl keeps a
 * copy of every arena's statistics (bins, large classes, extent sizes:
 * about 40 KiB an arena) and of their sum, all written at each "epoch".
 * Under Debian's jemalloc alone a program's first mallctl("epoch") adds
 * 152 KiB of resident memory and each arena made through "arenas.create"
 * 40 KiB more at the next refresh (docs/benchmarks.md): a program that
 * never calls mallctl pays none of it, and neither should the library on
 * its behalf. A program that calls mallctl gets ctl as jemalloc sets it
 * up (ctl counts the arenas that exist when it starts, this one among
 * them).
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

HP_HIDDEN unsigned hp_je_arena_create_early(extent_hooks_t *hooks,
    long dirty_ms, unsigned limit);
HP_HIDDEN void hp_je_counts(unsigned ind, uint64_t *live, uint64_t *nmalloc,
    uint64_t *ndalloc, uint64_t *mapped, uint64_t *pactive, uint64_t *pdirty,
    uint64_t *resident);
HP_HIDDEN void hp_je_counts_release(void);
HP_HIDDEN unsigned hp_je_manual_base(void);
HP_HIDDEN unsigned hp_je_narenas(void);
HP_HIDDEN bool hp_je_opt_retain(void);

/* "opt.retain". */
bool hp_je_opt_retain(void) {
	return opt_retain;
}

/* An arena over hooks, its metadata on jemalloc's own pages, with the
 * given dirty decay and no muzzy state: what "experimental.arenas_create_ext"
 * and "arena.<i>.{dirty,muzzy}_decay_ms" do, for the library's start
 * (core/init.c), before anything can have called mallctl: later, ctl
 * would not know of it. jemalloc must be booted (a call of its own made
 * first). UINT_MAX when it cannot be made, or when limit or more indices
 * are taken. */
unsigned hp_je_arena_create_early(extent_hooks_t *hooks, long dirty_ms,
    unsigned limit) {
	tsdn_t *tsdn = tsdn_fetch();
	unsigned ind = narenas_total_get();
	if (ind >= limit || ind >= MALLOCX_ARENA_LIMIT)
		return UINT_MAX;
	arena_config_t config = {hooks, false};
	arena_t *arena = arena_init(tsdn, ind, &config);
	if (arena == NULL)
		return UINT_MAX;
	arena_decay_ms_set(tsdn, arena, extent_state_dirty, dirty_ms);
	arena_decay_ms_set(tsdn, arena, extent_state_muzzy, -1);
	return ind;
}

/* One arena's statistics, merged here as ctl merges them. Static (29 KiB
 * and more: not for a host's stack); the callers serialize (core/stats.c
 * holds its refresh lock). Its whole pages are given back after each
 * read of the figures (hp_je_counts_release): else the 40 KiB that every
 * refresh writes would stay in every process's memory, 4% of what the
 * library may add to a small program's (docs/limits.md). */
static struct {
	arena_stats_t astats;
	bin_stats_data_t bstats[SC_NBINS];
	arena_stats_large_t lstats[SC_NSIZES - SC_NBINS];
	pac_estats_t estats[SC_NPSIZES];
	hpa_shard_stats_t hpastats;
	sec_stats_t secstats;
} merged;

/* base/os.c's, declared here: this file includes no header of the
 * library's. */
HP_HIDDEN int hp_os_madvise(void *addr, size_t len, int advice);

/* merged's whole pages given back: they read as zero again, and are no
 * longer resident. Under the callers' serialization, as hp_je_counts. */
void hp_je_counts_release(void) {
	char *lo = (char *)&merged, *hi = lo + sizeof merged;
	char *a = (char *)PAGE_CEILING((uintptr_t)lo);
	char *b = (char *)PAGE_ADDR2BASE(hi);
	if (a < b)
		hp_os_madvise(a, (size_t)(b - a), MADV_DONTNEED);
}

static void add_arena(tsdn_t *tsdn, arena_t *arena, uint64_t *live,
    uint64_t *nmalloc, uint64_t *ndalloc, uint64_t *mapped, uint64_t *pactive,
    uint64_t *pdirty, uint64_t *resident) {
	unsigned nthreads = 0;
	const char *dss = NULL;
	ssize_t dirty_ms = 0, muzzy_ms = 0;
	size_t nactive = 0, ndirty = 0, nmuzzy = 0;
	memset(&merged, 0, sizeof merged);
	arena_stats_merge(tsdn, arena, &nthreads, &dss, &dirty_ms, &muzzy_ms,
	    &nactive, &ndirty, &nmuzzy, &merged.astats, merged.bstats,
	    merged.lstats, merged.estats, &merged.hpastats, &merged.secstats);
	for (unsigned i = 0; i < SC_NBINS; i++) {
		const bin_stats_t *b = &merged.bstats[i].stats_data;
		*live += b->curregs * sz_index2size(i);
		*nmalloc += b->nmalloc;
		*ndalloc += b->ndalloc;
	}
	*live += merged.astats.allocated_large;
	*nmalloc += merged.astats.nmalloc_large;
	*ndalloc += merged.astats.ndalloc_large;
	*mapped += merged.astats.mapped;
	*pactive += nactive;
	*pdirty += ndirty;
	*resident += merged.astats.resident;
}

/* The figures mallctl gives as "stats.arenas.<ind>.{small,large}.
 * allocated", ".{small,large}.{nmalloc,ndalloc}", ".mapped", ".pactive",
 * ".pdirty" and ".resident" (each pair summed), after an "epoch", added
 * to what the pointers hold. An index with no arena adds nothing.
 *
 * Only for an arena that cannot be destroyed meanwhile: an automatic one
 * (below hp_je_manual_base: jemalloc refuses to destroy those) or one of
 * the library's own. jemalloc destroys an arena (and unmaps its memory,
 * the arena_t in it) under ctl's lock, which only mallctl takes; an
 * arena the program made with "arenas.create" is read through mallctl. */
void hp_je_counts(unsigned ind, uint64_t *live, uint64_t *nmalloc,
    uint64_t *ndalloc, uint64_t *mapped, uint64_t *pactive, uint64_t *pdirty,
    uint64_t *resident) {
	tsdn_t *tsdn = tsdn_fetch();
	if (ind >= narenas_total_get())
		return;
	arena_t *arena = arena_get(tsdn, ind, false);
	if (arena != NULL)
		add_arena(tsdn, arena, live, nmalloc, ndalloc, mapped, pactive,
		    pdirty, resident);
}

/* The first index of the arenas made after jemalloc's start (its
 * automatic arenas and its oversize arena are below), and the number of
 * indices taken. */
unsigned hp_je_manual_base(void) {
	return manual_arena_base;
}

unsigned hp_je_narenas(void) {
	return narenas_total_get();
}
