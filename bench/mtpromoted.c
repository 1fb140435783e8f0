/* Threads allocating at one promoted site: what the counters of a
 * promoted allocation cost when more than one core takes that path.
 * usage: mtpromoted THREADS PAIRS
 * The main thread first keeps a 64 MiB index of 64 B nodes made at the
 * site (node()), waits past lifetime_ms and allocates elsewhere, so that a
 * learning run promotes the site (PAIRS 0: only that, for a recording).
 * Then each of THREADS threads makes PAIRS nodes at the same site and
 * frees them 64 at a time. Prints ns_per_pair: the wall time over PAIRS
 * (each thread's own, the threads running at once). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* One call site for every node: not a tail call, whose return address
 * would be each caller's. */
static __attribute__((noinline)) void *node(size_t n) {
	void *volatile p = malloc(n);
	return p;
}

static long pairs;

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *run(void *arg) {
	(void)arg;
	void *keep[64];
	for (long i = 0; i < pairs; i++) {
		keep[i & 63] = node(64);
		if ((i & 63) == 63)
			for (int k = 0; k < 64; k++)
				free(keep[k]);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	int threads = atoi(argv[1]);
	pairs = atol(argv[2]) / 64 * 64;
	if (threads < 1 || threads > 64)
		return 2;
	long n = (64L << 20) / 64;
	void **index = malloc((size_t)n * sizeof *index);
	if (index == NULL)
		return 1;
	for (long i = 0; i < n; i++)
		if ((index[i] = node(64)) == NULL)
			return 1;
	nanosleep(&(struct timespec){0, 600 * 1000000L}, NULL);
	for (long i = 0; i < 1000000; i++) {      /* ages the samples */
		void *volatile q = malloc(64);
		free(q);
	}
	/* A promoted site is looked up once its slot's credit runs out; kept,
	 * as the index: freed at once, these would be a short-lived site of
	 * the same key, which a replay does not promote. */
	for (int i = 0; i < 4096; i++)
		if (node(64) == NULL)
			return 1;
	if (pairs == 0)
		return 0;
	pthread_t t[64];
	double t0 = now();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("ns_per_pair=%.2f\n", (now() - t0) * 1e9 / (double)pairs);
	return 0;
}
