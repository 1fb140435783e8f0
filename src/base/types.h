/* hugepreload: shared types and constants. No code, no prototypes. */
#ifndef HP_TYPES_H
#define HP_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HP_PAGE_SHIFT   12
#define HP_PAGE         ((size_t)1 << HP_PAGE_SHIFT)
#define HP_HUGE_SHIFT   21
#define HP_HUGE         ((size_t)1 << HP_HUGE_SHIFT)        /* 2 MiB */
#define HP_SUBPAGES     (HP_HUGE / HP_PAGE)                 /* 512 */
#define HP_SUBWORDS     (HP_SUBPAGES / 64)                  /* 8 */
/* The alignment malloc() alone gives every size (jemalloc's 8 B class). */
#define HP_MALLOC_ALIGN 8

/* The long-lived class's arenas are whole blocks of this size: mimalloc 2
 * expects its 32 MiB segments aligned to their size, and faults in its
 * first allocation from an arena that is only 2 MiB-aligned
 * (docs/long-lived-class.md). */
#define HP_LL_ALIGN     ((size_t)64 << 20)
#define HP_LL_SEGMENT   ((size_t)32 << 20)   /* mimalloc's arena block */
#define HP_LL_SHARE     8        /* of the huge class's address space */

#define HP_GIB_SHIFT    30
#define HP_GIB          ((size_t)1 << HP_GIB_SHIFT)
#define HP_PER_GIB      (HP_GIB / HP_HUGE)                  /* 512 */

/* How the huge class wants its memory backed: the start of the chain
 * hugetlb -> thp -> 4k that each new region walks. */
typedef enum {
	HP_BACKING_AUTO = 0,     /* hugetlb while the pool has pages, else on */
	HP_BACKING_HUGETLB = 1,  /* the same, and say so when the pool is dry */
	HP_BACKING_THP = 2,      /* MADV_HUGEPAGE regions */
	HP_BACKING_NONE = 3,     /* MADV_NOHUGEPAGE regions: 4 KiB, for A/B */
} hp_backing_t;

/* What a 2 MiB page of the reservation is mapped as right now. */
typedef enum {
	HP_MAP_NONE = 0,         /* PROT_NONE: reserved address space only */
	HP_MAP_4K = 1,           /* read-write, MADV_NOHUGEPAGE */
	HP_MAP_THP = 2,          /* read-write, MADV_HUGEPAGE */
	HP_MAP_HUGETLB_2M = 3,   /* a hugetlbfs page from the 2 MiB pool */
	HP_MAP_HUGETLB_1G = 4,   /* part of a hugetlbfs page from the 1 GiB pool */
} hp_map_t;

/* The effective policy, from HUGEPRELOAD_CONF over the defaults. */
typedef struct {
	size_t large_threshold;  /* requests >= this go to the huge class */
	hp_backing_t backing;
	size_t hugetlb_page;     /* HP_HUGE or HP_GIB */
	bool collapse;           /* MADV_COLLAPSE new THP pages on first use */
	bool verbose;            /* one startup line with the policy */
	long decay_ms;           /* huge class: free pages kept this long */
	size_t reserve;          /* address space reserved for the huge class */
	bool stats_print;        /* print the counters at exit */
	int stats_format;        /* hp_format_t */
	char stats_file[256];    /* "" for stderr */
	bool stats_live;         /* a page that "hugepreload stat" reads */
	size_t strand_limit;     /* bytes, or a percentage if strand_pct */
	bool strand_pct;
	int lifetime;            /* hp_lifetime_mode_t */
	size_t lifetime_sample;  /* one sampled allocation per this many bytes */
	long lifetime_sample_rate; /* samples a second per thread, at most;
	                            0: no limit */
	long lifetime_ms;        /* a sampled object this old is long-lived */
	long maintain_ms;        /* the maintenance thread's period */
	size_t mmap_threshold;   /* the program's mappings advised from this
	                            size; SIZE_MAX: off */
	char lifetime_record[256];  /* site table written here at exit; "" */
	char lifetime_profile[256]; /* site table loaded at start-up; "" */
	int long_lived;          /* hp_long_lived_t */
} hp_conf_t;

/* long_lived: what serves the small objects of promoted sites. */
typedef enum {
	HP_LL_JEMALLOC = 0,      /* the huge arena, a jemalloc tcache per thread */
	HP_LL_MIMALLOC = 1,      /* mimalloc heaps in exclusive arenas */
} hp_long_lived_t;

/* lifetime: whether allocation sites are learned, or taken from a profile. */
typedef enum {
	HP_LIFETIME_OFF = 0,     /* size alone decides */
	HP_LIFETIME_LEARN = 1,   /* sample sites online (from a profile too) */
	HP_LIFETIME_REPLAY = 2,  /* a profile's decisions only, no sampling */
} hp_lifetime_mode_t;

/* Allocation sites (site.c): the call stack of a sampled allocation, its
 * first frame being the return address of the malloc call; its key is
 * that address, or, behind a wrapper, the wrapper's key and the deeper
 * frames that tell the wrapper's callers apart (HP_SITE_DEPTH - 1 levels
 * of wrappers at most). */
#define HP_SITE_DEPTH   4
#define HP_STRIDE_MAX   65536    /* a caller's frame, in bytes, at most */
#define HP_SITES        4096     /* sites tracked, a power of two */
#define HP_KEY_BITS     13
#define HP_KEYS         (1 << HP_KEY_BITS) /* keys (hashes of return addresses) */
#define HP_LIFE_BUCKETS 6        /* <1 ms, <10 ms, <100 ms, <1 s, <10 s, more */
#define HP_SCORE_MAX    16
#define HP_PROMOTE_AT   6        /* score at which a site is promoted */
#define HP_DEMOTE_AT    0        /* and demoted again */
typedef struct {
	uint64_t hash;               /* of the frames; 0: free slot */
	uintptr_t frames[HP_SITE_DEPTH];
	uint8_t nframes;
	bool promoted;               /* its allocations go to the huge class */
	bool churny;                 /* score below zero: holds its key back */
	bool from_profile;           /* decided by lifetime_profile */
	bool lasting;                /* score above zero */
	int8_t score;
	uint32_t key;                /* slot in the key table */
	/* From where each frame's return address is kept to where the next
	 * one's is, in bytes (0: not known): its function's frame at the
	 * call. */
	int32_t stride[HP_SITE_DEPTH - 1];
	uint32_t samples, nshort, nlong, live;
	uint32_t hist[HP_LIFE_BUCKETS];  /* lifetimes of freed samples */
} hp_site_t;

/* Lifetime-learning counters, process-wide. */
#define HP_WRAPPERS_SHOWN 8
typedef struct {
	uint64_t sites;              /* distinct sites seen */
	uint64_t sites_dropped;      /* samples whose site, or record, did not
	                                fit */
	uint64_t samples;            /* allocations sampled (unwound) */
	uint64_t promotions, demotions;
	uint64_t sites_promoted;     /* promoted now */
	uint64_t placed_bytes;       /* bytes sent to huge pages by decision */
	uint64_t placed;             /* allocations sent there by decision */
	/* Catch-up (catchup.c): 2 MiB ranges of the small class that a site
	 * filled while it was learned, collapsed onto huge pages after its
	 * promotion; not, for MADV_COLLAPSE refused; passed over, not all
	 * resident or not jemalloc's data; not queued, the queue full. */
	uint64_t caught_up, caught_up_failed, caught_up_skipped;
	uint64_t caught_up_dropped;
	/* Wrappers (site.c): keys whose callers are told apart, and the sites
	 * behind them; the first HP_WRAPPERS_SHOWN of them one by one. */
	uint64_t wrappers, wrapped_sites;
	struct {
		uintptr_t addr;          /* the return address of its call */
		uint32_t level;          /* 0: its call is malloc's */
		uint32_t sites;          /* sites behind it */
	} wrapper[HP_WRAPPERS_SHOWN];
} hp_lifetime_counts_t;

/* The long-lived class's fallbacks (longlived.c), updated atomically; its
 * live bytes and calls are counted in tally.c's shards. */
typedef struct {
	uint64_t pool_full;          /* the pool arena was full: the rest tried */
	uint64_t full;               /* every arena full: jemalloc's path */
} hp_ll_counts_t;

/* jemalloc's extent descriptors (edata.c), process-wide. */
typedef struct {
	uint64_t live;               /* descriptors in use */
	uint64_t resident_bytes;     /* pages holding them, resident */
	uint64_t released_bytes;     /* pages given back, so far */
	uint64_t fallbacks;          /* taken from jemalloc's own cache */
} hp_edata_counts_t;

/*
 * One 2 MiB page of the huge-class reservation. A 4 KiB subpage is
 * "released" when no jemalloc extent holds it committed (never carved,
 * or decommitted since), and "dirty" when it may hold non-zero bytes.
 * A huge page is given back to the kernel only when all of it is
 * released, so the allocator never splits one.
 */
typedef struct {
	uint64_t released[HP_SUBWORDS];
	uint64_t dirty[HP_SUBWORDS];
	uint16_t nreleased;
	uint8_t map;             /* hp_map_t */
	bool populated;          /* THP page faulted in and collapsed */
	bool split;              /* free parts purged by strand_limit */
	uint8_t sharers;         /* hugetlb: fork children it was shared with
	                            since it was last ours alone
	                            (huge/region_fork.c) */
} hp_hpage_t;

/* The heap now, as jemalloc counts it (core/stats.c's
 * hp_stats_heap_totals): what the allocator extension APIs report. Bytes,
 * but huge_count. */
typedef struct {
	uint64_t small_live;         /* allocated, small class */
	uint64_t small_active;       /* in pages with an allocation, small class */
	uint64_t small_mapped;       /* mapped by the small class's arenas */
	uint64_t huge_live, huge_count; /* allocated in the huge class */
	uint64_t huge_active, huge_mapped;
} hp_heap_t;

/* The program's own mappings (mmap.c), process-wide. */
typedef struct {
	uint64_t mappings;           /* placed 2 MiB-aligned and advised */
	uint64_t advised_bytes;      /* their bytes */
	uint64_t reservations;       /* of them, PROT_NONE reservations */
	uint64_t fixed_advised;      /* MAP_FIXED mappings in those, advised */
	uint64_t unaligned;          /* mapped as asked: no room to align */
	uint64_t shared;             /* anonymous MAP_SHARED ones, advised */
	uint64_t shared_bytes;       /* their bytes */
} hp_mmap_counts_t;

/* The maintenance thread's passes (core/maint.c), as of the pass before the
 * last refresh: each drives the huge arena's decay, trims descriptors,
 * refreshes the counters and enforces strand_limit. */
typedef struct {
	uint64_t passes;             /* so far */
	uint64_t region_lock_ns;     /* region_lock held by them, in all */
	uint64_t region_lock_max_ns; /* by the longest one */
	uint64_t interval_ms;        /* maintain_ms */
} hp_maint_counts_t;

/* Formats of the counters: at exit, and from "hugepreload stat". */
typedef enum { HP_FMT_TEXT = 0, HP_FMT_JSON = 1, HP_FMT_PROM = 2 } hp_format_t;

/* Counters of one arena (the small class, or a huge-class arena), as the
 * shared stats page holds them. Bytes unless named otherwise. */
#define HP_HIST_BUCKETS 10
typedef struct {
	uint64_t live_bytes;         /* allocated and not freed */
	uint64_t nmalloc, ndalloc;   /* allocations and frees so far */
	uint64_t mapped_bytes;       /* address space backed by memory */
	/* resident = in_use + stranded + free_resident + metadata: the huge
	 * class's parts as the kernel holds them (hp_os_resident), the small
	 * class's as jemalloc counts them. */
	uint64_t resident_bytes;
	uint64_t in_use_bytes;       /* resident parts jemalloc holds: live
	                                objects, its free space among them */
	uint64_t free_resident_bytes; /* resident free parts of pages that hold
	                                nothing live */
	uint64_t resident_huge_bytes; /* resident on huge pages (kernel) */
	uint64_t hugetlb_2m_bytes, hugetlb_1g_bytes, thp_bytes, small_page_bytes;
	uint64_t pages_full;         /* huge pages with no free 4 KiB part */
	uint64_t pages_partial;      /* with live and free parts */
	uint64_t pages_empty_resident; /* all free, still resident */
	uint64_t pages_released;     /* given back whole, so far */
	uint64_t pages_split;        /* split by strand_limit, so far */
	uint64_t stranded_bytes;     /* resident free parts of huge pages that
	                                hold live parts */
	uint64_t live_hist[HP_HIST_BUCKETS]; /* huge pages by live tenth */
	uint64_t fallback_pool_empty, fallback_thp_off, fallback_mmap_failed;
	uint64_t purges_refused;     /* partial purges not done: no split */
	uint64_t hooks_refused;      /* extent hook calls on ranges not ours */
	uint64_t metadata_bytes;     /* jemalloc's own, resident, on 4 KiB
	                                pages (its base) */
} hp_arena_stats_t;

/* The shared stats page: a memfd of this name, mapped in the process and
 * read by "hugepreload stat" through /proc/PID/mem. seq is odd while the
 * library writes. */
#define HP_STATS_NAME    "hugepreload-stats"
#define HP_STATS_MAGIC   0x3174617473706868ull   /* "hhpstat1" */
#define HP_STATS_VERSION 11
#define HP_STATS_ARENAS  4
#define HP_STATS_RANGES  128
typedef struct {
	uint64_t magic;
	uint32_t version, narenas;
	int64_t pid;
	uint64_t seq;
	uint64_t updated_ns;         /* CLOCK_REALTIME of the last refresh */
	uint64_t strand_limit_bytes; /* in force at the last refresh */
	uint64_t region_base, region_size; /* the huge class's address range */
	uint64_t ll_base, ll_size;   /* the long-lived class's; 0 if unused */
	/* jemalloc's own mappings, where the small class and all metadata
	 * live (jemap.c): the first HP_STATS_RANGES of small_nranges. */
	uint32_t small_nranges, small_kernel; /* small_kernel: figures from
	                                         the kernel, not jemalloc */
	uint64_t small_ranges[HP_STATS_RANGES][2];
	char policy[320];               /* the longest policy is 275 bytes */
	char name[HP_STATS_ARENAS][16];
	hp_lifetime_counts_t lifetime;
	hp_edata_counts_t descriptors;
	hp_maint_counts_t maintenance;
	hp_mmap_counts_t mmap;
	hp_arena_stats_t arena[HP_STATS_ARENAS];
} hp_stats_t;

/* The huge-class virtual reservation. */
typedef struct {
	uintptr_t base;          /* 2 MiB aligned */
	size_t size;             /* bytes reserved */
	size_t granted;          /* of the reserve asked, what the kernel
	                            granted (halved until it did), before the
	                            long-lived class's share */
	uintptr_t bump;          /* next byte never handed to jemalloc */
	uintptr_t carved_end;    /* pages below have their state set up */
	hp_hpage_t *pages;       /* one per 2 MiB of the reservation */
	size_t hugetlb_2m;       /* 2 MiB pages mapped from the 2 MiB pool */
	size_t hugetlb_1g;       /* 1 GiB pages mapped from the 1 GiB pool */
} hp_region_t;

#endif
