/*
 * Sets of address ranges, sorted and disjoint, in an array the caller
 * owns and locks: jemalloc's own mappings (jemap.c) and the program's
 * advised reservations (mmap.c). A set that cannot hold a range says so
 * (overflow) rather than lose track silently.
 */
#include <string.h>
#include "base/base.h"

#ifdef HP_DEBUG
/* Sorted and disjoint, none empty, and apart: two ranges that touched
 * would have been merged. */
static bool well_formed(const hp_ranges_t *set) {
	if (set->n > set->max)
		return false;
	for (unsigned i = 0; i < set->n; i++)
		if (set->r[i].start >= set->r[i].end ||
		    (i > 0 && set->r[i - 1].end >= set->r[i].start))
			return false;
	return true;
}
#endif

/* Adds [s, e), merged with what it touches or overlaps. */
void hp_ranges_add(hp_ranges_t *set, uintptr_t s, uintptr_t e) {
	hp_assert(s < e && well_formed(set));
	unsigned i = 0;
	while (i < set->n && set->r[i].end < s)
		i++;
	unsigned j = i;                    /* r[i..j) touch [s, e) */
	while (j < set->n && set->r[j].start <= e) {
		if (set->r[j].start < s)
			s = set->r[j].start;
		if (set->r[j].end > e)
			e = set->r[j].end;
		j++;
	}
	if (j == i && set->n == set->max) {
		set->overflow = true;
		return;
	}
	memmove(&set->r[i + 1], &set->r[j], (set->n - j) * sizeof *set->r);
	set->n = set->n - (j - i) + 1;
	set->r[i] = (hp_range_t){s, e};
	hp_assert(well_formed(set));
}

/* Takes [s, e) away, splitting a range it cuts in two. */
void hp_ranges_del(hp_ranges_t *set, uintptr_t s, uintptr_t e) {
	hp_assert(s <= e && well_formed(set));
	if (s >= e)                  /* nothing: no hole of nothing */
		return;
	unsigned i = 0;
	while (i < set->n && set->r[i].end <= s)
		i++;
	while (i < set->n && set->r[i].start < e) {
		hp_range_t *r = &set->r[i];
		if (r->start < s && r->end > e) {          /* a hole in it */
			if (set->n == set->max) {
				set->overflow = true;
				r->end = s;                        /* keep the lower part */
				hp_assert(well_formed(set));
				return;
			}
			memmove(r + 2, r + 1, (set->n - i - 1) * sizeof *r);
			set->n++;
			r[1] = (hp_range_t){e, r->end};
			r->end = s;
			hp_assert(well_formed(set));
			return;
		}
		if (r->start < s) {
			r->end = s;
			i++;
		} else if (r->end > e) {
			r->start = e;
			hp_assert(well_formed(set));
			return;
		} else {                                   /* all of it */
			memmove(r, r + 1, (set->n - i - 1) * sizeof *r);
			set->n--;
		}
	}
	hp_assert(well_formed(set));
}

/* Whether one range of the set holds all of [s, e). */
bool hp_ranges_hold(const hp_ranges_t *set, uintptr_t s, uintptr_t e) {
	/* The one range that could: the last that starts at or below s
	 * (binary search; they are sorted and disjoint). */
	unsigned lo = 0, hi = set->n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (set->r[mid].start <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && set->r[lo - 1].end >= e;
}

/* Whether some range of the set overlaps [s, e). */
bool hp_ranges_touch(const hp_ranges_t *set, uintptr_t s, uintptr_t e) {
	for (unsigned i = 0; i < set->n && set->r[i].start < e; i++)
		if (set->r[i].end > s)
			return true;
	return false;
}
