/*
 * The huge class's hugetlb pages across fork: shadows for the pages a
 * child could not get copies of.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include "huge/huge.h"
#include "huge/region.h"

/*
 * Fork. A private hugetlb page shared with a child needs a new hugetlb
 * page when either side first writes it, from the pool and charged to
 * the hugetlb cgroup (both counters: cgroup.c); without one the kernel
 * takes the page from the child, or the child's own copy fails, and the
 * child dies of SIGBUS. So before fork, the pages the child could need
 * copies of are counted against the room the pool and the cgroup leave
 * (hp_backing_room), with the copies earlier children still alive may
 * make, and the pages that do not fit are copied to THP "shadows" and
 * marked MADV_DONTFORK: the child does not share them (it gets the
 * shadows instead, moved into place), and every copy that may still be
 * asked for can be had. The parent's own mappings never change, so
 * nothing its other threads write is lost. region_lock is held across
 * fork; these handlers are registered before jemalloc's, so they run
 * after jemalloc's prepare handler has taken its locks, and no thread
 * can be inside an extent hook then.
 */
#define HP_MAX_SHADOWS 256
static struct shadow {
	uintptr_t addr;
	size_t len;
	void *copy;
} shadows[HP_MAX_SHADOWS];
static unsigned nshadows;

/* Copies [addr, addr + len) to a THP shadow and keeps it from the child. */
static bool shadow_run(uintptr_t addr, size_t len) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(nshadows < HP_MAX_SHADOWS && len != 0 &&
	    ((addr | len) & (HP_HUGE - 1)) == 0);
	void *copy = hp_backing_copy(addr, len);
	if (copy == NULL)
		return false;
	if (hp_os_madvise((void *)addr, len, MADV_DONTFORK) != 0) {
		hp_os_munmap(copy, len);
		return false;
	}
	shadows[nshadows++] = (struct shadow){addr, len, copy};
	return true;
}

/* 2 MiB hugetlb pages outside the region that fork treats as its own:
 * the long-lived class's pool arena (longlived.c), shadowed only when the
 * region's own pages are not enough. */
static uintptr_t extra_base;
static size_t extra_len;
static uint8_t extra_sharers;   /* as a page's sharers, for all of them */

void hp_region_fork_also(uintptr_t addr, size_t len) {
	/* Outside the region: its pages are counted apart. */
	hp_assert(((addr | len) & (HP_HUGE - 1)) == 0 &&
	    (addr >= hp_region.base + hp_region.size ||
	    addr + len <= hp_region.base));
	hp_region_lock_timed();
	extra_base = addr;
	extra_len = len;
	extra_sharers = 0;
	hp_region_unlock_timed();
}

static void shared_once_more(uint8_t *sharers) {
	hp_lock_assert_held(&hp_region_lock);
	if (*sharers < UINT8_MAX)
		(*sharers)++;
}

/*
 * The copies children forked earlier may still make of pages of this
 * type: one a page for each fork that shared it (a page shared by the
 * process and k children needs at most k copies). With fresh, pagemap is
 * asked first which pages are this process's alone again (their children
 * gone, or copied): those owe nothing. Without it, an upper bound.
 */
static size_t owed_copies(size_t page, hp_map_t type, bool fresh) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert((type == HP_MAP_HUGETLB_2M && page == HP_HUGE) ||
	    (type == HP_MAP_HUGETLB_1G && page == HP_GIB));
	int fd = fresh ? hp_os_open("/proc/self/pagemap", O_RDONLY, 0) : -1;
	size_t owed = 0;
	for (uintptr_t hp = hp_region.base; hp < hp_region.carved_end;
	    hp += page) {
		hp_hpage_t *pg = hp_region_page(hp);
		if (pg->map != type || pg->sharers == 0)
			continue;
		if (fd >= 0 && hp_os_page_exclusive(fd, hp) == 1)
			pg->sharers = 0;
		owed += pg->sharers;
	}
	if (type == HP_MAP_HUGETLB_2M && extra_len && extra_sharers) {
		bool alone = fd >= 0;
		for (uintptr_t q = extra_base; alone && q < extra_base + extra_len;
		    q += HP_HUGE)
			alone = hp_os_page_exclusive(fd, q) == 1;
		if (alone)
			extra_sharers = 0;
		owed += (size_t)extra_sharers * (extra_len >> HP_HUGE_SHIFT);
	}
	if (fd >= 0)
		hp_os_close(fd);
	return owed;
}

/* Pages of type from the region's base up to upto are shadowed; every
 * other one is shared with the child about to be made. */
static void count_shared(size_t page, hp_map_t type, uintptr_t upto,
    bool extra_shadowed) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(upto >= hp_region.base && ((upto - hp_region.base) &
	    (page - 1)) == 0);
	for (uintptr_t hp = upto; hp < hp_region.carved_end; hp += page)
		if (hp_region_page(hp)->map == type)
			shared_once_more(&hp_region_page(hp)->sharers);
	if (type == HP_MAP_HUGETLB_2M && extra_len && !extra_shadowed)
		shared_once_more(&extra_sharers);
}

static void shadow_deficit(size_t page, hp_map_t type, size_t held) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(held != 0 && nshadows <= HP_MAX_SHADOWS);
	long room = hp_backing_room(page);
	size_t avail = room > 0 ? (size_t)room : 0;
	/* pagemap is read only when the bound would call for copies. */
	size_t owed = owed_copies(page, type, false);
	if (held + owed > avail)
		owed = owed_copies(page, type, true);
	size_t need = held + owed > avail ? held + owed - avail : 0;
	uintptr_t run = 0, end = 0, upto = hp_region.base;
	for (uintptr_t hp = hp_region.base; hp < hp_region.carved_end && need;
	    hp += page) {
		if (hp_region_page(hp)->map != type)
			continue;
		if (hp != end && run != end) {
			if (nshadows == HP_MAX_SHADOWS || !shadow_run(run, end - run))
				goto out;
			upto = end;
			run = end = 0;
		}
		if (run == end)
			run = end = hp;
		end += page;
		need--;
	}
	if (run != end) {
		if (nshadows == HP_MAX_SHADOWS || !shadow_run(run, end - run))
			goto out;
		upto = end;
	}
	/* The long-lived class's pages last: jemalloc's locks are held here
	 * and its records are not in the region, but mimalloc's are in the
	 * class's pages and change under the copy (backing.c). */
	bool extra_shadowed = false;
	if (need && type == HP_MAP_HUGETLB_2M && extra_len &&
	    nshadows < HP_MAX_SHADOWS)
		extra_shadowed = shadow_run(extra_base, extra_len);
	count_shared(page, type, upto, extra_shadowed);
	return;
out:
	count_shared(page, type, upto, false);
}

void hp_region_prefork(void) {
	hp_lock(&hp_region_lock);
	/* Counters that wrapped below zero would ask for shadows of pages
	 * that are not there. */
	hp_assert(hp_region.hugetlb_2m <= hp_region.size >> HP_HUGE_SHIFT &&
	    hp_region.hugetlb_1g <= hp_region.size >> HP_GIB_SHIFT);
	nshadows = 0;
	if (hp_region.hugetlb_2m || extra_len)
		shadow_deficit(HP_HUGE, HP_MAP_HUGETLB_2M, hp_region.hugetlb_2m +
		    (extra_len >> HP_HUGE_SHIFT));
	if (hp_region.hugetlb_1g)
		shadow_deficit(HP_GIB, HP_MAP_HUGETLB_1G, hp_region.hugetlb_1g);
}

void hp_region_postfork_parent(void) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(nshadows <= HP_MAX_SHADOWS);
	for (unsigned i = 0; i < nshadows; i++) {
		hp_os_madvise((void *)shadows[i].addr, shadows[i].len, MADV_DOFORK);
		hp_os_munmap(shadows[i].copy, shadows[i].len);
	}
	nshadows = 0;
	hp_unlock(&hp_region_lock);
}

void hp_region_postfork_child(void) {
	for (unsigned i = 0; i < nshadows; i++) {
		struct shadow *s = &shadows[i];
		if (hp_os_mremap(s->copy, s->len, s->len, MREMAP_MAYMOVE | MREMAP_FIXED,
		    (void *)s->addr) == MAP_FAILED) {
			/* Cannot happen short of the kernel refusing a move of
			 * our own mapping; the range would read as unmapped. */
			hp_log("fork: could not place a copied huge page (%s); "
			    "the child must not touch %p", hp_strerror(errno),
			    (void *)s->addr);
			continue;
		}
		if (s->addr == extra_base && s->len == extra_len) {
			extra_len = 0;           /* THP in this child now */
			continue;
		}
		for (uintptr_t q = s->addr; q < s->addr + s->len; q += HP_HUGE) {
			hp_hpage_t *pg = hp_region_page(q);
			/* region_lock is still the parent thread's here. */
			hp_region_recount(q, pg, -1);
			hp_assert(pg->map == HP_MAP_HUGETLB_2M ||
			    pg->map == HP_MAP_HUGETLB_1G);
			if (pg->map == HP_MAP_HUGETLB_2M) {
				hp_assert(hp_region.hugetlb_2m > 0);
				hp_region.hugetlb_2m--;
			} else if (pg->map == HP_MAP_HUGETLB_1G &&
			    (q & (HP_GIB - 1)) == 0) {
				hp_assert(hp_region.hugetlb_1g > 0);
				hp_region.hugetlb_1g--;
			}
			pg->map = HP_MAP_THP;
			pg->populated = true;
			pg->sharers = 0;
			hp_region_recount(q, pg, 1);
		}
	}
	nshadows = 0;
	hp_lock_reinit(&hp_region_lock);
}
