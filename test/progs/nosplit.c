/* Huge-class blocks, written; every other one freed; malloc_trim(0).
 * Reports the huge-page mappings' RSS and AnonHugePages before and after:
 * whole free 2 MiB pages must go back and no huge page may be split.
 * usage: nosplit [blocks] [KiB each] */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "probe.h"

/* RSS and AnonHugePages summed over the mappings flagged hg, and
 * Private_Hugetlb over all mappings. */
static void hg_totals(long *rss, long *huge, long *hugetlb) {
	probe_vma_t *v;
	size_t n = probe_vmas(&v);
	*rss = *huge = *hugetlb = 0;
	for (size_t i = 0; i < n; i++) {
		*hugetlb += v[i].private_hugetlb_kb;
		if (probe_has_flag(&v[i], "hg")) {
			*rss += v[i].rss_kb;
			*huge += v[i].anon_huge_kb;
		}
	}
	free(v);
}

int main(int argc, char **argv) {
	int blocks = argc > 1 ? atoi(argv[1]) : 64;
	size_t size = (size_t)(argc > 2 ? atol(argv[2]) : 3072) << 10;
	unsigned char **b = malloc((size_t)blocks * sizeof *b);
	for (int i = 0; i < blocks; i++) {
		b[i] = malloc(size);
		memset(b[i], i + 1, size);
	}
	long rss0, huge0, rss1, huge1, tlb0, tlb1, free0, free1;
	long long split0 = probe_vmstat("thp_split_pmd");
	hg_totals(&rss0, &huge0, &tlb0);
	free0 = probe_meminfo("HugePages_Free:");
	/* 2 MiB pages wholly inside a freed block hold no live byte: each
	 * must go back. */
	long whole_free = 0;
	for (int i = 1; i < blocks; i += 2) {
		uintptr_t lo = ((uintptr_t)b[i] + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1);
		uintptr_t hi = ((uintptr_t)b[i] + size) & ~(uintptr_t)((2 << 20) - 1);
		whole_free += hi > lo ? (long)((hi - lo) >> 21) : 0;
		free(b[i]);
	}
	malloc_trim(0);
	hg_totals(&rss1, &huge1, &tlb1);
	free1 = probe_meminfo("HugePages_Free:");
	long long live_thp = 0;
	size_t bad = 0;
	for (int i = 0; i < blocks; i += 2) {
		live_thp += probe_thp_bytes(b[i], size);
		for (size_t j = 0; j < size; j += 4096)
			bad += b[i][j] != (unsigned char)(i + 1);
	}
	printf("before_rss_kb=%ld\nbefore_huge_kb=%ld\nafter_rss_kb=%ld\n"
	    "after_huge_kb=%ld\nlive_bytes=%zu\nlive_thp_bytes=%lld\n"
	    "whole_free_pages=%ld\nsystem_thp_split_pmd_delta=%lld\n"
	    "data_ok=%d\nbefore_hugetlb_kb=%ld\nafter_hugetlb_kb=%ld\n"
	    "pool_free_before=%ld\npool_free_after=%ld\n", rss0, huge0, rss1, huge1,
	    (size_t)((blocks + 1) / 2) * size, live_thp, whole_free,
	    probe_vmstat("thp_split_pmd") - split0, bad == 0, tlb0, tlb1, free0,
	    free1);
	return 0;
}
