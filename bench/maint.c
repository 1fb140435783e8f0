/*
 * The maintenance pass at scale: a huge-class heap of BLOCK-byte blocks
 * (HEAP bytes in all, one block in 64 written: mostly untouched, as a
 * reserved heap is), then SECONDS of
 * churn in which one random block at a time is freed and allocated again,
 * each malloc timed. Run under decay_ms:0, every free and malloc goes
 * through the huge class's extent hooks and so through its page lock,
 * the lock a maintenance pass holds while it runs; run beside
 * maintain_ms:10 (a pass every 10 ms) and maintain_ms:3600000 (none in
 * the run), the latency percentiles show what the passes cost the
 * program's huge-class allocations.
 * Blocks are aligned to 2 MiB (aligned_alloc), so each is whole huge
 * pages: a free gives them back and a malloc takes them again without
 * zeroing pages it shares with a neighbour, and the latency is mostly the
 * huge class's own work.
 * usage: maint HEAP_GIB BLOCK_MIB SECONDS
 * prints: blocks, mallocs, p50_ns, p99_ns, max_ns (one "key value" a line)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: maint HEAP_GIB BLOCK_MIB SECONDS\n");
		return 2;
	}
	size_t block = strtoull(argv[2], NULL, 10) << 20;
	size_t n = (strtoull(argv[1], NULL, 10) << 30) / block;
	double secs = strtod(argv[3], NULL);
	char **blocks = calloc(n, sizeof *blocks);
	if (blocks == NULL || block == 0)
		return 1;
	for (size_t i = 0; i < n; i++) {
		blocks[i] = aligned_alloc((size_t)2 << 20, block);
		if (blocks[i] == NULL) {
			fprintf(stderr, "maint: block %zu: out of memory\n", i);
			return 1;
		}
		if (i % 64 == 0)
			memset(blocks[i], 1, block);
	}
	size_t cap = 1 << 22, k = 0;
	uint64_t *lat = malloc(cap * sizeof *lat);
	uint64_t rng = 0x9e3779b97f4a7c15ull, end = now_ns() + (uint64_t)(secs *
	    1e9);
	while (k < cap && now_ns() < end) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		size_t i = rng % n;
		free(blocks[i]);
		uint64_t t0 = now_ns();
		blocks[i] = aligned_alloc((size_t)2 << 20, block);
		lat[k++] = now_ns() - t0;
		if (blocks[i] == NULL)
			return 1;
	}
	qsort(lat, k, sizeof *lat, by_value);
	printf("blocks %zu\nmallocs %zu\np50_ns %llu\np99_ns %llu\nmax_ns %llu\n",
	    n, k, (unsigned long long)lat[k / 2],
	    (unsigned long long)lat[k * 99 / 100], (unsigned long long)lat[k - 1]);
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	free(blocks);
	free(lat);
	return 0;
}
