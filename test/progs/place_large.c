/* One large allocation, written; where it landed; then freed and trimmed,
 * and what the hugetlb pools hold. usage: place_large [MiB] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpclass.h"
#include "probe.h"

int main(int argc, char **argv) {
	size_t n = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
	long free0 = probe_meminfo("HugePages_Free:");
	unsigned char *p = malloc(n);
	if (p == NULL)
		return 2;
	memset(p, 0x5a, n);
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	const probe_vma_t *m = probe_find(v, nv, p);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += p[i] != 0x5a;
	printf("class=%d\nsize=%zu\nhg=%d\nnh=%d\nthp_bytes=%lld\n"
	    "vma_anon_huge_kb=%ld\nvma_hugetlb_kb=%ld\nkernel_page_kb=%ld\n"
	    "data_ok=%d\npool_free_before=%ld\npool_free_after=%ld\n",
	    hp_class_of(p), n, m && probe_has_flag(m, "hg"),
	    m && probe_has_flag(m, "nh"), probe_thp_bytes(p, n),
	    m ? m->anon_huge_kb : -1, m ? m->private_hugetlb_kb : -1,
	    m ? m->kernel_page_kb : -1, bad == 0, free0,
	    probe_meminfo("HugePages_Free:"));
	free(p);
	free(v);
	malloc_trim(0);
	printf("pool_free_after_trim=%ld\ngib_free_after_trim=%ld\n",
	    probe_meminfo("HugePages_Free:"), probe_sysfs_long(
	    "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"));
	return 0;
}
