/*
 * The small class's memory as the kernel holds it. Everything the embedded
 * jemalloc maps for itself goes through one mmap call in its pages.c, and
 * its bases (its metadata: radix tree, arenas, bins) through
 * extent_alloc_mmap or the default alloc hook in base.c; scripts/
 * embed-jemalloc sends those calls here, and this file keeps the ranges:
 * all of jemalloc's own mappings, and of them its bases'. (The huge
 * class's data is on region.c's pages, the extent descriptors on edata.c's:
 * neither is mapped by jemalloc.) hp_jemap_resident then asks the kernel
 * what of them is resident, so the small class's counters are the
 * kernel's figures as the huge class's are:
 *   resident  = resident bytes of jemalloc's mappings
 *   metadata  = of that, of its bases (both classes' metadata: they share
 *               these pages)
 *   in_use    = the rest: its extents, live objects and free space
 *               among them, its cache of dirty pages
 * A table that overflows (more than MAX_RANGES separate mappings) stops
 * the kernel's view; the counters then fall back to jemalloc's figures.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include "je/je.h"
#include "base/lock.h"

#define MAX_RANGES 1024

static hp_lock_t jemap_lock = HP_LOCK_INIT(HP_RANK_JEMAP);
static hp_range_t all_r[MAX_RANGES], meta_r[MAX_RANGES];
static hp_ranges_t all = {all_r, 0, MAX_RANGES, false};   /* under */
static hp_ranges_t meta = {meta_r, 0, MAX_RANGES, false}; /* jemap_lock */

static void record(hp_ranges_t *set, void *p, size_t len) {
	uintptr_t s = (uintptr_t)p & ~(uintptr_t)(HP_PAGE - 1);
	uintptr_t e = ((uintptr_t)p + len + HP_PAGE - 1) &
	    ~(uintptr_t)(HP_PAGE - 1);
	hp_assert(s < e);
	hp_lock(&jemap_lock);
	hp_ranges_add(set, s, e);
	hp_assert(set->overflow || hp_ranges_hold(set, s, e));
	hp_unlock(&jemap_lock);
}

/* ---- jemalloc's calls, renamed to these by scripts/embed-jemalloc ---- */

#define HP_JE_OS __attribute__((visibility("hidden")))
HP_JE_OS void *hp_je_mmap(void *addr, size_t len, int prot, int flags,
    int fd, off_t off);
HP_JE_OS int hp_je_munmap(void *addr, size_t len);
HP_JE_OS void *hp_je_base_alloc_mmap(void *new_addr, size_t size,
    size_t alignment, bool *zero, bool *commit);
HP_JE_OS void *hp_je_base_alloc_impl(void *tsdn, void *new_addr, size_t size,
    size_t alignment, bool *zero, bool *commit, unsigned arena_ind);
/* jemalloc's own (hidden, in our copy of its archive). */
void *je_extent_alloc_mmap(void *new_addr, size_t size, size_t alignment,
    bool *zero, bool *commit);
void *je_ehooks_default_alloc_impl(void *tsdn, void *new_addr, size_t size,
    size_t alignment, bool *zero, bool *commit, unsigned arena_ind);

void *hp_je_mmap(void *addr, size_t len, int prot, int flags, int fd,
    off_t off) {
	void *p = hp_os_mmap(addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED && (flags & MAP_ANONYMOUS))
		record(&all, p, len);
	return p;
}

int hp_je_munmap(void *addr, size_t len) {
	int r = hp_os_munmap(addr, len);
	if (r == 0) {
		uintptr_t s = (uintptr_t)addr, e = s + ((len + HP_PAGE - 1) &
		    ~(size_t)(HP_PAGE - 1));
		hp_lock(&jemap_lock);
		hp_ranges_del(&all, s, e);
		hp_ranges_del(&meta, s, e);
		/* A full set that cannot cut a hole keeps the part below. */
		hp_assert(!hp_ranges_touch(&all, s, e) &&
		    !hp_ranges_touch(&meta, s, e));
		hp_unlock(&jemap_lock);
	}
	return r;
}

void *hp_je_base_alloc_mmap(void *new_addr, size_t size, size_t alignment,
    bool *zero, bool *commit) {
	void *p = je_extent_alloc_mmap(new_addr, size, alignment, zero, commit);
	if (p != NULL)
		record(&meta, p, size);
	return p;
}

void *hp_je_base_alloc_impl(void *tsdn, void *new_addr, size_t size,
    size_t alignment, bool *zero, bool *commit, unsigned arena_ind) {
	void *p = je_ehooks_default_alloc_impl(tsdn, new_addr, size, alignment,
	    zero, commit, arena_ind);
	if (p != NULL)
		record(&meta, p, size);
	return p;
}

/* ---- the kernel's view ---------------------------------------------- */

typedef struct {
	uint64_t bytes, huge;
} sums_t;

static void sum(void *ctx, uintptr_t start, uintptr_t end, bool huge) {
	sums_t *s = ctx;
	s->bytes += end - start;
	if (huge)
		s->huge += end - start;
}

/* Resident bytes of the set, and of them on huge pages (collapse.c's
 * collapsed ranges); UINT64_MAX if the kernel could not be asked. */
static uint64_t resident_of(const hp_ranges_t *set, uint64_t *huge) {
	sums_t s = {0, 0};
	for (unsigned i = 0; i < set->n; i++)
		if (!hp_os_resident(set->r[i].start, set->r[i].end, false, sum,
		    &s))
			return UINT64_MAX;
	if (huge != NULL)
		*huge = s.huge;
	return s.bytes;
}

/* Resident bytes of jemalloc's mappings and of its bases', from the
 * kernel, and of them on huge pages; false if a table overflowed or the
 * kernel could not be asked.
 * Called under the stats refresh lock. ranges (up to max) gets the
 * mappings, for "hugepreload stat" to read the kernel's figures by. */
bool hp_jemap_resident(uint64_t *resident, uint64_t *metadata,
    uint64_t *huge, uint64_t (*ranges)[2], unsigned max, unsigned *nranges) {
	static hp_range_t a_r[MAX_RANGES], m_r[MAX_RANGES];  /* copies, asked */
	hp_ranges_t a = {a_r, 0, MAX_RANGES, false};          /* without the */
	hp_ranges_t m = {m_r, 0, MAX_RANGES, false};          /* lock */
	hp_lock(&jemap_lock);
	memcpy(a_r, all_r, all.n * sizeof *a_r);
	memcpy(m_r, meta_r, meta.n * sizeof *m_r);
	a.n = all.n, a.overflow = all.overflow;
	m.n = meta.n, m.overflow = meta.overflow;
	hp_unlock(&jemap_lock);
	hp_assert(a.n <= MAX_RANGES && m.n <= MAX_RANGES);
	*nranges = a.n < max ? a.n : max;
	for (unsigned i = 0; i < *nranges; i++) {
		ranges[i][0] = a.r[i].start;
		ranges[i][1] = a.r[i].end;
	}
	if (a.overflow || m.overflow)
		return false;
	*resident = resident_of(&a, huge);
	*metadata = resident_of(&m, NULL);
	return *resident != UINT64_MAX && *metadata != UINT64_MAX &&
	    *metadata <= *resident;
}

bool hp_jemap_data(uintptr_t start, uintptr_t end) {
	hp_lock(&jemap_lock);
	bool ok = !all.overflow && !meta.overflow &&
	    hp_ranges_hold(&all, start, end) &&
	    !hp_ranges_touch(&meta, start, end);
	hp_unlock(&jemap_lock);
	return ok;
}

bool hp_jemap_may_hold(uintptr_t a) {
	hp_lock(&jemap_lock);
	bool ok = all.overflow || meta.overflow || (hp_ranges_hold(&all, a,
	    a + 1) && !hp_ranges_touch(&meta, a, a + 1));
	hp_unlock(&jemap_lock);
	return ok;
}

void hp_jemap_prefork(void) {
	hp_lock(&jemap_lock);
}

void hp_jemap_postfork_parent(void) {
	hp_unlock(&jemap_lock);
}

void hp_jemap_postfork_child(void) {
	hp_lock_reinit(&jemap_lock);
}
