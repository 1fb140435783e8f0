/*
 * jemalloc's non-standard API over the one heap. A program linked with
 * libjemalloc.so.2 (Redis, say) takes malloc and free from the library
 * but mallctl, mallocx and the rest from its own jemalloc, which then
 * describes a heap nobody uses. Exported from here, they win the lookup
 * as malloc does, and serve the library's heap:
 * - mallocx, rallocx, dallocx, sdallocx, sallocx go through the malloc
 *   family (tail calls where the flags allow, so the caller's return
 *   address still keys lifetime sampling): MALLOCX_LG_ALIGN and
 *   MALLOCX_ZERO are honoured as jemalloc documents them (the whole
 *   usable size zeroed; rallocx keeps the old bytes up to the old usable
 *   size, zeroes from there to the new one, and resizes in place where
 *   the object's class and alignment allow); tcache flags are ignored
 *   (jemalloc's own thread caches serve either way); an explicit
 *   MALLOCX_ARENA goes to the embedded jemalloc as asked (an arena the
 *   program made through mallctl "arenas.create"), outside the huge class.
 * - xallocx and nallocx ask the embedded jemalloc: every object of both
 *   classes is one of its allocations.
 * - mallctl, mallctlnametomib, mallctlbymib and malloc_stats_print are the
 *   embedded jemalloc's, whose arenas are both classes ("stats.allocated"
 *   counts the huge class too, and the long-lived class's objects are
 *   added to it and to "stats.active"); "version" names the library and
 *   the jemalloc under it.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/core.h"
#include "je/je.h"
#include "hugepreload.h"

#define ARENA_FLAGS  (~(unsigned)0 << 20)     /* MALLOCX_ARENA(a) */
#define ALIGN_FLAGS  0x3f                     /* MALLOCX_LG_ALIGN(la) */
#define SHAPE_FLAGS  (ALIGN_FLAGS | MALLOCX_ZERO)
#define TCACHE_FLAGS (0xfffu << 8)               /* MALLOCX_TCACHE(tc) */

static size_t align_of(int flags) {
	unsigned la = (unsigned)flags & ALIGN_FLAGS;
	return la ? (size_t)1 << la : 0;
}

HP_EXPORT void *mallocx(size_t size, int flags) {
	if ((unsigned)flags & ARENA_FLAGS)
		return hp_je_mallocx(size, flags);
	size_t align = align_of(flags);
	bool zero = flags & MALLOCX_ZERO;
	if (align <= HP_MALLOC_ALIGN)
		return zero ? calloc(1, size) : malloc(size);
	/* aligned_alloc's route; jemalloc zeroes the whole usable size. A
	 * size of 0 is jemalloc's undefined case: the smallest aligned. */
	if (size < hp_threshold)
		return hp_je_mallocx(size ? size : 1, flags & SHAPE_FLAGS);
	int saved = errno;
	void *p = hp_route_alloc(size, align, zero);
	errno = saved;
	return p;
}

/* rallocx of an object of the owned range (the huge class, the
 * long-lived class, a sampled object), or to the huge class's sizes, or
 * before start-up: in place where the object keeps its class and its
 * alignment and the class can resize it there (jemalloc's xallocx; the
 * long-lived class's usable size, or mimalloc's realloc without an
 * alignment), as realloc does; else moved into the class of the new
 * size. Either way the old bytes are kept up to the smaller usable size
 * and, with zero, everything from the old usable size to the new one is
 * zero, as in jemalloc's rallocx. */
static void *ralloc_slow(void *p, size_t size, int flags) {
	size_t align = align_of(flags);
	bool zero = flags & MALLOCX_ZERO;
	if (p == NULL)
		return hp_route_alloc(size, align, zero);
	bool to_huge = hp_init() && size >= hp_threshold;
	bool ll = hp_ll_contains(p);
	size_t old = hp_route_usable(p);
	if (ll && !to_huge && align <= HP_MALLOC_ALIGN) {
		void *q = hp_ll_realloc(p, size);   /* old bytes kept */
		if (q != NULL) {
			size_t now = hp_ll_usable(q);
			if (zero && now > old)
				memset((char *)q + old, 0, now - old);
			return q;
		}
	}
	bool aligned = align == 0 || ((uintptr_t)p & (align - 1)) == 0;
	/* In place as jemalloc's rallocx is: where the object can take the
	 * new size's own class there (xallocx returns the usable size it
	 * has after, its old one where it could not resize: a large object
	 * asked for a small size keeps it, and must move). */
	if (aligned && !hp_zone_contains(p) && hp_region_contains(p) == to_huge &&
	    (ll ? size <= old : hp_je_xallocx(p, size, 0, flags & SHAPE_FLAGS) ==
	    hp_je_nallocx(size, flags & SHAPE_FLAGS)))
		return p;
	void *q = hp_route_alloc(size, align, zero);
	if (q == NULL)
		return NULL;                 /* p is left as it was */
	size_t now = hp_route_usable(q);
	memcpy(q, p, old < now ? old : now);
	free(p);
	return q;
}

/* rallocx into the arena MALLOCX_ARENA names of an object of the owned
 * range, which jemalloc's rallocx must not see (a mimalloc object, a
 * sampled one, or a huge-class block, which would go into the small
 * class's thread cache): moved, with rallocx's rules for the bytes. */
static void *ralloc_to_arena(void *p, size_t size, int flags) {
	size_t old = hp_route_usable(p);
	void *q = hp_je_mallocx(size, flags);
	if (q == NULL)
		return NULL;                 /* p is left as it was */
	size_t now = hp_je_sallocx(q, 0);
	memcpy(q, p, old < now ? old : now);  /* MALLOCX_ZERO: the rest zero */
	free(p);
	return q;
}

HP_EXPORT void *rallocx(void *p, size_t size, int flags) {
	if ((unsigned)flags & ARENA_FLAGS)
		return p != NULL && hp_owned(p) ? ralloc_to_arena(p, size ?
		    size : 1, flags) : hp_je_rallocx(p, size, flags);
	/* A size of 0 is jemalloc's undefined case: the smallest object,
	 * never realloc's free (a NULL from rallocx leaves p live). */
	size = size ? size : 1;
	if (align_of(flags) <= HP_MALLOC_ALIGN && !(flags & MALLOCX_ZERO))
		return realloc(p, size);
	/* The small class's own object staying small: jemalloc's rallocx is
	 * the definition. */
	if (hp_likely(size < hp_threshold && p != NULL && !hp_maybe_owned(p)))
		return hp_je_rallocx(p, size, flags & SHAPE_FLAGS);
	int saved = errno;
	void *q = ralloc_slow(p, size, flags);
	errno = saved;
	return q;
}

HP_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags) {
	if (hp_ll_contains(p))           /* mimalloc's: not resized in place */
		return hp_ll_usable(p);
	return hp_je_xallocx(p, size, extra, flags & ~(int)ARENA_FLAGS);
}

HP_EXPORT size_t sallocx(const void *p, int flags) {
	(void)flags;
	return malloc_usable_size((void *)p);
}

/* A jemalloc object freed with MALLOCX_TCACHE_NONE or MALLOCX_TCACHE(tc)
 * goes where the flags say, as under jemalloc: a program that destroys
 * an arena frees its objects so, and an object left in the thread's own
 * cache would outlive its arena. Everything else goes to free(). */
static void dalloc(void *p, int flags) {
	if (((unsigned)flags & TCACHE_FLAGS) && p != NULL && !hp_owned(p))
		hp_je_dallocx(p, flags & (int)TCACHE_FLAGS);
	else
		free(p);
}

HP_EXPORT void dallocx(void *p, int flags) {
	dalloc(p, flags);
}

/* jemalloc checks the size class only in its debug builds; so does this
 * (a wrong size is the program's bug, and free() needs no size). */
HP_EXPORT void sdallocx(void *p, size_t size, int flags) {
	(void)size;
	(void)flags;
	hp_assert(p == NULL || hp_je_nallocx(size, flags & ~(int)ARENA_FLAGS) ==
	    malloc_usable_size(p));
	dalloc(p, flags);
}

HP_EXPORT size_t nallocx(size_t size, int flags) {
	if (!hp_init())
		return 0;
	return hp_je_nallocx(size, flags & ~(int)ARENA_FLAGS);
}

static char version[128];

/* "hugepreload V (jemalloc V)", made once. */
static const char *our_version(void) {
	if (version[0] == '\0') {
		const char *je = "?";
		size_t sz = sizeof je;
		hp_je_mallctl("version", &je, &sz, NULL, 0);
		char v[sizeof version];
		size_t n = strlen(HUGEPRELOAD_VERSION), m = strlen(je);
		if (n + m + 24 < sizeof v) {
			memcpy(v, "hugepreload ", 12);
			memcpy(v + 12, HUGEPRELOAD_VERSION, n);
			memcpy(v + 12 + n, " (jemalloc ", 11);
			memcpy(v + 23 + n, je, m);
			memcpy(v + 23 + n + m, ")", 2);
			memcpy(version, v, sizeof v);
		}
	}
	return version[0] ? version : HUGEPRELOAD_VERSION;
}

/* "version" read (it cannot be written): the library's name with it. */
static int read_version(void *oldp, size_t *oldlenp, void *newp) {
	if (newp != NULL)
		return EPERM;
	if (oldp != NULL && oldlenp != NULL) {
		if (*oldlenp != sizeof(const char *))
			return EINVAL;
		*(const char **)oldp = our_version();
	}
	return 0;
}

/* "stats.resident" read: the heap's resident bytes as the kernel holds
 * them, as of the last "epoch" (hp_stats_heap_resident). jemalloc's own
 * figure leaves out what the library keeps resident after jemalloc has
 * decommitted it (free parts of huge pages that still hold live data) and
 * the extent descriptors' pages, and counts what it handed out as
 * resident whether touched or not. */
static int read_resident(void *oldp, size_t *oldlenp, void *newp) {
	if (newp != NULL)
		return EPERM;
	if (oldp != NULL && oldlenp != NULL) {
		if (*oldlenp != sizeof(size_t))
			return EINVAL;
		*(size_t *)oldp = (size_t)hp_stats_heap_resident();
	}
	return 0;
}

/* "stats.allocated" and "stats.active" read: jemalloc's, and the
 * long-lived class's (mimalloc's) live bytes and, for active, its
 * resident bytes as of the last "epoch": every object of the heap is
 * counted, whichever allocator serves it. */
static int read_plus_ll(int r, void *oldp, size_t *oldlenp, bool active) {
	if (r == 0 && oldp != NULL && oldlenp != NULL &&
	    *oldlenp == sizeof(size_t))
		*(size_t *)oldp += active ? (size_t)hp_stats_ll_resident() :
		    (size_t)hp_tally_sum(HP_TALLY_LL_LIVE);
	return r;
}

/* "background_thread" written by the program: its choice stands, and the
 * library no longer starts jemalloc's threads itself (huge/huge.c). */
static void wrote_background(int r, const void *newp, size_t newlen) {
	if (r == 0 && newlen == sizeof(bool))
		hp_huge_background_chosen(*(const bool *)newp);
}

/* "epoch" written: jemalloc's statistics, then the library's counters,
 * refreshed together. */
static int write_epoch(int r) {
	if (r == 0)
		hp_stats_refresh(false);
	return r;
}

/* "tcache.flush" or "tcache.destroy" of one of the library's caches
 * (an id the program never had from "tcache.create"): refused as jemalloc
 * would refuse a write it cannot take, since a thread's block still names
 * that cache (huge/huge.c). */
static bool cache_not_yours(bool named, const void *newp, size_t newlen) {
	unsigned id;
	if (!named || newp == NULL || newlen != sizeof id)
		return false;
	memcpy(&id, newp, sizeof id);
	return hp_huge_cache_is_ours(id);
}

HP_EXPORT int mallctl(const char *name, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (!hp_init())
		return EAGAIN;
	if (cache_not_yours(name != NULL && (strcmp(name, "tcache.flush") == 0 ||
	    strcmp(name, "tcache.destroy") == 0), newp, newlen))
		return EFAULT;
	if (name != NULL && strcmp(name, "version") == 0)
		return read_version(oldp, oldlenp, newp);
	if (name != NULL && strcmp(name, "stats.resident") == 0)
		return read_resident(oldp, oldlenp, newp);
	int r = hp_je_mallctl(name, oldp, oldlenp, newp, newlen);
	if (newp != NULL && name != NULL && strcmp(name, "epoch") == 0)
		r = write_epoch(r);
	else if (newp != NULL && name != NULL &&
	    strcmp(name, "background_thread") == 0)
		wrote_background(r, newp, newlen);
	else if (hp_ll_size != 0 && name != NULL && newp == NULL &&
	    (strcmp(name, "stats.allocated") == 0 ||
	    strcmp(name, "stats.active") == 0))
		r = read_plus_ll(r, oldp, oldlenp,
		    strcmp(name, "stats.active") == 0);
	return r;
}

/* Whether mib names name (of miblen parts). */
static bool mib_is(const size_t *mib, size_t miblen, const char *name,
    size_t parts) {
	size_t want[4], n = parts;
	if (miblen != parts || parts > 4 ||
	    hp_je_mallctlnametomib(name, want, &n) != 0 || n != parts)
		return false;
	return memcmp(mib, want, parts * sizeof *mib) == 0;
}

HP_EXPORT int mallctlnametomib(const char *name, size_t *mibp,
    size_t *miblenp) {
	if (!hp_init())
		return EAGAIN;
	return hp_je_mallctlnametomib(name, mibp, miblenp);
}

HP_EXPORT int mallctlbymib(const size_t *mib, size_t miblen, void *oldp,
    size_t *oldlenp, void *newp, size_t newlen) {
	if (!hp_init())
		return EAGAIN;
	if (mib_is(mib, miblen, "version", 1))
		return read_version(oldp, oldlenp, newp);
	if (mib_is(mib, miblen, "stats.resident", 2))
		return read_resident(oldp, oldlenp, newp);
	if (cache_not_yours(newp != NULL && (mib_is(mib, miblen,
	    "tcache.flush", 2) || mib_is(mib, miblen, "tcache.destroy", 2)),
	    newp, newlen))
		return EFAULT;
	int r = hp_je_mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen);
	if (newp != NULL && mib_is(mib, miblen, "epoch", 1))
		r = write_epoch(r);
	else if (newp != NULL && mib_is(mib, miblen, "background_thread", 1))
		wrote_background(r, newp, newlen);
	else if (hp_ll_size != 0 && newp == NULL && miblen == 2 &&
	    (mib_is(mib, miblen, "stats.allocated", 2) ||
	    mib_is(mib, miblen, "stats.active", 2)))
		r = read_plus_ll(r, oldp, oldlenp, mib_is(mib, miblen,
		    "stats.active", 2));
	return r;
}

HP_EXPORT void malloc_stats_print(void (*write_cb)(void *, const char *),
    void *cbopaque, const char *opts) {
	if (hp_init())
		hp_je_malloc_stats_print(write_cb, cbopaque, opts);
}
