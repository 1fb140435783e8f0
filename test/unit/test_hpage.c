/* src/pages/hpage.c: one 2 MiB page's bitmaps of released and dirty 4 KiB
 * parts, against a plain model of one flag per part, and its purge
 * against a real 2 MiB mapping, as mincore sees it. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include "pages/pages.h"

/* A page as the region carves it: every part released, none dirty. */
static hp_hpage_t fresh(void) {
	hp_hpage_t pg;
	memset(&pg, 0, sizeof pg);
	memset(pg.released, 0xff, sizeof pg.released);
	pg.nreleased = HP_SUBPAGES;
	return pg;
}

static bool all_zero(const uint64_t *m) {
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		if (m[w] != 0)
			return false;
	return true;
}

Test(hpage, reuse_then_release_whole_page_needs_zap) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 0, 512, zero);
	cr_assert_eq(pg.nreleased, 0);
	cr_assert(all_zero(zero), "fresh memory needs no zeroing");
	cr_assert_not(hp_hpage_release(&pg, 0, 200));
	cr_assert_eq(pg.nreleased, 200);
	cr_assert(hp_hpage_release(&pg, 200, 312), "empty and dirty: zap");
	cr_assert_eq(pg.nreleased, 512);
	/* Until the zap is done, the page stays dirty: reuse would zero. */
	hp_hpage_reuse(&pg, 0, 512, zero);
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		cr_assert_eq(zero[w], ~0ull, "not zapped yet: all stale");
}

Test(hpage, partial_reuse_zeroes_only_stale_subpages) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 10, 100, zero);      /* subpages 10..109 dirty */
	hp_hpage_reuse(&pg, 300, 10, zero);      /* keeps the page live */
	cr_assert_not(hp_hpage_release(&pg, 10, 100), "300..309 still live");
	/* Reusing 0..59: 10..59 are stale, 0..9 were never written. */
	hp_hpage_reuse(&pg, 0, 60, zero);
	cr_assert_eq(zero[0], ((1ull << 50) - 1) << 10);
	for (unsigned w = 1; w < HP_SUBWORDS; w++)
		cr_assert_eq(zero[w], 0);
	cr_assert_eq(pg.nreleased, 512 - 70);
	/* Once everything is released the page is empty and dirty: zap. */
	cr_assert_not(hp_hpage_release(&pg, 0, 60));
	cr_assert(hp_hpage_release(&pg, 300, 10));
}

Test(hpage, release_is_idempotent_and_counts_once) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 0, 512, zero);
	cr_assert_not(hp_hpage_release(&pg, 64, 64));
	cr_assert_not(hp_hpage_release(&pg, 64, 64));
	cr_assert_eq(pg.nreleased, 64);
	cr_assert_not(hp_hpage_release(&pg, 63, 3));   /* only 63 is new */
	cr_assert_eq(pg.nreleased, 65);
	/* A word boundary run and the last subpage. */
	cr_assert_not(hp_hpage_release(&pg, 511, 1));
	cr_assert_eq(pg.released[7] >> 63, 1);
	cr_assert_eq(pg.nreleased, 66);
}

/* Given back (zapped), a page reads as zero: reusing it needs no zeroing,
 * and it is not empty-and-dirty again until something was handed out. */
Test(hpage, reuse_after_zap_needs_no_zeroing) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 0, 512, zero);
	cr_assert(hp_hpage_release(&pg, 0, 512));
	hp_hpage_zapped(&pg);
	cr_assert(all_zero(pg.dirty));
	cr_assert_eq(pg.nreleased, 512, "zapping does not hand anything out");
	hp_hpage_reuse(&pg, 100, 200, zero);
	cr_assert(all_zero(zero), "zapped: reads as zero already");
	cr_assert_eq(pg.nreleased, 312);
	cr_assert(hp_hpage_release(&pg, 100, 200), "dirty again: zap again");
	/* Released while still dirty, then reused at once (jemalloc's
	 * decommit and commit of one extent): exactly that run is stale. */
	hp_hpage_reuse(&pg, 0, 512, zero);
	cr_assert_not(hp_hpage_release(&pg, 130, 70));
	hp_hpage_reuse(&pg, 128, 80, zero);
	cr_assert_eq(zero[2], ~0ull << 2, "130..191 of word 2: %#lx",
	    (unsigned long)zero[2]);
	cr_assert_eq(zero[3], (1ull << 8) - 1, "192..199");
	cr_assert_eq(zero[0] | zero[1] | zero[4] | zero[5] | zero[6] | zero[7], 0);
	cr_assert_eq(pg.nreleased, 0);
}

/* Empty runs change nothing, also at the page's end. */
Test(hpage, zero_length_runs_change_nothing) {
	hp_hpage_t pg = fresh(), was;
	uint64_t zero[HP_SUBWORDS];
	memset(zero, 0xaa, sizeof zero);
	hp_hpage_reuse(&pg, 0, 0, zero);
	cr_assert(all_zero(zero), "the mask is cleared even for no parts");
	hp_hpage_reuse(&pg, 40, 30, zero);
	was = pg;
	for (unsigned first = 0; first <= HP_SUBPAGES; first += 64) {
		cr_assert_not(hp_hpage_release(&pg, first, 0));
		hp_hpage_reuse(&pg, first, 0, zero);
		cr_assert(all_zero(zero));
		cr_assert(memcmp(&pg, &was, sizeof pg) == 0, "at %u", first);
	}
	/* A fully released page stays "not dirty, nothing to give back"
	 * for an empty release: the answer depends on the dirty bits. */
	hp_hpage_t clean = fresh();
	cr_assert_not(hp_hpage_release(&clean, 512, 0));
}

/*
 * Random runs against a model of one flag per part: released, dirty,
 * nreleased, the zero mask and the "give it back" answer agree after
 * every step. Runs cross word boundaries and end at the page's end.
 */
static bool model_rel[HP_SUBPAGES], model_dirty[HP_SUBPAGES];

static void agrees(const hp_hpage_t *pg, int step) {
	unsigned n = 0;
	for (unsigned i = 0; i < HP_SUBPAGES; i++) {
		cr_assert_eq(hp_hpage_bit(pg->released, i), model_rel[i],
		    "step %d: released bit %u", step, i);
		cr_assert_eq(hp_hpage_bit(pg->dirty, i), model_dirty[i],
		    "step %d: dirty bit %u", step, i);
		n += model_rel[i];
	}
	cr_assert_eq(pg->nreleased, n, "step %d", step);
	cr_assert_leq(pg->nreleased, HP_SUBPAGES);
}

Test(hpage, random_runs_match_a_flag_per_part) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS], r = 0x243f6a8885a308d3ull;
	for (unsigned i = 0; i < HP_SUBPAGES; i++)
		model_rel[i] = true, model_dirty[i] = false;
	for (int step = 0; step < 20000; step++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		unsigned first = (unsigned)(r % (HP_SUBPAGES + 1));
		unsigned left = HP_SUBPAGES - first;
		/* Mostly short runs, some to the end of the page. */
		unsigned n = left == 0 ? 0 : (r >> 20) % 4 == 0 ? left :
		    (unsigned)((r >> 24) % (left < 140 ? left + 1 : 140));
		switch ((r >> 40) % 8) {
		case 0: case 1: case 2: {
			bool any_dirty = false, all_rel = true;
			for (unsigned i = first; i < first + n; i++)
				model_rel[i] = true;
			for (unsigned i = 0; i < HP_SUBPAGES; i++)
				any_dirty |= model_dirty[i], all_rel &= model_rel[i];
			cr_assert_eq(hp_hpage_release(&pg, first, n),
			    all_rel && any_dirty, "step %d: release %u+%u", step,
			    first, n);
			break;
		}
		case 3: case 4: case 5: case 6:
			hp_hpage_reuse(&pg, first, n, zero);
			for (unsigned i = 0; i < HP_SUBPAGES; i++) {
				bool in = i >= first && i < first + n;
				cr_assert_eq(hp_hpage_bit(zero, i), in && model_rel[i] &&
				    model_dirty[i], "step %d: zero bit %u", step, i);
				if (in)
					model_rel[i] = false, model_dirty[i] = true;
			}
			break;
		default: {
			bool all_rel = true;
			for (unsigned i = 0; i < HP_SUBPAGES; i++)
				all_rel &= model_rel[i];
			if (!all_rel)
				break;       /* the region zaps empty pages only */
			hp_hpage_zapped(&pg);
			memset(model_dirty, 0, sizeof model_dirty);
		}
		}
		agrees(&pg, step);
	}
}

Test(hpage, subpages_past_the_page_abort, .signal = SIGABRT) {
	hp_hpage_t pg;
	memset(&pg, 0, sizeof pg);
	hp_hpage_release(&pg, 500, 20);
}

Test(hpage, reuse_past_the_page_aborts, .signal = SIGABRT) {
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 512, 1, zero);
}

/* A page whose count says "all released" while its bits say none: one
 * more release counts past the page, and the debug build stops. */
Test(hpage, nreleased_past_the_page_aborts, .signal = SIGABRT) {
	hp_hpage_t pg;
	memset(&pg, 0, sizeof pg);
	pg.nreleased = HP_SUBPAGES;
	hp_hpage_release(&pg, 0, 1);
}

/* ---- purge, against a real 2 MiB page -------------------------------- */

/* A 2 MiB-aligned, 2 MiB anonymous mapping of 4 KiB pages (no THP, so
 * that each part is resident on its own), every part written. */
static char *map_page(void) {
	char *m = mmap(NULL, 2 * HP_HUGE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(m, MAP_FAILED);
	char *hp = (char *)(((uintptr_t)m + HP_HUGE - 1) & ~(HP_HUGE - 1));
	if (hp > m)
		munmap(m, (size_t)(hp - m));
	munmap(hp + HP_HUGE, (size_t)(m + HP_HUGE - hp));
	cr_assert_eq(madvise(hp, HP_HUGE, MADV_NOHUGEPAGE), 0);
	memset(hp, 0x5a, HP_HUGE);
	return hp;
}

static void residency(const char *hp, unsigned char *vec) {
	cr_assert_eq(mincore((void *)hp, HP_HUGE, vec), 0);
	for (unsigned i = 0; i < HP_SUBPAGES; i++)
		vec[i] &= 1;
}

/* Without split: only parts released and dirty go back; the ones the
 * bitmap knows are clean, and every live one, stay as they are. */
Test(hpage, purge_gives_back_released_dirty_runs) {
	char *hp = map_page();
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 0, 512, zero);
	/* Runs inside a word, across words, and at the page's end. */
	hp_hpage_release(&pg, 10, 10);
	hp_hpage_release(&pg, 60, 70);
	hp_hpage_release(&pg, 500, 12);
	/* 300: released and known clean (as after a zap); its bytes stay
	 * there, the bitmap not knowing. */
	pg.released[300 / 64] |= 1ull << (300 % 64);
	pg.dirty[300 / 64] &= ~(1ull << (300 % 64));
	pg.nreleased++;
	hp_hpage_t before = pg;
	hp_hpage_purge((uintptr_t)hp, &pg, false);
	unsigned char vec[HP_SUBPAGES];
	residency(hp, vec);
	unsigned gone = 0;
	for (unsigned i = 0; i < HP_SUBPAGES; i++) {
		bool purged = (i >= 10 && i < 20) || (i >= 60 && i < 130) ||
		    i >= 500;
		cr_assert_eq(vec[i], !purged, "part %u resident: %u", i, vec[i]);
		cr_assert_eq(hp_hpage_bit(pg.dirty, i), !purged && i != 300,
		    "part %u dirty", i);
		cr_assert_eq(hp[(size_t)i << HP_PAGE_SHIFT], purged ? 0 : 0x5a,
		    "part %u's bytes", i);
		gone += purged;
	}
	cr_assert_eq(gone, 92);
	cr_assert(memcmp(pg.released, before.released, sizeof pg.released) == 0,
	    "purging releases nothing and takes nothing back");
	cr_assert_eq(pg.nreleased, before.nreleased);
	/* Purged parts are clean now: a second purge has nothing to do, and
	 * reusing them needs no zeroing. */
	hp_hpage_purge((uintptr_t)hp, &pg, false);
	hp_hpage_reuse(&pg, 0, 512, zero);
	cr_assert(all_zero(zero));
	munmap(hp, HP_HUGE);
}

/* With split: every released part goes back, the clean ones included
 * (a THP page is resident whole, parts never handed out too). */
Test(hpage, purge_split_gives_back_every_released_part) {
	char *hp = map_page();
	hp_hpage_t pg = fresh();
	uint64_t zero[HP_SUBWORDS];
	hp_hpage_reuse(&pg, 0, 256, zero);   /* 256..511 released, clean */
	hp_hpage_release(&pg, 0, 64);        /* 0..63 released, dirty */
	hp_hpage_purge((uintptr_t)hp, &pg, true);
	unsigned char vec[HP_SUBPAGES];
	residency(hp, vec);
	for (unsigned i = 0; i < HP_SUBPAGES; i++) {
		bool live = i >= 64 && i < 256;
		cr_assert_eq(vec[i], live, "part %u resident: %u", i, vec[i]);
		cr_assert_eq(hp_hpage_bit(pg.dirty, i), live, "part %u dirty", i);
	}
	cr_assert_eq(pg.nreleased, 512 - 192);
	munmap(hp, HP_HUGE);
}

/* hp_popcount64 by the POPCNT instruction (where os.c finds it) and by
 * the portable count, against the compiler's, on edge and random words. */
Test(hpage, popcount_both_ways) {
	uint64_t r = 0x9e3779b97f4a7c15ull;
	hp_os_probe_cpu();
	bool cpu = hp_os_have_popcnt;
	for (int way = 0; way < 2; way++) {
		hp_os_have_popcnt = way == 0 ? false : cpu;
		static const uint64_t edge[] = {0, ~0ull, 1, 1ull << 63,
		    0x8000000000000001ull, ~1ull, 0x5555555555555555ull};
		for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
			cr_assert_eq(hp_popcount64(edge[i]),
			    (unsigned)__builtin_popcountll(edge[i]), "%#lx",
			    (unsigned long)edge[i]);
		for (int i = 0; i < 100000; i++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			uint64_t x = r & (r >> (i % 64));   /* sparse and dense */
			cr_assert_eq(hp_popcount64(x),
			    (unsigned)__builtin_popcountll(x), "%#lx",
			    (unsigned long)x);
		}
	}
	hp_os_have_popcnt = cpu;
}
