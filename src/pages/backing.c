/*
 * How huge-class memory is backed. Each run of 2 MiB pages that is about
 * to be used walks the chain: pages from the hugetlbfs pool (reserved when
 * mapped, so a short pool fails here and never raises SIGBUS later; no
 * more than the process's hugetlb cgroup leaves room for, cgroup.c, whose
 * fault limit would raise SIGBUS at the fault), else
 * transparent huge pages (MADV_HUGEPAGE, MADV_COLLAPSE if asked), else
 * 4 KiB pages. Also: what the kernel offers (probe) and how pages go back
 * (zap).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "pages/pages.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

static int warned_madvise, warned_zap, warned_pool, warned_collapse, warned_cg;
static bool thp_usable;                /* THP not 'never', or collapse on */
static bool hugetlb_broken;            /* this kernel cannot move them in */
/* A pool of hugetlb_size pages exists, or was asked for: only then does
 * a new run read the pool's free pages from sysfs. Set at start-up and
 * by each maintenance pass (hp_backing_poll), so a pool reserved later
 * is used within maintain_ms. */
static bool pool_configured;
hp_backing_fallbacks_t hp_backing_fallbacks;
/* The region's hugetlb pages by size (hp_backing_watch), read atomically. */
static const size_t no_pages;
static const size_t *held_2m = &no_pages, *held_1g = &no_pages;

void hp_backing_watch(const size_t *two_mib, const size_t *one_gib) {
	hp_assert(two_mib != NULL && one_gib != NULL);
	held_2m = two_mib;
	held_1g = one_gib;
}

static size_t region_held(const size_t *n) {
	return __atomic_load_n(n, __ATOMIC_RELAXED);
}

/* After a failed MAP_FIXED or MREMAP_FIXED, the kernel may have unmapped
 * the target already: take the hole back before anyone else's mmap can.
 * True if the range is now PROT_NONE and ours (it was a hole). */
static bool rereserve(uintptr_t addr, size_t len) {
	hp_assert(len != 0 && ((addr | len) & (HP_HUGE - 1)) == 0);
	void *p = hp_os_mmap((void *)addr, len, PROT_NONE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
	return p == (void *)addr;
}

/* The bracketed choice of a sysfs knob such as "always [madvise] never". */
static void sysfs_choice(const char *path, char *out, size_t n) {
	char buf[128];
	const char *lb, *rb;
	strncpy(out, "absent", n - 1);
	out[n - 1] = '\0';
	if (hp_os_read_file(path, buf, sizeof buf) <= 0 ||
	    (lb = strchr(buf, '[')) == NULL || (rb = strchr(lb, ']')) == NULL)
		return;
	size_t len = (size_t)(rb - lb - 1) < n - 1 ? (size_t)(rb - lb - 1) : n - 1;
	memcpy(out, lb + 1, len);
	out[len] = '\0';
}

#define POOL_DIR "/sys/kernel/mm/hugepages/hugepages-"

/* Pages of the pool of this page size that a new mapping can reserve. */
long hp_backing_pool_avail(size_t page) {
	const char *kb = page == HP_GIB ? "1048576kB" : "2048kB";
	char path[96];
	strcpy(path, POOL_DIR);
	strcat(path, kb);
	size_t dir = strlen(path);
	strcpy(path + dir, "/free_hugepages");
	long free_pages = hp_os_read_long(path);
	strcpy(path + dir, "/resv_hugepages");
	long resv = hp_os_read_long(path);
	return free_pages < 0 || resv < 0 ? 0 : free_pages - resv;
}

/* Pages of this size a new mapping can reserve and fault in: the pool's
 * available pages, no more than the hugetlb cgroup leaves room for. */
long hp_backing_room(size_t page) {
	long pool = hp_backing_pool_avail(page);
	long cg = pool > 0 ? hp_cgroup_room(page, NULL, 0) : 0;
	return cg < pool ? cg : pool;
}

/* Once: the cgroup's limit, not the pool, kept a run off hugetlb pages. */
static void cgroup_bound(size_t page, long room, const char *why) {
	hp_warn_once(&warned_cg, "the hugetlb cgroup limit (%s) leaves room for "
	    "%ld more %s pages; huge-class regions beyond it go to %s (said "
	    "once)", why, room, page == HP_GIB ? "1 GiB" : "2 MiB",
	    thp_usable ? "THP" : "4 KiB pages");
}

void hp_backing_probe(hp_sys_t *s) {
	char path[96];
	sysfs_choice("/sys/kernel/mm/transparent_hugepage/enabled",
	    s->thp_enabled, sizeof s->thp_enabled);
	sysfs_choice("/sys/kernel/mm/transparent_hugepage/defrag",
	    s->thp_defrag, sizeof s->thp_defrag);
	strcpy(path, POOL_DIR);
	strcat(path, hp_conf.hugetlb_page == HP_GIB ? "1048576kB" : "2048kB");
	strcat(path, "/nr_hugepages");
	s->pool_total = hp_os_read_long(path);
	s->pool_avail = hp_backing_pool_avail(hp_conf.hugetlb_page);
	__atomic_store_n(&pool_configured, s->pool_total > 0 ||
	    hp_conf.backing == HP_BACKING_HUGETLB, __ATOMIC_RELAXED);
	thp_usable = hp_conf.collapse ||
	    strcmp(s->thp_enabled, "always") == 0 ||
	    strcmp(s->thp_enabled, "madvise") == 0;
}

static bool wants_hugetlb(void) {
	return hp_conf.backing == HP_BACKING_AUTO ||
	    hp_conf.backing == HP_BACKING_HUGETLB;
}

/* From the maintenance thread, outside every lock: whether the pool of
 * hugetlb_size pages exists now, and, if so, the cgroup directories whose
 * limits bind (the process may have been moved), at most once a second:
 * that reads the whole of /proc/self/mountinfo, too dear for every pass
 * at a short maintain_ms (docs/backing.md). */
void hp_backing_poll(void) {
	static long since_ms;
	if (!wants_hugetlb())
		return;
	if (hp_conf.backing != HP_BACKING_HUGETLB) {
		char path[96];
		hp_fmt(path, sizeof path, POOL_DIR "%s/nr_hugepages",
		    hp_conf.hugetlb_page == HP_GIB ? "1048576kB" : "2048kB");
		__atomic_store_n(&pool_configured, hp_os_read_long(path) > 0,
		    __ATOMIC_RELAXED);
	}
	since_ms += hp_conf.maintain_ms;
	if (since_ms >= 1000 && __atomic_load_n(&pool_configured,
	    __ATOMIC_RELAXED)) {
		since_ms = 0;
		hp_cgroup_refresh();
	}
}

/* Whether a new run should look at the pool at all. */
static bool pool_maybe(void) {
	return wants_hugetlb() && !hugetlb_broken &&
	    __atomic_load_n(&pool_configured, __ATOMIC_RELAXED);
}

/* The chain as it stands at start-up, for the verbose line. */
const char *hp_backing_describe(const hp_sys_t *s, char *buf, size_t n) {
	const char *thp = hp_conf.backing == HP_BACKING_NONE ? "" : thp_usable ?
	    (hp_conf.collapse ? "thp with collapse, then " : "thp, then ") :
	    "no thp (THP never), ";
	const char *page = hp_conf.hugetlb_page == HP_GIB ? "1g" : "2m";
	if (wants_hugetlb() && (s->pool_avail > 0 ||
	    hp_conf.backing == HP_BACKING_HUGETLB))
		hp_fmt(buf, n, "hugetlb %s (pool %ld free of %ld), then %s4k",
		    page, s->pool_avail, s->pool_total, thp);
	else
		hp_fmt(buf, n, "%s4k%s", thp, wants_hugetlb() ?
		    " (no hugetlb pool)" : "");
	return buf;
}

/*
 * Maps len bytes of hugetlbfs pages of size page at addr, inside the
 * reservation. The pages are mapped elsewhere first and moved in, so that
 * a pool too short for them leaves the reservation as it was.
 */
static bool map_hugetlb(uintptr_t addr, size_t len, size_t page) {
	hp_assert((page == HP_HUGE || page == HP_GIB) && len != 0 &&
	    ((addr | len) & (page - 1)) == 0);
	int shift = page == HP_GIB ? HP_GIB_SHIFT : HP_HUGE_SHIFT;
	void *p = hp_os_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT), -1, 0);
	if (p == MAP_FAILED)
		return false;
	if (hp_os_mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
	    (void *)addr) != MAP_FAILED)
		return true;
	int err = errno;
	hp_os_munmap(p, len);
	if (err == EINVAL) {           /* kernels before 5.16 */
		hugetlb_broken = true;
	} else {
		/* The move can fail for want of page tables (ENOMEM, which
		 * 1 GiB pages can meet) after the target was unmapped: map
		 * the pages straight into that hole instead. */
		p = hp_os_mmap((void *)addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		    MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_HUGETLB |
		    (shift << MAP_HUGE_SHIFT), -1, 0);
		if (p == (void *)addr)
			return true;
		if (p != MAP_FAILED)
			hp_os_munmap(p, len);
	}
	rereserve(addr, len);
	return false;
}

/* Once: why the pool gave no pages, as the kernel's own knob says. No
 * message names a pool that is not there: with none configured, only
 * backing:hugetlb (which asked for one) is told so. */
static void pool_dry(size_t page) {
	hp_assert(page == HP_HUGE || page == HP_GIB);
	const char *size = page == HP_GIB ? "1 GiB" : "2 MiB";
	char path[96];
	hp_fmt(path, sizeof path, POOL_DIR "%s/nr_hugepages",
	    page == HP_GIB ? "1048576kB" : "2048kB");
	long total = hp_os_read_long(path);
	const char *next = thp_usable ? "THP" : "4 KiB pages";
	if (total > 0)
		hp_warn_once(&warned_pool, "the %s hugetlb pool (%ld pages) has "
		    "no free pages; new huge-class regions go to %s (said once)",
		    size, total, next);
	else if (hp_conf.backing == HP_BACKING_HUGETLB)
		hp_warn_once(&warned_pool, "backing:hugetlb, but no %s hugetlb "
		    "pool is reserved (%s is %ld); the huge class goes to %s "
		    "(said once)", size, path, total < 0 ? 0 : total, next);
}

bool hp_backing_map_gib(uintptr_t addr) {
	hp_assert((addr & (HP_GIB - 1)) == 0);
	if (!pool_maybe())
		return false;
	char why[320];
	long pool = hp_backing_pool_avail(HP_GIB);
	long cg = pool >= 1 ? hp_cgroup_room(HP_GIB, why, sizeof why) : 0;
	if (pool >= 1 && cg < 1) {
		cgroup_bound(HP_GIB, cg, why);
		return false;
	}
	if (pool >= 1 && map_hugetlb(addr, HP_GIB, HP_GIB))
		return true;
	if (hp_conf.backing == HP_BACKING_HUGETLB || region_held(held_1g))
		pool_dry(HP_GIB);
	return false;
}

/* Faults in and collapses fresh THP pages, so they are huge whatever the
 * fault path would have done (defrag never, THP never). */
void hp_backing_collapse(uintptr_t addr, size_t len) {
	hp_assert(len != 0 && ((addr | len) & (HP_HUGE - 1)) == 0);
	if (hp_os_madvise((void *)addr, len, MADV_POPULATE_WRITE) != 0 ||
	    hp_os_madvise((void *)addr, len, MADV_COLLAPSE) != 0)
		hp_warn_once(&warned_collapse, "MADV_COLLAPSE failed (%s); some "
		    "pages may stay on 4 KiB", hp_strerror(errno));
}

size_t hp_backing_map(uintptr_t addr, size_t len, hp_map_t *type) {
	/* Whole 2 MiB pages, mapped whole: the region keeps one state each. */
	hp_assert(len != 0 && ((addr | len) & (HP_HUGE - 1)) == 0);
	if (pool_maybe() && hp_conf.hugetlb_page == HP_HUGE) {
		long avail = hp_backing_pool_avail(HP_HUGE);
		size_t take = avail > 0 ? (size_t)avail * HP_HUGE : 0;
		if (take > len)
			take = len;
		bool cg_bound = false;
		if (take != 0) {
			char why[320];
			long cg = hp_cgroup_room(HP_HUGE, why, sizeof why);
			if ((size_t)cg < take / HP_HUGE) {
				cgroup_bound(HP_HUGE, cg, why);
				take = (size_t)cg * HP_HUGE;
				cg_bound = true;
			}
		}
		/* Other processes race for the pool: halve on failure. */
		for (; take >= HP_HUGE; take = (take / 2) & ~(HP_HUGE - 1))
			if (map_hugetlb(addr, take, HP_HUGE)) {
				hp_assert(take <= len && (take & (HP_HUGE - 1)) == 0);
				*type = HP_MAP_HUGETLB_2M;
				return take;
			}
		__atomic_fetch_add(&hp_backing_fallbacks.pool_empty, 1,
		    __ATOMIC_RELAXED);
		if (!cg_bound && (hp_conf.backing == HP_BACKING_HUGETLB ||
		    region_held(held_2m)))
			pool_dry(HP_HUGE);
	}
	if (hp_os_mprotect((void *)addr, len, PROT_READ | PROT_WRITE) != 0)
		return 0;                /* counted by huge.c's fallback */
	bool huge = hp_conf.backing != HP_BACKING_NONE && thp_usable;
	if (hp_conf.backing != HP_BACKING_NONE && !thp_usable)
		__atomic_fetch_add(&hp_backing_fallbacks.thp_off, 1, __ATOMIC_RELAXED);
	if (hp_os_madvise((void *)addr, len, huge ? MADV_HUGEPAGE :
	    MADV_NOHUGEPAGE) != 0)
		hp_warn_once(&warned_madvise, "hp_os_madvise(%s) failed (%s); the "
		    "huge class stays on the kernel's default pages",
		    huge ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE", hp_strerror(errno));
	*type = huge ? HP_MAP_THP : HP_MAP_4K;
	return len;
}

/*
 * The long-lived class's arenas (longlived.c), which mimalloc commits
 * and gives back itself in whole 32 MiB segments. From the 2 MiB pool: a
 * multiple of unit, at most max bytes, and no more than leaves the pool
 * (and the hugetlb cgroup) as many available pages as the process then
 * holds, so that a fork needs no shadows (huge/region_fork.c): mimalloc's
 * records in the arena are written without a lock, and a copy made while
 * other threads run could give the child a torn heap. Returns the bytes
 * mapped, 0 for none.
 */
size_t hp_backing_map_pool(uintptr_t addr, size_t max, size_t unit) {
	hp_assert(unit != 0 && (unit & (HP_HUGE - 1)) == 0 &&
	    (addr & (HP_HUGE - 1)) == 0);
	if (!pool_maybe() || hp_conf.hugetlb_page != HP_HUGE)
		return 0;
	long avail = hp_backing_room(HP_HUGE);
	long ours = (long)region_held(held_2m);
	size_t take = avail > ours ? (size_t)(avail - ours) / 2 * HP_HUGE : 0;
	take = (take < max ? take : max) / unit * unit;
	for (; take >= unit; take = take / 2 / unit * unit)
		if (map_hugetlb(addr, take, HP_HUGE)) {
			hp_assert(take <= max && take % unit == 0);
			return take;
		}
	__atomic_fetch_add(&hp_backing_fallbacks.pool_empty, 1, __ATOMIC_RELAXED);
	return 0;
}

/* The rest stays PROT_NONE, advised as the huge class's THP or 4 KiB
 * pages are; true if on THP. */
bool hp_backing_advise(uintptr_t addr, size_t len) {
	hp_assert(((addr | len) & (HP_PAGE - 1)) == 0);
	bool huge = hp_backing_thp_usable();
	if (hp_conf.backing != HP_BACKING_NONE && !huge)
		__atomic_fetch_add(&hp_backing_fallbacks.thp_off, 1, __ATOMIC_RELAXED);
	hp_os_madvise((void *)addr, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	return huge;
}

/* Gives back a run of whole, empty pages of one type; false if it could
 * not (mlock'ed memory, say). hugetlb pages are unmapped to PROT_NONE,
 * which returns them, and their reservation, to the pool. */
bool hp_backing_zap(uintptr_t addr, size_t len, hp_map_t type) {
	/* Whole pages of the type: a 1 GiB page goes back only whole. */
	hp_assert(type != HP_MAP_NONE && len != 0 && ((addr | len) &
	    ((type == HP_MAP_HUGETLB_1G ? HP_GIB : HP_HUGE) - 1)) == 0);
	bool ok;
	if (type == HP_MAP_HUGETLB_2M || type == HP_MAP_HUGETLB_1G)
		ok = hp_os_mmap((void *)addr, len, PROT_NONE, MAP_PRIVATE |
		    MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED ||
		    rereserve(addr, len);
	else
		ok = hp_os_madvise((void *)addr, len, MADV_DONTNEED) == 0;
	if (!ok)
		hp_warn_once(&warned_zap, "could not give back free huge pages "
		    "(%s); they stay resident", hp_strerror(errno));
	return ok;
}

/* A copy of [addr, addr + len) in fresh THP memory, 2 MiB aligned, or
 * NULL. For fork: see huge/region_fork.c. */
void *hp_backing_copy(uintptr_t addr, size_t len) {
	hp_assert(len != 0 && ((addr | len) & (HP_HUGE - 1)) == 0);
	char *copy = hp_os_map_aligned(len, HP_HUGE, PROT_READ | PROT_WRITE, 0);
	if (copy == NULL)
		return NULL;
	hp_os_madvise(copy, len, thp_usable ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memcpy(copy, (void *)addr, len);
	return copy;
}

bool hp_backing_thp_usable(void) {
	return thp_usable && hp_conf.backing != HP_BACKING_NONE;
}
