/* The hugetlb pool reserved while the program runs. N blocks of 8 MiB
 * first (each a new run of the huge class: with no pool, THP), then, with
 * PAGES > 0, the pool raised to PAGES pages and a 4 MiB block allocated
 * every 20 ms, kept, until one lands on hugetlb pages or 10 s pass.
 * usage: pool_later N PAGES
 * prints: blocks, hugetlb_used (0|1), tries */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "probe.h"

static int on_hugetlb(const void *p) {
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	const probe_vma_t *m = probe_find(v, nv, p);
	int yes = m != NULL && m->kernel_page_kb == 2048;
	free(v);
	return yes;
}

int main(int argc, char **argv) {
	if (argc != 3)
		return 2;
	long n = atol(argv[1]), pages = atol(argv[2]);
	for (long i = 0; i < n; i++)
		if (malloc((size_t)8 << 20) == NULL)
			return 1;
	printf("blocks=%ld\n", n);
	if (pages <= 0)
		return 0;
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "w");
	if (f == NULL || fprintf(f, "%ld\n", pages) < 0 || fclose(f) != 0)
		return 3;
	int used = 0, tries = 0;
	for (; tries < 500 && !used; tries++) {
		void *p = malloc((size_t)4 << 20);
		if (p == NULL)
			return 1;
		used = on_hugetlb(p);
		struct timespec ms20 = {0, 20 * 1000 * 1000};
		if (!used)
			nanosleep(&ms20, NULL);
	}
	printf("hugetlb_used=%d\ntries=%d\n", used, tries);
	return 0;
}
