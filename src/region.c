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
#include "internal.h"
#include "lock.h"

hp_region_t hp_region;
static hp_lock_t region_lock = HP_LOCK_INIT(HP_RANK_REGION);
static void tally(uintptr_t hp, int sign);
/* Counters kept under region_lock: pages given back whole, split by
 * strand_limit, and partial purges left undone (no split). */
static uint64_t n_released, n_split, n_refused;
static void purge_parts(uintptr_t hp, hp_hpage_t *pg, bool split);

/* The time a thread holds region_lock, counted while it asks for it
 * (hp_region_timing): the maintenance thread's passes are measured so. */
static HP_TLS bool timing;
static HP_TLS uint64_t held_ns, taken_at;

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void region_lock_timed(void) {
	hp_lock(&region_lock);
	if (timing)
		taken_at = now_ns();
}

static void region_unlock_timed(void) {
	if (timing)
		held_ns += now_ns() - taken_at;
	hp_unlock(&region_lock);
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

HP_STATIC_ASSERT(HP_SUBPAGES == HP_SUBWORDS * 64, "a bitmap bit per subpage");
HP_STATIC_ASSERT(HP_SUBPAGES <= UINT16_MAX, "nreleased counts subpages");

uintptr_t hp_owned_base = UINTPTR_MAX;
size_t hp_owned_size;

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
	/* PROT_NONE is not charged to the commit limit; mprotect() charges
	 * each part as it is made accessible. */
	size_t align = hp_conf.hugetlb_page == HP_GIB ? HP_GIB : HP_HUGE, got;
	size_t extra = with_zone ? want / HP_ZONE_SHARE : 0;
	uintptr_t base = (uintptr_t)hp_reserve(want + extra, HP_RESERVE_MIN +
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

/* The mask of subpages [first, first + n) in 64-bit word w. */
static inline uint64_t sub_mask(unsigned first, unsigned n, unsigned w) {
	unsigned lo = w * 64, a = first > lo ? first : lo;
	unsigned b = first + n < lo + 64 ? first + n : lo + 64;
	if (a >= b)
		return 0;
	return b - a == 64 ? ~(uint64_t)0 :
	    (((uint64_t)1 << (b - a)) - 1) << (a - lo);
}

/* The words that subpages [first, first + n) touch: [*w0, *w1). A commit
 * of one slab is one word of eight (jemalloc's slab commits come here
 * once per slab: a 2 KiB object's slab is 4 KiB). */
static inline void sub_words(unsigned first, unsigned n, unsigned *w0,
    unsigned *w1) {
	*w0 = first / 64;
	*w1 = n == 0 ? *w0 : (first + n + 63) / 64;
}

bool hp_hpage_release(hp_hpage_t *pg, unsigned first, unsigned n) {
	unsigned w0, w1;
	hp_assert(first + n <= HP_SUBPAGES);
	sub_words(first, n, &w0, &w1);
	for (unsigned w = w0; w < w1; w++) {
		uint64_t m = sub_mask(first, n, w);
		pg->nreleased += (uint16_t)hp_popcount64(m & ~pg->released[w]);
		pg->released[w] |= m;
	}
	hp_assert(pg->nreleased <= HP_SUBPAGES);
	if (pg->nreleased < HP_SUBPAGES)
		return false;
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		if (pg->dirty[w] != 0)
			return true;
	return false;
}

/* Called once an empty page really went back: it reads as zero now. */
static void hpage_zapped(hp_hpage_t *pg) {
	memset(pg->dirty, 0, sizeof pg->dirty);
}

void hp_hpage_reuse(hp_hpage_t *pg, unsigned first, unsigned n,
    uint64_t *zero) {
	unsigned w0, w1;
	hp_assert(first + n <= HP_SUBPAGES);
	sub_words(first, n, &w0, &w1);
	memset(zero, 0, HP_SUBWORDS * sizeof *zero);
	for (unsigned w = w0; w < w1; w++) {
		uint64_t m = sub_mask(first, n, w);
		uint64_t was = m & pg->released[w];
		zero[w] = was & pg->dirty[w];
		pg->nreleased -= (uint16_t)hp_popcount64(was);
		pg->released[w] &= ~m;
		pg->dirty[w] |= m;
	}
}

static hp_hpage_t *page_of(uintptr_t a) {
	hp_assert(a - hp_region.base < hp_region.size);
	return &hp_region.pages[(a - hp_region.base) >> HP_HUGE_SHIFT];
}

/* The subpages [*first, *first + *n) of 2 MiB page hp inside [a, e). */
static void span(uintptr_t hp, uintptr_t a, uintptr_t e, unsigned *first,
    unsigned *n) {
	uintptr_t lo = hp > a ? hp : a, hi = e < hp + HP_HUGE ? e : hp + HP_HUGE;
	hp_assert(lo <= hi && hi - hp <= HP_HUGE);
	*first = (unsigned)((lo - hp) >> HP_PAGE_SHIFT);
	*n = (unsigned)((hi - lo) >> HP_PAGE_SHIFT);
}

static bool bit(const uint64_t *m, unsigned i) {
	return (m[i / 64] >> (i % 64)) & 1;
}

/* Maps every PROT_NONE 2 MiB page that [a, e) touches. With 1 GiB pages,
 * a wholly unmapped GiB that [a, e) covers at least half of is first
 * offered to the 1 GiB pool: those pages are scarce, and small commits
 * (jemalloc's own metadata, say) must not take them. */
static bool map_locked(uintptr_t a, uintptr_t e) {
	hp_lock_assert_held(&region_lock);
	uintptr_t end = align_up(e, HP_HUGE);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < end;) {
		if (page_of(hp)->map != HP_MAP_NONE) {
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
				    page_of(q)->map == HP_MAP_NONE;
			if (free_gib && hp_backing_map_gib(g)) {
				for (uintptr_t q = g; q < g + HP_GIB; q += HP_HUGE) {
					tally(q, -1);
					page_of(q)->map = HP_MAP_HUGETLB_1G;
					page_of(q)->sharers = 0;
					tally(q, 1);
				}
				hp_region.hugetlb_1g++;
				hp = g + HP_GIB;
				continue;
			}
		}
		uintptr_t run = hp;
		while (run < end && page_of(run)->map == HP_MAP_NONE)
			run += HP_HUGE;
		hp_map_t type;
		size_t got = hp_backing_map(hp, run - hp, &type);
		if (got == 0)
			return false;
		for (uintptr_t q = hp; q < hp + got; q += HP_HUGE) {
			tally(q, -1);
			page_of(q)->map = (uint8_t)type;
			page_of(q)->populated = false;
			page_of(q)->sharers = 0;
			tally(q, 1);
		}
		if (type == HP_MAP_HUGETLB_2M)
			hp_region.hugetlb_2m += got >> HP_HUGE_SHIFT;
		hp = hp + got;
	}
	return true;
}

/* With collapse:true, THP pages still empty are faulted in and collapsed
 * as they are first used. */
static void collapse_locked(uintptr_t a, uintptr_t e) {
	hp_lock_assert_held(&region_lock);
	uintptr_t run = 0, end = align_up(e, HP_HUGE);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp <= end; hp += HP_HUGE) {
		bool fresh = hp < end && page_of(hp)->map == HP_MAP_THP &&
		    !page_of(hp)->populated;
		if (fresh) {
			page_of(hp)->populated = true;
			if (run == 0)
				run = hp;
		} else if (run != 0) {
			hp_backing_collapse(run, hp - run);
			run = 0;
		}
	}
}

static bool reuse_locked(uintptr_t a, size_t len) {
	hp_lock_assert_held(&region_lock);
	if (!map_locked(a, a + len))
		return false;
	if (hp_conf.collapse)
		collapse_locked(a, a + len);
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < a + len; hp += HP_HUGE) {
		unsigned first, n;
		uint64_t zero[HP_SUBWORDS];
		span(hp, a, a + len, &first, &n);
		tally(hp, -1);
		hp_hpage_reuse(page_of(hp), first, n, zero);
		tally(hp, 1);
		/* jemalloc takes decommitted memory back as zeroed; subpages
		 * that stayed resident inside a live huge page are not. */
		for (unsigned i = first, j; i < first + n; i = j) {
			for (j = i + 1; bit(zero, i) && j < first + n &&
			    bit(zero, j); j++)
				;
			if (bit(zero, i))
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
	region_lock_timed();
	uintptr_t start = align_up(hp_region.bump, align), end = start + size;
	if (start < hp_region.bump || end < start ||
	    end > hp_region.base + hp_region.size)
		goto out;
	/* Pages first carved start empty: every subpage released. */
	uintptr_t was = hp_region.carved_end, carved = was;
	for (; carved < end; carved += HP_HUGE) {
		hp_hpage_t *pg = page_of(carved);
		tally(carved, -1);           /* counted as not carved yet */
		memset(pg->released, 0xff, sizeof pg->released);
		memset(pg->dirty, 0, sizeof pg->dirty);
		pg->nreleased = HP_SUBPAGES;
	}
	__atomic_store_n(&hp_region.carved_end, carved, __ATOMIC_RELEASE);
	for (uintptr_t hp = was; hp < carved; hp += HP_HUGE)
		tally(hp, 1);
	if (commit && !reuse_locked(start, size))
		goto out;
	hp_region.bump = end;
	ret = (void *)start;
out:
	region_unlock_timed();
	return ret;
}

/* True if every 2 MiB page of the GiB that holds hp is empty. */
static bool gib_empty(uintptr_t hp) {
	hp_lock_assert_held(&region_lock);
	uintptr_t g = hp & ~(HP_GIB - 1);
	for (uintptr_t q = g; q < g + HP_GIB; q += HP_HUGE)
		if (q < hp_region.carved_end &&      /* beyond: never used */
		    page_of(q)->nreleased < HP_SUBPAGES)
			return false;
	return true;
}

/* Gives back the empty pages [zap, end), all of one type. Their dirty
 * bits are cleared only once that worked: until then they may hold old
 * bytes, and a fork child that copies them sees them as dirty still. */
static void zap_run(uintptr_t zap, uintptr_t end, hp_map_t type) {
	hp_lock_assert_held(&region_lock);
	if (type == HP_MAP_HUGETLB_1G) {
		/* Only a whole empty GiB can go back to the 1 GiB pool. */
		for (uintptr_t g = zap & ~(HP_GIB - 1); g < end; g += HP_GIB) {
			if (!gib_empty(g) || !hp_backing_zap(g, HP_GIB, type))
				continue;
			for (uintptr_t q = g; q < g + HP_GIB; q += HP_HUGE) {
				tally(q, -1);
				hpage_zapped(page_of(q));
				page_of(q)->map = HP_MAP_NONE;
				tally(q, 1);             /* unmapped: adds nothing */
			}
			hp_region.hugetlb_1g--;
			n_released += HP_PER_GIB;
		}
		return;
	}
	if (!hp_backing_zap(zap, end - zap, type))
		return;                  /* reuse will zero them instead */
	n_released += (end - zap) >> HP_HUGE_SHIFT;
	for (uintptr_t hp = zap; hp < end; hp += HP_HUGE) {
		tally(hp, -1);
		hpage_zapped(page_of(hp));
		page_of(hp)->populated = false;
		if (page_of(hp)->split)          /* empty again: huge again */
			hp_os_madvise((void *)hp, HP_HUGE, MADV_HUGEPAGE);
		page_of(hp)->split = false;
		if (type == HP_MAP_HUGETLB_2M)
			page_of(hp)->map = HP_MAP_NONE;
		tally(hp, 1);
	}
	if (type == HP_MAP_HUGETLB_2M)
		hp_region.hugetlb_2m -= (end - zap) >> HP_HUGE_SHIFT;
}

void hp_region_release(void *addr, size_t len) {
	uintptr_t a = (uintptr_t)addr, zap = 0, zap_end = 0;
	hp_map_t zap_type = HP_MAP_NONE;
	hp_assert(hp_region_owns(addr, len));
	region_lock_timed();
	for (uintptr_t hp = a & ~(HP_HUGE - 1); hp < a + len; hp += HP_HUGE) {
		unsigned first, n;
		span(hp, a, a + len, &first, &n);
		hp_hpage_t *pg = page_of(hp);
		tally(hp, -1);
		bool zap_it = hp_hpage_release(pg, first, n) &&
		    pg->map != HP_MAP_NONE;
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
	region_unlock_timed();
}

bool hp_region_reuse(void *addr, size_t len) {
	hp_assert(hp_region_owns(addr, len));
	region_lock_timed();
	bool ok = reuse_locked((uintptr_t)addr, len);
	region_unlock_timed();
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

static void tally(uintptr_t hp, int sign) {
	hp_lock_assert_held(&region_lock);
	tally_into(&totals, hp, page_of(hp), sign);
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
	hp_lock_assert_held(&region_lock);
	tally_t t = {0};
	uintptr_t end = hp_region.carved_end;
	if (hp_conf.hugetlb_page == HP_GIB && hp_region.size)
		end = align_up(end, HP_GIB);
	for (uintptr_t hp = hp_region.base; hp < end; hp += HP_HUGE)
		tally_into(&t, hp, page_of(hp), 1);
	hp_assert(memcmp(&t, &totals, sizeof t) == 0);
}
#else
#define recount_check() ((void)0)
#endif

/* Adds the page-level counters of the huge class to *a. */
void hp_region_scan(hp_arena_stats_t *a) {
	region_lock_timed();
	recount_check();
	add_pages(a, &totals.a);
	a->pages_released = n_released;
	a->pages_split = n_split;
	a->purges_refused = n_refused;
	region_unlock_timed();
}

/* The end of the pages that may be mapped: carved ones, and with 1 GiB
 * pages the rest of the last GiB. */
uintptr_t hp_region_mapped_end(void) {
	region_lock_timed();
	uintptr_t end = hp_region.carved_end;
	if (hp_conf.hugetlb_page == HP_GIB && end > hp_region.base)
		end = align_up(end, HP_GIB);
	region_unlock_timed();
	return end;
}

/* The states of the pages first + i for each bit i of pages, copied
 * under the lock into v[i] (resident.c asks the kernel about them without
 * it). Pages past the carved end hold nothing. */
void hp_region_view(uintptr_t first, uint64_t pages, hp_page_view_t *v) {
	if (pages == 0)
		return;
	region_lock_timed();
	for (uint64_t left = pages; left != 0; left &= left - 1) {
		unsigned i = (unsigned)__builtin_ctzll(left);
		uintptr_t hp = first + ((uintptr_t)i << HP_HUGE_SHIFT);
		const hp_hpage_t *pg = page_of(hp);
		bool carved = hp < hp_region.carved_end;
		v[i].may_be_huge = whole_resident(pg);
		v[i].nheld = carved ? HP_SUBPAGES - pg->nreleased : 0;
		for (unsigned w = 0; w < HP_SUBWORDS; w++)
			v[i].held[w] = carved ? ~pg->released[w] : 0;
	}
	region_unlock_timed();
}

static void purge_parts(uintptr_t hp, hp_hpage_t *pg, bool split) {
	hp_lock_assert_held(&region_lock);
	hp_hpage_purge(hp, pg, split);
}

void hp_hpage_purge(uintptr_t hp, hp_hpage_t *pg, bool split) {
	uint64_t stale[HP_SUBWORDS];
	for (unsigned w = 0; w < HP_SUBWORDS; w++)
		stale[w] = pg->released[w] & (split ? ~0ull : pg->dirty[w]);
	for (unsigned i = 0, j; i < HP_SUBPAGES; i = j) {
		for (j = i + 1; bit(stale, i) && j < HP_SUBPAGES && bit(stale, j);
		    j++)
			;
		if (!bit(stale, i))
			continue;
		void *run = (void *)(hp + ((size_t)i << HP_PAGE_SHIFT));
		size_t len = (size_t)(j - i) << HP_PAGE_SHIFT;
		if (split)
			hp_os_madvise(run, len, MADV_FREE);
		if (hp_os_madvise(run, len, MADV_DONTNEED) == 0)
			for (unsigned k = i; k < j; k++)
				pg->dirty[k / 64] &= ~((uint64_t)1 << (k % 64));
	}
}

/* Purges the free 4 KiB parts of a THP page, which splits it. */
static void split_page(uintptr_t hp, hp_hpage_t *pg) {
	hp_lock_assert_held(&region_lock);
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
	region_lock_timed();
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
			hp_hpage_t *pg = page_of(hp);
			unsigned live = HP_SUBPAGES - pg->nreleased;
			if (pg->map != HP_MAP_THP || pg->split || live == 0 ||
			    live == HP_SUBPAGES || live * HP_HIST_BUCKETS /
			    (HP_SUBPAGES + 1) != tenth)
				continue;
			split_page(hp, pg);
			splits++;
		}
	size_t stranded = totals.thp_stranded;
	region_unlock_timed();
	return stranded;
}

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
	hp_lock_assert_held(&region_lock);
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
	region_lock_timed();
	extra_base = addr;
	extra_len = len;
	extra_sharers = 0;
	region_unlock_timed();
}

static void shared_once_more(uint8_t *sharers) {
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
	hp_lock_assert_held(&region_lock);
	int fd = fresh ? hp_open("/proc/self/pagemap", O_RDONLY, 0) : -1;
	size_t owed = 0;
	for (uintptr_t hp = hp_region.base; hp < hp_region.carved_end;
	    hp += page) {
		hp_hpage_t *pg = page_of(hp);
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
	hp_lock_assert_held(&region_lock);
	for (uintptr_t hp = upto; hp < hp_region.carved_end; hp += page)
		if (page_of(hp)->map == type)
			shared_once_more(&page_of(hp)->sharers);
	if (type == HP_MAP_HUGETLB_2M && extra_len && !extra_shadowed)
		shared_once_more(&extra_sharers);
}

static void shadow_deficit(size_t page, hp_map_t type, size_t held) {
	hp_lock_assert_held(&region_lock);
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
		if (page_of(hp)->map != type)
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
	hp_lock(&region_lock);
	nshadows = 0;
	if (hp_region.hugetlb_2m || extra_len)
		shadow_deficit(HP_HUGE, HP_MAP_HUGETLB_2M, hp_region.hugetlb_2m +
		    (extra_len >> HP_HUGE_SHIFT));
	if (hp_region.hugetlb_1g)
		shadow_deficit(HP_GIB, HP_MAP_HUGETLB_1G, hp_region.hugetlb_1g);
}

void hp_region_postfork_parent(void) {
	for (unsigned i = 0; i < nshadows; i++) {
		hp_os_madvise((void *)shadows[i].addr, shadows[i].len, MADV_DOFORK);
		hp_os_munmap(shadows[i].copy, shadows[i].len);
	}
	nshadows = 0;
	hp_unlock(&region_lock);
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
			hp_hpage_t *pg = page_of(q);
			/* region_lock is still the parent thread's here. */
			tally_into(&totals, q, pg, -1);
			if (pg->map == HP_MAP_HUGETLB_2M)
				hp_region.hugetlb_2m--;
			else if (pg->map == HP_MAP_HUGETLB_1G &&
			    (q & (HP_GIB - 1)) == 0)
				hp_region.hugetlb_1g--;
			pg->map = HP_MAP_THP;
			pg->populated = true;
			pg->sharers = 0;
			tally_into(&totals, q, pg, 1);
		}
	}
	nshadows = 0;
	hp_lock_reinit(&region_lock);
}
