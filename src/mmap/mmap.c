/*
 * The program's own anonymous memory on huge pages. Much of the memory
 * that matters never passes through malloc: buffer pools and caches that
 * map their own memory, runtimes that reserve a heap PROT_NONE and commit
 * it later (the JVM, V8), numpy's and Python's large buffers. The library
 * exports mmap, mmap64, munmap, mremap, mprotect and madvise; every call
 * does exactly what the kernel's does, and for the program's anonymous
 * private mappings of at least mmap_threshold bytes (no MAP_FIXED,
 * MAP_HUGETLB, MAP_STACK or MAP_GROWSDOWN) two things more:
 *  - with no address hinted, the mapping is placed 2 MiB-aligned: mapped
 *    2 MiB larger, with the unaligned head and tail unmapped again
 *    (address space only; nothing is mapped over memory the library does
 *    not own); a hinted address is left to the kernel, as asked;
 *  - it is advised MADV_HUGEPAGE, so THP in "madvise" mode backs it.
 * It stays an ordinary mapping: the program may unmap, mremap, mprotect
 * or madvise any 4 KiB-aligned part of it, as without the library. A
 * PROT_NONE reservation is recorded as well: memory committed in it later
 * with mprotect keeps the advice (it is the area's), and a mmap(MAP_FIXED)
 * inside it, which makes a new area without the advice, is advised again.
 * hugetlbfs is never used here: the program may unmap 4 KiB pieces.
 *
 * Anonymous MAP_SHARED mappings of that size (Python's mmap.mmap(-1, n)
 * by default) are shared memory: advised MADV_HUGEPAGE only. The kernel
 * places them itself, 2 MiB-aligned in the shared-memory object too, when
 * shmem THP can back them (shmem_enabled "advise" and up); trimming an
 * over-mapping would misalign the object's offsets, so it is not done.
 * File mappings, MAP_SHARED of a file included, are left alone.
 *
 * The library's own mappings and the embedded jemalloc's go to the kernel
 * directly (os.c), never through these. Calls made before start-up
 * (another library's constructors) pass through untouched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include "mmap/mmap.h"
#include "base/lock.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

#define MAX_RESERVATIONS 4096

void (*hp_mmap_on_change)(void);

static hp_lock_t mmap_lock = HP_LOCK_INIT(HP_RANK_MMAP);
static hp_range_t res_r[MAX_RESERVATIONS];
static hp_ranges_t res = {res_r, 0, MAX_RESERVATIONS, false}; /* advised
                                          PROT_NONE reservations; under
                                          mmap_lock */
static int warned_unaligned, warned_full;
hp_mmap_counts_t hp_mmap_counts;       /* updated atomically */
size_t hp_mmap_threshold = SIZE_MAX;   /* mmap_threshold, once started */

static uintptr_t page_up(uintptr_t x) {
	return (x + HP_PAGE - 1) & ~(uintptr_t)(HP_PAGE - 1);
}

static void count(uint64_t *c, uint64_t n) {
	hp_assert(c >= (uint64_t *)&hp_mmap_counts &&
	    c < (uint64_t *)(&hp_mmap_counts + 1));
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

/* Takes [s, e) out of the records (munmap, mremap away). */
static void forget(uintptr_t s, uintptr_t e) {
	hp_assert(s <= e && ((s | e) & (HP_PAGE - 1)) == 0);
	if (__atomic_load_n(&res.n, __ATOMIC_RELAXED) == 0)
		return;
	hp_lock(&mmap_lock);
	hp_ranges_del(&res, s, e);   /* a full table keeps the lower part */
	hp_assert(!hp_ranges_touch(&res, s, e));
	res.overflow = false;
	hp_unlock(&mmap_lock);
}

static void remember(uintptr_t s, uintptr_t e) {
	hp_assert(s < e && ((s | e) & (HP_PAGE - 1)) == 0);
	hp_lock(&mmap_lock);
	hp_ranges_add(&res, s, e);
	bool full = res.overflow;
	hp_assert(full || hp_ranges_hold(&res, s, e));
	res.overflow = false;
	hp_unlock(&mmap_lock);
	if (full)
		hp_warn_once(&warned_full, "more than %d PROT_NONE reservations "
		    "advised; memory mapped MAP_FIXED into later ones is not "
		    "advised again", MAX_RESERVATIONS);
	else
		count(&hp_mmap_counts.reservations, 1);
}

/* Whether [s, e) lies inside one recorded reservation. */
static bool reserved(uintptr_t s, uintptr_t e) {
	if (__atomic_load_n(&res.n, __ATOMIC_RELAXED) == 0)
		return false;
	hp_lock(&mmap_lock);
	bool in = hp_ranges_hold(&res, s, e);
	hp_unlock(&mmap_lock);
	return in;
}

/* An anonymous mapping of at least mmap_threshold bytes that the library
 * may advise: not placed by the program (MAP_FIXED), not already huge, no
 * stack. An unaligned offset is the kernel's EINVAL, as asked. */
static bool eligible(size_t len, int flags, off_t off) {
	size_t threshold = __atomic_load_n(&hp_mmap_threshold,
	    __ATOMIC_RELAXED);
	return len >= threshold && (flags & MAP_ANONYMOUS) &&
	    (off & (HP_PAGE - 1)) == 0 &&
	    !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_HUGETLB |
	    MAP_STACK | MAP_GROWSDOWN));
}

static bool private(int flags) {
	return (flags & MAP_TYPE) == MAP_PRIVATE;
}

static bool shared(int flags) {
	return (flags & MAP_TYPE) == MAP_SHARED ||
	    (flags & MAP_TYPE) == MAP_SHARED_VALIDATE;
}

/* Advice, record and counts of the program's new mapping [p, p + len):
 * advised before MAP_POPULATE's pages are faulted in, so they are huge. */
static void advise(uintptr_t p, size_t len, int prot, int flags) {
	/* The program's new mapping: page-aligned, of mmap_threshold bytes
	 * at least, shared or private. */
	hp_assert((p & (HP_PAGE - 1)) == 0 && len != 0 &&
	    len >= __atomic_load_n(&hp_mmap_threshold, __ATOMIC_RELAXED) &&
	    (shared(flags) || private(flags)));
	hp_os_madvise((void *)p, len, MADV_HUGEPAGE);
	if (private(flags) && prot == PROT_NONE)
		remember(p, p + page_up(len));
	if (flags & MAP_POPULATE)
		hp_os_madvise((void *)p, len, (prot & PROT_WRITE) ?
		    MADV_POPULATE_WRITE : MADV_POPULATE_READ);
	if (shared(flags)) {
		count(&hp_mmap_counts.shared, 1);
		count(&hp_mmap_counts.shared_bytes, page_up(len));
	} else {
		count(&hp_mmap_counts.mappings, 1);
		count(&hp_mmap_counts.advised_bytes, page_up(len));
	}
	if (hp_mmap_on_change != NULL)
		hp_mmap_on_change();
}

/* The program's mapping where the kernel puts it, advised: at an address
 * the program hinted (the JVM asks for its heap where compressed pointers
 * reach; its aligned 2 MiB blocks get huge pages), and shared memory,
 * which the kernel aligns itself when shmem THP can back it. */
static void *map_advised(void *addr, size_t len, int prot, int flags,
    int fd, off_t off) {
	int saved = errno;
	void *p = hp_os_mmap(addr, len, prot, flags & ~MAP_POPULATE, fd, off);
	if (p != MAP_FAILED) {
		advise((uintptr_t)p, len, prot, flags);
		errno = saved;
	}
	return p;
}

/* The program's mapping, 2 MiB-aligned and advised; errno as the kernel
 * set it on failure, untouched on success. */
static void *map_huge(size_t len, int prot, int flags, int fd, off_t off) {
	int saved = errno;
	size_t span = len + HP_HUGE;
	void *raw = span < len ? MAP_FAILED : hp_os_mmap(NULL, span, prot,
	    flags & ~MAP_POPULATE, fd, off);
	if (raw == MAP_FAILED) {
		/* No room for the slack (ulimit -v, a full address space), or
		 * arguments the kernel refuses: the mapping as asked, its
		 * errno the kernel's. */
		void *p = hp_os_mmap(NULL, len, prot, flags, fd, off);
		if (p != MAP_FAILED) {
			hp_assert(((uintptr_t)p & (HP_PAGE - 1)) == 0);
			count(&hp_mmap_counts.unaligned, 1);
			hp_warn_once(&warned_unaligned, "could not place a %zu-byte "
			    "mapping 2 MiB-aligned (%s); it and others like it get "
			    "fewer huge pages", len, hp_strerror(errno));
			errno = saved;
		}
		return p;
	}
	uintptr_t r = (uintptr_t)raw;
	uintptr_t p = (r + HP_HUGE - 1) & ~(uintptr_t)(HP_HUGE - 1);
	uintptr_t end = p + page_up(len);
	hp_assert(p >= r && end <= r + span);   /* inside what was mapped */
	if (p > r)
		hp_os_munmap(raw, p - r);
	if (r + span > end)
		hp_os_munmap((void *)end, r + span - end);
	advise(p, len, prot, flags);
	errno = saved;
	return (void *)p;
}

HP_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd,
    off_t off) {
	if (hp_unlikely(hp_os_own_maps))
		return hp_os_mmap(addr, len, prot, flags, fd, off);
	if (eligible(len, flags, off) && (private(flags) || shared(flags)))
		return addr == NULL && private(flags) ? map_huge(len, prot, flags,
		    fd, off) : map_advised(addr, len, prot, flags, fd, off);
	void *p = hp_os_mmap(addr, len, prot, flags, fd, off);
	/* Committed with MAP_FIXED inside a reservation advised here: the
	 * new area is advised too (MAP_SHARED and file mappings excepted). */
	if (p != MAP_FAILED && (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) &&
	    (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE &&
	    !(flags & MAP_HUGETLB) && reserved((uintptr_t)p, (uintptr_t)p +
	    page_up(len))) {
		int saved = errno;
		hp_assert(((uintptr_t)p & (HP_PAGE - 1)) == 0);
		hp_os_madvise(p, len, MADV_HUGEPAGE);
		count(&hp_mmap_counts.fixed_advised, 1);
		errno = saved;
	}
	return p;
}

HP_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
    off_t off) {
	return mmap(addr, len, prot, flags, fd, off);
}

HP_EXPORT int munmap(void *addr, size_t len) {
	int r = hp_os_munmap(addr, len);
	if (r == 0)
		forget((uintptr_t)addr, (uintptr_t)addr + page_up(len));
	return r;
}

HP_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags,
    ...) {
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	void *p = hp_os_mremap(old, old_len, new_len, flags, new_addr);
	if (p != MAP_FAILED && p != old)
		forget((uintptr_t)old, (uintptr_t)old + page_up(old_len));
	else if (p != MAP_FAILED && new_len < old_len)
		forget((uintptr_t)old + page_up(new_len), (uintptr_t)old +
		    page_up(old_len));
	return p;
}

/* The long-lived class's commits and decommits (libmimalloc's) go to
 * llpages.c. */
HP_EXPORT int mprotect(void *addr, size_t len, int prot) {
	if (hp_unlikely(hp_llpages_contains(addr)))
		return hp_llpages_mprotect(addr, len, prot);
	return hp_os_mprotect(addr, len, prot);
}

HP_EXPORT int madvise(void *addr, size_t len, int advice) {
	if (hp_unlikely(hp_llpages_contains(addr)))
		return hp_llpages_madvise(addr, len, advice);
	return hp_os_madvise(addr, len, advice);
}

void hp_mmap_prefork(void) {
	hp_lock(&mmap_lock);
}

void hp_mmap_postfork_parent(void) {
	hp_unlock(&mmap_lock);
}

void hp_mmap_postfork_child(void) {
	hp_lock_reinit(&mmap_lock);
}
