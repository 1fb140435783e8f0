/* What huge/region.c shares with huge/region_fork.c, and no one else. */
#ifndef HP_REGION_H
#define HP_REGION_H

#include "huge/huge.h"
#include "base/lock.h"

#pragma GCC visibility push(hidden)

/* The region's lock (rank HP_RANK_REGION): page states and counters. */
extern hp_lock_t hp_region_lock;
/* hp_lock and hp_unlock of it, timed for hp_region_timing. */
void hp_region_lock_timed(void);
void hp_region_unlock_timed(void);
/* The page state of the 2 MiB page at a, inside the region. */
static inline hp_hpage_t *hp_region_page(uintptr_t a) {
	hp_assert(a - hp_region.base < hp_region.size);
	return &hp_region.pages[(a - hp_region.base) >> HP_HUGE_SHIFT];
}
/* The page at hp counted out of (sign -1) or into (1) the region's
 * totals. The lock held, or a fork child's. */
void hp_region_recount(uintptr_t hp, hp_hpage_t *pg, int sign);

#pragma GCC visibility pop

#endif
