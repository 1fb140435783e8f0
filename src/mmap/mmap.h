/* The mmap layer (src/mmap/README): the program's own anonymous mappings. */
#ifndef HP_MMAP_H
#define HP_MMAP_H

#include "lifetime/lifetime.h"

#pragma GCC visibility push(hidden)

/* mmap.c: the program's own mappings. */
/* Called after each advised mapping is counted: start-up (core/init.c)
 * sets it to publish the counters at once. */
extern void (*hp_mmap_on_change)(void);
extern size_t hp_mmap_threshold;       /* SIZE_MAX until started, or off */
extern hp_mmap_counts_t hp_mmap_counts;
void hp_mmap_prefork(void);
void hp_mmap_postfork_parent(void);
void hp_mmap_postfork_child(void);

#pragma GCC visibility pop

#endif
