/* Many small allocations, written; the mappings that hold them.
 * usage: place_small [count] [size] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpclass.h"
#include "probe.h"

int main(int argc, char **argv) {
	long count = argc > 1 ? atol(argv[1]) : 1000000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
	void **ptr = malloc((size_t)count * sizeof *ptr);
	for (long i = 0; i < count; i++) {
		ptr[i] = malloc(size);
		memset(ptr[i], (int)(i & 0xff), size);
	}
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	char *seen = calloc(nv, 1);
	long vmas = 0, nh_all = 1, hg_any = 0, unmapped = 0, small_all = 1;
	long long anon_huge_kb = 0, thp = 0;
	for (long i = 0; i < count; i++) {
		const probe_vma_t *m = probe_find(v, nv, ptr[i]);
		if (hp_class_of(ptr[i]) != 1)
			small_all = 0;
		if (m == NULL) {
			unmapped++;
			continue;
		}
		if (seen[m - v])
			continue;
		seen[m - v] = 1;
		vmas++;
		nh_all &= probe_has_flag(m, "nh");
		hg_any |= probe_has_flag(m, "hg");
		anon_huge_kb += m->anon_huge_kb;
		thp += probe_thp_bytes((void *)m->start, m->end - m->start);
	}
	long bad = 0;
	for (long i = 0; i < count; i++)
		bad += ((unsigned char *)ptr[i])[size - 1] != (i & 0xff);
	printf("count=%ld\nvmas=%ld\nunmapped=%ld\nnh_all=%ld\nhg_any=%ld\n"
	    "anon_huge_kb=%lld\nthp_bytes=%lld\nclass_small_all=%ld\n"
	    "data_ok=%d\nprocess_huge_kb=%ld\n", count, vmas, unmapped, nh_all,
	    hg_any, anon_huge_kb, thp, small_all, bad == 0, probe_huge_kb());
	return 0;
}
