#define _GNU_SOURCE
/*
 * The long-lived class (long_lived:mimalloc): the small objects of
 * promoted sites, served by mimalloc heaps bound to exclusive arenas over
 * a range of the library's reservation (region.c puts it between the huge
 * class and the sample zone, so free() sends its objects here with the
 * test it already makes). docs/long-lived-class.md has the measurements.
 *
 * Debian's libmimalloc.so.2 is loaded at the first promotion, RTLD_LOCAL:
 * it is built to replace malloc, and in the global scope its malloc could
 * be found by a program's dlsym(RTLD_NEXT). Only the functions resolved
 * below are used, and only with the version this was built against
 * (mimalloc's option numbers change between versions). If the library
 * cannot be loaded, or the program has loaded it itself (its options and
 * output are then the program's), the class stays on jemalloc's path
 * (huge.c), said in one line.
 *
 * The arenas: the first from the 2 MiB pool while it has pages (mimalloc
 * keeps hugetlb memory committed), the rest of the range PROT_NONE and
 * advised, which mimalloc commits (mprotect) and gives back (MADV_DONTNEED)
 * 32 MiB segment by segment: whole huge pages, only when a segment is
 * empty. The options that would split them or put memory outside the
 * range are held at values that cannot, one line for each the user set.
 *
 * Each thread allocates from heaps of its own, made at its first
 * promoted allocation; any thread frees (mimalloc's cross-thread frees).
 *
 * The class counts its live bytes without asking mimalloc for each
 * object's size (mi_usable_size finds the object's segment and page at
 * every call, at both ends of the promoted path; docs/long-lived-class.md
 * has its cost): a mimalloc page is whole 64 KiB slices of one block
 * size, so a table at the top of the range keeps the block size of each
 * slice, written by the allocation that finds it different and read by
 * free; the size of a new object comes from a per-thread cache keyed by
 * the request.
 * A thread's heaps die with it: mimalloc's key destructor gives their
 * pages to the thread's backing heap, so this thread's own key, made
 * before mimalloc's and so run first by glibc, retires them before that.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <mimalloc.h>
#include "longlived/longlived.h"

#define LL_LIB    "libmimalloc.so.2"
#define LL_ARENAS 2                       /* the pool's, then THP or 4 KiB */
#define LL_POOL_RETRY 65536               /* allocations before a full pool
                                             arena is tried again */
#define LL_SLICE_SHIFT 16                 /* mimalloc 2.0's page unit:
                                             MI_SEGMENT_SLICE_SIZE, 64 KiB */
#define LL_SIZES  32                      /* the per-thread size cache */

uintptr_t hp_ll_base;
size_t hp_ll_size;
hp_ll_counts_t hp_ll_counts;

/* 0 not loaded, 1 loading, 2 ready, 3 off (jemalloc's path). */
static int state;
static mi_arena_id_t arena_id[LL_ARENAS];
static unsigned narenas;
static size_t pool_bytes;                 /* the pool arena's, at the bottom */
static bool thp;                          /* the rest advised MADV_HUGEPAGE */
/* The block size of each slice of the arenas (0: ask mimalloc), at the
 * top of the range, on 4 KiB pages; table_bytes of the range. */
static uint32_t *bsize;
static size_t table_bytes;
static pthread_key_t thread_key;

static struct {
	int (*version)(void);
	bool (*manage)(void *, size_t, bool, bool, bool, int, bool,
	    mi_arena_id_t *);
	mi_heap_t *(*heap_new_in_arena)(mi_arena_id_t);
	void *(*heap_malloc)(mi_heap_t *, size_t);
	void *(*heap_zalloc)(mi_heap_t *, size_t);
	void *(*heap_realloc)(mi_heap_t *, void *, size_t);
	void (*free)(void *);
	size_t (*usable_size)(const void *);
	long (*option_get)(mi_option_t);
	void (*option_set)(mi_option_t, long);
	void (*register_output)(mi_output_fun *, void *);
	void (*thread_init)(void);
	mi_heap_t *(*heap_get_default)(void);
	void (*collect)(bool);
	void (*heap_collect)(mi_heap_t *, bool);
} mi;

static const struct {
	const char *name;
	size_t offset;
} functions[] = {
#define F(field, name) {name, offsetof(__typeof__(mi), field)}
	F(version, "mi_version"),
	F(manage, "mi_manage_os_memory_ex"),
	F(heap_new_in_arena, "mi_heap_new_in_arena"),
	F(heap_malloc, "mi_heap_malloc"),
	F(heap_zalloc, "mi_heap_zalloc"),
	F(heap_realloc, "mi_heap_realloc"),
	F(free, "mi_free"),
	F(usable_size, "mi_usable_size"),
	F(option_get, "mi_option_get"),
	F(option_set, "mi_option_set"),
	F(register_output, "mi_register_output"),
	F(thread_init, "mi_thread_init"),
	F(heap_get_default, "mi_heap_get_default"),
	F(collect, "mi_collect"),
	F(heap_collect, "mi_heap_collect"),
#undef F
};

/* mimalloc's options the class holds, mimalloc 2.0.9's default beside. */
static const struct {
	mi_option_t opt;
	const char *env;
	long want, dflt;
	const char *why;
} held[] = {
	{mi_option_allow_decommit, "MIMALLOC_ALLOW_DECOMMIT", 1, 1,
	 "free spans go back whole huge pages at a time"},
	{mi_option_decommit_delay, "MIMALLOC_DECOMMIT_DELAY", 0, 25,
	 "decommits only mark spans free here"},
	{mi_option_page_reset, "MIMALLOC_PAGE_RESET", 0, 0,
	 "resets would split huge pages"},
	{mi_option_abandoned_page_decommit, "MIMALLOC_ABANDONED_PAGE_DECOMMIT",
	 0, 0, "decommits would split huge pages"},
	{mi_option_large_os_pages, "MIMALLOC_LARGE_OS_PAGES", 0, 0,
	 "the class's pages come from the library's backing chain"},
	{mi_option_limit_os_alloc, "MIMALLOC_LIMIT_OS_ALLOC", 0, 0,
	 "each thread's heap records come from the system"},
	{mi_option_destroy_on_exit, "MIMALLOC_DESTROY_ON_EXIT", 0, 0,
	 "objects stay valid until the program ends"},
	{mi_option_show_errors, "MIMALLOC_SHOW_ERRORS", 0, 0,
	 "a full arena is not an error here"},
	{mi_option_show_stats, "MIMALLOC_SHOW_STATS", 0, 0,
	 "mimalloc's counters describe the library's arenas, not the "
	 "program's heap (hugepreload stat has the class's)"},
	{mi_option_verbose, "MIMALLOC_VERBOSE", 0, 0,
	 "the program did not ask mimalloc for messages"},
};

/* Options mimalloc acted on when it was loaded, which cannot be undone. */
static const char *const at_load[] = {"MIMALLOC_RESERVE_HUGE_OS_PAGES",
	"MIMALLOC_RESERVE_HUGE_OS_PAGES_AT", "MIMALLOC_RESERVE_OS_MEMORY"};

/* Per thread: a heap per arena; 1 once made, 2 once retired. */
static HP_TLS mi_heap_t *heaps[LL_ARENAS];
static HP_TLS unsigned char thread_state;
static HP_TLS unsigned pool_skip;         /* the pool arena was full */
/* The heap tried first: heaps[0], or the last while pool_skip counts
 * down; NULL until this thread's heaps are made. */
static HP_TLS mi_heap_t *first;
/* Requests (as size + 1: 0 is an empty entry) and the usable size
 * mimalloc gave them. */
static HP_TLS struct {
	uint32_t key, usable;
} sizes[LL_SIZES];

static void message(const char *msg, void *arg) {
	(void)arg;
	size_t n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		n--;
	if (n != 0)
		hp_log("libmimalloc: %.*s", (int)n, msg);
}

static void hold_options(void) {
	for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
		long v = mi.option_get(held[i].opt);
		if (v == held[i].want)
			continue;
		if (v != held[i].dflt || getenv(held[i].env) != NULL)
			hp_log("%s=%ld ignored: the long-lived class keeps it at "
			    "%ld (%s)", held[i].env, v, held[i].want, held[i].why);
		mi.option_set(held[i].opt, held[i].want);
	}
	for (size_t i = 0; i < sizeof at_load / sizeof at_load[0]; i++)
		if (getenv(at_load[i]) != NULL)
			hp_log("%s: libmimalloc acted on it when the long-lived "
			    "class loaded it; that memory is outside the class and "
			    "its counters", at_load[i]);
}

/* Whether every block of a mimalloc page has the page's usable size: not
 * in a build with MI_PADDING (debug, valgrind), where mi_usable_size is
 * the request's size. A 1-byte object's is 8 without it. */
static bool unpadded(void) {
	mi_heap_t *h = mi.heap_get_default();
	void *p = h != NULL ? mi.heap_malloc(h, 1) : NULL;
	if (p == NULL)
		return false;
	bool ok = mi.usable_size(p) == 8;
	mi.free(p);
	return ok;
}

/* The block-size table: one entry per slice of the range, at the bottom
 * of whole arena blocks at its top, read-write on 4 KiB pages (the kernel
 * gives it pages as slices are used). The rest of those blocks, a page at
 * least, stays PROT_NONE: the table's mapping must not merge with what
 * lies above the range (the sample zone's), or smaps would show it
 * outside the range (stats_print.c's check). Without it, mimalloc is
 * asked. */
static void make_table(void) {
	size_t need = ((hp_ll_size >> LL_SLICE_SHIFT) * sizeof *bsize +
	    HP_PAGE - 1) & ~(HP_PAGE - 1);
	size_t bytes = (need + HP_PAGE + HP_LL_SEGMENT - 1) &
	    ~(HP_LL_SEGMENT - 1);
	uintptr_t t = hp_ll_base + hp_ll_size - bytes;
	if (bytes > hp_ll_size / 8 || !unpadded() ||
	    hp_os_mprotect((void *)t, need, PROT_READ | PROT_WRITE) != 0)
		return;
	hp_os_madvise((void *)t, need, MADV_NOHUGEPAGE);
	hp_assert(need < bytes && bytes % HP_LL_SEGMENT == 0);
	table_bytes = bytes;
	bsize = (uint32_t *)t;
}

/* The range as arenas: pool pages first, then the rest up to the table. */
static bool make_arenas(void) {
	make_table();
	uintptr_t a = hp_ll_base;
	size_t left = hp_ll_size - table_bytes;
	size_t got = hp_backing_map_pool(a, left / 2, HP_LL_SEGMENT);
	if (got != 0) {
		if (mi.manage((void *)a, got, true, true, true, -1, true,
		    &arena_id[narenas])) {
			narenas++;
			pool_bytes = got;
			hp_region_fork_also(a, got);
			a += got;
			left -= got;
		} else {
			hp_backing_zap(a, got, HP_MAP_HUGETLB_2M);
		}
	}
	thp = hp_backing_advise(a, left);
	/* Its decommits give back whole huge pages only (llpages.c). */
	if (thp && !hp_llpages_init(a, left))
		return narenas != 0;
	if (mi.manage((void *)a, left, false, false, true, -1, true,
	    &arena_id[narenas]))
		narenas++;
	/* The arenas tile the range below the table, in whole segments. */
	hp_assert(narenas <= LL_ARENAS && pool_bytes % HP_LL_SEGMENT == 0 &&
	    a + left + table_bytes == hp_ll_base + hp_ll_size);
	return narenas != 0;
}

static void retire_thread(void *arg) {
	(void)arg;
	thread_state = 2;        /* heaps[] die with mimalloc's destructor */
	memset(heaps, 0, sizeof heaps);
	first = NULL;
}

/* Why the class stays on jemalloc, or NULL once it is ready. */
static const char *load(char *buf, size_t n) {
	void *h = dlopen(LL_LIB, RTLD_NOW | RTLD_NOLOAD);
	if (h != NULL) {
		dlclose(h);
		return "the program has loaded " LL_LIB " itself";
	}
	/* Before mimalloc makes its own key: glibc runs destructors in the
	 * order of their keys. */
	if (pthread_key_create(&thread_key, retire_thread) != 0)
		return "no thread key left";
	h = dlopen(LL_LIB, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		hp_fmt(buf, n, "%s", e ? e : LL_LIB " could not be loaded");
		return buf;
	}
	for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
		void *f = dlsym(h, functions[i].name);
		if (f == NULL) {
			hp_fmt(buf, n, LL_LIB " has no %s", functions[i].name);
			return buf;
		}
		memcpy((char *)&mi + functions[i].offset, &f, sizeof f);
	}
	if (mi.version() != MI_MALLOC_VERSION) {
		hp_fmt(buf, n, LL_LIB " is version %d; the class was built for "
		    "%d", mi.version(), MI_MALLOC_VERSION);
		return buf;
	}
	mi.register_output(message, NULL);
	hold_options();
	if (!make_arenas())
		return "mimalloc did not take the class's range";
	return NULL;
}

/* Once, by the first thread that gets here; the others use jemalloc's
 * path meanwhile rather than wait (the loader's lock is held by dlopen,
 * and a thread inside it may allocate). */
static bool ready(void) {
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	if (hp_likely(s == 2))
		return true;
	if (s != 0 || hp_ll_size == 0 ||
	    !__atomic_compare_exchange_n(&state, &s, 1, false, __ATOMIC_ACQ_REL,
	    __ATOMIC_RELAXED))
		return false;
	char why[160];
	hp_os_own_maps = true;      /* mimalloc's own mappings are not the program's */
	const char *e = load(why, sizeof why);
	hp_os_own_maps = false;
	if (e != NULL)
		hp_log("the long-lived class stays on jemalloc: %s", e);
	else if (hp_conf.verbose)
		hp_log("long-lived class: mimalloc %d, %zu MiB of arenas at "
		    "%#lx-%#lx (%zu MiB from the hugetlb pool, the rest %s)",
		    MI_MALLOC_VERSION, hp_ll_size >> 20, (unsigned long)hp_ll_base,
		    (unsigned long)(hp_ll_base + hp_ll_size), pool_bytes >> 20,
		    thp ? "THP" : "4 KiB");
	__atomic_store_n(&state, e == NULL ? 2 : 3, __ATOMIC_RELEASE);
	/* Empty segments go back on the maintenance thread's pace. */
	if (e == NULL)
		hp_huge_start_threads();
	return e == NULL;
}

/* mimalloc keeps its thread's default heap in initial-exec TLS, which
 * glibc fills in for every thread when the library is loaded; a thread
 * started while the first promotion loads mimalloc can find it NULL, and
 * mi_heap_new_in_arena would then fault (in mi_heap_get_backing;
 * docs/long-lived-class.md). mi_heap_get_default returns that NULL
 * rather than read through it: such a thread stays on jemalloc's path. */
static bool thread_usable(void) {
	static int said;
	if (mi.heap_get_default() != NULL)
		return true;
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		hp_log("a thread has no mimalloc thread state (its TLS is not "
		    "initialised); its long-lived objects stay on jemalloc");
	return false;
}

static bool make_heaps(void) {
	hp_os_own_maps = true;
	if (!thread_usable()) {
		hp_os_own_maps = false;
		thread_state = 2;
		return false;
	}
	for (unsigned i = 0; i < narenas; i++)
		heaps[i] = mi.heap_new_in_arena(arena_id[i]);
	hp_os_own_maps = false;
	hp_assert(narenas >= 1 && narenas <= LL_ARENAS);
	thread_state = heaps[narenas - 1] != NULL ? 1 : 2;
	if (thread_state == 1) {
		first = heaps[0] != NULL ? heaps[0] : heaps[narenas - 1];
		pthread_setspecific(thread_key, (void *)1);
	}
	return thread_state == 1;
}

static inline void *heap_alloc(mi_heap_t *h, size_t size, bool zero) {
	return zero ? mi.heap_zalloc(h, size) : mi.heap_malloc(h, size);
}

static inline uint32_t *slice_of(const void *p) {
	hp_assert(hp_ll_contains(p));
	return &bsize[((uintptr_t)p - hp_ll_base) >> LL_SLICE_SHIFT];
}

/* p's slice holds blocks of usable bytes (0 if too large to keep). */
static inline void note(const void *p, size_t usable) {
	hp_assert(hp_ll_contains(p));
	uint32_t u = usable <= UINT32_MAX ? (uint32_t)usable : 0;
	if (bsize != NULL && __atomic_load_n(slice_of(p), __ATOMIC_RELAXED) != u)
		__atomic_store_n(slice_of(p), u, __ATOMIC_RELAXED);
}

/* What mimalloc gave a request of size: its cache entry, or asked. */
static inline size_t usable_of(const void *p, size_t size) {
	unsigned i = (unsigned)(size >> 3) % LL_SIZES;
	if (hp_likely(sizes[i].key == size + 1))
		return sizes[i].usable;
	size_t u = mi.usable_size(p);
	if (size < UINT32_MAX && u <= UINT32_MAX) {
		sizes[i].key = (uint32_t)(size + 1);
		sizes[i].usable = (uint32_t)u;
	}
	return u;
}

static inline void *counted(void *p, size_t size) {
	size_t u = usable_of(p, size);
	hp_assert(hp_ll_contains(p) && u >= size && u == mi.usable_size(p));
	note(p, u);
	hp_shard_t *s = hp_shard();
	hp_tally(s, HP_TALLY_LL_LIVE, u);
	hp_tally(s, HP_TALLY_LL_NMALLOC, 1);
	return p;
}

/* The rest of hp_ll_alloc, out of line so that its common path keeps a
 * small frame: this thread's heaps not made yet, or the first heap full
 * (tried: it returned NULL). A full pool arena is skipped for the next
 * LL_POOL_RETRY allocations; with every arena full, NULL. */
static __attribute__((noinline)) void *alloc_slow(size_t size, bool zero,
    bool tried) {
	if (thread_state != 1) {
		if (thread_state == 2 || !ready() || !make_heaps())
			return NULL;
		tried = false;
	}
	hp_assert(first != NULL && narenas >= 1);
	void *p = tried ? NULL : heap_alloc(first, size, zero);
	if (p == NULL && pool_bytes != 0 && narenas > 1 && first == heaps[0]) {
		pool_skip = LL_POOL_RETRY;
		first = heaps[narenas - 1];
		__atomic_fetch_add(&hp_ll_counts.pool_full, 1, __ATOMIC_RELAXED);
		p = heap_alloc(first, size, zero);
	}
	if (hp_unlikely(p == NULL)) {
		__atomic_fetch_add(&hp_ll_counts.full, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	return counted(p, size);
}

/* hp_ll_alloc_fast's body, in line in both its callers (so that link-
 * time optimisation still puts hp_ll_alloc_fast in line in its own). */
static inline __attribute__((always_inline)) void *alloc_fast(size_t size,
    bool zero, bool *tried) {
	mi_heap_t *h = first;
	*tried = false;
	if (hp_unlikely(h == NULL))
		return NULL;
	if (hp_unlikely(pool_skip != 0)) {
		if (pool_skip == 1)      /* hp_ll_alloc tries the pool again */
			return NULL;
		pool_skip--;
	}
	void *p = heap_alloc(h, size, zero);
	if (hp_likely(p != NULL))
		return counted(p, size);
	*tried = true;                   /* the first heap is full */
	return NULL;
}

void *hp_ll_alloc_fast(size_t size, bool zero, bool *tried) {
	return alloc_fast(size, zero, tried);
}

void *hp_ll_alloc_rest(size_t size, bool zero, bool tried) {
	return tried ? alloc_slow(size, zero, true) : hp_ll_alloc(size, zero);
}

void *hp_ll_alloc(size_t size, bool zero) {
	hp_assert(hp_ll_size != 0);
	bool tried;
	void *p = alloc_fast(size, zero, &tried);
	if (p != NULL || tried)
		return p != NULL ? p : alloc_slow(size, zero, true);
	/* No heap yet, or the pool arena's skip ends with this call. */
	if (first != NULL) {
		hp_assert(pool_skip == 1);
		pool_skip = 0;
		if (heaps[0] != NULL)
			first = heaps[0];        /* the pool arena again */
	}
	return alloc_slow(size, zero, false);
}

void hp_ll_free(void *p) {
	hp_assert(hp_ll_contains(p));
	size_t u = bsize != NULL ? __atomic_load_n(slice_of(p),
	    __ATOMIC_RELAXED) : 0;
	if (hp_unlikely(u == 0))
		u = mi.usable_size(p);
	hp_assert(u == mi.usable_size(p));
	hp_shard_t *s = hp_shard();
	hp_tally(s, HP_TALLY_LL_LIVE, -(uint64_t)u);
	hp_tally(s, HP_TALLY_LL_NDALLOC, 1);
	mi.free(p);
}

size_t hp_ll_usable(const void *p) {
	hp_assert(hp_ll_contains(p));
	return mi.usable_size(p);
}

/* In place or within the class, from this thread's heap; NULL (p kept)
 * if this thread has none, or the class is full. */
void *hp_ll_realloc(void *p, size_t size) {
	hp_assert(hp_ll_contains(p));
	if (thread_state != 1 || size == 0)
		return NULL;
	size_t old = mi.usable_size(p);
	mi_heap_t *h = heaps[narenas - 1];
	if (pool_bytes != 0 && (uintptr_t)p - hp_ll_base < pool_bytes)
		h = heaps[0];
	void *q = mi.heap_realloc(h, p, size);
	if (q == NULL)
		return NULL;
	size_t now = mi.usable_size(q);
	hp_assert(hp_ll_contains(q) && now >= size);
	note(q, now);
	hp_shard_t *s = hp_shard();
	hp_tally(s, HP_TALLY_LL_LIVE, now - old);
	if (q != p) {
		hp_tally(s, HP_TALLY_LL_NMALLOC, 1);
		hp_tally(s, HP_TALLY_LL_NDALLOC, 1);
	}
	return q;
}

/*
 * Empty segments go back to the kernel. mimalloc keeps a freed segment
 * committed in its segment cache and, with allow_decommit held at 0,
 * would never give it back; a forced collect hands every cached segment
 * to its arena, which gives the whole 32 MiB back (MADV_DONTNEED; pool
 * pages stay). It also frees the segments of exited threads that other
 * threads have emptied since. The maintenance thread does it once every
 * decay_ms (never with -1), malloc_trim at once, with this thread's heaps
 * collected first.
 */
static HP_TLS bool collector;
static uint64_t last_collect_ns;

void hp_ll_collect(uint64_t now_ns, bool trim) {
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2)
		return;
	if (!trim && (hp_conf.decay_ms < 0 || now_ns - last_collect_ns <
	    (uint64_t)hp_conf.decay_ms * 1000000u))
		return;
	last_collect_ns = now_ns;
	hp_assert(narenas <= sizeof heaps / sizeof *heaps);
	if (!collector) {
		hp_os_own_maps = true;
		mi.thread_init();        /* mi_collect needs this thread's heap */
		hp_os_own_maps = false;
		collector = true;
	}
	if (trim && thread_state == 1)
		for (unsigned i = 0; i < narenas; i++)
			mi.heap_collect(heaps[i], true);
	mi.collect(true);
}

bool hp_ll_init(const hp_conf_t *c, uintptr_t base, size_t size) {
	if (c->long_lived != HP_LL_MIMALLOC || size < HP_LL_ALIGN)
		return false;
	hp_assert(((base | size) & (HP_LL_ALIGN - 1)) == 0);
	hp_ll_size = size;
	__atomic_store_n(&hp_ll_base, base, __ATOMIC_RELEASE);
	return true;
}

/* The class's counters: the library's own counts, and the kernel's
 * figures for the range (the pool arena's pages are huge pages, mapped
 * whole; the rest as the kernel holds it). */
struct scan {
	hp_arena_stats_t *a;
};

static void resident_run(void *ctx, uintptr_t start, uintptr_t end,
    bool huge) {
	hp_arena_stats_t *a = ((struct scan *)ctx)->a;
	a->resident_bytes += end - start;
	if (huge)
		a->resident_huge_bytes += end - start;
}

bool hp_ll_scan(hp_arena_stats_t *a) {
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2)
		return false;
	struct scan s = {a};
	a->live_bytes = hp_tally_sum(HP_TALLY_LL_LIVE);
	a->nmalloc = hp_tally_sum(HP_TALLY_LL_NMALLOC);
	a->ndalloc = hp_tally_sum(HP_TALLY_LL_NDALLOC);
	hp_os_resident(hp_ll_base, hp_ll_base + pool_bytes, true, resident_run,
	    &s);
	uint64_t pool_resident = a->resident_bytes;
	uintptr_t top = hp_ll_base + hp_ll_size - table_bytes;
	hp_os_resident(hp_ll_base + pool_bytes, top, thp, resident_run, &s);
	uint64_t rest = a->resident_bytes - pool_resident;
	/* The block-size table: the class's metadata, on 4 KiB pages. */
	hp_os_resident(top, hp_ll_base + hp_ll_size, false, resident_run, &s);
	uint64_t table = a->resident_bytes - pool_resident - rest;
	a->metadata_bytes = table;
	a->hugetlb_2m_bytes = pool_bytes;
	if (thp)
		a->thp_bytes = rest;
	a->small_page_bytes = (thp ? 0 : rest) + table;
	a->mapped_bytes = pool_bytes + rest + table;
	/* Free spans kept resident beside live ones in huge pages; the rest
	 * of the arenas is mimalloc's: objects, free blocks among them, its
	 * records. */
	hp_llpages_scan(a);
	if (a->stranded_bytes > rest)
		a->stranded_bytes = rest;
	a->in_use_bytes = a->resident_bytes - a->stranded_bytes - table;
	/* resident = in use + stranded + the table, none below zero. */
	hp_assert(a->in_use_bytes <= a->resident_bytes && table <= table_bytes &&
	    a->resident_huge_bytes <= a->resident_bytes);
	a->fallback_pool_empty = __atomic_load_n(&hp_ll_counts.pool_full,
	    __ATOMIC_RELAXED);
	a->fallback_mmap_failed = __atomic_load_n(&hp_ll_counts.full,
	    __ATOMIC_RELAXED);
	return true;
}
