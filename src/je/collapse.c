/*
 * The small class's 2 MiB ranges collapsed onto huge pages (for
 * lifetime/catchup.c), and jemalloc's madvise, which splits them again.
 *
 * A range is collapsed with MADV_HUGEPAGE and MADV_COLLAPSE, and keeps
 * its MADV_HUGEPAGE: in smaps it is a mapping of its own, flagged hg, and
 * the small class's other mappings, flagged nh, hold no huge page. The
 * small class gives memory back 4 KiB at a time, and MADV_DONTNEED of
 * part of a huge page would leave all of it allocated on the kernel's
 * deferred-split queue (see hp_hpage_purge). So jemalloc's madvise calls
 * come here (scripts/embed-jemalloc): a purge that touches a collapsed
 * range (one being collapsed included) first advises the collapsed
 * ranges it touches MADV_NOHUGEPAGE again (nothing faults in huge there,
 * and khugepaged leaves them be), then the purge MADV_FREE, which splits
 * the page, and the ranges are forgotten. If the set of collapsed ranges
 * ever overflowed, every purge is advised so first (MADV_NOHUGEPAGE on
 * the purged pages alone: the rest is not known to be the small
 * class's). The kernel does not split a page it shares with a fork child
 * (copy-on-write): such a page's purged parts come back when the kernel
 * needs memory, or when the child's copy goes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include "je/je.h"
#include "base/lock.h"

#define DONE_MAX 1024            /* runs of collapsed ranges */

static hp_lock_t lock = HP_LOCK_INIT(HP_RANK_COLLAPSE);
static hp_range_t done_r[DONE_MAX];
static hp_ranges_t done = {done_r, 0, DONE_MAX, false};   /* under lock */
/* Read without the lock: the span of done (lo == hi: empty), or all of
 * the address space once done overflowed. */
static uintptr_t done_lo, done_hi;

/* Lock held. */
static void publish(void) {
	hp_lock_assert_held(&lock);
	uintptr_t lo = 0, hi = 0;
	if (done.overflow)
		hi = UINTPTR_MAX;
	else if (done.n > 0)
		lo = done.r[0].start, hi = done.r[done.n - 1].end;
	hp_assert(lo <= hi);
	__atomic_store_n(&done_lo, lo, __ATOMIC_RELEASE);
	__atomic_store_n(&done_hi, hi, __ATOMIC_RELEASE);
}

/* The range is in done before it is collapsed, so that a purge meanwhile
 * splits it too; it leaves done, its advice set back, if the collapse
 * fails. */
bool hp_collapse(uintptr_t r) {
	hp_assert((r & (HP_HUGE - 1)) == 0);
	void *p = (void *)r;
	hp_lock(&lock);
	hp_ranges_add(&done, r, r + HP_HUGE);
	hp_assert(done.overflow || hp_ranges_hold(&done, r, r + HP_HUGE));
	publish();
	hp_unlock(&lock);
	bool ok = hp_os_madvise(p, HP_HUGE, MADV_HUGEPAGE) == 0 &&
	    hp_os_madvise(p, HP_HUGE, MADV_COLLAPSE) == 0;
	if (!ok) {
		hp_os_madvise(p, HP_HUGE, MADV_NOHUGEPAGE);
		hp_lock(&lock);
		hp_ranges_del(&done, r, r + HP_HUGE);
		hp_assert(!hp_ranges_touch(&done, r, r + HP_HUGE));
		publish();
		hp_unlock(&lock);
	}
	return ok;
}

/* For je/jefill.c, which asks about many slabs under one of jemalloc's
 * bin locks: whether any range is known collapsed (read without the
 * lock; not once the set overflowed), the lock if it is free (it is held
 * across madvise calls, which a bin lock must not wait for), and whether
 * [start, end) lies in one collapsed range, the lock held. */
bool hp_collapsed_any(void) {
	uintptr_t hi = __atomic_load_n(&done_hi, __ATOMIC_ACQUIRE);
	return hi != UINTPTR_MAX &&
	    __atomic_load_n(&done_lo, __ATOMIC_ACQUIRE) != hi;
}

bool hp_collapsed_trylock(void) {
	return hp_trylock(&lock);
}

void hp_collapsed_unlock(void) {
	hp_unlock(&lock);
}

bool hp_collapsed_holds(uintptr_t start, uintptr_t end) {
	hp_lock_assert_held(&lock);
	hp_assert(start < end);
	return !done.overflow && hp_ranges_hold(&done, start, end);
}

/* jemalloc's madvise (scripts/embed-jemalloc renames its calls to this;
 * nothing of ours calls it). */
__attribute__((visibility("hidden"))) int hp_je_madvise(void *addr,
    size_t len, int advice);
int hp_je_madvise(void *addr, size_t len, int advice) {
	uintptr_t a = (uintptr_t)addr;
	if ((advice == MADV_DONTNEED || advice == MADV_FREE) &&
	    a < __atomic_load_n(&done_hi, __ATOMIC_ACQUIRE) &&
	    a + len > __atomic_load_n(&done_lo, __ATOMIC_ACQUIRE)) {
		uintptr_t s = a & ~(uintptr_t)(HP_HUGE - 1);
		uintptr_t e = (a + len + HP_HUGE - 1) & ~(uintptr_t)(HP_HUGE - 1);
		int saved = errno;
		hp_lock(&lock);
		bool split = done.overflow || hp_ranges_touch(&done, s, e);
		if (done.overflow)
			hp_os_madvise(addr, len, MADV_NOHUGEPAGE);
		else
			for (uintptr_t u = s; split && u < e; u += HP_HUGE)
				if (hp_ranges_hold(&done, u, u + HP_HUGE))
					hp_os_madvise((void *)u, HP_HUGE,
					    MADV_NOHUGEPAGE);
		if (split) {
			hp_ranges_del(&done, s, e);
			hp_assert(!hp_ranges_touch(&done, s, e));
			publish();
		}
		hp_unlock(&lock);
		if (split && advice == MADV_DONTNEED)
			hp_os_madvise(addr, len, MADV_FREE);
		errno = saved;
	}
	return hp_os_madvise(addr, len, advice);
}

void hp_collapse_prefork(void) {
	hp_lock(&lock);
}

void hp_collapse_postfork_parent(void) {
	hp_unlock(&lock);
}

void hp_collapse_postfork_child(void) {
	hp_lock_reinit(&lock);
}
