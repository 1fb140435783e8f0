/* The long-lived layer (src/longlived/README): promoted small objects in
 * mimalloc heaps over a part of the reservation. */
#ifndef HP_LONGLIVED_H
#define HP_LONGLIVED_H

#include "huge/huge.h"

#pragma GCC visibility push(hidden)

/* longlived.c: the long-lived class (long_lived:mimalloc), mimalloc heaps
 * over [hp_ll_base, hp_ll_base + hp_ll_size), inside the owned range. */
extern uintptr_t hp_ll_base;
extern size_t hp_ll_size;
extern hp_ll_counts_t hp_ll_counts;
static inline bool hp_ll_contains(const void *p) {
	return (uintptr_t)p - hp_ll_base < hp_ll_size;
}
bool hp_ll_init(const hp_conf_t *c, uintptr_t base, size_t size);
/* A promoted small object, or NULL: jemalloc's path (hp_huge_small). */
void *hp_ll_alloc(size_t size, bool zero);
/* Its common path alone, which allocates nothing else and makes no
 * system call of ours: this thread's first heap; NULL when that heap is
 * not made, skipped or full (*tried: it was asked, and was full). Then
 * hp_ll_alloc_rest, which does not ask that heap again. */
void *hp_ll_alloc_fast(size_t size, bool zero, bool *tried);
void *hp_ll_alloc_rest(size_t size, bool zero, bool tried);
void hp_ll_free(void *p);
size_t hp_ll_usable(const void *p);
/* p resized within the class, or NULL with p untouched. */
void *hp_ll_realloc(void *p, size_t size);
/* Gives empty segments back: due ones (every decay_ms, from the
 * maintenance thread), or all at once (trim, malloc_trim). */
void hp_ll_collect(uint64_t now_ns, bool trim);
/* llpages.c: the class's THP arena, whose decommits (mimalloc's, through
 * the exported madvise) give back only whole 2 MiB pages. */
extern uintptr_t hp_llpages_base;
extern size_t hp_llpages_size;
static inline bool hp_llpages_contains(const void *p) {
	return (uintptr_t)p - hp_llpages_base < hp_llpages_size;
}
bool hp_llpages_init(uintptr_t base, size_t size);
int hp_llpages_mprotect(void *addr, size_t len, int prot);
int hp_llpages_madvise(void *addr, size_t len, int advice);
void hp_llpages_scan(hp_arena_stats_t *a);
size_t hp_llpages_enforce(size_t limit);
void hp_llpages_prefork(void);
void hp_llpages_postfork_parent(void);
void hp_llpages_postfork_child(void);
/* The class's counters into *a; false (a untouched) if it is not in use. */
bool hp_ll_scan(hp_arena_stats_t *a);

#pragma GCC visibility pop

#endif
