/* The core layer (src/core/README): start-up, routing between the
 * classes, the counters and the maintenance thread. */
#ifndef HP_CORE_H
#define HP_CORE_H

#include "mmap/mmap.h"

#pragma GCC visibility push(hidden)

/* init.c: the start-up sequence. */
bool hp_init(void);

/* route.c: the slow paths of the entry points, and where an object of
 * the owned range goes back to. */
void *hp_route_alloc(size_t size, size_t align, bool zero);
void *hp_route_realloc(void *p, size_t size);
/* ra: where the caller's return address is kept (HP_CALLER_RA). */
void *hp_route_slot(size_t size, const uintptr_t *ra, bool zero);
void *hp_route_slot_malloc(size_t size, const uintptr_t *ra);  /* !zero */
/* In an entry point: where its return address is kept, just below its
 * canonical frame address (x86-64); the stack above it holds its callers'
 * frames, where a wrapper's caller is found (lifetime.h's hp_key_placed).
 * No frame pointer needed: on the slow path, one instruction. */
#define HP_CALLER_RA() ((const uintptr_t *)__builtin_dwarf_cfa() - 1)
void hp_route_free_owned(void *p);
/* The same, once the huge cache's step did not take p. */
void hp_route_free_rest(void *p);
/* malloc_usable_size of an object of any class. */
size_t hp_route_usable(const void *p);
/* free() of any object, for the library's own use (the exported free is
 * the program's, and may be interposed). */
static inline void hp_free(void *p) {
	if (hp_unlikely(hp_maybe_owned(p)))
		hp_route_free_owned(p);
	else
		hp_je_free(p);
}

/* stats.c: the counters and the shared stats page. */
void hp_stats_init(void);
void hp_stats_refresh(bool enforce);
/* The heap's resident bytes, both classes and the descriptors, as of the
 * last refresh (mallctl's "stats.resident"). */
uint64_t hp_stats_heap_resident(void);
uint64_t hp_stats_ll_resident(void);
void hp_stats_mmap_changed(void);   /* mmap.c advised a mapping */
void hp_stats_open(void);
void hp_stats_maint_pass(uint64_t region_lock_ns);
bool hp_stats_last(hp_stats_t *out);
/* When this process started (or forked), CLOCK_REALTIME. */
uint64_t hp_stats_started_ns(void);
void hp_stats_atfork_child(void);
void hp_stats_heap_totals(hp_heap_t *h);

/* maint.c: the maintenance thread, and malloc_trim's purge of every
 * class. */
void hp_maint_start(void);
void hp_maint_atfork_child(void);
int hp_maint_trim(void);

#pragma GCC visibility pop

#endif
