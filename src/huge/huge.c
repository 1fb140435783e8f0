/*
 * The huge class: a jemalloc arena whose extent hooks hand out memory from
 * the 2 MiB-aligned reservation (region.c). jemalloc carves and reuses it;
 * the hooks decide what reaches the kernel:
 *  - dalloc is refused, so address space is retained and reused;
 *  - decommit hands 4 KiB subpages back to region.c, which returns a
 *    2 MiB page to the kernel only once all of it is free;
 *  - purge_lazy and purge_forced are left out (NULL), so jemalloc never
 *    asks for a partial purge that would split a huge page.
 * The arena's own metadata is not on these hooks (hp_arena_create), so
 * every range they see is data. jemalloc only ever hands back ranges it
 * was given; a range the region does not own (a jemalloc or a MALLOC_CONF
 * this code was not written for) is refused and counted, never touched.
 *
 * Objects of the class go back to it: free() sends every pointer of the
 * owned range here (hp_huge_free), so none reaches the thread caches of
 * the small class.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "huge/huge.h"
#include "base/lock.h"
#include "je/je.h"

#define HP_GROW_LIMIT ((size_t)64 << 20)

static int huge_flags;         /* MALLOCX_ARENA(i) | MALLOCX_TCACHE_NONE */
static unsigned huge_ind = HP_NO_ARENA;
static int warned_fallback;
static bool threads_on;        /* off again in a fork child */
static bool background_on;     /* jemalloc's; off again in a fork child */
/* Whether this thread has made a slow allocation (core/route.c), and the
 * first thread that did (the program's main thread, as a rule). */
HP_TLS bool hp_huge_thread_seen;
static uintptr_t first_thread;
/* The arena made and the threads on (both again in a fork child):
 * hp_huge_start_threads alone starts the threads, not the arena. */
static bool ready;
static long decay_ms;
static hp_lock_t start_lock = HP_LOCK_INIT(HP_RANK_START);
/* Whether this thread holds start_lock for a start: an allocation nested
 * in it (pthread_create's calloc, at a promoted site, say) must not start
 * the class again and wait for the lock its own thread holds. */
static HP_TLS bool start_held;

static void start_lock_take(void) {
	hp_lock(&start_lock);
	start_held = true;
}

static bool start_lock_try(void) {
	if (!hp_trylock(&start_lock))
		return false;
	start_held = true;
	return true;
}

static void start_lock_drop(void) {
	start_held = false;
	hp_unlock(&start_lock);
}

/* ---- the extent hooks --------------------------------------------------- */

static bool foreign(const void *addr, size_t size) {
	bool owned = hp_region_owns(addr, size);
	/* The embedded jemalloc hands back only ranges the hooks gave it
	 * (hooks_refused is 0 in every test): a debug build stops at one
	 * that is not. */
	hp_assert(owned);
	if (hp_likely(owned))
		return false;
	__atomic_fetch_add(&hp_backing_fallbacks.foreign, 1, __ATOMIC_RELAXED);
	return true;
}

static void *h_alloc(extent_hooks_t *h, void *new_addr, size_t size,
    size_t align, bool *zero, bool *commit, unsigned ind) {
	(void)h, (void)ind;
	if (new_addr != NULL)        /* in-place growth: not offered */
		return NULL;
	void *p = hp_region_alloc(size, align, *commit);
	hp_assert(p == NULL || (hp_region_owns(p, size) &&
	    (align == 0 || (uintptr_t)p % align == 0)));
	if (p != NULL)
		*zero = true;            /* fresh, or zeroed on reuse */
	return p;
}

static bool h_dalloc(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h, (void)addr, (void)size, (void)committed, (void)ind;
	return true;                 /* keep the range; jemalloc retains it */
}

static void h_destroy(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h, (void)ind;
	if (committed && !foreign(addr, size))
		hp_region_release(addr, size);
}

static bool h_commit(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h, (void)size, (void)ind;
	if (foreign((char *)addr + off, len))
		return true;             /* failed */
	hp_assert(off <= size && len <= size - off);
	return !hp_region_reuse((char *)addr + off, len);
}

static bool h_decommit(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h, (void)size, (void)ind;
	if (foreign((char *)addr + off, len))
		return true;             /* failed: jemalloc keeps it committed */
	hp_assert(off <= size && len <= size - off);
	hp_region_release((char *)addr + off, len);
	return false;
}

static bool h_split(extent_hooks_t *h, void *addr, size_t size,
    size_t size_a, size_t size_b, bool committed, unsigned ind) {
	(void)h, (void)size_a, (void)size_b, (void)committed, (void)ind;
	return foreign(addr, size);
}

static bool h_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
    void *addr_b, size_t size_b, bool committed, unsigned ind) {
	(void)h, (void)committed, (void)ind;
	return foreign(addr_a, size_a) || foreign(addr_b, size_b);
}

static extent_hooks_t huge_hooks = {
	.alloc = h_alloc,
	.dalloc = h_dalloc,
	.destroy = h_destroy,
	.commit = h_commit,
	.decommit = h_decommit,
	.purge_lazy = NULL,
	.purge_forced = NULL,
	.split = h_split,
	.merge = h_merge,
};

/* Made with the first huge-class allocation, so that a process that never
 * uses the huge class has nothing of it. Tried again by each huge-class
 * allocation while it cannot be made, said once (in a fork child too:
 * the flag is inherited). */
static bool create_arena(void) {
	hp_lock_assert_held(&start_lock);
	hp_assert(huge_ind == HP_NO_ARENA);
	const char *why;
	unsigned ind = hp_arena_create(&huge_hooks, &why);
	if (ind == HP_NO_ARENA) {
		hp_warn_once(&warned_fallback, "could not create the huge class's "
		    "arena (%s); huge-class requests fall back to 4 KiB pages "
		    "(said once)", why);
		return false;
	}
	/* Without eager purge, reused large blocks keep their huge pages. */
	int err = hp_arena_decay(ind, decay_ms);
	if (err != 0)
		hp_log("could not set decay on the huge arena %u (%s); its free "
		    "pages go back only on malloc_trim", ind, hp_strerror(err));
	/* jemalloc grows its retained address space geometrically; capping
	 * the step keeps what the hooks map (and the kernel charges) close to
	 * what is used, and lets the reservation fill up. Larger requests
	 * still get an exact fit. (With MALLOC_CONF retain:false every
	 * extent is an exact fit.) */
	char name[64];
	size_t limit = HP_GROW_LIMIT;
	hp_fmt(name, sizeof name, "arena.%u.retain_grow_limit", ind);
	if (hp_je_opt_retain() && (err = hp_je_mallctl(name, NULL, NULL, &limit,
	    sizeof limit)) != 0)
		hp_log("could not limit the huge arena's growth step (%s)",
		    hp_strerror(err));
	huge_flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
	/* Promoted sites' caches take the holes their learning left first. */
	hp_je_fill_holes_for(ind);
	__atomic_store_n(&huge_ind, ind, __ATOMIC_RELEASE);
	return true;
}

/*
 * Free huge pages must go back while the program makes no malloc call:
 * the maintenance thread (core/maint.c, started through
 * hp_huge_on_threads) drives the huge arena's decay once a second. It
 * starts with the first huge-class allocation, or with the first
 * allocation of a program's second thread (core/route.c), not at load: a
 * single-threaded process that never uses the huge class stays
 * single-threaded (unshare(CLONE_NEWUSER) needs that). Once started it
 * stays, also after the program's own threads have exited.
 *
 * jemalloc's background threads, which purge the small class on the
 * decay curve while the program makes no malloc call, start later: with
 * the maintenance thread's HP_BG_AFTER_PASSES-th pass, 10 s after it
 * started at the default maintain_ms. A service gets them; a short
 * program with a few threads never does, as under jemalloc's own
 * default. Started through mallctl, they set up ctl's copy of every
 * arena's statistics; with that, their code, stacks and the dirty pages
 * they leave for their next pass, starting them later cut a three-thread
 * program's peak (W11, 3 s) by 0.86 MB (docs/benchmarks.md). Without
 * them, a thread that exits does not purge its arena either
 * (je/jeexit.c). A MALLOC_CONF
 * background_thread:false is kept (jeconf.c), and so is the program's own
 * mallctl of it (hp_huge_background_chosen); under background_thread:true
 * jemalloc starts them itself, at its own start, and in a fork child the
 * maintenance thread's start does. jemalloc turns its threads off in a
 * fork child; hp_huge_atfork_child re-arms both starts.
 */
void (*hp_huge_on_threads)(void);

static void start_background(void) {
	hp_lock_assert_held(&start_lock);
	if (background_on || hp_jeconf_background_off())
		return;
	/* Through mallctl, under ctl's lock, though its first call makes
	 * ctl's copy of every arena's statistics: je/jectl.c says why. */
	bool on = true;
	int err = hp_je_mallctl("background_thread", NULL, NULL, &on, sizeof on);
	if (err != 0) {
		hp_log("could not start jemalloc's background threads (%s); "
		    "the small class's free memory goes back as the program "
		    "allocates, and on malloc_trim", hp_strerror(err));
		/* jemalloc leaves itself marked on after a failed start, and
		 * then purges only from its threads: off again, so that the
		 * program's calls and a thread's exit purge (je/jeexit.c). */
		on = false;
		hp_je_mallctl("background_thread", NULL, NULL, &on, sizeof on);
		hp_je_exit_purge(true);
	}
	__atomic_store_n(&background_on, true, __ATOMIC_RELEASE);
}

/* The program's own choice (-1: none), kept in a fork child too. */
static int background_chosen = -1;

void hp_huge_background_chosen(bool on) {
	start_lock_take();
	/* Again under start_lock: a start of the library's between the
	 * program's mallctl and this lock would have undone it. */
	hp_je_mallctl("background_thread", NULL, NULL, &on, sizeof on);
	hp_je_exit_purge(!on);
	background_chosen = on;
	__atomic_store_n(&background_on, true, __ATOMIC_RELEASE);
	start_lock_drop();
}

static void start_threads(void) {
	hp_lock_assert_held(&start_lock);
	if (hp_jeconf_background_on())
		start_background();
	__atomic_store_n(&threads_on, true, __ATOMIC_RELEASE);
	if (hp_huge_on_threads != NULL)
		hp_huge_on_threads();
}

void hp_huge_start_background(void) {
	if (__atomic_load_n(&background_on, __ATOMIC_ACQUIRE))
		return;
	start_lock_take();
	start_background();
	start_lock_drop();
}

unsigned hp_huge_arena(void) {
	return __atomic_load_n(&huge_ind, __ATOMIC_ACQUIRE);
}

static void tcache_atfork_child(void);

/* Without it, a fork while another thread makes the huge arena left the
 * child with the arena made (and counted among the library's own) but
 * huge_ind unset: the child made a second one (test/progs/forkmt). */
void hp_huge_prefork(void) {
	hp_lock(&start_lock);
}

void hp_huge_postfork_parent(void) {
	hp_unlock(&start_lock);
}

void hp_huge_atfork_child(void) {
	/* The child's one thread, the forking one, is its first. */
	first_thread = (uintptr_t)pthread_self();
	hp_huge_thread_seen = true;
	threads_on = false;
	/* jemalloc's are off in the child: started again as in the parent,
	 * unless the program turned them off. */
	background_on = background_chosen == 0;
	ready = false;
	hp_lock_reinit(&start_lock);
	tcache_atfork_child();
}

bool hp_huge_init(const hp_conf_t *c) {
	decay_ms = c->decay_ms;
	return true;
}

/* Once per process (and again in a fork child, for the threads): the arena,
 * then the threads. False if the arena cannot be made. */
static bool start_huge(void) {
	start_lock_take();
	bool ok = huge_ind != HP_NO_ARENA || create_arena();
	if (ok && !threads_on)
		start_threads();
	if (ok)
		__atomic_store_n(&ready, true, __ATOMIC_RELEASE);
	start_lock_drop();
	return ok;
}

void hp_huge_start_threads(void) {
	start_lock_take();
	if (!threads_on)
		start_threads();
	start_lock_drop();
}

/* The same from an allocation that may be nested in a start (pthread_create
 * allocates): a thread that finds start_lock held does not wait for its
 * holder. True if the threads are on. */
static bool try_start_threads(void) {
	if (__atomic_load_n(&threads_on, __ATOMIC_ACQUIRE))
		return true;
	if (!start_lock_try())
		return false;
	if (!threads_on)
		start_threads();
	start_lock_drop();
	return true;
}

/* A thread's first slow allocation: any thread but the first starts the
 * threads, as the huge class's first allocation does. A program that
 * starts no thread of its own still has none of ours. A thread that
 * found the start in another's hands (or its own, nested) asks again
 * next time. */
void hp_huge_thread_first(void) {
	uintptr_t me = (uintptr_t)pthread_self(), first = 0;
	hp_huge_thread_seen = __atomic_compare_exchange_n(&first_thread,
	    &first, me, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
	    first == me || try_start_threads();
}

/* Nested in a start on this thread: not started, and not started here. */
static bool started(void) {
	return hp_likely(__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) ||
	    (!start_held && start_huge());
}

/* ---- allocation ---------------------------------------------------------- */

void *hp_huge_alloc(size_t size, size_t align, bool zero) {
	if (size > PTRDIFF_MAX) {
		errno = ENOMEM;
		return NULL;
	}
	int shape = (zero ? MALLOCX_ZERO : 0) |
	    (align > HP_MALLOC_ALIGN ? MALLOCX_ALIGN(align) : 0);
	void *p = started() ? hp_je_mallocx(size, huge_flags | shape) : NULL;
	if (hp_likely(p != NULL)) {
		hp_assert(hp_region_contains(p));     /* the arena's hooks' */
		return p;
	}
	/* The reservation is full or could not be mapped: the program
	 * goes on, on 4 KiB pages. (Nested in a start on this thread, the
	 * class was not asked: nothing failed, nothing to count.) */
	p = hp_je_mallocx(size, shape);
	if (!start_held) {
		__atomic_fetch_add(&hp_backing_fallbacks.mmap_failed, 1,
		    __ATOMIC_RELAXED);
		if (p != NULL)
			hp_warn_once(&warned_fallback, "the huge class could not "
			    "map %zu bytes; falling back to 4 KiB pages (said "
			    "once)", size);
	}
	if (p == NULL)
		errno = ENOMEM;
	return p;
}

/* Where a promoted small object can be: the huge class's region, or the
 * small class's data, where a hole in a collapsed range filled the cache
 * (je/jefill.c; the range may have been split since). */
bool hp_huge_small_home(const void *p) {
	uintptr_t a = (uintptr_t)p;
	return hp_region_contains(p) || hp_jemap_may_hold(a);
}

/* Promoted small objects come from the huge arena through an explicit
 * tcache per thread (filled first from the holes the site's learning left
 * in the small class's collapsed ranges: je/jefill.c), made on the
 * thread's first such allocation and destroyed with the thread; objects that a thread with a cache frees go
 * into its own cache (whichever thread made them), those of a thread
 * without one straight to the arena. jemalloc never collects explicit
 * caches by time: a cache holds what its bins hold until it is full. */
static HP_TLS unsigned tcache_id;      /* id + 1; 0: none yet */
/* The cache itself (hp_je_tc_of), for the fast paths; hp_no_cache, whose
 * bins are all empty and full, while the thread has none. In the thread
 * block, beside the rest of the promoted path's state. */
#define tcache (hp_thread.huge_cache)
/* The largest request hp_huge_small_try takes from it: 0 while a
 * long-lived class serves promoted sites (its objects are the huge
 * class's own, what that class could not take, through hp_huge_small),
 * so that route.c's placed path goes on to that class after one compare,
 * without a test of its own. */
static size_t cache_max = HP_CACHE_MAX;

void hp_huge_promoted_elsewhere(void) {
	cache_max = 0;
}

static void *fast_cache(unsigned id) {
	void *tc = hp_je_tc_of(id);
	return tc != NULL ? tc : HP_NO_CACHE;
}
/* In a fork child, the forking thread's cache, set aside so that its
 * first promoted allocation misses the fast path and restarts the
 * threads (hp_huge_small: started()), then takes it back. */
static HP_TLS unsigned tcache_parked;
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

/* The ids of the library's caches (jemalloc's are below 4096): the
 * program's mallctl may not flush or destroy one (api/jeapi.c), which
 * would free a cache that a thread's block still names. */
#define CACHE_IDS 4096
static uint64_t ours[CACHE_IDS / 64];

static void mark(unsigned id, bool on) {
	hp_assert(id < CACHE_IDS);
	uint64_t bit = (uint64_t)1 << (id % 64);
	if (on)
		__atomic_fetch_or(&ours[id / 64], bit, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&ours[id / 64], ~bit, __ATOMIC_RELEASE);
}

bool hp_huge_cache_is_ours(unsigned id) {
	return id < CACHE_IDS && (__atomic_load_n(&ours[id / 64],
	    __ATOMIC_ACQUIRE) & (uint64_t)1 << (id % 64)) != 0;
}

static void tcache_destroy(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg - 1;
	tcache = HP_NO_CACHE;
	tcache_id = 0;
	/* Unmarked first: once destroyed, the id is jemalloc's to hand out
	 * again, to the program or to another thread of the library, whose
	 * mark must not be cleared here. A program's flush in between finds
	 * a cache no thread's block names. */
	mark(id, false);
	hp_je_mallctl("tcache.destroy", NULL, NULL, &id, sizeof id);
}

static void tcache_key_init(void) {
	pthread_key_create(&tcache_key, tcache_destroy);
}

static void tcache_atfork_child(void) {
	tcache_parked = tcache_id;
	tcache = HP_NO_CACHE;
	tcache_id = 0;
}

void *hp_huge_small(size_t size, bool zero) {
	if (!started())
		return NULL;
	if (hp_unlikely(tcache_id == 0) && tcache_parked != 0) {
		tcache_id = tcache_parked;
		tcache_parked = 0;
		tcache = fast_cache(tcache_id - 1);
	}
	if (hp_unlikely(tcache_id == 0)) {
		unsigned id;
		size_t sz = sizeof id;
		pthread_once(&tcache_once, tcache_key_init);
		if (hp_je_mallctl("tcache.create", &id, &sz, NULL, 0) != 0 ||
		    id >= CACHE_IDS)
			return NULL;
		mark(id, true);
		tcache_id = id + 1;
		/* The placed path counts what this cache serves on the
		 * thread's shard without a test: taken now. */
		(void)hp_shard();
		tcache = fast_cache(id);
		pthread_setspecific(tcache_key, (void *)(uintptr_t)tcache_id);
	}
	void *p = hp_je_mallocx(size ? size : 1, MALLOCX_ARENA(huge_ind) |
	    MALLOCX_TCACHE(tcache_id - 1) | (zero ? MALLOCX_ZERO : 0));
	hp_assert(p == NULL || hp_huge_small_home(p));
	return p;
}

/* The two above when this thread's cache can serve them on jemalloc's
 * fast paths (je/jetc.c): no lock, no system call, errno untouched. A
 * thread has a cache once hp_huge_small has run on it, and so once the
 * arena is made. */
inline __attribute__((always_inline)) bool hp_huge_small_try(size_t size,
    void **out) {
	hp_assert(tcache != NULL);
	if (!hp_je_tc_try_malloc(tcache, size, cache_max, out))
		return false;
	hp_assert(tcache != HP_NO_CACHE && hp_huge_small_home(*out));
	return true;
}

inline __attribute__((always_inline)) bool hp_huge_free_try(void *p) {
	hp_assert(tcache != NULL && hp_region_contains(p));
	bool done = hp_je_tc_try_free(tcache, p);
	hp_assert(!done || tcache != HP_NO_CACHE);
	return done;
}

void hp_huge_free(void *p) {
	hp_assert(hp_region_contains(p));
	hp_je_dallocx(p, tcache_id != 0 ? MALLOCX_TCACHE(tcache_id - 1) :
	    MALLOCX_TCACHE_NONE);
}

void *hp_huge_realloc(void *p, size_t size) {
	hp_assert(hp_region_contains(p) && huge_ind != HP_NO_ARENA);
	void *q = size > PTRDIFF_MAX ? NULL : hp_je_rallocx(p, size, huge_flags);
	if (q == NULL)
		errno = ENOMEM;
	return q;
}
