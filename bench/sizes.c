/*
 * For choosing large_threshold: objects of one size, long-lived, read by
 * a dependent-load chase across all of them; then a random half freed and
 * malloc_trim(0). Prints ns/load and what the freed half left resident.
 * usage: sizes OBJECT_KIB TOTAL_MIB LOADS_MILLIONS
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "probe.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	size_t obj = (size_t)atol(argv[1]) << 10;
	size_t total = (size_t)atol(argv[2]) << 20;
	long loads = atol(argv[3]) * 1000000L;
	size_t nobj = total / obj, per = obj / 64, ncell = nobj * per;
	long rss0 = probe_rss_kb();
	char **o = malloc(nobj * sizeof *o);
	for (size_t i = 0; i < nobj; i++)
		o[i] = malloc(obj);
	/* One random cycle through every 64 B cell of every object. */
	uint32_t *order = malloc(ncell * sizeof *order);
	for (size_t i = 0; i < ncell; i++)
		order[i] = (uint32_t)i;
	for (size_t i = ncell - 1; i > 0; i--) {
		size_t j = next_rand() % (i + 1);
		uint32_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
#define CELL(k) ((void **)(o[(k) / per] + (k) % per * 64))
	for (size_t i = 0; i < ncell; i++)
		*CELL(order[i]) = CELL(order[(i + 1) % ncell]);
	void **p = CELL(order[0]);
	free(order);
	double t0 = now();
	for (long i = 0; i < loads; i++)
		p = *p;
	double ns = (now() - t0) * 1e9 / loads;
	/* Free a random half; what stays resident beyond the live half? */
	size_t live = 0;
	for (size_t i = 0; i < nobj; i++) {
		if (next_rand() & 1) {
			free(o[i]);
		} else {
			live += obj;
		}
	}
	malloc_trim(0);
	long rss1 = probe_rss_kb();
	printf("ns_per_load=%.2f\nlive_kb=%zu\nrss_after_free_kb=%ld\n"
	    "overhead_kb=%ld\nend=%p\n", ns, live >> 10, rss1 - rss0,
	    rss1 - rss0 - (long)(live >> 10), (void *)p);
	return 0;
}
