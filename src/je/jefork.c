/*
 * A lock that jemalloc 5.3's own fork handlers leave out.
 *
 * jemalloc's address map (arena_emap_global, an rtree) builds its nodes
 * lazily, under the rtree's init_lock, the first time an extent lands in
 * a new stretch of address space. Its prefork takes the arenas', bases'
 * and caches' locks but not that one, so a fork while another thread
 * holds it leaves it held in the child for good: the child's first
 * lookup that needs a new node waits forever, in
 * rtree_leaf_elm_lookup_hard (docs/backing.md).
 *
 * In the child only the forking thread is left, and it was not inside
 * the map (it was in fork), so the lock is made anew, as rtree_new makes
 * it. A node the vanished thread was building is either published or
 * still NULL, to be built again; the bytes it took from the base are
 * lost to the child, nothing more.
 *
 * What this knows of jemalloc's insides, checked by scripts/embed-jemalloc
 * so another jemalloc stops the build: arena_emap_global starts with its
 * rtree (emap_init passes its argument to rtree_new unchanged), whose
 * init_lock is at offset 8, made by malloc_mutex_init(lock, "rtree",
 * WITNESS_RANK_RTREE = 0x16, 0).
 */
#include <stdbool.h>
#include "je/je.h"

#define RTREE_INIT_LOCK_OFFSET 8
#define WITNESS_RANK_RTREE     0x16

/* jemalloc's (hidden, linked in from our copy of its archive). */
extern char je_arena_emap_global[];
bool je_malloc_mutex_init(void *mutex, const char *name, unsigned rank,
    int lock_order);

void hp_jefork_child(void) {
	je_malloc_mutex_init(je_arena_emap_global + RTREE_INIT_LOCK_OFFSET,
	    "rtree", WITNESS_RANK_RTREE, 0);
}
