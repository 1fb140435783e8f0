/*
 * The huge class: jemalloc arenas whose extent hooks hand out memory from
 * the 2 MiB-aligned reservation (region.c). jemalloc carves and reuses it;
 * the hooks decide what reaches the kernel:
 *  - dalloc is refused, so address space is retained and reused;
 *  - decommit hands 4 KiB subpages back to region.c, which returns a
 *    2 MiB page to the kernel only once all of it is free;
 *  - purge_lazy and purge_forced are left out (NULL), so jemalloc never
 *    asks for a partial purge that would split a huge page.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include "internal.h"
#include "je.h"

#define HP_GROW_LIMIT ((size_t)64 << 20)

static int huge_flags;         /* MALLOCX_ARENA(i) | MALLOCX_TCACHE_NONE */
static unsigned huge_ind = HP_NO_ARENA;
static int warned_fallback;
static bool decay_thread_on;   /* off again in a fork child */
static long decay_ms;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Free huge pages must go back while the program makes no malloc call, so
 * decay runs on jemalloc's background threads. They start with the first
 * huge-class allocation, not at load: a process that never uses the huge
 * class stays single-threaded (unshare(CLONE_NEWUSER) needs that). jemalloc
 * turns them off in a fork child; hp_huge_atfork_child re-arms the start.
 */
static void start_decay_thread(void) {
	bool on = true;
	if (hp_je_mallctl("background_thread", NULL, NULL, &on, sizeof on))
		hp_log("could not start the decay thread; free huge pages go "
		    "back only on allocator calls and malloc_trim");
	__atomic_store_n(&decay_thread_on, true, __ATOMIC_RELEASE);
	hp_stats_start_thread();
}

unsigned hp_huge_arena(void) {
	return __atomic_load_n(&huge_ind, __ATOMIC_ACQUIRE);
}

void hp_huge_atfork_child(void) {
	decay_thread_on = false;
	pthread_mutex_init(&start_lock, NULL);
}

/*
 * jemalloc maps the arena's own metadata (its "base": extent descriptors,
 * bins) through these hooks too, in blocks aligned to 2 MiB; with retain
 * on, every extent it grows is asked for with page alignment. Metadata is
 * small, hot and never freed: it goes to plain 4 KiB pages, not to the
 * reservation, where it would take a huge page (or a pool page) each.
 */
static void *meta_map(size_t size, size_t align) {
	void *p = hp_map_aligned(size, align, PROT_READ | PROT_WRITE,
	    MAP_NORESERVE);
	if (p != NULL)
		madvise(p, size, MADV_NOHUGEPAGE);
	return p;
}

static void *h_alloc(extent_hooks_t *h, void *new_addr, size_t size,
    size_t align, bool *zero, bool *commit, unsigned ind) {
	(void)h, (void)ind;
	if (new_addr != NULL)        /* in-place growth: not offered */
		return NULL;
	if (align > HP_PAGE) {
		void *m = meta_map(size, align);
		if (m != NULL)
			*zero = *commit = true;
		return m;
	}
	void *p = hp_region_alloc(size, align, *commit);
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
	if (committed)
		hp_region_release(addr, size);
}

static bool h_commit(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h, (void)size, (void)ind;
	return !hp_region_reuse((char *)addr + off, len);   /* true: failed */
}

static bool h_decommit(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h, (void)size, (void)ind;
	hp_region_release((char *)addr + off, len);
	return false;
}

bool hp_hook_split(extent_hooks_t *h, void *addr, size_t size,
    size_t size_a, size_t size_b, bool committed, unsigned ind) {
	(void)h, (void)addr, (void)size, (void)size_a, (void)size_b;
	(void)committed, (void)ind;
	return false;
}

bool hp_hook_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
    void *addr_b, size_t size_b, bool committed, unsigned ind) {
	(void)h, (void)addr_a, (void)size_a, (void)addr_b, (void)size_b;
	(void)committed, (void)ind;
	return false;
}

static extent_hooks_t huge_hooks = {
	.alloc = h_alloc,
	.dalloc = h_dalloc,
	.destroy = h_destroy,
	.commit = h_commit,
	.decommit = h_decommit,
	.purge_lazy = NULL,
	.purge_forced = NULL,
	.split = hp_hook_split,
	.merge = hp_hook_merge,
};

static bool arena_set_ssize(unsigned ind, const char *what, ssize_t v) {
	char name[64];
	snprintf(name, sizeof name, "arena.%u.%s", ind, what);
	return hp_je_mallctl(name, NULL, NULL, &v, sizeof v) == 0;
}

/* Free pages stay dirty for dirty_ms, then go back (the arenas made here
 * have no lazy purge, so no muzzy state); muzzy -1 also turns off
 * jemalloc's eager purge of freed extents over oversize_threshold. */
bool hp_arena_decay(unsigned ind, long dirty_ms) {
	return arena_set_ssize(ind, "dirty_decay_ms", dirty_ms) &&
	    arena_set_ssize(ind, "muzzy_decay_ms", -1);
}

bool hp_huge_init(const hp_conf_t *c) {
	decay_ms = c->decay_ms;
	return true;
}

/* The arena is created with the first huge-class allocation: jemalloc maps
 * its metadata through the arena's hooks, a 2 MiB block that would sit on a
 * huge page in every process, even one that never uses the huge class. */
static bool create_arena(void) {
	unsigned ind;
	size_t sz = sizeof ind;
	extent_hooks_t *hooks = &huge_hooks;
	if (hp_je_mallctl("arenas.create", &ind, &sz, &hooks, sizeof hooks))
		return false;
	/* Without eager purge, reused large blocks keep their huge pages. */
	if (!hp_arena_decay(ind, decay_ms))
		hp_log("could not set decay on the huge arena %u", ind);
	/* jemalloc grows its retained address space geometrically; capping
	 * the step keeps what the hooks map (and the kernel charges) close to
	 * what is used, and lets the reservation fill up. Larger requests
	 * still get an exact fit. */
	char name[64];
	size_t limit = HP_GROW_LIMIT;
	snprintf(name, sizeof name, "arena.%u.retain_grow_limit", ind);
	if (hp_je_mallctl(name, NULL, NULL, &limit, sizeof limit))
		hp_log("could not limit the huge arena's growth step");
	huge_flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
	__atomic_store_n(&huge_ind, ind, __ATOMIC_RELEASE);
	return true;
}

/* Once per process (and again in a fork child, for the threads): the arena,
 * then the decay and stats threads. False if the arena cannot be made. */
static bool start_huge(void) {
	pthread_mutex_lock(&start_lock);
	bool ok = huge_ind != HP_NO_ARENA || create_arena();
	if (ok && !decay_thread_on)
		start_decay_thread();
	pthread_mutex_unlock(&start_lock);
	return ok;
}

void *hp_huge_alloc(size_t size, size_t align, bool zero) {
	if (size > PTRDIFF_MAX) {
		errno = ENOMEM;
		return NULL;
	}
	int shape = (zero ? MALLOCX_ZERO : 0) |
	    (align > HP_MALLOC_ALIGN ? MALLOCX_ALIGN(align) : 0);
	void *p = NULL;
	if (hp_likely(__atomic_load_n(&decay_thread_on, __ATOMIC_ACQUIRE)) ||
	    start_huge())
		p = hp_je_mallocx(size, huge_flags | shape);
	if (hp_likely(p != NULL))
		return p;
	/* The reservation is full or could not be mapped: the program
	 * goes on, on 4 KiB pages. */
	p = hp_je_mallocx(size, shape);
	__atomic_fetch_add(&hp_fallbacks.mmap_failed, 1, __ATOMIC_RELAXED);
	if (p == NULL)
		errno = ENOMEM;
	else
		hp_warn_once(&warned_fallback, "the huge class could not map %zu "
		    "bytes; falling back to 4 KiB pages (said once)", size);
	return p;
}

/* Promoted small objects come from the huge arena through an explicit
 * tcache per thread, made on the thread's first such allocation and
 * destroyed with the thread. */
static HP_TLS unsigned tcache_id;      /* id + 1; 0: none yet */
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

static void tcache_destroy(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg - 1;
	hp_je_mallctl("tcache.destroy", NULL, NULL, &id, sizeof id);
	tcache_id = 0;
}

static void tcache_key_init(void) {
	pthread_key_create(&tcache_key, tcache_destroy);
}

void *hp_huge_small(size_t size, bool zero) {
	if (hp_unlikely(!__atomic_load_n(&decay_thread_on, __ATOMIC_ACQUIRE)) &&
	    !start_huge())
		return NULL;
	if (hp_unlikely(tcache_id == 0)) {
		unsigned id;
		size_t sz = sizeof id;
		pthread_once(&tcache_once, tcache_key_init);
		if (hp_je_mallctl("tcache.create", &id, &sz, NULL, 0) != 0)
			return NULL;
		tcache_id = id + 1;
		pthread_setspecific(tcache_key, (void *)(uintptr_t)tcache_id);
	}
	void *p = hp_je_mallocx(size ? size : 1, MALLOCX_ARENA(huge_ind) |
	    MALLOCX_TCACHE(tcache_id - 1) | (zero ? MALLOCX_ZERO : 0));
	if (p != NULL) {
		__atomic_fetch_add(&hp_lifetime_counts.placed_bytes, size,
		    __ATOMIC_RELAXED);
		__atomic_fetch_add(&hp_lifetime_counts.placed, 1,
		    __ATOMIC_RELAXED);
	}
	return p;
}

void *hp_huge_realloc(void *p, size_t size) {
	void *q = size > PTRDIFF_MAX ? NULL : hp_je_rallocx(p, size, huge_flags);
	if (q == NULL)
		errno = ENOMEM;
	return q;
}
