#define _GNU_SOURCE
/*
 * Sampling allocations to learn their lifetimes.
 *
 * Each thread counts down the bytes it allocates (slot.c hands them over,
 * a slot's credit at a time); when the count runs out, the allocation at
 * hand is unwound with libunwind and served from the sample zone, a jemalloc
 * arena of its own over a reserved range of 4 KiB pages. free() knows a
 * sampled object by its address alone (hp_zone_contains: two compares),
 * so an unsampled free costs no lookup. A sampled object's record holds
 * its site and birth time: freed before lifetime_ms it is short-lived;
 * found still live past lifetime_ms (records are aged a few at a time on
 * each sampled call) it is long-lived.
 *
 * The mean interval is lifetime_sample bytes, drawn uniformly from half to
 * one and a half times that, per thread, so that a loop's period cannot
 * alias with it.
 *
 * A sample costs a few microseconds (the unwind, two system calls, the
 * site table), so each thread's samples are paced by a token bucket:
 * lifetime_sample_rate tokens a second, ten seconds' worth at most, one
 * token a sample. A thread takes its first ten seconds' worth of samples
 * at the full density, so that start-up and a short program are learned
 * as before (a bucket of one second's worth left learning short of
 * samples in the tests' few-second programs); when its
 * count runs out with no token left, that allocation is not sampled and
 * the thread's interval doubles; once the bucket is half full again, it
 * halves. A thread that allocates gigabytes a second from one site (a
 * server's request loop) is then sampled at most lifetime_sample_rate
 * times a second, not tens of thousands, and one that slows down goes
 * back to lifetime_sample.
 */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "lifetime/lifetime.h"
#include "base/lock.h"
#include "je/je.h"

#define HP_SAMPLE_SLOTS 65536               /* live sampled objects, max */
#define HP_SAMPLE_FIRST 256                 /* slots at least: doubled when
                                               3/4 full, halved when 1/8 */
#define HP_AGE_STEP    64                   /* records aged per sampled call */

uintptr_t hp_zone_base;
size_t hp_zone_size;

typedef struct {
	uintptr_t ptr;               /* 0: free slot */
	uint64_t born_ns;
	uintptr_t near;              /* where the thread's next small object of
	                                its size went (catchup.c), or 0 */
	int32_t site;
	bool long_lived;             /* counted long-lived already */
} sample_t;

static sample_t *samples;       /* nslots, a power of two */
static size_t nslots, nsamples, age_cursor;
static uintptr_t zone_bump, zone_mapped, zone_end;
static hp_lock_t zone_lock = HP_LOCK_INIT(HP_RANK_ZONE);
/* The only lock of ours held around dl_iterate_phdr (unwinding, module
 * checks, profile.c's module list), and around nothing that calls
 * jemalloc: fork takes it, so no child inherits the loader's lock held,
 * whatever the order of the fork handlers. An allocation only tries it:
 * a thread in its own dl_iterate_phdr callback holds the loader's lock,
 * and must not wait here for a thread that waits for that lock. */
static hp_lock_t sample_lock = HP_LOCK_INIT(HP_RANK_SAMPLE);
static int zone_flags;           /* MALLOCX_ARENA(zone) | TCACHE_NONE */
static bool learning;
static uint64_t lifetime_ns;
static int64_t mean_interval;    /* 0: nothing sampled */
static uint64_t token_ns;        /* 1 s / lifetime_sample_rate; 0: no limit */
static unsigned dl_adds;         /* dl_iterate_phdr's count, last seen */

static HP_TLS uint64_t rng;
/* The pace: this thread's bucket, in nanoseconds of tokens (a token is
 * token_ns), filled as time passes up to HP_BUCKET_NS; its interval is
 * next_interval()'s << stretch. last_due_ns: when it last asked. */
#define HP_SECOND_NS   1000000000ull
#define HP_BUCKET_NS   (10 * HP_SECOND_NS)
#define HP_STRETCH_MAX 16
static HP_TLS uint64_t bucket_ns, last_due_ns;
static HP_TLS unsigned stretch;

/* Whether this thread may take a sample now: a token taken, or none left
 * and the interval doubled; halved when the bucket was half full (before
 * the token: at a rate of 1 a token is the whole bucket). A new thread's
 * bucket starts full. */
static bool paced(void) {
	if (token_ns == 0)
		return true;
	uint64_t now = hp_os_clock_ns(CLOCK_MONOTONIC);
	uint64_t since = now - last_due_ns;
	uint64_t b = last_due_ns == 0 || since >= HP_BUCKET_NS - bucket_ns ?
	    HP_BUCKET_NS : bucket_ns + since;
	last_due_ns = now;
	if (b < token_ns) {
		bucket_ns = b;
		if (stretch < HP_STRETCH_MAX)
			stretch++;
		return false;
	}
	if (stretch > 0 && b >= HP_BUCKET_NS / 2)
		stretch--;
	bucket_ns = b - token_ns;
	return true;
}

/* A token taken for a sample that was not taken after all. */
static void unpaced(void) {
	if (token_ns != 0)
		bucket_ns = bucket_ns + token_ns < HP_BUCKET_NS ?
		    bucket_ns + token_ns : HP_BUCKET_NS;
}

/* hp_sample_busy (lifetime.h) is the top bit of hp_thread.ra_gen. */

static int64_t next_interval(void) {
	hp_assert(mean_interval > 0);
	if (rng == 0)
		rng = (uintptr_t)&rng ^ hp_os_clock_ns(CLOCK_MONOTONIC) ^
		    0x9e3779b97f4a7c15ull;
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return mean_interval / 2 + (int64_t)(rng % (uint64_t)mean_interval);
}

/* ---- the sample zone: a jemalloc arena over its own reservation ------ */

static void *z_alloc(extent_hooks_t *h, void *new_addr, size_t size,
    size_t align, bool *zero, bool *commit, unsigned ind) {
	(void)h, (void)ind;
	if (new_addr != NULL)
		return NULL;
	hp_lock(&zone_lock);
	hp_assert(hp_zone_base < zone_bump && zone_bump <= zone_mapped &&
	    zone_mapped <= zone_end && (align & (align - 1)) == 0);
	uintptr_t p = (zone_bump + align - 1) & ~(uintptr_t)(align - 1);
	uintptr_t end = p + size;
	void *ret = NULL;
	if (end <= zone_end && end > p) {
		uintptr_t to = (end + HP_HUGE - 1) & ~(uintptr_t)(HP_HUGE - 1);
		if (to > zone_end)
			to = zone_end;
		if (to <= zone_mapped || hp_os_mprotect((void *)zone_mapped,
		    to - zone_mapped, PROT_READ | PROT_WRITE) == 0) {
			if (to > zone_mapped)
				zone_mapped = to;
			hp_assert(end <= zone_mapped && zone_mapped <= zone_end);
			__atomic_store_n(&zone_bump, end, __ATOMIC_RELEASE);
			ret = (void *)p;
		}
	}
	hp_unlock(&zone_lock);
	if (ret != NULL)
		*zero = *commit = true;
	return ret;
}

static bool z_dalloc(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h, (void)addr, (void)size, (void)committed, (void)ind;
	return true;                 /* refused: jemalloc retains and reuses */
}

/* A range the zone handed out: the hooks touch nothing else. */
static bool zone_owns(const void *addr, size_t size) {
	uintptr_t a = (uintptr_t)addr;
	uintptr_t bump = __atomic_load_n(&zone_bump, __ATOMIC_ACQUIRE);
	return a >= hp_zone_base && a < bump && size <= bump - a;
}

static bool z_purge(extent_hooks_t *h, void *addr, size_t size,
    size_t offset, size_t length, unsigned ind) {
	(void)h, (void)ind;
	if (!zone_owns(addr, size) || offset > size || length > size - offset)
		return true;
	return hp_os_madvise((char *)addr + offset, length, MADV_DONTNEED) != 0;
}

static bool z_split(extent_hooks_t *h, void *addr, size_t size,
    size_t size_a, size_t size_b, bool committed, unsigned ind) {
	(void)h, (void)size_a, (void)size_b, (void)committed, (void)ind;
	return !zone_owns(addr, size);
}

static bool z_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
    void *addr_b, size_t size_b, bool committed, unsigned ind) {
	(void)h, (void)committed, (void)ind;
	return !zone_owns(addr_a, size_a) || !zone_owns(addr_b, size_b);
}

static extent_hooks_t zone_hooks = {
	.alloc = z_alloc,
	.dalloc = z_dalloc,
	.purge_forced = z_purge,     /* MADV_DONTNEED: reads back zero */
	.split = z_split,
	.merge = z_merge,
};

/* The zone is the tail of the region's reservation (region.c), so that
 * free() tests one range for both. */
static bool zone_init(uintptr_t base, size_t size, long decay_ms,
    const char **why) {
	*why = "no address space for it";
	if (size == 0)
		return false;
	hp_assert(size > HP_PAGE && ((base | size) & (HP_PAGE - 1)) == 0);
	hp_os_madvise((void *)base, size, MADV_NOHUGEPAGE);
	/* Its first page stays PROT_NONE: a mapping below the zone (the
	 * long-lived class's top block, read-write MADV_NOHUGEPAGE like the
	 * zone's when THP is unusable) can never merge with the zone's, which
	 * would take that block out of the class's range in smaps. */
	zone_bump = zone_mapped = base + HP_PAGE;
	zone_end = base + size;
	hp_zone_base = base;
	/* At start, before anything can call mallctl: made without it, so
	 * that a program that never asks for jemalloc's statistics does
	 * not pay for ctl's copy of them (je/jectl.c). */
	unsigned ind = hp_arena_create_early(&zone_hooks, decay_ms, why);
	if (ind == HP_NO_ARENA)
		return false;
	zone_flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
	/* Published last: free() tests pointers against it. */
	__atomic_store_n(&hp_zone_size, size, __ATOMIC_RELEASE);
	return true;
}

/* ---- sampled objects ------------------------------------------------- */

static size_t slot_of(uintptr_t p) {
	return (size_t)((p * 0x9e3779b97f4a7c15ull) >> 32) & (nslots - 1);
}

static void insert(const sample_t *s) {
	/* A free slot is always left: probing ends. */
	hp_assert(s->ptr != 0 && nsamples < nslots);
	size_t i = slot_of(s->ptr);
	while (samples[i].ptr != 0)
		i = (i + 1) & (nslots - 1);
	samples[i] = *s;
}

#ifdef HP_DEBUG
/* The records in the table, counted one by one. */
static size_t records(void) {
	size_t n = 0;
	for (size_t i = 0; i < nslots; i++)
		n += samples[i].ptr != 0;
	return n;
}
#endif

/* n slots, in a new mapping: the table's memory follows the number of
 * live samples, not the most it ever held. Lock held. */
static bool resize(size_t n) {
	hp_site_assert_locked();
	sample_t *old = samples, *t;
	size_t o = nslots;
	hp_assert((n & (n - 1)) == 0 && n >= HP_SAMPLE_FIRST &&
	    n <= HP_SAMPLE_SLOTS && nsamples < n * 3 / 4);
	if ((t = hp_site_map(n * sizeof *t)) == NULL)
		return false;
	samples = t;
	nslots = n;
	age_cursor = 0;
	for (size_t i = 0; i < o; i++)
		if (old[i].ptr != 0)
			insert(&old[i]);
	hp_assert(records() == nsamples);    /* the count is the table's */
	hp_os_munmap(old, o * sizeof *old);
	return true;
}

/* Lock held. */
static bool record(uintptr_t p, int site, uint64_t t, uintptr_t near) {
	hp_site_assert_locked();
	hp_assert(hp_zone_contains((void *)p) && site >= 0 && site < HP_SITES);
	if (nsamples >= nslots * 3 / 4 && (nslots >= HP_SAMPLE_SLOTS ||
	    !resize(2 * nslots)))
		return false;
	insert(&(sample_t){p, t, near, site, false});
	nsamples++;
	hp_sites[site].samples++;
	hp_sites[site].live++;
	hp_assert(nsamples <= nslots * 3 / 4 && hp_sites[site].live <=
	    hp_sites[site].samples);
	return true;
}

/* Removes slot i, shifting back the entries after it (linear probing).
 * Lock held. */
static void unrecord(size_t i) {
	hp_site_assert_locked();
	hp_assert(i < nslots && samples[i].ptr != 0 && nsamples > 0);
	samples[i].ptr = 0;
	nsamples--;
	for (size_t j = (i + 1) & (nslots - 1); samples[j].ptr != 0;
	    j = (j + 1) & (nslots - 1)) {
		size_t home = slot_of(samples[j].ptr);
		/* Can j's entry move to the hole at i? Only if its home is not
		 * cyclically within (i, j]. */
		bool stays = i <= j ? (home > i && home <= j) :
		    (home > i || home <= j);
		if (!stays) {
			samples[i] = samples[j];
			samples[j].ptr = 0;
			i = j;
		}
	}
}

/* A sampled object's outcome; when it places its site on huge pages, the
 * small-class ranges the site's live samples noted are queued for
 * catch-up: what the site allocated while it was learned. Lock held. */
static void outcome(int site, bool long_lived, uint64_t life_ns) {
	hp_site_assert_locked();
	bool was = hp_site_placed(site);
	hp_site_outcome(site, long_lived, life_ns);
	if (was || !hp_site_placed(site))
		return;
	for (size_t i = 0; i < nslots; i++)
		if (samples[i].ptr != 0 && samples[i].site == site)
			hp_catchup_queue(samples[i].near);
}

/* Counts records older than lifetime_ms as long-lived, a few per call.
 * Lock held. */
static void age(uint64_t t) {
	hp_site_assert_locked();
	hp_assert(age_cursor < nslots && (nslots & (nslots - 1)) == 0);
	for (unsigned n = 0; n < HP_AGE_STEP; n++) {
		sample_t *s = &samples[age_cursor];
		age_cursor = (age_cursor + 1) & (nslots - 1);
		if (s->ptr != 0 && !s->long_lived && t - s->born_ns >= lifetime_ns) {
			s->long_lived = true;
			outcome(s->site, true, t - s->born_ns);
		}
	}
}

/* frames and stride: the site, unwound under sample_lock. Out of line, so
 * that the promoted path (core/route.c) keeps a small frame. */
static __attribute__((noinline)) void *sample(size_t size,
    const uintptr_t *frames, unsigned n, const int32_t *stride, bool zero) {
	void *p = hp_je_mallocx(size ? size : 1, zone_flags |
	    (zero ? MALLOCX_ZERO : 0));
	if (p == NULL)
		return NULL;
	uintptr_t near = hp_catchup_probe(size);
	hp_site_lock();
	/* Under the lock: records age in order. */
	uint64_t t = hp_os_clock_ns(CLOCK_MONOTONIC);
	int site = hp_site_get(frames, n, stride);
	bool kept = site >= 0 && record((uintptr_t)p, site, t, near);
	if (kept)
		hp_site_counts.samples++;
	else if (site >= 0)              /* the sample table could not grow */
		hp_site_counts.sites_dropped++;
	/* Each sample kept is a record, live or ended since. */
	hp_assert(nsamples <= hp_site_counts.samples);
	age(t);
	hp_site_unlock();
	if (!kept) {                 /* untracked: must not stay in the zone */
		hp_je_dallocx(p, zone_flags);
		return NULL;
	}
	return p;
}

/* In replay mode nothing is sampled, but the sample counter still paces a
 * cheap check for modules loaded since (dlopen), whose profile entries then
 * apply. */
static int count_adds(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

static void check_new_modules(void) {
	unsigned long long adds = 0;
	dl_iterate_phdr(count_adds, &adds);
	if ((unsigned)adds != __atomic_load_n(&dl_adds, __ATOMIC_RELAXED)) {
		__atomic_store_n(&dl_adds, (unsigned)adds, __ATOMIC_RELAXED);
		hp_profile_resolve();
	}
}

/* Bytes to this thread's next sample: hp_thread.budget (base.h's block,
 * so that hp_sample_skip reads it with the rest of the promoted path). It
 * starts at 0, so the first call only draws the first interval: sampling
 * it would unwind every thread that allocates, even once. Without
 * sampling, the first call sets it to INT64_MAX. */
#define budget (hp_thread.budget)
static HP_TLS bool armed;

/* The budget ran out: the next interval, and this allocation sampled
 * (or NULL). Out of line, as sample(). */
static __attribute__((noinline)) void *sample_due(size_t size, uintptr_t ret,
    bool zero) {
	void *p = NULL;
	bool first = !armed;
	armed = true;
	/* Inside the sampler (hp_sample_busy), a nested allocation only
	 * restarts the count; with sample_lock busy, this interval goes
	 * unsampled (see the lock), and its token back. Paced only where it
	 * unwinds: replay's dues only look for modules loaded since. */
	bool unwinds = learning && hp_zone_size != 0;
	bool take = !hp_sample_busy && !first && (!unwinds || paced());
	budget = next_interval() << stretch;
	hp_assert(stretch <= HP_STRETCH_MAX &&
	    budget >= mean_interval / 2 << stretch &&
	    budget < (mean_interval / 2 + mean_interval) << stretch);
	if (take && hp_trylock(&sample_lock)) {
		hp_sample_busy_set(true);
		check_new_modules();
		uintptr_t frames[HP_SITE_DEPTH];
		int32_t stride[HP_SITE_DEPTH - 1];
		bool go = learning && hp_zone_size != 0;
		unsigned n = go ? hp_unwind_frames(ret, frames, stride) : 0;
		hp_unlock(&sample_lock);
		if (go)
			p = sample(size, frames, n, stride, zero);
		hp_sample_busy_set(false);
	} else if (take && unwinds) {
		unpaced();
	}
	return p;
}

/* hp_sample_skip took size, and the budget ran out, or the request is
 * the huge class's, which the sampler does not count: it is given back
 * (the caller then takes the slot's slow path, which counts it again, or
 * the huge class). */
__attribute__((noinline, cold)) void hp_sample_unskip(size_t size) {
	hp_thread.budget_bits += size;
}

void *hp_sample_take(size_t size, uintptr_t ret, bool zero, uint64_t used) {
	hp_assert(used >= size);    /* hp_slot_refill's: this call's too */
	if (mean_interval <= 0) {
		budget = INT64_MAX;      /* hp_sample_skip's test never fails */
		return NULL;
	}
	if ((budget -= (int64_t)used) < 0)
		return sample_due(size, ret, zero);
	return NULL;
}

/* Ends a sampled object's record: its lifetime decides. */
static void end_sample(uintptr_t p) {
	hp_site_lock();
	uint64_t t = hp_os_clock_ns(CLOCK_MONOTONIC);
	size_t i = slot_of(p);
	while (samples[i].ptr != 0 && samples[i].ptr != p)
		i = (i + 1) & (nslots - 1);
	/* Every object of the zone that the program holds has its record
	 * (sample() frees one it could not record). */
	hp_assert(samples[i].ptr == p);
	if (samples[i].ptr == p) {
		sample_t s = samples[i];
		uint64_t life = t - s.born_ns;
		hp_assert(hp_sites[s.site].live > 0);
		hp_sites[s.site].live--;
		if (s.long_lived)
			hp_site_freed_long(s.site, life);
		else
			outcome(s.site, life >= lifetime_ns, life);
		unrecord(i);
		if (nslots > HP_SAMPLE_FIRST && nsamples < nslots / 8)
			resize(nslots / 2);  /* on failure, the old one serves */
	}
	age(t);
	hp_site_unlock();
}

void hp_sample_free(void *p) {
	hp_assert(hp_zone_contains(p));
	end_sample((uintptr_t)p);
	hp_je_dallocx(p, zone_flags);
}

/* Registered before jemalloc's fork handlers (asserted below), so they
 * run after its prepare handler, which takes the huge class's start lock
 * first (je/jefork.c): that lock ranks below these. Neither is held
 * across a jemalloc call. zone_lock is only taken inside jemalloc's
 * extent calls, which its prefork has drained; the child just resets
 * it. */
static void lt_prefork(void) {
	hp_lock(&sample_lock);
	hp_site_lock();
}

static void lt_postfork_parent(void) {
	hp_site_unlock();
	hp_unlock(&sample_lock);
}

static void lt_postfork_child(void) {
	hp_lock_reinit(&sample_lock);
	hp_lock_reinit(&zone_lock);
	hp_site_atfork_child();
}

bool hp_sample_init(const hp_conf_t *c, uintptr_t zone, size_t zone_size) {
	if (c->lifetime == HP_LIFETIME_OFF)
		return true;
	hp_assert(nslots == 0 && nsamples == 0);    /* once */
	nslots = HP_SAMPLE_FIRST;
	samples = hp_site_map(nslots * sizeof *samples);
	if (samples == NULL || !hp_site_init()) {
		hp_log("could not map the site tables (%s); lifetime learning "
		    "is off", hp_strerror(errno));
		return false;
	}
	hp_assert(!hp_je_atfork_registered());        /* je/jefork.c */
	pthread_atfork(lt_prefork, lt_postfork_parent, lt_postfork_child);
	mean_interval = (int64_t)c->lifetime_sample;
	token_ns = c->lifetime_sample_rate > 0 ? HP_SECOND_NS /
	    (uint64_t)c->lifetime_sample_rate : 0;
	lifetime_ns = (uint64_t)c->lifetime_ms * 1000000u;
	learning = c->lifetime == HP_LIFETIME_LEARN;
	hp_lock(&sample_lock);    /* the profile's module list */
	bool loaded = c->lifetime_profile[0] != '\0' &&
	    hp_profile_load(c->lifetime_profile);
	hp_unlock(&sample_lock);
	if (c->lifetime == HP_LIFETIME_REPLAY && !loaded) {
		/* A bad profile has said so already, in one line. */
		if (c->lifetime_profile[0] == '\0')
			hp_log("lifetime:replay without lifetime_profile; sites "
			    "are learned instead");
		learning = true;
	}
	unsigned long long adds = 0;
	dl_iterate_phdr(count_adds, &adds);
	dl_adds = (unsigned)adds;
	const char *why;
	if (learning && !hp_unwind_init(&why)) {
		hp_log("lifetime learning is off: stacks cannot be unwound "
		    "without descriptors here (%s)", why);
		learning = false;
	}
	if (learning && !zone_init(zone, zone_size, c->decay_ms, &why)) {
		hp_log("could not make the sample zone's arena (%s); lifetime "
		    "learning is off", why);
		learning = false;
	}
	return true;
}
