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
	return hp_site_get(f, 3);
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
	int c = hp_site_get(two, 2);
	cr_assert(c != a && c != b);
	/* Frames past HP_SITE_DEPTH do not count. */
	uintptr_t deep[HP_SITE_DEPTH + 2] = {1, 2, 3, 4, 5, 6};
	int d = hp_site_get(deep, HP_SITE_DEPTH + 2);
	deep[HP_SITE_DEPTH] = 99;
	cr_assert_eq(hp_site_get(deep, HP_SITE_DEPTH + 2), d);
	cr_assert_eq(hp_site_get(deep, HP_SITE_DEPTH), d);
	cr_assert_eq(hp_sites[d].nframes, HP_SITE_DEPTH);
	cr_assert_eq(hp_site_get(deep, 0), -1, "no frames: no site");
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
	cr_assert_eq(hp_key_tab[hp_sites[a].key], 0x401000);
	cr_assert_eq(hp_key_tab[hp_sites[c].key], 0x402000);
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
		cr_assert_eq(hp_key_tab[hp_sites[i].key], 0x10000 + 16 * k);
	}
	cr_assert_eq(hp_site_counts.sites_dropped, 2);
}
