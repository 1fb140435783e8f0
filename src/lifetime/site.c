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
 * Unsampled allocations are not unwound: they are looked up by their key
 * (hp_key_placed). A key is first the return address of the malloc call
 * alone, and is placed on huge pages while some site under it is promoted
 * and none is churny (score below zero: more short-lived evidence than
 * long). So the cheap key never sends a site that is known to churn to
 * huge pages, and a site not yet known either way does not hold its key
 * back.
 *
 * A wrapper (xmalloc, zmalloc, PyMem_Malloc) puts all its callers under
 * one key. When a key holds both a churny site and a site leaning
 * long-lived, it becomes a wrapper's key: each site under it moves to a
 * deeper key, the wrapper's key mixed with its next frame, the return
 * address in the wrapper's caller, and the deeper keys are decided as
 * above, each by the evidence of its own sites; a deeper key that mixes
 * lifetimes becomes a wrapper's in turn, down to HP_SITE_DEPTH - 1
 * levels. An unsampled call finds its caller's return address on the
 * stack, at the wrapper's stride from its own: the size of the wrapper's
 * frame at its call, which the sampled stacks measure (hp_unwind_frames).
 * Only a key whose samples all saw one stride, at least twice, becomes a
 * wrapper's; one that sees another stride later (a frame of varying size:
 * alloca) is a plain key again, its sites back under it.
 *
 * The tables are fixed arrays, written under one lock on sampled calls
 * only; hp_key_placed() reads the key table without it.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include "lifetime/lifetime.h"
#include "base/lock.h"

hp_site_t *hp_sites;
hp_key_t *hp_keys;
hp_lifetime_counts_t hp_site_counts;

/* What the lock-free readers do not need of a key. */
typedef struct {
	uintptr_t root;              /* the level-0 key it is under: its slot
	                                is pinned while the key is placed */
	uintptr_t frame;             /* the return address it ends with */
	uint16_t nsites;             /* sites under it */
	uint16_t nchurny, nlasting, npromoted; /* of them */
	uint16_t behind;             /* a wrapper's: sites behind it */
	uint16_t seen;               /* samples that measured stride */
	int32_t stride;              /* the one they measured, or 0 */
	uint8_t level;               /* wrappers above it */
	bool stride_bad;             /* two strides measured: no wrapper */
} key_info_t;

/* Every site has a key, and a key can fill up: a table of keys smaller
 * than the site table would drop sites whose slots are free. Behind a
 * wrapper a site has a key at each level, but a key only at the deepest:
 * keys left empty by a move stay in the table (slots are never emptied),
 * so the table is twice the site table. The key counts are 16 bits. */
HP_STATIC_ASSERT(2 * HP_SITES <= HP_KEYS, "the key table holds every "
    "site's key, and the wrappers' above them");
HP_STATIC_ASSERT(HP_SITES < 65536, "key counts are 16 bits");
HP_STATIC_ASSERT((HP_SITES & (HP_SITES - 1)) == 0 &&
    (HP_KEYS & (HP_KEYS - 1)) == 0, "both tables are powers of two");
HP_STATIC_ASSERT(HP_STRIDE_MAX <= INT32_MAX && HP_STRIDE_MAX % 8 == 0,
    "a stride is an int32_t, a whole number of words");

static key_info_t *keys;
static hp_lock_t site_lock = HP_LOCK_INIT(HP_RANK_SITE);
/* A key became a wrapper's, or stopped being one: sites move (settle). */
static bool moved;

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
	    (sizeof *hp_keys + sizeof *keys));
	if (m == NULL)
		return false;
	hp_keys = (hp_key_t *)m;
	m += HP_KEYS * sizeof *hp_keys;
	hp_sites = (hp_site_t *)m;
	m += HP_SITES * sizeof *hp_sites;
	keys = (key_info_t *)m;
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

/* ---- keys ------------------------------------------------------------ */

size_t hp_key_probe(uintptr_t key, size_t i) {
	for (size_t probes = 0; probes < HP_KEYS; probes++) {
		uintptr_t k = __atomic_load_n(&hp_keys[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return i;
		if (k == 0)
			return HP_KEYS;
		i = (i + 1) & (HP_KEYS - 1);
	}
	return HP_KEYS;
}

/* Each thread's notes of direct decisions (lifetime.h, hp_ra_hit), in
 * its thread block: hp_ra, hp_ra_gen. */
uint64_t hp_key_gen = 1;

void hp_ra_note(uintptr_t ret) {
	hp_assert(!hp_sample_busy);
	/* The generation first: a change after it makes the note stale. */
	uint64_t gen = hp_key_gen_now();
	/* The slot's first wrapper: its callers decide, without a probe. */
	if (hp_wraps(hp_slot_wrapper_of(ret), ret) || gen < hp_ra_gen)
		return;
	uintptr_t key = hp_key_of(ret);
	size_t i = hp_key_probe(key, hp_key_slot(key));
	if (i == HP_KEYS || HP_KEY_STATE(__atomic_load_n(&hp_keys[i].how,
	    __ATOMIC_ACQUIRE)) != HP_KEY_PLACED)
		return;                  /* another wrapper's, or not placed */
	/* A signal handler's allocation may note too, between any two of
	 * these steps: the notes are cleared before their generation moves
	 * on, and a note made after a handler moved it on is taken back. */
	if (gen != hp_ra_gen) {          /* the older notes are stale */
		memset(hp_ra, 0, sizeof hp_ra);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		hp_ra_gen = gen;
	}
	uintptr_t *e = &hp_ra[ret % HP_RA_WAYS];
	*e = ret;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (hp_ra_gen != gen)
		*e = 0;
}

/* The key's slot, made if new, under root and ending with frame at
 * level; -1 if the table is full. Lock held. */
static long key_get(uintptr_t key, uintptr_t root, uintptr_t frame,
    unsigned level) {
	hp_lock_assert_held(&site_lock);
	hp_assert(key != 0 && level < HP_SITE_DEPTH);  /* 0: a free slot */
	size_t i = hp_key_slot(key);
	for (size_t probes = 0; probes < HP_KEYS; probes++, i = (i + 1) &
	    (HP_KEYS - 1)) {
		if (hp_keys[i].key == key)
			return (long)i;
		if (hp_keys[i].key != 0)
			continue;
		keys[i] = (key_info_t){.root = root, .frame = frame,
		    .level = (uint8_t)level};
		__atomic_store_n(&hp_keys[i].key, key, __ATOMIC_RELEASE);
		return (long)i;
	}
	return -1;
}

static bool wrapper_ok(const key_info_t *k) {
	return !k->stride_bad && k->seen >= 2 && k->stride > 0 &&
	    k->level + 1 < HP_SITE_DEPTH;
}

/* Recomputes a key's state. Lock held. */
static void key_update(long i) {
	hp_lock_assert_held(&site_lock);
	hp_assert(i >= 0 && i < HP_KEYS && hp_keys[i].key != 0);
	key_info_t *k = &keys[i];
	uint8_t was = HP_KEY_STATE(hp_keys[i].how), st;
	/* Once a wrapper's, a key stays one: its sites have moved on. */
	if (wrapper_ok(k) && (was == HP_KEY_WRAPPER || (k->nchurny > 0 &&
	    k->nlasting > 0)))
		st = HP_KEY_WRAPPER;
	else
		st = k->npromoted > 0 && k->nchurny == 0 ? HP_KEY_PLACED :
		    HP_KEY_SMALL;
	if (st == was)
		return;
	if (st == HP_KEY_WRAPPER) {
		hp_site_counts.wrappers++;
		moved = true;
	} else if (was == HP_KEY_WRAPPER) {
		hp_assert(hp_site_counts.wrappers > 0);
		hp_site_counts.wrappers--;
		moved = true;
	}
	/* One store: a reader that sees a wrapper sees its stride. */
	__atomic_store_n(&hp_keys[i].how, HP_KEY_HOW(st, st == HP_KEY_WRAPPER ?
	    k->stride : 0), __ATOMIC_RELEASE);
	if (k->level == 0 && (st == HP_KEY_WRAPPER) != (was == HP_KEY_WRAPPER))
		hp_slot_wrap(k->root, k->stride, st == HP_KEY_WRAPPER);
	if ((st == HP_KEY_PLACED) != (was == HP_KEY_PLACED))
		hp_slot_pin(k->root, st == HP_KEY_PLACED);
	/* Every thread's noted decisions are stale. */
	__atomic_fetch_add(&hp_key_gen, 1, __ATOMIC_RELEASE);
}

/* A sample measured stride below key i's frame (0: not known). */
static void key_measured(long i, int32_t stride) {
	key_info_t *k = &keys[i];
	if (stride <= 0 || k->stride_bad)
		return;
	if (k->seen == 0)
		k->stride = stride;
	if (k->stride != stride) {
		k->stride_bad = true;    /* for good: its frame varies */
		key_update(i);
		return;
	}
	if (k->seen < UINT16_MAX && ++k->seen == 2)
		key_update(i);           /* may become a wrapper's now */
}

/* The key of these frames: behind each wrapper's key, the next level's;
 * -1 if the table is full. stride: measured by the sample, or NULL. Lock
 * held. */
static long key_walk(const uintptr_t *f, unsigned n, const int32_t *stride) {
	long i = key_get(hp_key_of(f[0]), f[0], f[0], 0);
	for (unsigned level = 0; i >= 0; level++) {
		if (stride != NULL && level + 1 < n)
			key_measured(i, stride[level]);
		if (HP_KEY_STATE(hp_keys[i].how) != HP_KEY_WRAPPER || level + 1 >= n)
			return i;
		uintptr_t key = hp_key_mix(hp_keys[i].key, f[level + 1]);
		long d = key == 0 ? -1 : key_get(key, f[0], f[level + 1],
		    level + 1);
		if (d < 0)
			return i;            /* under the wrapper: never placed */
		i = d;
	}
	return -1;
}

/* A site counted under its key, or taken off it (by = -1); the key is
 * then updated by the caller. Lock held. */
static void count(const hp_site_t *s, int by) {
	key_info_t *k = &keys[s->key];
	hp_assert(by == 1 || (k->nsites > 0 && (!s->churny || k->nchurny > 0) &&
	    (!s->lasting || k->nlasting > 0) &&
	    (!s->promoted || k->npromoted > 0)));
	k->nsites += (uint16_t)by;
	k->nchurny += (uint16_t)(s->churny ? by : 0);
	k->nlasting += (uint16_t)(s->lasting ? by : 0);
	k->npromoted += (uint16_t)(s->promoted ? by : 0);
}

/* Keys became wrappers' or stopped being them: every site goes under the
 * key its frames walk to now, until none moves. Lock held. */
static void settle(void) {
	if (!moved)
		return;
	for (unsigned round = 0; moved && round <= HP_SITE_DEPTH; round++) {
		moved = false;
		for (size_t j = 0; j < HP_SITES; j++) {
			hp_site_t *s = &hp_sites[j];
			if (s->hash == 0)
				continue;
			long i = key_walk(s->frames, s->nframes, NULL);
			if (i < 0 || (uint32_t)i == s->key)
				continue;
			long old = s->key;
			count(s, -1);
			key_update(old);
			s->key = (uint32_t)i;
			count(s, 1);
			key_update(i);
			/* A new level: the stride its first sample measured
			 * there. */
			unsigned level = keys[i].level;
			if (level + 1 < s->nframes)
				key_measured(i, s->stride[level]);
		}
	}
	/* What the counters show: the wrappers and the sites behind them. */
	unsigned shown = 0;
	uint64_t behind = 0;
	for (size_t i = 0; i < HP_KEYS; i++)
		keys[i].behind = 0;
	for (size_t j = 0; j < HP_SITES; j++) {
		const hp_site_t *s = &hp_sites[j];
		if (s->hash == 0 || keys[s->key].level == 0)
			continue;
		behind++;
		/* Each wrapper above it: its frames walked again (every key
		 * on the way is in the table). */
		uintptr_t key = hp_key_of(s->frames[0]);
		for (unsigned l = 0; l < keys[s->key].level; l++) {
			long i = key_get(key, s->frames[0], s->frames[l], l);
			hp_assert(i >= 0 && HP_KEY_STATE(hp_keys[i].how) == HP_KEY_WRAPPER);
			keys[i].behind++;
			key = hp_key_mix(key, s->frames[l + 1]);
		}
	}
	hp_site_counts.wrapped_sites = behind;
	memset(hp_site_counts.wrapper, 0, sizeof hp_site_counts.wrapper);
	for (size_t i = 0; i < HP_KEYS && shown < HP_WRAPPERS_SHOWN; i++)
		if (hp_keys[i].key != 0 && HP_KEY_STATE(hp_keys[i].how) == HP_KEY_WRAPPER) {
			hp_site_counts.wrapper[shown].addr = keys[i].frame;
			hp_site_counts.wrapper[shown].level = keys[i].level;
			hp_site_counts.wrapper[shown].sites = keys[i].behind;
			shown++;
		}
}

/* ---- sites ----------------------------------------------------------- */

int hp_site_get(const uintptr_t *frames, unsigned n, const int32_t *stride) {
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
		    memcmp(s->frames, frames, n * sizeof *frames) == 0) {
			if (stride != NULL)      /* measured again */
				key_walk(frames, n, stride);
			settle();
			return (int)i;
		}
		if (s->hash != 0)
			continue;
		long k = key_walk(frames, n, stride);
		if (k < 0) {
			hp_site_counts.sites_dropped++;
			settle();
			return -1;
		}
		memcpy(s->frames, frames, n * sizeof *frames);
		s->nframes = (uint8_t)n;
		for (unsigned l = 0; l + 1 < HP_SITE_DEPTH; l++)
			s->stride[l] = stride != NULL && l + 1 < n ? stride[l] : 0;
		s->key = (uint32_t)k;
		count(s, 1);
		key_update(k);
		/* Last, and released: the profile at exit may read the table
		 * without the lock (profile.c). */
		__atomic_store_n(&s->hash, h, __ATOMIC_RELEASE);
		hp_site_counts.sites++;
		hp_assert(hp_site_counts.sites <= HP_SITES);
		settle();
		return (int)i;
	}
	hp_site_counts.sites_dropped++;
	return -1;
}

/* A site's score changed: its state, its key's counts, its key. */
static void update(hp_site_t *s, bool promoted) {
	bool churny = s->score < 0, lasting = s->score > 0;
	if (churny == s->churny && lasting == s->lasting &&
	    promoted == s->promoted)
		return;
	count(s, -1);
	if (promoted != s->promoted) {
		if (promoted)
			hp_site_counts.promotions++, hp_site_counts.sites_promoted++;
		else
			hp_site_counts.demotions++, hp_site_counts.sites_promoted--;
	}
	s->churny = churny, s->lasting = lasting, s->promoted = promoted;
	count(s, 1);
	key_update(s->key);
	settle();
	/* Each promotion is a site promoted now, or demoted since. */
	hp_assert(hp_site_counts.sites_promoted == hp_site_counts.promotions -
	    hp_site_counts.demotions && hp_site_counts.sites_promoted <=
	    hp_site_counts.sites);
}

bool hp_site_placed(int idx) {
	hp_lock_assert_held(&site_lock);
	hp_assert(idx >= 0 && idx < HP_SITES && hp_sites[idx].hash != 0);
	return hp_sites[idx].promoted &&
	    HP_KEY_STATE(hp_keys[hp_sites[idx].key].how) == HP_KEY_PLACED;
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
 * it was), churny while below zero, lasting above, its key under its
 * first frame and no deeper than its frames. */
static bool site_valid(const hp_site_t *s) {
	return s->hash != 0 && s->score >= -HP_SCORE_MAX &&
	    s->score <= HP_SCORE_MAX &&
	    (s->promoted ? s->score > HP_DEMOTE_AT : s->score < HP_PROMOTE_AT) &&
	    s->churny == (s->score < 0) && s->lasting == (s->score > 0) &&
	    s->key < HP_KEYS && keys[s->key].root == s->frames[0] &&
	    keys[s->key].level < s->nframes &&
	    keys[s->key].frame == s->frames[keys[s->key].level];
}
#endif

void hp_site_outcome(int idx, bool long_lived, uint64_t life_ns) {
	hp_lock_assert_held(&site_lock);
	hp_assert(idx >= 0 && idx < HP_SITES);
	hp_site_t *s = &hp_sites[idx];
	bool promoted = s->promoted;
	if (long_lived) {
		s->nlong++;
		if (s->score < HP_SCORE_MAX)
			s->score++;
		promoted |= s->score >= HP_PROMOTE_AT;
	} else {
		s->nshort++;
		s->hist[bucket(life_ns)]++;
		s->score = s->score - 2 < -HP_SCORE_MAX ? -HP_SCORE_MAX :
		    s->score - 2;
		promoted &= s->score > HP_DEMOTE_AT;
	}
	update(s, promoted);
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
	update(s, decision > 0);
	hp_assert(site_valid(s));
}
