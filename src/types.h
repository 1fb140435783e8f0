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
} hp_conf_t;

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
} hp_hpage_t;

/* The huge-class virtual reservation. */
typedef struct {
	uintptr_t base;          /* 2 MiB aligned */
	size_t size;             /* bytes reserved */
	uintptr_t bump;          /* next byte never handed to jemalloc */
	uintptr_t carved_end;    /* pages below have their state set up */
	hp_hpage_t *pages;       /* one per 2 MiB of the reservation */
	size_t hugetlb_2m;       /* 2 MiB pages mapped from the 2 MiB pool */
	size_t hugetlb_1g;       /* 1 GiB pages mapped from the 1 GiB pool */
} hp_region_t;

#endif
