/*
 * The je layer (src/je/README): the embedded jemalloc and what the
 * embedding redirects. jemalloc's public API as linked into this
 * library: the build (scripts/embed-jemalloc) copies Debian's
 * libjemalloc_pic.a with its public symbols renamed NAME -> hp_je_NAME,
 * so the embedded jemalloc exports nothing and is called directly,
 * without a PLT hop.
 */
#ifndef HP_JE_H
#define HP_JE_H

#include <stddef.h>
#include <jemalloc/jemalloc.h>   /* extent_hooks_t, MALLOCX_* */
#include "base/base.h"

#define HP_JE_API __attribute__((visibility("hidden")))

HP_JE_API void *hp_je_malloc(size_t);
HP_JE_API void *hp_je_calloc(size_t, size_t);
HP_JE_API void *hp_je_realloc(void *, size_t);
HP_JE_API void hp_je_free(void *);
HP_JE_API void *hp_je_memalign(size_t, size_t);
HP_JE_API int hp_je_posix_memalign(void **, size_t, size_t);
HP_JE_API size_t hp_je_malloc_usable_size(const void *);
HP_JE_API void *hp_je_mallocx(size_t, int);
HP_JE_API void *hp_je_rallocx(void *, size_t, int);
HP_JE_API size_t hp_je_sallocx(const void *, int);
HP_JE_API void hp_je_dallocx(void *, int);
HP_JE_API void hp_je_sdallocx(void *, size_t, int);
/* jefast.c: jemalloc's own malloc and free, their fast paths inlined
 * into the exported malloc and free at link time (these two: one caller
 * each); the op pair, the same out of line, for C++'s operators. */
HP_JE_API void *hp_je_fast_malloc(size_t size);
HP_JE_API void hp_je_fast_free(void *p);
HP_JE_API void *hp_je_op_malloc(size_t size);
HP_JE_API void hp_je_op_free(void *p);
/* sdallocx(p, size, 0) on its fast path, else free's (a size past 4 KiB,
 * a page-aligned p) or sdallocx's general path. */
HP_JE_API void hp_je_op_sized_free(void *p, size_t size);
/* jetc.c: mallocx and dallocx through an explicit cache, on jemalloc's
 * fast paths: false, and nothing done, where those would leave the call
 * to the general path (then mallocx or dallocx itself). tc: the cache of
 * an id, from hp_je_tc_of. */
HP_JE_API void *hp_je_tc_of(unsigned tc);      /* NULL: none there */
HP_JE_API bool hp_je_tc_try_malloc(void *tc, size_t size, size_t max,
    void **out);
HP_JE_API bool hp_je_tc_try_free(void *tc, void *p);
HP_JE_API size_t hp_je_xallocx(void *, size_t, size_t, int);
HP_JE_API size_t hp_je_nallocx(size_t, int);
HP_JE_API int hp_je_mallctlnametomib(const char *, size_t *, size_t *);
HP_JE_API int hp_je_mallctlbymib(const size_t *, size_t, void *, size_t *,
    void *, size_t);
HP_JE_API int hp_je_mallctl(const char *, void *, size_t *, void *, size_t);
HP_JE_API void hp_je_malloc_stats_print(void (*)(void *, const char *),
    void *, const char *);
/* Its calls of exp, log and round, served by jemath.c (no libm). */
HP_JE_API double hp_je_exp(double);
HP_JE_API double hp_je_log(double);
HP_JE_API double hp_je_round(double);
/* Its zeroing of memory it hands out again on its default hooks (calloc,
 * its threads' cache bins), served by jezero.c. */
HP_JE_API void hp_je_zero(void *, size_t);
/* Read by jemalloc at start-up after MALLOC_CONF, so it has the last word. */
extern HP_JE_API const char *hp_je_malloc_conf_2_conf_harder;

#pragma GCC visibility push(hidden)

/* jeconf.c: jemalloc's options. The string jemalloc reads last (after the
 * user's MALLOC_CONF), with one line for each user setting it overrides. */
const char *hp_jeconf(const hp_conf_t *c);
/* MALLOC_CONF said background_thread:false: jemalloc's threads stay off;
 * background_thread:true: jemalloc starts them at its start, and in a
 * fork child they start with the library's threads, not later
 * (huge/huge.c). */
bool hp_jeconf_background_off(void);
bool hp_jeconf_background_on(void);


/* arena.c: the library's own jemalloc arenas over extent hooks. */
#define HP_NO_ARENA (~0u)
/* jemalloc 5.3's arena indices (MALLOCX_ARENA_LIMIT: MALLOCX_ARENA keeps 12
 * bits): its automatic arenas take the lowest narenas of them, its
 * oversize arena the next, arenas.create the rest in order. The library
 * makes HP_OWN_ARENAS of them: the huge class's and the sample zone's. */
#define HP_ARENA_INDICES 4095u
#define HP_OWN_ARENAS 2u
/* An arena's decay: dirty_ms, no muzzy state; 0 or jemalloc's error. */
int hp_arena_decay(unsigned ind, long dirty_ms);
/* A new arena over these hooks, its metadata off them; HP_NO_ARENA if
 * jemalloc refuses, with the reason in *why. */
unsigned hp_arena_create(extent_hooks_t *hooks, const char **why);
/* The same with its decay set, made without mallctl (jectl.c): only at
 * the library's start, before anything can have called mallctl. */
unsigned hp_arena_create_early(extent_hooks_t *hooks, long dirty_ms,
    const char **why);
/* Whether arena ind is one of those made here (never destroyed). */
bool hp_arena_is_own(unsigned ind);
/* jectl.c: jemalloc's own calls, for what needs no mallctl. */
HP_JE_API unsigned hp_je_arena_create_early(extent_hooks_t *hooks,
    long dirty_ms, unsigned limit);
/* An arena's figures as mallctl's "stats.arenas.<i>" gives them after an
 * "epoch", added to *live (small and large allocated), *nmalloc, *ndalloc
 * (both sizes), *mapped, *pactive, *pdirty and *resident: only for an
 * automatic arena (below hp_je_manual_base) or one of the library's own
 * (hp_arena_is_own), which cannot be destroyed meanwhile. The caller
 * serializes (core/stats.c's refresh lock). */
HP_JE_API void hp_je_counts(unsigned ind, uint64_t *live, uint64_t *nmalloc,
    uint64_t *ndalloc, uint64_t *mapped, uint64_t *pactive,
    uint64_t *pdirty, uint64_t *resident);
/* The pages of hp_je_counts' buffer given back (after each read of the
 * figures: core/stats.c), under the same serialization. */
HP_JE_API void hp_je_counts_release(void);
/* jeexit.c: whether a thread's exit purges every dirty page of an arena
 * no thread uses any more, as jemalloc does without background threads
 * (true), or decays it as with them (false, until jemalloc's threads
 * start: huge/huge.c). */
HP_JE_API void hp_je_exit_purge(bool purge);
/* The first index of the arenas made after jemalloc's start, and the
 * number of indices taken. */
HP_JE_API unsigned hp_je_manual_base(void);
HP_JE_API unsigned hp_je_narenas(void);
/* mallctl "opt.retain". */
HP_JE_API bool hp_je_opt_retain(void);

/* edata.c: jemalloc's extent descriptors, on pages given back when free.
 * The build routes jemalloc's edata_cache_get/put here. */
extern hp_edata_counts_t hp_edata_counts;
void *hp_edata_get(void *tsdn, void *cache);
void hp_edata_put(void *tsdn, void *cache, void *edata);
void hp_edata_trim(void);
void hp_edata_prefork(void);
void hp_edata_postfork_parent(void);
void hp_edata_postfork_child(void);

/* jemap.c: jemalloc's own mappings, and the kernel's view of them. */
/* Whether [start, end) lies in jemalloc's own mappings and in none of
 * its bases: the small class's data. */
bool hp_jemap_data(uintptr_t start, uintptr_t end);
/* For assertions: whether address a can be the small class's data (its
 * data, or the set of ranges overflowed and it is not known). */
bool hp_jemap_may_hold(uintptr_t a);
bool hp_jemap_resident(uint64_t *resident, uint64_t *metadata,
    uint64_t *huge, uint64_t (*ranges)[2], unsigned max, unsigned *nranges);
void hp_jemap_prefork(void);
void hp_jemap_postfork_parent(void);
void hp_jemap_postfork_child(void);
/* collapse.c: the small class's ranges collapsed onto huge pages (at
 * most 2 MiB each, aligned): true if the kernel collapsed it. jemalloc's
 * purges there split it first. */
bool hp_collapse(uintptr_t range);
/* Whether any range is known collapsed; whether [start, end) lies in one
 * range collapsed (and not split since), under the lock the trylock
 * takes, if free, and unlock lets go (je/jefill.c). */
bool hp_collapsed_any(void);
bool hp_collapsed_trylock(void);
void hp_collapsed_unlock(void);
bool hp_collapsed_holds(uintptr_t start, uintptr_t end);
void hp_collapse_prefork(void);
void hp_collapse_postfork_parent(void);
void hp_collapse_postfork_child(void);
/* jefill.c: the huge arena's caches (promoted sites') are filled first
 * from the holes in the small class's collapsed ranges. */
HP_JE_API void hp_je_fill_holes_for(unsigned ind);
/* jefork.c: what jemalloc's own fork handlers leave held, made anew. */
void hp_jefork_child(void);
/* A lock held across mallctl, held across a fork too: first is called
 * first in the prepare handler, last last in the parent's. Once, at
 * start-up (it boots jemalloc if nothing has yet). */
void hp_je_fork_hooks(void (*first)(void), void (*last)(void));
/* Whether jemalloc has registered its fork handlers (it does as it
 * boots): the library's own must be registered before (jefork.c). */
bool hp_je_atfork_registered(void);


#pragma GCC visibility pop

#endif
