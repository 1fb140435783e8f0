#define _GNU_SOURCE
/*
 * The huge-class reservation: one PROT_NONE range, 2 MiB aligned (1 GiB
 * with 1 GiB pages), that the huge arena's extent hooks carve from the
 * bottom up. A 2 MiB page is mapped (backing.c picks how) when jemalloc
 * first commits part of it, and a per-2 MiB bitmap tracks which 4 KiB
 * subpages jemalloc holds, so that memory goes back to the kernel only in
 * whole huge pages: the allocator never splits one.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include "huge/huge.h"
#include "base/lock.h"
#include "huge/region.h"

hp_region_t hp_region;
hp_lock_t hp_region_lock = HP_LOCK_INIT(HP_RANK_REGION);
static void tally(uintptr_t hp, int sign);
#ifdef HP_DEBUG
static bool totals_agree(void);
#endif
/* Counters kept under region_lock: pages given back whole, split by
 * strand_limit, and partial purges left undone (no split). */
static uint64_t n_released, n_split, n_refused;
static void purge_parts(uintptr_t hp, hp_hpage_t *pg, bool split);

/* The time a thread holds region_lock, counted while it asks for it
 * (hp_region_timing): the maintenance thread's passes are measured so. */
static HP_TLS bool timing;
static HP_TLS uint64_t held_ns, taken_at;

void hp_region_lock_timed(void) {
	hp_lock(&hp_region_lock);
	if (timing)
		taken_at = hp_os_clock_ns(CLOCK_MONOTONIC);
}

void hp_region_unlock_timed(void) {
	if (timing)
		held_ns += hp_os_clock_ns(CLOCK_MONOTONIC) - taken_at;
	hp_unlock(&hp_region_lock);
}

/* Starts counting (on) or stops and returns the nanoseconds this thread
 * held region_lock since it started. */
uint64_t hp_region_timing(bool on) {
	uint64_t ns = held_ns;
	timing = on;
	held_ns = 0;
	return ns;
}

#define HP_RESERVE_MIN ((size_t)1 << 30)   /* halved down to this */
#define HP_ZONE_SHARE  16                   /* zone: 1/16 of the region */
#define HP_SPLITS_PER_PASS 4096             /* 8 GiB of huge pages */

uintptr_t hp_owned_base = UINTPTR_MAX;
size_t hp_owned_size;
uintptr_t hp_region_end;

static uintptr_t align_up(uintptr_t x, size_t a) {
	return (x + a - 1) & ~(uintptr_t)(a - 1);
}

/*
 * One PROT_NONE reservation: the huge class's region, then (ll_share) the
 * long-lived class's range, then (with_zone) the sample zone's share, so
 * that free() tells all three from jemalloc's own memory with a single
 * range test. The long-lived range is whole HP_LL_ALIGN blocks, one
 * ll_share-th of the region, taken from the region's top; its range in
 * *ll, *ll_size (0 without), the zone's in *zone, *zone_size.
 */
bool hp_region_init(size_t want, bool with_zone, unsigned ll_share,
    uintptr_t *ll, size_t *ll_size, uintptr_t *zone, size_t *zone_size) {
	hp_backing_watch(&hp_region.hugetlb_2m, &hp_region.hugetlb_1g);
	/* PROT_NONE is not charged to the commit limit; mprotect() charges
	 * each part as it is made accessible. */
	size_t align = hp_conf.hugetlb_page == HP_GIB ? HP_GIB : HP_HUGE, got;
	size_t extra = with_zone ? want / HP_ZONE_SHARE : 0;
	uintptr_t base = (uintptr_t)hp_os_reserve(want + extra, HP_RESERVE_MIN +
	    HP_RESERVE_MIN / HP_ZONE_SHARE * with_zone, align, 0, &got);
	if (base == 0)
		return false;
	size_t size = with_zone ? got / (HP_ZONE_SHARE + 1) * HP_ZONE_SHARE : got;
	size &= ~(align - 1);
	hp_region.granted = got < want + extra ? size : want;
	*zone = base + size;
	*zone_size = with_zone ? got - size : 0;
	*ll = 0;
	*ll_size = 0;
	if (ll_share != 0) {
		/* Its end aligned down, its start aligned to both units, so the
		 * region below stays whole pages of its own size. */
		size_t unit = align > HP_LL_ALIGN ? align : HP_LL_ALIGN;
		uintptr_t end = (base + size) & ~(uintptr_t)(HP_LL_ALIGN - 1);
		uintptr_t start = (end - size / ll_share) & ~(uintptr_t)(unit - 1);
		if (start > base && start < end) {
			*ll = start;
			*ll_size = end - start;
			size = start - base;
		}
	}
	size_t meta = align_up((size >> HP_HUGE_SHIFT) * sizeof(hp_hpage_t),
	    HP_PAGE);
	void *pages = hp_os_mmap(NULL, meta, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (pages == MAP_FAILED) {
		hp_os_munmap((void *)base, got);
		return false;
	}
	hp_region.pages = pages;
	hp_region.bump = hp_region.carved_end = base;
	hp_region.base = base;
	hp_region.size = size;
	hp_region_end = base + size;
	hp_assert(size != 0 && size <= got && ((base | size) & (align - 1)) == 0);
	/* The size first: a free() that sees the base must find both. */
	hp_owned_size = got;
	__atomic_store_n(&hp_owned_base, base, __ATOMIC_RELEASE);
	return true;
}

/* Whether [addr, addr + len) is whole 4 KiB pages of the region that
 * jemalloc was handed (the extent hooks check every range with this). */
bool hp_region_owns(const void *addr, size_t len) {
	uintptr_t a = (uintptr_t)addr;
	uintptr_t carved = __atomic_load_n(&hp_region.carved_end,
	    __ATOMIC_ACQUIRE);
	return len != 0 && ((a | len) & (HP_PAGE - 1)) == 0 &&
	    a >= hp_region.base && a < carved && len <= carved - a;
}


/* The subpages [*first, *first + *n) of 2 MiB page hp inside [a, e). */
static void span(uintptr_t hp, uintptr_t a, uintptr_t e, unsigned *first,
    unsigned *n) {
	uintptr_t lo = hp > a ? hp : a, hi = e < hp + HP_HUGE ? e : hp + HP_HUGE;
	hp_assert(lo <= hi && hi - hp <= HP_HUGE);
	*first = (unsigned)((lo - hp) >> HP_PAGE_SHIFT);
	*n = (unsigned)((hi - lo) >> HP_PAGE_SHIFT);
}


/* Maps every PROT_NONE 2 MiB page that [a, e) touches. With 1 GiB pages,
 * a wholly unmapped GiB that [a, e) covers at least half of is first
 * offered to the 1 GiB pool: those pages are scarce, and small commits
 * (jemalloc's own metadata, say) must not take them. */
static bool map_locked(uintptr_t a, uintptr_t e) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(a < e && a >= hp_region.base && e <= hp_region.carved_end);
	uintptr_t end = align_up(e, HP_HUGE);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < end;) {
		if (hp_region_page(hp)->map != HP_MAP_NONE) {
			hp += HP_HUGE;
			continue;
		}
		if (hp_conf.hugetlb_page == HP_GIB) {
			uintptr_t g = hp & ~(HP_GIB - 1);
			uintptr_t lo = a > g ? a : g;
			uintptr_t hi = e < g + HP_GIB ? e : g + HP_GIB;
			bool free_gib = g >= hp_region.base && hi - lo >= HP_GIB / 2 &&
			    g + HP_GIB <= hp_region.base + hp_region.size;
			for (uintptr_t q = g; free_gib && q < g + HP_GIB; q += HP_HUGE)
				free_gib = q >= hp_region.carved_end ||
				    hp_region_page(q)->map == HP_MAP_NONE;
			if (free_gib && hp_backing_map_gib(g)) {
				for (uintptr_t q = g; q < g + HP_GIB; q += HP_HUGE) {
					hp_assert(hp_region_page(q)->map == HP_MAP_NONE);
					tally(q, -1);
					hp_region_page(q)->map = HP_MAP_HUGETLB_1G;
					hp_region_page(q)->sharers = 0;
					tally(q, 1);
				}
				hp_region.hugetlb_1g++;
				hp_assert(totals_agree());
				hp = g + HP_GIB;
				continue;
			}
		}
		uintptr_t run = hp;
		while (run < end && hp_region_page(run)->map == HP_MAP_NONE)
			run += HP_HUGE;
		hp_map_t type;
		size_t got = hp_backing_map(hp, run - hp, &type);
		if (got == 0)
			return false;
		hp_assert(got <= run - hp && (got & (HP_HUGE - 1)) == 0 &&
		    type != HP_MAP_NONE && type != HP_MAP_HUGETLB_1G);
		for (uintptr_t q = hp; q < hp + got; q += HP_HUGE) {
			tally(q, -1);
			hp_region_page(q)->map = (uint8_t)type;
			hp_region_page(q)->populated = false;
			hp_region_page(q)->sharers = 0;
			tally(q, 1);
		}
		if (type == HP_MAP_HUGETLB_2M)
			hp_region.hugetlb_2m += got >> HP_HUGE_SHIFT;
		hp_assert(totals_agree());
		hp = hp + got;
	}
	return true;
}

/* With collapse:true, THP pages still empty are faulted in and collapsed
 * as they are first used. */
static void collapse_locked(uintptr_t a, uintptr_t e) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(a < e && a >= hp_region.base && e <= hp_region.carved_end);
	uintptr_t run = 0, end = align_up(e, HP_HUGE);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp <= end; hp += HP_HUGE) {
		bool fresh = hp < end && hp_region_page(hp)->map == HP_MAP_THP &&
		    !hp_region_page(hp)->populated;
		if (fresh) {
			hp_region_page(hp)->populated = true;
			if (run == 0)
				run = hp;
		} else if (run != 0) {
			hp_backing_collapse(run, hp - run);
			run = 0;
		}
	}
}

static bool reuse_locked(uintptr_t a, size_t len) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(len != 0 && ((a | len) & (HP_PAGE - 1)) == 0);
	if (!map_locked(a, a + len))
		return false;
	if (hp_conf.collapse)
		collapse_locked(a, a + len);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < a + len; hp += HP_HUGE) {
		unsigned first, n;
		uint64_t zero[HP_SUBWORDS];
		span(hp, a, a + len, &first, &n);
		tally(hp, -1);
		hp_hpage_reuse(hp_region_page(hp), first, n, zero);
		hp_assert(hp_region_page(hp)->map != HP_MAP_NONE);   /* mapped above */
		tally(hp, 1);
		/* jemalloc takes decommitted memory back as zeroed; subpages
		 * that stayed resident inside a live huge page are not. */
		for (unsigned i = first, j; i < first + n; i = j) {
			for (j = i + 1; hp_hpage_bit(zero, i) && j < first + n &&
			    hp_hpage_bit(zero, j); j++)
				;
			if (hp_hpage_bit(zero, i))
				memset((void *)(hp + ((size_t)i << HP_PAGE_SHIFT)),
				    0, (size_t)(j - i) << HP_PAGE_SHIFT);
		}
	}
	return true;
}

void *hp_region_alloc(size_t size, size_t align, bool commit) {
	void *ret = NULL;
	if (align < HP_PAGE)
		align = HP_PAGE;
	/* With 1 GiB pages, a request of half a GiB or more gets a GiB of
	 * its own, so that one 1 GiB page can back it. */
	if (hp_conf.hugetlb_page == HP_GIB && size >= HP_GIB / 2 &&
	    align < HP_GIB)
		align = HP_GIB;
	hp_region_lock_timed();
	uintptr_t start = align_up(hp_region.bump, align), end = start + size;
	if (start < hp_region.bump || end < start ||
	    end > hp_region.base + hp_region.size)
		goto out;
	/* Pages first carved start empty: every subpage released. */
	uintptr_t was = hp_region.carved_end, carved = was;
	for (; carved < end; carved += HP_HUGE) {
		hp_hpage_t *pg = hp_region_page(carved);
		/* Nothing maps a page before it is carved but a 1 GiB page
		 * mapped for an earlier one of its GiB. */
		hp_assert(pg->map == HP_MAP_NONE || pg->map == HP_MAP_HUGETLB_1G);
		tally(carved, -1);           /* counted as not carved yet */
		memset(pg->released, 0xff, sizeof pg->released);
		memset(pg->dirty, 0, sizeof pg->dirty);
		pg->nreleased = HP_SUBPAGES;
	}
	hp_assert((carved & (HP_HUGE - 1)) == 0 &&
	    carved <= hp_region.base + hp_region.size);
	__atomic_store_n(&hp_region.carved_end, carved, __ATOMIC_RELEASE);
	for (uintptr_t hp = was; hp < carved; hp += HP_HUGE)
		tally(hp, 1);
	if (commit && !reuse_locked(start, size))
		goto out;
	hp_region.bump = end;
	hp_assert(end <= hp_region.carved_end);
	ret = (void *)start;
out:
	hp_region_unlock_timed();
	return ret;
}

/* True if every 2 MiB page of the GiB that holds hp is empty. */
static bool gib_empty(uintptr_t hp) {
	hp_lock_assert_held(&hp_region_lock);
	uintptr_t g = hp & ~(HP_GIB - 1);
	for (uintptr_t q = g; q < g + HP_GIB; q += HP_HUGE)
		if (q < hp_region.carved_end &&      /* beyond: never used */
		    hp_region_page(q)->nreleased < HP_SUBPAGES)
			return false;
	return true;
}

/* Gives back the empty pages [zap, end), all of one type. Their dirty
 * bits are cleared only once that worked: until then they may hold old
 * bytes, and a fork child that copies them sees them as dirty still. */
static void zap_run(uintptr_t zap, uintptr_t end, hp_map_t type) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(zap < end && end <= hp_region.carved_end && type != HP_MAP_NONE);
	if (type == HP_MAP_HUGETLB_1G) {
		/* Only a whole empty GiB can go back to the 1 GiB pool. */
		for (uintptr_t g = zap & ~(HP_GIB - 1); g < end; g += HP_GIB) {
			if (!gib_empty(g) || !hp_backing_zap(g, HP_GIB, type))
				continue;
			for (uintptr_t q = g; q < g + HP_GIB; q += HP_HUGE) {
				hp_assert(hp_region_page(q)->map == HP_MAP_HUGETLB_1G);
				tally(q, -1);
				hp_hpage_zapped(hp_region_page(q));
				hp_region_page(q)->map = HP_MAP_NONE;
				tally(q, 1);             /* unmapped: adds nothing */
			}
			hp_assert(hp_region.hugetlb_1g > 0);
			hp_region.hugetlb_1g--;
			hp_assert(totals_agree());
			n_released += HP_PER_GIB;
		}
		return;
	}
	if (!hp_backing_zap(zap, end - zap, type))
		return;                  /* reuse will zero them instead */
	n_released += (end - zap) >> HP_HUGE_SHIFT;
	for (uintptr_t hp = zap; hp < end; hp += HP_HUGE) {
		hp_assert(hp_region_page(hp)->map == type &&
		    hp_region_page(hp)->nreleased == HP_SUBPAGES);
		tally(hp, -1);
		hp_hpage_zapped(hp_region_page(hp));
		hp_region_page(hp)->populated = false;
		if (hp_region_page(hp)->split)          /* empty again: huge again */
			hp_os_madvise((void *)hp, HP_HUGE, MADV_HUGEPAGE);
		hp_region_page(hp)->split = false;
		if (type == HP_MAP_HUGETLB_2M)
			hp_region_page(hp)->map = HP_MAP_NONE;
		tally(hp, 1);
	}
	if (type == HP_MAP_HUGETLB_2M) {
		hp_assert(hp_region.hugetlb_2m >= (end - zap) >> HP_HUGE_SHIFT);
		hp_region.hugetlb_2m -= (end - zap) >> HP_HUGE_SHIFT;
	}
	hp_assert(totals_agree());
}

void hp_region_release(void *addr, size_t len) {
	uintptr_t a = (uintptr_t)addr, zap = 0, zap_end = 0;
	hp_map_t zap_type = HP_MAP_NONE;
	hp_assert(hp_region_owns(addr, len));
	hp_region_lock_timed();
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < a + len; hp += HP_HUGE) {
		unsigned first, n;
		span(hp, a, a + len, &first, &n);
		hp_hpage_t *pg = hp_region_page(hp);
		tally(hp, -1);
		bool zap_it = hp_hpage_release(pg, first, n) &&
		    pg->map != HP_MAP_NONE;
		hp_assert(!zap_it || pg->nreleased == HP_SUBPAGES);
		if (!zap_it && pg->map != HP_MAP_NONE &&
		    pg->nreleased < HP_SUBPAGES) {
			if (pg->split || pg->map == HP_MAP_4K)
				purge_parts(hp, pg, false);   /* no huge page to keep */
			else
				n_refused++;   /* left resident rather than split */
		}
		tally(hp, 1);
		if (!zap_it)
			continue;
		if (hp != zap_end || pg->map != zap_type) {   /* batch runs */
			if (zap_end)
				zap_run(zap, zap_end, zap_type);
			zap = hp;
			zap_type = (hp_map_t)pg->map;
		}
		zap_end = hp + HP_HUGE;
	}
	if (zap_end)
		zap_run(zap, zap_end, zap_type);
	hp_region_unlock_timed();
}

bool hp_region_reuse(void *addr, size_t len) {
	hp_assert(hp_region_owns(addr, len));
	hp_region_lock_timed();
	bool ok = reuse_locked((uintptr_t)addr, len);
	hp_region_unlock_timed();
	return ok;
}

static unsigned popcount_and(const uint64_t *a, const uint64_t *b) {
	unsigned n = 0;
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		n += (unsigned)hp_popcount64(b ? a[w] & b[w] : a[w]);
	return n;
}

static bool any_set(const uint64_t *m) {
	uint64_t x = 0;
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		x |= m[w];
	return x != 0;
}

/* A huge page whose free parts stay resident with it: THP not yet split,
 * or hugetlb (which cannot be split). */
static bool whole_resident(const hp_hpage_t *pg) {
	return (pg->map == HP_MAP_THP && !pg->split) ||
	    pg->map == HP_MAP_HUGETLB_2M || pg->map == HP_MAP_HUGETLB_1G;
}

/* Stranded bytes of one page: resident and free, beside live data. */
static size_t stranded_of(const hp_hpage_t *pg) {
	if (pg->nreleased == 0 || pg->nreleased == HP_SUBPAGES ||
	    pg->map == HP_MAP_NONE)
		return 0;
	if (whole_resident(pg))
		return (size_t)pg->nreleased << HP_PAGE_SHIFT;
	return (size_t)popcount_and(pg->released, pg->dirty) << HP_PAGE_SHIFT;
}

/*
 * The page-level counters of the huge class are kept as pages change
 * state, under region_lock: every change of a page is bracketed by
 * tally(-1) and tally(+1), so a refresh copies them in constant time
 * whatever the heap's size (hp_region_scan), and strand_limit walks the
 * pages only when there is something to split. A debug build recounts
 * every page at each refresh and checks the two agree.
 */
typedef struct {
	hp_arena_stats_t a;      /* the page-level fields only */
	uint64_t thp_stranded;   /* on unsplit THP pages: what a split frees */
} tally_t;
static tally_t totals;

/* Adds (sign 1) or takes away (sign -1) page hp's share. "dirty" (handed
 * to jemalloc since the page was last given back) stands for touched. */
static void tally_into(tally_t *t, uintptr_t hp, const hp_hpage_t *pg,
    int sign) {
	hp_arena_stats_t *a = &t->a;
	uint64_t s = (uint64_t)(int64_t)sign;    /* adds modulo 2^64 */
	hp_assert((sign == 1 || sign == -1) && pg->nreleased <= HP_SUBPAGES);
	if (pg->map == HP_MAP_NONE)
		return;
	if (hp >= hp_region.carved_end) {   /* a 1 GiB page's uncarved part */
		a->mapped_bytes += s * HP_HUGE;
		a->hugetlb_1g_bytes += s * HP_HUGE;
		a->resident_bytes += s * HP_HUGE;
		a->resident_huge_bytes += s * HP_HUGE;
		return;
	}
	/* A page resident whole needs only whether any part was touched. */
	unsigned dirty = whole_resident(pg) ? any_set(pg->dirty) :
	    popcount_and(pg->dirty, NULL);
	a->mapped_bytes += s * HP_HUGE;
	switch (pg->map) {
	case HP_MAP_HUGETLB_2M: a->hugetlb_2m_bytes += s * HP_HUGE; break;
	case HP_MAP_HUGETLB_1G: a->hugetlb_1g_bytes += s * HP_HUGE; break;
	case HP_MAP_THP: a->thp_bytes += s * HP_HUGE; break;
	default: a->small_page_bytes += s * HP_HUGE; break;
	}
	if (pg->map == HP_MAP_HUGETLB_1G) {
		a->resident_bytes += s * HP_HUGE;   /* the GiB is one page */
		a->resident_huge_bytes += s * HP_HUGE;
	} else if (whole_resident(pg)) {
		a->resident_bytes += dirty ? s * HP_HUGE : 0;
		a->resident_huge_bytes += dirty ? s * HP_HUGE : 0;
	} else
		a->resident_bytes += s * ((uint64_t)dirty << HP_PAGE_SHIFT);
	if (pg->nreleased == 0) {
		a->pages_full += s;
	} else if (pg->nreleased == HP_SUBPAGES) {
		a->pages_empty_resident += dirty != 0 ? s : 0;
		return;
	} else {
		a->pages_partial += s;
	}
	unsigned live = HP_SUBPAGES - pg->nreleased;
	a->live_hist[live * HP_HIST_BUCKETS / (HP_SUBPAGES + 1)] += s;
	uint64_t stranded = stranded_of(pg);
	a->stranded_bytes += s * stranded;
	/* What strand_limit can give back: on THP pages not yet split. */
	if (pg->map == HP_MAP_THP && !pg->split)
		t->thp_stranded += s * stranded;
}

#ifdef HP_DEBUG
/* The totals of the pages counted in: none below zero (a page taken out
 * that was not counted in would wrap them), and each figure within the
 * one it is part of. Between a page's tally(-1) and tally(1) too. */
static bool totals_sane(void) {
	const hp_arena_stats_t *a = &totals.a;
	uint64_t pages = a->mapped_bytes >> HP_HUGE_SHIFT;
	return a->hugetlb_2m_bytes + a->hugetlb_1g_bytes + a->thp_bytes +
	    a->small_page_bytes == a->mapped_bytes &&
	    a->resident_bytes <= a->mapped_bytes &&
	    a->resident_huge_bytes <= a->resident_bytes &&
	    a->stranded_bytes <= a->resident_bytes &&
	    totals.thp_stranded <= a->stranded_bytes &&
	    a->pages_full + a->pages_partial + a->pages_empty_resident <= pages;
}

/* The hugetlb pages the region holds, by its counters and by its pages'
 * states. Each 1 GiB page counts whole, its parts not carved yet
 * included; a fork child's copies of hugetlb pages are THP. */
static bool totals_agree(void) {
	return totals.a.hugetlb_2m_bytes == hp_region.hugetlb_2m * HP_HUGE &&
	    totals.a.hugetlb_1g_bytes >= hp_region.hugetlb_1g * HP_GIB &&
	    hp_region.hugetlb_2m <= hp_region.size >> HP_HUGE_SHIFT &&
	    hp_region.hugetlb_1g <= hp_region.size >> HP_GIB_SHIFT;
}
#endif

static void tally(uintptr_t hp, int sign) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(hp_region_page(hp)->map <= HP_MAP_HUGETLB_1G);
	tally_into(&totals, hp, hp_region_page(hp), sign);
	hp_assert(totals_sane());
}

/* For the fork child, whose region_lock is still the parent thread's. */
void hp_region_recount(uintptr_t hp, hp_hpage_t *pg, int sign) {
	hp_assert(pg == hp_region_page(hp));
	tally_into(&totals, hp, pg, sign);
	hp_assert(totals_sane());
}

/* The page-level fields of b added to a. */
static void add_pages(hp_arena_stats_t *a, const hp_arena_stats_t *b) {
	a->mapped_bytes += b->mapped_bytes;
	a->resident_bytes += b->resident_bytes;
	a->resident_huge_bytes += b->resident_huge_bytes;
	a->hugetlb_2m_bytes += b->hugetlb_2m_bytes;
	a->hugetlb_1g_bytes += b->hugetlb_1g_bytes;
	a->thp_bytes += b->thp_bytes;
	a->small_page_bytes += b->small_page_bytes;
	a->pages_full += b->pages_full;
	a->pages_partial += b->pages_partial;
	a->pages_empty_resident += b->pages_empty_resident;
	a->stranded_bytes += b->stranded_bytes;
	for (unsigned i = 0; i < HP_HIST_BUCKETS; i++)
		a->live_hist[i] += b->live_hist[i];
}

#ifdef HP_DEBUG
/* Every page counted again: the kept totals must be the same. */
static void recount_check(void) {
	hp_lock_assert_held(&hp_region_lock);
	tally_t t = {0};
	uintptr_t end = hp_region.carved_end;
	if (hp_conf.hugetlb_page == HP_GIB && hp_region.size)
		end = align_up(end, HP_GIB);
	for (uintptr_t hp = hp_region.base; hp < end; hp += HP_HUGE) {
		hp_assert(hp >= hp_region.carved_end ||
		    hp_hpage_valid(hp_region_page(hp)));
		tally_into(&t, hp, hp_region_page(hp), 1);
	}
	hp_assert(memcmp(&t, &totals, sizeof t) == 0);
	hp_assert(totals_agree() && hp_region.bump <= hp_region.carved_end);
}
#else
#define recount_check() ((void)0)
#endif

/* Adds the page-level counters of the huge class to *a. */
void hp_region_scan(hp_arena_stats_t *a) {
	hp_region_lock_timed();
	recount_check();
	add_pages(a, &totals.a);
	a->pages_released = n_released;
	a->pages_split = n_split;
	a->purges_refused = n_refused;
	hp_region_unlock_timed();
}

/* The end of the pages that may be mapped: carved ones, and with 1 GiB
 * pages the rest of the last GiB. */
uintptr_t hp_region_mapped_end(void) {
	hp_region_lock_timed();
	uintptr_t end = hp_region.carved_end;
	if (hp_conf.hugetlb_page == HP_GIB && end > hp_region.base)
		end = align_up(end, HP_GIB);
	hp_region_unlock_timed();
	return end;
}

/* The states of the pages first + i for each bit i of pages, copied
 * under the lock into v[i] (resident.c asks the kernel about them without
 * it). Pages past the carved end hold nothing. */
void hp_region_view(uintptr_t first, uint64_t pages, hp_page_view_t *v) {
	if (pages == 0)
		return;
	hp_region_lock_timed();
	for (uint64_t left = pages; left != 0; left &= left - 1) {
		unsigned i = (unsigned)__builtin_ctzll(left);
		uintptr_t hp = first + ((uintptr_t)i << HP_HUGE_SHIFT);
		const hp_hpage_t *pg = hp_region_page(hp);
		bool carved = hp < hp_region.carved_end;
		hp_assert(!carved || hp_hpage_valid(pg));
		v[i].may_be_huge = whole_resident(pg);
		v[i].nheld = carved ? HP_SUBPAGES - pg->nreleased : 0;
		for (unsigned w = 0; w < HP_SUBWORDS; w++)
			v[i].held[w] = carved ? ~pg->released[w] : 0;
	}
	hp_region_unlock_timed();
}

static void purge_parts(uintptr_t hp, hp_hpage_t *pg, bool split) {
	hp_lock_assert_held(&hp_region_lock);
	hp_assert(pg == hp_region_page(hp) && pg->map != HP_MAP_NONE);
	hp_hpage_purge(hp, pg, split);
}

/* Purges the free 4 KiB parts of a THP page, which splits it. */
static void split_page(uintptr_t hp, hp_hpage_t *pg) {
	hp_lock_assert_held(&hp_region_lock);
	/* A THP page with live and free parts, split once. */
	hp_assert(pg->map == HP_MAP_THP && !pg->split && pg->nreleased != 0 &&
	    pg->nreleased != HP_SUBPAGES);
	tally(hp, -1);
	purge_parts(hp, pg, true);
	/* Or khugepaged would collapse it again, filling the holes. */
	hp_os_madvise((void *)hp, HP_HUGE, MADV_NOHUGEPAGE);
	pg->split = true;
	n_split++;
	tally(hp, 1);
}

/*
 * strand_limit: while more than `limit` bytes are stranded, split the
 * emptiest THP pages (fewest live 4 KiB parts first), giving back their
 * free parts at 4 KiB granularity. hugetlb pages cannot be split.
 * Returns the stranded bytes left.
 */
size_t hp_region_enforce(size_t limit) {
	hp_region_lock_timed();
	unsigned splits = 0;
	/* Only what splitting can give back counts here: THP pages. The
	 * pages are walked only when that is over the limit. Emptiest first:
	 * by tenths of live parts, low to high; at most HP_SPLITS_PER_PASS a
	 * call, so region_lock is not held long. */
	for (unsigned tenth = 0; tenth < HP_HIST_BUCKETS && totals.thp_stranded >
	    limit && splits < HP_SPLITS_PER_PASS; tenth++)
		for (uintptr_t hp = hp_region.base; hp < hp_region.carved_end &&
		    totals.thp_stranded > limit && splits < HP_SPLITS_PER_PASS;
		    hp += HP_HUGE) {
			hp_hpage_t *pg = hp_region_page(hp);
			unsigned live = HP_SUBPAGES - pg->nreleased;
			if (pg->map != HP_MAP_THP || pg->split || live == 0 ||
			    live == HP_SUBPAGES || live * HP_HIST_BUCKETS /
			    (HP_SUBPAGES + 1) != tenth)
				continue;
			split_page(hp, pg);
			splits++;
		}
	size_t stranded = totals.thp_stranded;
	hp_assert(splits <= HP_SPLITS_PER_PASS);
	hp_region_unlock_timed();
	return stranded;
}

