/* src/lifetime/site.c: the site table, the key table, and the scores
 * that promote and demote a site; linked with slot.c, whose slots a
 * placed key pins (seen here through hp_slot_refill). */
#include <criterion/criterion.h>
#include <string.h>
#include "lifetime/lifetime.h"

#define MS 1000000ull

static void setup(void) {
	cr_assert(hp_site_init());
	hp_slot_init(1 << 20, 0);
	hp_site_lock();
}

static void teardown(void) {
	hp_site_unlock();
}

/* Whether the slot of key is pinned (its calls all come back). */
static bool pinned(uintptr_t key) {
	bool p;
	unsigned i = (uint8_t)key;
	hp_slots[i] -= 1;
	hp_slot_refill(i, 1, &p);
	return p;
}

static int site(uintptr_t a, uintptr_t b, uintptr_t c) {
	uintptr_t f[3] = {a, b, c};
	return hp_site_get(f, 3, NULL);
}

/* Whether a direct call of malloc returning to key goes to huge pages. */
static bool hp_key_promoted(uintptr_t key) {
	uintptr_t stack[1] = {key};
	return hp_key_placed(key, (const char *)stack);
}

static void outcomes(int idx, bool long_lived, int n) {
	for (int k = 0; k < n; k++)
		hp_site_outcome(idx, long_lived, long_lived ? 0 : MS / 2);
}

TestSuite(site, .init = setup, .fini = teardown);

Test(site, same_frames_same_site) {
	int a = site(0x401000, 0x402000, 0x403000);
	int b = site(0x401000, 0x402000, 0x403001);
	cr_assert_geq(a, 0);
	cr_assert_geq(b, 0);
	cr_assert_neq(a, b);
	cr_assert_eq(site(0x401000, 0x402000, 0x403000), a);
	cr_assert_eq(site(0x401000, 0x402000, 0x403001), b);
	cr_assert_eq(hp_site_counts.sites, 2);
	/* The same first frames, fewer of them: another site. */
	uintptr_t two[2] = {0x401000, 0x402000};
	int c = hp_site_get(two, 2, NULL);
	cr_assert(c != a && c != b);
	/* Frames past HP_SITE_DEPTH do not count. */
	uintptr_t deep[HP_SITE_DEPTH + 2] = {1, 2, 3, 4, 5, 6};
	int d = hp_site_get(deep, HP_SITE_DEPTH + 2, NULL);
	deep[HP_SITE_DEPTH] = 99;
	cr_assert_eq(hp_site_get(deep, HP_SITE_DEPTH + 2, NULL), d);
	cr_assert_eq(hp_site_get(deep, HP_SITE_DEPTH, NULL), d);
	cr_assert_eq(hp_sites[d].nframes, HP_SITE_DEPTH);
	cr_assert_eq(hp_site_get(deep, 0, NULL), -1, "no frames: no site");
	cr_assert_eq(hp_site_counts.sites, 4);
	cr_assert_eq(memcmp(hp_sites[a].frames, (uintptr_t[]){0x401000,
	    0x402000, 0x403000}, 3 * sizeof(uintptr_t)), 0);
}

/* Sites with the same first frame (the malloc call's return address)
 * share a key; the key table holds that address once. */
Test(site, sites_share_their_first_frame_as_key) {
	int a = site(0x401000, 0x500000, 0);
	int b = site(0x401000, 0x600000, 0);
	int c = site(0x402000, 0x500000, 0);
	cr_assert_eq(hp_sites[a].key, hp_sites[b].key);
	cr_assert_neq(hp_sites[a].key, hp_sites[c].key);
	cr_assert_eq(hp_keys[hp_sites[a].key].key, hp_key_of(0x401000));
	cr_assert_eq(hp_keys[hp_sites[c].key].key, hp_key_of(0x402000));
	cr_assert_eq(HP_KEY_STATE(hp_keys[hp_sites[a].key].how), HP_KEY_SMALL);
	cr_assert_not(hp_key_promoted(0x401000));
	cr_assert_not(hp_key_promoted(0x403000), "a key never seen");
}

/* One up per long-lived sample, two down per short one: promoted at
 * HP_PROMOTE_AT, demoted only at HP_DEMOTE_AT. */
Test(site, promoted_at_promote_at_demoted_at_demote_at) {
	const uintptr_t key = 0x7f00004011a7;
	int s = site(key, 0x500000, 0x600000);
	outcomes(s, true, HP_PROMOTE_AT - 1);
	cr_assert_eq(hp_sites[s].score, HP_PROMOTE_AT - 1);
	cr_assert_not(hp_sites[s].promoted);
	cr_assert_not(hp_key_promoted(key));
	cr_assert_not(pinned(key));
	outcomes(s, true, 1);
	cr_assert(hp_sites[s].promoted);
	cr_assert(hp_key_promoted(key));
	cr_assert(pinned(key), "a placed key pins its slot");
	cr_assert_eq(hp_site_counts.promotions, 1);
	cr_assert_eq(hp_site_counts.sites_promoted, 1);
	cr_assert_eq(hp_sites[s].nlong, HP_PROMOTE_AT);
	/* Down by two a short sample: 4, 2, still promoted; 0 demotes. */
	for (int left = HP_PROMOTE_AT - 2; left > HP_DEMOTE_AT; left -= 2) {
		outcomes(s, false, 1);
		cr_assert_eq(hp_sites[s].score, left);
		cr_assert(hp_sites[s].promoted, "score %d: in the band", left);
	}
	outcomes(s, false, 1);
	cr_assert_eq(hp_sites[s].score, HP_DEMOTE_AT);
	cr_assert_not(hp_sites[s].promoted);
	cr_assert_not(hp_key_promoted(key));
	cr_assert_not(pinned(key), "unpinned with its key");
	cr_assert_eq(hp_site_counts.demotions, 1);
	cr_assert_eq(hp_site_counts.sites_promoted, 0);
	cr_assert_eq(hp_sites[s].nshort, 3);
	/* Up again from 0: not promoted until HP_PROMOTE_AT. */
	outcomes(s, true, HP_PROMOTE_AT - 1);
	cr_assert_not(hp_sites[s].promoted);
	outcomes(s, true, 1);
	cr_assert(hp_sites[s].promoted);
	cr_assert_eq(hp_site_counts.promotions, 2);
}

Test(site, score_is_bounded) {
	int s = site(0x401000, 0, 0);
	outcomes(s, true, 3 * HP_SCORE_MAX);
	cr_assert_eq(hp_sites[s].score, HP_SCORE_MAX);
	outcomes(s, false, 3 * HP_SCORE_MAX);
	cr_assert_eq(hp_sites[s].score, -HP_SCORE_MAX);
	cr_assert(hp_sites[s].churny);
}

/* A key is placed while some site under it is promoted and none is
 * churny (score below zero). */
Test(site, a_churny_site_holds_its_key_back) {
	const uintptr_t key = 0x401234;
	int good = site(key, 0x500000, 0);
	int churn = site(key, 0x600000, 0);
	outcomes(churn, false, 1);
	cr_assert(hp_sites[churn].churny);
	outcomes(good, true, HP_PROMOTE_AT);
	cr_assert(hp_sites[good].promoted);
	cr_assert_not(hp_key_promoted(key), "held back by the churny site");
	cr_assert_not(pinned(key));
	/* Long-lived evidence brings the churny site to 0: not churny. */
	outcomes(churn, true, 2);
	cr_assert_eq(hp_sites[churn].score, 0);
	cr_assert_not(hp_sites[churn].churny);
	cr_assert(hp_key_promoted(key));
	cr_assert(pinned(key));
	/* Churny again: the key comes off, the site stays promoted. */
	outcomes(churn, false, 1);
	cr_assert_not(hp_key_promoted(key));
	cr_assert_not(pinned(key));
	cr_assert(hp_sites[good].promoted);
	/* Two promoted sites under one key: it stays on until both are off. */
	outcomes(churn, true, 2 + HP_PROMOTE_AT);
	cr_assert(hp_sites[churn].promoted && hp_key_promoted(key));
	outcomes(good, false, HP_PROMOTE_AT / 2);      /* to 0: not churny */
	cr_assert_not(hp_sites[good].promoted);
	cr_assert(hp_key_promoted(key), "the other site still holds it");
	cr_assert(pinned(key));
}

/* Lifetimes of short-lived and freed long-lived samples, by decade. */
Test(site, lifetimes_by_decade) {
	int s = site(0x401000, 0, 0);
	static const uint64_t ns[] = {0, MS - 1, MS, 10 * MS - 1, 10 * MS,
	    100 * MS, 1000 * MS, 9999 * MS, 10000 * MS, 1000000 * MS};
	static const unsigned want[HP_LIFE_BUCKETS] = {2, 2, 1, 1, 2, 2};
	for (size_t k = 0; k < 5; k++)
		hp_site_outcome(s, false, ns[k]);
	for (size_t k = 5; k < sizeof ns / sizeof ns[0]; k++)
		hp_site_freed_long(s, ns[k]);
	for (int b = 0; b < HP_LIFE_BUCKETS; b++)
		cr_assert_eq(hp_sites[s].hist[b], want[b], "bucket %d: %u", b,
		    hp_sites[s].hist[b]);
	cr_assert_eq(hp_sites[s].nshort, 5);
	cr_assert_eq(hp_sites[s].nlong, 0, "freed long-lived: counted before");
}

/* A profile's decisions: promote, small (churny) or undecided. */
Test(site, decide_sets_the_state_a_profile_says) {
	const uintptr_t key = 0x40aa00;
	int s = site(key, 1, 2);
	hp_site_decide(s, 1);
	cr_assert(hp_sites[s].promoted && hp_sites[s].from_profile);
	cr_assert_eq(hp_sites[s].score, HP_PROMOTE_AT);
	cr_assert(hp_key_promoted(key));
	cr_assert(pinned(key));
	hp_site_decide(s, -1);
	cr_assert(!hp_sites[s].promoted && hp_sites[s].churny);
	cr_assert_eq(hp_sites[s].score, -HP_PROMOTE_AT);
	cr_assert_not(hp_key_promoted(key));
	cr_assert_not(pinned(key));
	hp_site_decide(s, 0);
	cr_assert(!hp_sites[s].promoted && !hp_sites[s].churny);
	cr_assert_eq(hp_sites[s].score, 0);
	/* A decided site still learns: one short sample makes it churny. */
	hp_site_decide(s, 1);
	outcomes(s, false, 1);
	cr_assert(hp_sites[s].promoted, "4: in the band");
	cr_assert_eq(hp_site_counts.sites_promoted, 1);
}

/* The table holds HP_SITES sites; past that, samples are dropped and
 * counted, and every site already there is still found. */
Test(site, a_full_table_drops_and_counts) {
	for (uintptr_t k = 0; k < HP_SITES; k++)
		cr_assert_geq(site(0x10000 + 16 * k, k, 0), 0, "site %lu",
		    (unsigned long)k);
	cr_assert_eq(hp_site_counts.sites, HP_SITES);
	cr_assert_eq(site(0x7000000, 1, 2), -1);
	cr_assert_eq(site(0x7000010, 1, 2), -1);
	cr_assert_eq(hp_site_counts.sites_dropped, 2);
	cr_assert_eq(hp_site_counts.sites, HP_SITES);
	for (uintptr_t k = 0; k < HP_SITES; k += 97) {
		int i = site(0x10000 + 16 * k, k, 0);
		cr_assert_geq(i, 0);
		cr_assert_eq(hp_sites[i].frames[1], k);
		cr_assert_eq(hp_keys[hp_sites[i].key].key, hp_key_of(0x10000 + 16 * k));
	}
	cr_assert_eq(hp_site_counts.sites_dropped, 2);
}

/* ---- wrappers -------------------------------------------------------- */

#define W 0x7f0000401a00ull    /* the malloc call in xmalloc */
#define V 0x7f0000402b00ull    /* the xmalloc call in xstrdup */
#define A 0x7f0000403c00ull    /* a caller that keeps its objects */
#define B 0x7f0000404d00ull    /* a caller that frees them at once */
#define C 0x7f0000405e00ull    /* another one */

/* A site seen by a sample that measured these strides (as
 * hp_unwind_frames gives them: 0 where not known). */
static int site_s(uintptr_t a, uintptr_t b, uintptr_t c, int32_t s0,
    int32_t s1) {
	uintptr_t f[3] = {a, b, c};
	int32_t st[HP_SITE_DEPTH - 1] = {s0, s1, 0};
	return hp_site_get(f, 3, st);
}

/* A stack as malloc's entry sees it: the return address at word 0, and
 * each caller's return address at the strides after it. */
static bool placed_from(uintptr_t f0, int32_t s0, uintptr_t f1, int32_t s1,
    uintptr_t f2) {
	uintptr_t stack[64] = {0};
	stack[0] = f0;
	stack[s0 / 8] = f1;
	stack[(s0 + s1) / 8] = f2;
	return hp_key_placed(f0, (const char *)stack);
}

/* One wrapper, two callers: a long-lived one and a churny one under one
 * key. The churny one first, as in a service's mixed traffic: the key is
 * held back, then becomes a wrapper's, and the long-lived caller's key is
 * placed alone. */
Test(site, a_wrapper_key_tells_its_callers_apart) {
	int churn = site_s(W, B, 0x10, 48, 32);
	outcomes(churn, false, 1);
	int good = site_s(W, A, 0x20, 48, 32);
	cr_assert_eq(hp_sites[good].key, hp_sites[churn].key, "one key so far");
	cr_assert_eq(HP_KEY_STATE(hp_keys[hp_sites[good].key].how), HP_KEY_SMALL);
	outcomes(good, true, 1);         /* lasting beside churny: a wrapper */
	cr_assert_neq(hp_sites[good].key, hp_sites[churn].key);
	cr_assert_eq(hp_site_counts.wrappers, 1);
	cr_assert_eq(hp_site_counts.wrapped_sites, 2);
	cr_assert_eq(hp_site_counts.wrapper[0].addr, W);
	cr_assert_eq(hp_site_counts.wrapper[0].level, 0);
	cr_assert_eq(hp_site_counts.wrapper[0].sites, 2);
	outcomes(good, true, HP_PROMOTE_AT - 1);
	cr_assert(hp_sites[good].promoted);
	cr_assert(placed_from(W, 48, A, 32, 0x20), "the long-lived caller");
	cr_assert_not(placed_from(W, 48, B, 32, 0x10), "the churny caller");
	cr_assert_not(placed_from(W, 48, C, 32, 0x30), "a caller never seen");
	cr_assert_not(placed_from(W, 40, A, 32, 0x20), "A, but not where the "
	    "stride says");
	cr_assert(pinned(W), "the wrapper's slot: its calls come back");
	cr_assert_eq(hp_site_counts.sites_promoted, 1);
	/* The churny caller stays churny; the long-lived one demoted comes
	 * off, and the slot with it. */
	outcomes(good, false, HP_PROMOTE_AT / 2);
	cr_assert_not(placed_from(W, 48, A, 32, 0x20));
	cr_assert_not(pinned(W));
	cr_assert_eq(hp_site_counts.wrappers, 1, "a wrapper's key stays one");
}

/* A wrapper of a wrapper: xstrdup's callers, behind xmalloc's. */
Test(site, a_wrapper_of_a_wrapper) {
	int direct = site_s(W, C, 0x30, 48, 16);     /* xmalloc, churny */
	int churn = site_s(W, V, B, 48, 32);         /* xstrdup's churny one */
	int good = site_s(W, V, A, 48, 32);          /* its long-lived one */
	outcomes(direct, false, 1);
	outcomes(churn, false, 1);
	outcomes(good, true, HP_PROMOTE_AT);
	cr_assert(hp_sites[good].promoted);
	cr_assert_eq(hp_site_counts.wrappers, 2);
	cr_assert_eq(hp_site_counts.wrapped_sites, 3);
	cr_assert(placed_from(W, 48, V, 32, A));
	cr_assert_not(placed_from(W, 48, V, 32, B));
	cr_assert_not(placed_from(W, 48, C, 16, 0x30));
	/* The two wrappers: xmalloc's key with 3 sites behind it, xstrdup's
	 * call (level 1) with 2. */
	unsigned found = 0;
	for (int i = 0; i < 2; i++) {
		if (hp_site_counts.wrapper[i].addr == W)
			found += hp_site_counts.wrapper[i].level == 0 &&
			    hp_site_counts.wrapper[i].sites == 3;
		if (hp_site_counts.wrapper[i].addr == V)
			found += hp_site_counts.wrapper[i].level == 1 &&
			    hp_site_counts.wrapper[i].sites == 2;
	}
	cr_assert_eq(found, 2);
}

/* Without a stride measured twice, a key mixing lifetimes stays one key,
 * held back by its churny site: no stack word is read on a guess. */
Test(site, no_wrapper_without_a_measured_stride) {
	int churn = site_s(W, B, 0, 0, 0);
	int good = site_s(W, A, 0, 0, 0);
	outcomes(churn, false, 1);
	outcomes(good, true, HP_PROMOTE_AT);
	cr_assert_eq(hp_site_counts.wrappers, 0);
	cr_assert_eq(hp_sites[good].key, hp_sites[churn].key);
	cr_assert_not(hp_key_promoted(W));
	/* Measured once: still not enough. */
	site_s(W, A, 0, 48, 0);
	cr_assert_eq(hp_site_counts.wrappers, 0);
	site_s(W, B, 0, 48, 0);
	cr_assert_eq(hp_site_counts.wrappers, 1, "measured twice, the same");
	cr_assert(placed_from(W, 48, A, 8, 0));
}

/* A frame whose size varies (alloca) measures two strides: its key is no
 * wrapper's, or stops being one, its sites back under it. */
Test(site, a_varying_stride_unmakes_a_wrapper) {
	int churn = site_s(W, B, 0, 48, 0);
	int good = site_s(W, A, 0, 48, 0);
	outcomes(churn, false, 1);
	outcomes(good, true, HP_PROMOTE_AT);
	cr_assert_eq(hp_site_counts.wrappers, 1);
	cr_assert(placed_from(W, 48, A, 8, 0));
	site_s(W, A, 0, 64, 0);          /* another stride */
	cr_assert_eq(hp_site_counts.wrappers, 0);
	cr_assert_eq(hp_site_counts.wrapped_sites, 0);
	cr_assert_eq(hp_sites[good].key, hp_sites[churn].key, "back together");
	cr_assert_not(placed_from(W, 48, A, 8, 0));
	cr_assert_not(hp_key_promoted(W), "held back again");
	cr_assert_not(pinned(W));
	/* For good: the same stride again makes no wrapper. */
	site_s(W, A, 0, 48, 0);
	site_s(W, B, 0, 48, 0);
	cr_assert_eq(hp_site_counts.wrappers, 0);
}

/* A key behind HP_SITE_DEPTH - 1 wrappers is the deepest: its frames end
 * there, so it is decided as a plain key. */
Test(site, wrappers_go_as_deep_as_the_frames) {
	uintptr_t f[HP_SITE_DEPTH];
	int32_t st[HP_SITE_DEPTH - 1];
	int s[2];
	for (int k = 0; k < 2; k++) {
		for (int l = 0; l < HP_SITE_DEPTH; l++)
			f[l] = 0x400000 + 0x1000 * l + (l == HP_SITE_DEPTH - 1 ?
			    k : 0);
		for (int l = 0; l < HP_SITE_DEPTH - 1; l++)
			st[l] = 16;
		s[k] = hp_site_get(f, HP_SITE_DEPTH, st);
		hp_site_get(f, HP_SITE_DEPTH, st);       /* measured twice */
	}
	outcomes(s[0], false, 1);
	outcomes(s[1], true, HP_PROMOTE_AT);
	cr_assert_eq(hp_site_counts.wrappers, HP_SITE_DEPTH - 1);
	cr_assert_neq(hp_sites[s[0]].key, hp_sites[s[1]].key);
	cr_assert(hp_sites[s[1]].promoted);
	uintptr_t stack[HP_SITE_DEPTH * 2];
	for (int l = 0; l < HP_SITE_DEPTH; l++)
		stack[2 * l] = 0x400000 + 0x1000 * l + (l == HP_SITE_DEPTH - 1);
	cr_assert(hp_key_placed(stack[0], (const char *)stack));
	stack[2 * (HP_SITE_DEPTH - 1)]--;
	cr_assert_not(hp_key_placed(stack[0], (const char *)stack));
}

/* A slot keeps one wrapper (its first level then needs no lookup); a
 * second wrapper in the same slot is found through the table, and either
 * comes off the slot with its key. */
Test(site, two_wrappers_in_one_slot) {
	const uintptr_t w1 = 0x7f0000401a42, w2 = 0x7f0000409c42;  /* slot 0x42 */
	int c1 = site_s(w1, B, 0, 48, 0), g1 = site_s(w1, A, 0, 48, 0);
	int c2 = site_s(w2, B, 0, 64, 0), g2 = site_s(w2, A, 0, 64, 0);
	outcomes(c1, false, 1);
	outcomes(c2, false, 1);
	outcomes(g1, true, HP_PROMOTE_AT);
	outcomes(g2, true, HP_PROMOTE_AT);
	cr_assert_eq(hp_site_counts.wrappers, 2);
	cr_assert_eq(hp_slot_wrapper[0x42], w1 | (uint64_t)(48 / 8) << 48,
	    "the first wrapper in the slot");
	cr_assert(placed_from(w1, 48, A, 8, 0));
	cr_assert(placed_from(w2, 64, A, 8, 0), "the second, by the table");
	cr_assert_not(placed_from(w2, 64, B, 8, 0));
	cr_assert_not(placed_from(w2, 48, A, 8, 0), "not at the first's stride");
	site_s(w1, A, 0, 56, 0);         /* w1's frame varies: no wrapper */
	cr_assert_eq(hp_slot_wrapper[0x42], 0, "off the slot with its key");
	cr_assert_not(placed_from(w1, 48, A, 8, 0));
	cr_assert(placed_from(w2, 64, A, 8, 0));
}
