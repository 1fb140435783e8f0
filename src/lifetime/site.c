/*
 * Allocation sites and their lifetime decisions.
 *
 * A site is the first HP_SITE_DEPTH return addresses of a sampled
 * allocation's call stack. Each sampled object ends short-lived (freed
 * before lifetime_ms) or long-lived (still live at lifetime_ms); a site's
 * score rises by one for a long-lived object and falls by two for a short
 * one, and the site is promoted to the huge class at HP_PROMOTE_AT and
 * demoted at HP_DEMOTE_AT: a band of hysteresis, weighted against
 * stranding a huge page with churn.
 *
 * Unsampled allocations are not unwound: they are looked up by their key,
 * the return address of the malloc call alone. A key is placed on huge
 * pages while some site under it is promoted and none is churny (score
 * below zero: more short-lived evidence than long). So a key that a
 * wrapper (strdup, operator new) shares between a long-lived and a churny
 * site stays on the small class, and the cheap key never sends a site that
 * is known to churn to huge pages; a site not yet known either way (its
 * samples still young) does not hold its key back.
 *
 * The tables are fixed arrays, written under one lock on sampled calls
 * only; hp_key_promoted() reads the key table without it.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include "lifetime/lifetime.h"
#include "base/lock.h"

hp_site_t *hp_sites;
uintptr_t *hp_key_tab;
uint8_t *hp_key_on;
hp_lifetime_counts_t hp_site_counts;

/* Every site has a key, and a key can fill up: a table of keys smaller
 * than the site table would drop sites whose slots are free. The key
 * counts are 16 bits, each site counted once under its key. */
HP_STATIC_ASSERT(HP_SITES <= HP_KEYS, "the key table holds every site's key");
HP_STATIC_ASSERT(HP_SITES < 65536, "key counts are 16 bits");
HP_STATIC_ASSERT((HP_SITES & (HP_SITES - 1)) == 0 &&
    (HP_KEYS & (HP_KEYS - 1)) == 0, "both tables are powers of two");

static uint16_t *key_nchurny, *key_npromoted;
static hp_lock_t site_lock = HP_LOCK_INIT(HP_RANK_SITE);

/* The tables live in their own 4 KiB-page mapping, made only when
 * lifetime learning is on (in the library's .bss they would make it large
 * enough for THP "always" to back it with huge pages). */
void *hp_site_map(size_t size) {
	void *p = hp_os_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	hp_os_madvise(p, size, MADV_NOHUGEPAGE);
	return p;
}

bool hp_site_init(void) {
	char *m = hp_site_map(HP_SITES * sizeof *hp_sites + HP_KEYS *
	    (sizeof *hp_key_tab + sizeof *hp_key_on + 2 * sizeof(uint16_t)));
	if (m == NULL)
		return false;
	hp_key_tab = (uintptr_t *)m;
	m += HP_KEYS * sizeof *hp_key_tab;
	hp_sites = (hp_site_t *)m;
	m += HP_SITES * sizeof *hp_sites;
	key_nchurny = (uint16_t *)m;
	key_npromoted = key_nchurny + HP_KEYS;
	hp_key_on = (uint8_t *)(key_npromoted + HP_KEYS);
	return true;
}

void hp_site_lock(void) {
	hp_lock(&site_lock);
}

void hp_site_unlock(void) {
	hp_unlock(&site_lock);
}

#ifdef HP_DEBUG
void hp_site_assert_locked(void) {
	hp_lock_assert_held(&site_lock);
}
#endif

bool hp_site_lock_at_exit(void) {
	return hp_lock_at_exit(&site_lock);
}

void hp_site_atfork_child(void) {
	hp_lock_reinit(&site_lock);
}

static uint64_t hash_frames(const uintptr_t *f, unsigned n) {
	uint64_t h = 0xcbf29ce484222325ull;
	for (unsigned i = 0; i < n; i++)
		h = (h ^ f[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

/* The key's slot, or the empty slot where it goes; -1 if the table is
 * full. Lock held. */
static long key_slot(uintptr_t key) {
	hp_lock_assert_held(&site_lock);
	hp_assert(key != 0);                 /* 0 marks a free slot */
	size_t i = hp_key_hash(key);
	for (size_t probes = 0; probes < HP_KEYS; probes++, i = (i + 1) &
	    (HP_KEYS - 1))
		if (hp_key_tab[i] == key || hp_key_tab[i] == 0)
			return (long)i;
	return -1;
}

/* Recomputes whether a key is placed on huge pages. Lock held. */
static void key_update(long k) {
	hp_lock_assert_held(&site_lock);
	hp_assert(k >= 0 && k < HP_KEYS && hp_key_tab[k] != 0);
	bool on = key_npromoted[k] > 0 && key_nchurny[k] == 0;
	if (on != (hp_key_on[k] != 0)) {
		__atomic_store_n(&hp_key_on[k], on, __ATOMIC_RELEASE);
		hp_slot_pin(hp_key_tab[k], on);
	}
}

int hp_site_get(const uintptr_t *frames, unsigned n) {
	hp_lock_assert_held(&site_lock);
	if (n == 0)
		return -1;
	if (n > HP_SITE_DEPTH)
		n = HP_SITE_DEPTH;
	uint64_t h = hash_frames(frames, n);
	size_t i = h & (HP_SITES - 1);
	for (size_t probes = 0; probes < HP_SITES; probes++,
	    i = (i + 1) & (HP_SITES - 1)) {
		hp_site_t *s = &hp_sites[i];
		if (s->hash == h && s->nframes == n &&
		    memcmp(s->frames, frames, n * sizeof *frames) == 0)
			return (int)i;
		if (s->hash != 0)
			continue;
		long k = key_slot(frames[0]);
		if (k < 0) {
			hp_site_counts.sites_dropped++;
			return -1;
		}
		hp_assert(hp_key_tab[k] == 0 || hp_key_tab[k] == frames[0]);
		memcpy(s->frames, frames, n * sizeof *frames);
		s->nframes = (uint8_t)n;
		s->key = (uint32_t)k;
		if (hp_key_tab[k] == 0)
			__atomic_store_n(&hp_key_tab[k], frames[0], __ATOMIC_RELEASE);
		/* Last, and released: the profile at exit may read the table
		 * without the lock (profile.c). */
		__atomic_store_n(&s->hash, h, __ATOMIC_RELEASE);
		hp_site_counts.sites++;
		hp_assert(hp_site_counts.sites <= HP_SITES);
		return (int)i;
	}
	hp_site_counts.sites_dropped++;
	return -1;
}

/* A site's score changed: its state, its key's counts, its key. */
static void update(hp_site_t *s) {
	bool churny = s->score < 0;
	if (churny != s->churny) {
		s->churny = churny;
		hp_assert(churny || key_nchurny[s->key] > 0);
		key_nchurny[s->key] += churny ? 1 : (uint16_t)-1;
		key_update(s->key);
	}
}

static void set_promoted(hp_site_t *s, bool on) {
	if (s->promoted == on)
		return;
	s->promoted = on;
	hp_assert(on || key_npromoted[s->key] > 0);
	key_npromoted[s->key] += on ? 1 : (uint16_t)-1;
	key_update(s->key);
	if (on)
		hp_site_counts.promotions++, hp_site_counts.sites_promoted++;
	else
		hp_site_counts.demotions++, hp_site_counts.sites_promoted--;
	/* Each promotion is a site promoted now, or demoted since. */
	hp_assert(hp_site_counts.sites_promoted == hp_site_counts.promotions -
	    hp_site_counts.demotions && hp_site_counts.sites_promoted <=
	    hp_site_counts.sites);
}

/* Lifetime histogram buckets: < 1 ms, 10 ms, 100 ms, 1 s, 10 s, longer. */
static unsigned bucket(uint64_t ns) {
	unsigned b = 0;
	for (uint64_t lim = 1000000; b < HP_LIFE_BUCKETS - 1 && ns >= lim;
	    lim *= 10)
		b++;
	return b;
}

#ifdef HP_DEBUG
/* A site in use: its score in bounds, promoted above the demotion mark
 * and not promoted below the promotion mark (the band between keeps what
 * it was), churny while below zero, its key its first frame's. */
static bool site_valid(const hp_site_t *s) {
	return s->hash != 0 && s->score >= -HP_SCORE_MAX &&
	    s->score <= HP_SCORE_MAX &&
	    (s->promoted ? s->score > HP_DEMOTE_AT : s->score < HP_PROMOTE_AT) &&
	    s->churny == (s->score < 0) && s->key < HP_KEYS &&
	    hp_key_tab[s->key] == s->frames[0];
}
#endif

void hp_site_outcome(int idx, bool long_lived, uint64_t life_ns) {
	hp_lock_assert_held(&site_lock);
	hp_assert(idx >= 0 && idx < HP_SITES);
	hp_site_t *s = &hp_sites[idx];
	if (long_lived) {
		s->nlong++;
		if (s->score < HP_SCORE_MAX)
			s->score++;
		if (s->score >= HP_PROMOTE_AT)
			set_promoted(s, true);
		update(s);
	} else {
		s->nshort++;
		s->hist[bucket(life_ns)]++;
		s->score = s->score - 2 < -HP_SCORE_MAX ? -HP_SCORE_MAX :
		    s->score - 2;
		if (s->score <= HP_DEMOTE_AT)
			set_promoted(s, false);
		update(s);
	}
	hp_assert(site_valid(s));
}

void hp_site_freed_long(int idx, uint64_t life_ns) {
	hp_lock_assert_held(&site_lock);
	hp_assert(idx >= 0 && idx < HP_SITES && hp_sites[idx].hash != 0);
	hp_sites[idx].hist[bucket(life_ns)]++;
}

void hp_site_decide(int idx, int decision) {
	hp_lock_assert_held(&site_lock);
	hp_assert(idx >= 0 && idx < HP_SITES && decision >= -1 && decision <= 1);
	hp_site_t *s = &hp_sites[idx];
	s->score = (int8_t)(decision * HP_PROMOTE_AT);
	s->from_profile = true;
	set_promoted(s, decision > 0);
	update(s);
	hp_assert(site_valid(s));
}
