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

/* How the huge class is backed. */
typedef enum {
	HP_BACKING_THP = 0,   /* MADV_HUGEPAGE regions */
	HP_BACKING_NONE = 1,  /* MADV_NOHUGEPAGE regions: 4 KiB, for A/B runs */
} hp_backing_t;

/* The effective policy, from HUGEPRELOAD_CONF over the defaults. */
typedef struct {
	size_t large_threshold;  /* requests >= this go to the huge class */
	hp_backing_t backing;
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
} hp_hpage_t;

/* The huge-class virtual reservation. */
typedef struct {
	uintptr_t base;          /* 2 MiB aligned */
	size_t size;             /* bytes reserved */
	uintptr_t bump;          /* next byte never handed to jemalloc */
	uintptr_t mapped_end;    /* end of the read-write mapped prefix */
	hp_hpage_t *pages;       /* one per 2 MiB of the reservation */
} hp_region_t;

#endif
