/* src/base/ranges.c: the sets of address ranges jemap.c and mmap.c keep. */
#include <criterion/criterion.h>
#include "base/base.h"

static hp_range_t r[4];

static hp_ranges_t set_of(void) {
	return (hp_ranges_t){r, 0, 4, false};
}

static void is(const hp_ranges_t *s, unsigned n, const uintptr_t *want) {
	cr_assert_eq(s->n, n, "%u ranges, not %u", s->n, n);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq(s->r[i].start, want[2 * i], "range %u start", i);
		cr_assert_eq(s->r[i].end, want[2 * i + 1], "range %u end", i);
	}
}

Test(ranges, add_keeps_order_and_merges) {
	hp_ranges_t s = set_of();
	hp_ranges_add(&s, 100, 200);
	hp_ranges_add(&s, 400, 500);
	hp_ranges_add(&s, 0, 50);
	is(&s, 3, (uintptr_t[]){0, 50, 100, 200, 400, 500});
	hp_ranges_add(&s, 200, 250);             /* touches: merged */
	hp_ranges_add(&s, 150, 450);             /* spans two: one */
	is(&s, 2, (uintptr_t[]){0, 50, 100, 500});
	cr_assert_not(s.overflow);
}

Test(ranges, del_trims_splits_and_removes) {
	hp_ranges_t s = set_of();
	hp_ranges_add(&s, 0, 100);
	hp_ranges_add(&s, 200, 300);
	hp_ranges_del(&s, 40, 60);                /* a hole */
	is(&s, 3, (uintptr_t[]){0, 40, 60, 100, 200, 300});
	hp_ranges_del(&s, 90, 250);               /* trims two */
	is(&s, 3, (uintptr_t[]){0, 40, 60, 90, 250, 300});
	hp_ranges_del(&s, 0, 1000);               /* all */
	is(&s, 0, NULL);
	hp_ranges_del(&s, 0, 10);                 /* nothing there */
	is(&s, 0, NULL);
}

/* An empty range removes nothing: inside a range it must not split it
 * into two that touch (mmap.c's mremap of less than a page of an advised
 * reservation left such a pair, and a later commit across the split was
 * not advised). */
Test(ranges, empty_del_keeps_the_set) {
	hp_ranges_t s = set_of();
	hp_ranges_add(&s, 0, 100);
	hp_ranges_del(&s, 40, 40);
	is(&s, 1, (uintptr_t[]){0, 100});
	cr_assert(hp_ranges_hold(&s, 30, 50));
}

Test(ranges, full_set_says_so) {
	hp_ranges_t s = set_of();
	for (uintptr_t i = 0; i < 4; i++)
		hp_ranges_add(&s, i * 100, i * 100 + 10);
	hp_ranges_add(&s, 1000, 1010);            /* no room */
	cr_assert(s.overflow);
	cr_assert_eq(s.n, 4);
	s.overflow = false;
	hp_ranges_add(&s, 5, 20);                 /* merges: room enough */
	cr_assert_not(s.overflow);
	hp_ranges_del(&s, 102, 104);              /* a hole, no room */
	cr_assert(s.overflow);
	is(&s, 4, (uintptr_t[]){0, 20, 100, 102, 200, 210, 300, 310});
}

Test(ranges, hold_needs_one_range_around) {
	hp_ranges_t s = set_of();
	hp_ranges_add(&s, 100, 200);
	hp_ranges_add(&s, 300, 400);
	cr_assert(hp_ranges_hold(&s, 100, 200));
	cr_assert(hp_ranges_hold(&s, 150, 160));
	cr_assert_not(hp_ranges_hold(&s, 150, 350));
	cr_assert_not(hp_ranges_hold(&s, 50, 120));
	cr_assert_not(hp_ranges_hold(&s, 200, 300));
}

/* hold finds its range by binary search (collapse.c asks it for hundreds
 * of slabs under one of jemalloc's bin locks): against the plain answer,
 * for every query of a set of 97 ranges and the gaps between them. */
Test(ranges, hold_by_search_agrees_with_a_scan) {
	enum { N = 97 };
	static hp_range_t many[N];
	hp_ranges_t s = {many, 0, N, false};
	for (uintptr_t i = 0; i < N; i++)  /* [10i+1, 10i+7): gaps of 4 */
		hp_ranges_add(&s, 10 * i + 1, 10 * i + 7);
	cr_assert_eq(s.n, N);
	for (uintptr_t a = 0; a < 10 * N + 10; a++)
		for (uintptr_t e = a + 1; e < a + 12; e++) {
			bool want = false;
			for (unsigned i = 0; i < s.n; i++)
				want |= s.r[i].start <= a && e <= s.r[i].end;
			cr_assert_eq(hp_ranges_hold(&s, a, e), want,
			    "[%lu, %lu)", (unsigned long)a, (unsigned long)e);
		}
	hp_ranges_t empty = {many, 0, N, false};
	cr_assert_not(hp_ranges_hold(&empty, 5, 6));
}
