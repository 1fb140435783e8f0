/* 4 threads each allocate and write 1 GiB in 8 MiB pieces (while a small
 * hugetlb pool runs dry under them), then every byte is checked.
 * usage: pool_threads [MiB per thread] [MiB per piece] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "probe.h"

#define NT 4
static size_t per_thread, piece;
static unsigned char **blocks[NT];

static void *work(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg;
	size_t n = per_thread / piece;
	blocks[id] = malloc(n * sizeof *blocks[id]);
	for (size_t i = 0; i < n; i++) {
		blocks[id][i] = malloc(piece);
		memset(blocks[id][i], (int)((id * 31 + i) & 0xff), piece);
	}
	return NULL;
}

int main(int argc, char **argv) {
	per_thread = (size_t)(argc > 1 ? atol(argv[1]) : 1024) << 20;
	piece = (size_t)(argc > 2 ? atol(argv[2]) : 8) << 20;
	pthread_t t[NT];
	for (unsigned i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, work, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	long bad = 0;
	for (unsigned id = 0; id < NT; id++)
		for (size_t i = 0; i < per_thread / piece; i++)
			for (size_t j = 0; j < piece; j += 8) {
				uint64_t v;
				memcpy(&v, blocks[id][i] + j, 8);
				bad += v != 0x0101010101010101ull * ((id * 31 + i) & 0xff);
			}
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	long hugetlb = 0, thp = 0;
	for (size_t i = 0; i < nv; i++) {
		hugetlb += v[i].private_hugetlb_kb;
		thp += v[i].anon_huge_kb;
	}
	printf("bad=%ld\nhugetlb_kb=%ld\nanon_huge_kb=%ld\n", bad, hugetlb, thp);
	return bad != 0;
}
