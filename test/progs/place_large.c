/* One large allocation, written; where it landed.
 * usage: place_large [MiB] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpclass.h"
#include "probe.h"

int main(int argc, char **argv) {
	size_t n = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
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
	    "data_ok=%d\n", hp_class_of(p), n, m && probe_has_flag(m, "hg"),
	    m && probe_has_flag(m, "nh"), probe_thp_bytes(p, n),
	    m ? m->anon_huge_kb : -1, m ? m->private_hugetlb_kb : -1,
	    m ? m->kernel_page_kb : -1, bad == 0);
	free(p);
	free(v);
	return 0;
}
