/*
 * Dependent-load chase: a random cyclic permutation of 64 B cells through
 * one large block, beside a population of small objects; prints the time
 * per load and where both kinds of memory were placed.
 * usage: chase [MiB] [loads in millions] [small objects] [HOW]
 *   HOW  malloc        the block from malloc (W2; the default)
 *        mmap          the program's own anonymous private mmap (W7)
 *        mmap-advised  the same, advised MADV_HUGEPAGE by the program
 *                      itself before the first write: W7's control
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "probe.h"

typedef struct cell { struct cell *next; char pad[56]; } cell_t;

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void) {
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

/* Sums smaps fields over the mappings that hold any of ptrs. */
static void report(const char *name, void **ptrs, size_t n, size_t bytes) {
	probe_vma_t *v;
	size_t nv = probe_vmas(&v), vmas = 0;
	char *seen = calloc(nv, 1);
	long rss = 0, huge = 0, hugetlb = 0, hg = 0, nh = 0;
	for (size_t i = 0; i < n; i++) {
		const probe_vma_t *m = probe_find(v, nv, ptrs[i]);
		if (m == NULL || seen[m - v])
			continue;
		seen[m - v] = 1;
		vmas++;
		rss += m->rss_kb;
		huge += m->anon_huge_kb;
		hugetlb += m->private_hugetlb_kb;
		hg += probe_has_flag(m, "hg");
		nh += probe_has_flag(m, "nh");
	}
	int (*cls)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT,
	    "hugepreload_class");
	printf("%s_bytes=%zu\n%s_class=%s\n%s_mappings=%zu\n%s_hg=%ld\n"
	    "%s_nh=%ld\n%s_rss_kb=%ld\n%s_anon_huge_kb=%ld\n%s_hugetlb_kb=%ld\n",
	    name, bytes, name, cls == NULL ? "-" : cls(ptrs[0]) == 2 ? "huge" :
	    "small", name, vmas, name, hg, name, nh, name, rss, name, huge, name,
	    hugetlb);
	free(seen);
	free(v);
}

int main(int argc, char **argv) {
	size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 1024) << 20;
	long loads = (argc > 2 ? atol(argv[2]) : 20) * 1000000L;
	size_t nsmall = argc > 3 ? (size_t)atol(argv[3]) : 200000;

	const char *how = argc > 4 ? argv[4] : "malloc";

	double t0 = now();
	size_t n = bytes / sizeof(cell_t);
	cell_t *c;
	if (strcmp(how, "malloc") == 0) {
		c = malloc(n * sizeof *c);
	} else if (strcmp(how, "mmap") == 0 || strcmp(how, "mmap-advised") ==
	    0) {
		c = mmap(NULL, n * sizeof *c, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c == MAP_FAILED)
			c = NULL;
		else if (how[4] == '-' && madvise(c, n * sizeof *c,
		    MADV_HUGEPAGE) != 0)
			perror("madvise");
	} else {
		fprintf(stderr, "chase: HOW is malloc, mmap or mmap-advised\n");
		return 2;
	}
	if (c == NULL) {
		perror("chase");
		return 1;
	}
	/* Sattolo: one cycle through every cell, in random order. */
	for (size_t i = 0; i < n; i++)
		c[i].next = &c[i];
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = next_rand() % i;
		cell_t *t = c[i].next;
		c[i].next = c[j].next;
		c[j].next = t;
	}
	void **small = malloc(nsmall * sizeof *small);
	for (size_t i = 0; i < nsmall; i++) {
		small[i] = malloc(64);
		memset(small[i], 1, 64);
	}
	double setup = now() - t0;

	cell_t *p = c;
	t0 = now();
	for (long i = 0; i < loads; i++)
		p = p->next;
	double dt = now() - t0;

	printf("ns_per_load=%.2f\nsetup_s=%.2f\nend=%p\npeak_kb=%ld\n"
	    "huge_kb=%ld\n", dt * 1e9 / loads, setup, (void *)p, probe_rss_kb() +
	    probe_hugetlb_kb(), probe_huge_kb());
	void *big[] = {c};
	report("large", big, 1, n * sizeof *c);
	report("small", small, nsmall, nsmall * 64);
	return 0;
}
