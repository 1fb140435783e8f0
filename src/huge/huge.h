/* The huge layer (src/huge/README): the 2 MiB-aligned reservation, its
 * pages' states and counters, and the jemalloc arena over it. */
#ifndef HP_HUGE_H
#define HP_HUGE_H

#include "base/base.h"
#include "pages/pages.h"
#include "je/je.h"

#pragma GCC visibility push(hidden)

/* region.c: the huge-class reservation and its per-2 MiB page state. The
 * reservation also holds the sample zone (sample.c) after the region:
 * together they are the owned range, which free() tests first. */
extern hp_region_t hp_region;
extern uintptr_t hp_owned_base;         /* UINTPTR_MAX until reserved */
extern size_t hp_owned_size;
/* free()'s one compare. The reservation is made first thing at start-up,
 * top-down below what the loader mapped, so the program's heap, mapped
 * after it, lies below it: only the rare object above it (say, in a gap
 * between libraries) takes the exact test, hp_owned(). */
static inline bool hp_maybe_owned(const void *p) {
	return (uintptr_t)p >= hp_owned_base;
}
static inline bool hp_owned(const void *p) {
	return (uintptr_t)p - hp_owned_base < hp_owned_size;
}
bool hp_region_init(size_t want, bool with_zone, unsigned ll_share,
    uintptr_t *ll, size_t *ll_size, uintptr_t *zone, size_t *zone_size);
bool hp_region_owns(const void *addr, size_t len);
void *hp_region_alloc(size_t size, size_t align, bool commit);
void hp_region_release(void *addr, size_t len);
bool hp_region_reuse(void *addr, size_t len);
void hp_region_scan(hp_arena_stats_t *a);
/* A page's state as resident.c needs it. */
typedef struct {
	uint64_t held[HP_SUBWORDS];   /* 4 KiB parts jemalloc holds */
	uint16_t nheld;
	bool may_be_huge;             /* THP not split, or hugetlb */
} hp_page_view_t;
uintptr_t hp_region_mapped_end(void);
/* Views of the pages first + i, i each bit of pages (at most 64). */
void hp_region_view(uintptr_t first, uint64_t pages, hp_page_view_t *v);
/* resident.c: the huge class's resident parts as the kernel holds them,
 * into a's resident, in_use, stranded, free_resident and resident_huge
 * fields; false (a untouched) if the kernel could not be asked. */
bool hp_resident_scan(hp_arena_stats_t *a);
uint64_t hp_region_timing(bool on);
size_t hp_region_enforce(size_t limit);
void hp_region_prefork(void);
/* Fork copies these 2 MiB hugetlb pages outside the region too, when the
 * pool could not back both sides (the long-lived class's pool arena). */
void hp_region_fork_also(uintptr_t addr, size_t len);
void hp_region_postfork_parent(void);
void hp_region_postfork_child(void);
static inline bool hp_region_contains(const void *p) {
	return (uintptr_t)p - hp_region.base < hp_region.size;
}
/* The same for a pointer of the owned range (hp_maybe_owned): the region
 * is its first part, so one compare. */
extern uintptr_t hp_region_end;      /* 0 until reserved */
static inline bool hp_region_holds_owned(const void *p) {
	hp_assert(hp_maybe_owned(p));
	return (uintptr_t)p < hp_region_end;
}

/* huge.c: the huge class, a jemalloc arena over the reservation. */
bool hp_huge_init(const hp_conf_t *c);
void *hp_huge_alloc(size_t size, size_t align, bool zero);
void *hp_huge_realloc(void *p, size_t size);
void hp_huge_atfork_child(void);
/* start_lock held across a fork (the child makes it anew): taken first
 * in jemalloc's prepare handler (je/jefork.c), as a start holds it
 * across mallctl. */
void hp_huge_prefork(void);
void hp_huge_postfork_parent(void);
/* The huge arena's index; HP_NO_ARENA until the first huge allocation. */
unsigned hp_huge_arena(void);
/* A small object of a promoted site, on huge pages (a per-thread tcache
 * of the huge arena, filled first from the holes in the small class's
 * collapsed ranges: je/jefill.c); NULL if the huge class cannot take it. */
void *hp_huge_small(size_t size, bool zero);
/* Whether p is where hp_huge_small's objects are: the huge class's
 * region, or the small class's data. */
bool hp_huge_small_home(const void *p);
/* The same from this thread's cache on jemalloc's fast path (into
 * *out), and hp_huge_free's into it: false, and nothing done, when the
 * general path must (hp_huge_small, hp_huge_free). hp_huge_free_try
 * takes an object of the region only: the sample zone's objects are a
 * jemalloc arena's too. */
bool hp_huge_small_try(size_t size, void **out);
bool hp_huge_free_try(void *p);
/* Start-up: a long-lived class serves promoted sites; the huge class's
 * small objects (what that class could not take) then come from the
 * general path, and hp_huge_small_try always says false. */
void hp_huge_promoted_elsewhere(void);
/* Whether explicit cache id is one of the library's. */
bool hp_huge_cache_is_ours(unsigned id);
/* Called once when the threads start (the huge class's first allocation,
 * or a program's second thread: core/route.c): start-up (core/init.c)
 * sets it to start the maintenance thread. */
extern void (*hp_huge_on_threads)(void);
/* Starts the huge class's threads, for a class that uses huge pages
 * without the huge arena (the long-lived class). */
void hp_huge_start_threads(void);
/* Starts jemalloc's background threads, if they are not on and
 * MALLOC_CONF does not keep them off: the maintenance thread calls it
 * after its HP_BG_AFTER_PASSES-th pass, 10 s at the default maintain_ms
 * (huge.c says why not sooner). */
#define HP_BG_AFTER_PASSES 10
void hp_huge_start_background(void);
/* The program turned them on or off itself (mallctl "background_thread",
 * api/jeapi.c): the library leaves them so. */
void hp_huge_background_chosen(bool on);
/* route.c's slot path, on a thread's first slow allocation: the threads
 * start when a second thread allocates (huge.c says why). */
extern HP_TLS bool hp_huge_thread_seen;
__attribute__((noinline, cold)) void hp_huge_thread_first(void);
/* Frees an object of the region (free()'s owned-range path). */
void hp_huge_free(void *p);

#pragma GCC visibility pop

#endif
