/*
 * Benchmark workloads, one per run: the figures are printed as key=value.
 * Every workload also prints peak_kb: the most memory the process held,
 * hugetlbfs pages included (which VmHWM leaves out).
 *
 *   stranding MIB KEEP_PCT WAIT_S   W4 (KEEP_PCT 0: one object per 2 MiB of
 *                                   address order) / W4r (KEEP_PCT 1: a
 *                                   random 1%): 64 B objects, the rest
 *                                   freed, then WAIT_S s with no call
 *   reuse N MIN_MIB MAX_MIB LIVE    W6: N blocks of MIN..MAX MiB, at most
 *                                   LIVE at a time, each zero-filled
 *   objchase N KIB LOADS_M          W3: a dependent-load chase through N
 *                                   separately malloc'd objects of KIB
 *   churn THREADS OPS               W5: threads allocate 16-1024 B objects
 *                                   and free each other's
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "probe.h"

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

/* Resident memory now, hugetlbfs pages included, in kB. */
static long held_kb(void) {
	return probe_rss_kb() + probe_hugetlb_kb();
}

static long peak, huge;   /* kB held, and kB on huge pages, at the peak */
static void sample(void) {
	long h = held_kb();
	if (h > peak)
		peak = h, huge = probe_huge_kb();
}

static int cmp_ptr(const void *a, const void *b) {
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static int stranding(size_t mib, int keep_pct, double wait) {
	size_t n = (mib << 20) / 64, live = 0;
	char **p = malloc(n * sizeof *p);
	double t0 = now();
	for (size_t i = 0; i < n; i++) {
		p[i] = malloc(64);
		memset(p[i], 1, 64);
	}
	sample();
	qsort(p, n, sizeof *p, cmp_ptr);   /* address order */
	uintptr_t last = 0;
	size_t kept = 0;
	for (size_t i = 0; i < n; i++) {
		int keep = keep_pct ? (int)(next_rand() % 100) < keep_pct :
		    ((uintptr_t)p[i] >> 21) != last;
		last = (uintptr_t)p[i] >> 21;
		if (keep)
			p[kept++] = p[i];        /* survivors, in the same array */
		else
			free(p[i]);
	}
	/* Only the survivors' pointers stay live, in an array of their own. */
	char **survivors = malloc((kept ? kept : 1) * sizeof *survivors);
	memcpy(survivors, p, kept * sizeof *p);
	free(p);
	live = kept * 64 + kept * sizeof *survivors;
	double setup = now() - t0;
	long after_free = held_kb();
	/* No allocator call from here: does the memory come back? */
	struct timespec s = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
	nanosleep(&s, NULL);
	long end = held_kb();
	printf("setup_s=%.3f\nlive_kb=%zu\nrss_after_free_kb=%ld\n"
	    "rss_after_wait_kb=%ld\nexcess_kb=%ld\npeak_kb=%ld\nhuge_kb=%ld\n",
	    setup, live >> 10, after_free, end, end - (long)(live >> 10), peak,
	    huge);
	return 0;
}

static int reuse(int n, int min_mib, int max_mib, int live) {
	char **slot = calloc((size_t)live, sizeof *slot);
	double t0 = now();
	unsigned long sum = 0;
	for (int i = 0; i < n; i++) {
		int k = (int)(next_rand() % (uint64_t)live);
		free(slot[k]);
		size_t size = ((size_t)min_mib << 20) + next_rand() %
		    (((size_t)(max_mib - min_mib) << 20) + 1);
		slot[k] = malloc(size);
		memset(slot[k], 0, size);
		sum += (unsigned char)slot[k][size / 2];
		if (i % 50 == 0)
			sample();
	}
	double t = now() - t0;
	sample();
	for (int k = 0; k < live; k++)
		free(slot[k]);
	printf("time_s=%.3f\npeak_kb=%ld\nhuge_kb=%ld\nchecksum=%lu\n", t, peak,
	    huge, sum);
	return 0;
}

static int objchase(size_t n, size_t kib, long loads) {
	void ***obj = malloc(n * sizeof *obj);
	double t0 = now();
	for (size_t i = 0; i < n; i++) {
		obj[i] = malloc(kib << 10);
		memset(obj[i], 0, kib << 10);
	}
	/* Sattolo over the objects: one cycle, random order. */
	size_t *perm = malloc(n * sizeof *perm);
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = next_rand() % i, t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		*obj[i] = obj[perm[i]];
	free(perm);
	double setup = now() - t0;
	sample();
	void **p = obj[0];
	t0 = now();
	for (long i = 0; i < loads; i++)
		p = *p;
	double ns = (now() - t0) * 1e9 / (double)loads;
	printf("ns_per_load=%.2f\nsetup_s=%.3f\npeak_kb=%ld\nhuge_kb=%ld\n"
	    "end=%p\n", ns, setup, peak, huge, (void *)p);
	return 0;
}

#define SLOTS 4096
static void *_Atomic ring[SLOTS];
static long ops_per_thread;

static void *churner(void *arg) {
	uint64_t r = 0x2545f4914f6cdd1dull * ((uintptr_t)arg + 1);
	for (long i = 0; i < ops_per_thread; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		char *p = malloc(16 + r % 1009);
		p[0] = (char)i;
		/* Swap into a shared slot: the old object is freed here, often
		 * by another thread than the one that allocated it. */
		free(__atomic_exchange_n(&ring[r % SLOTS], p, __ATOMIC_ACQ_REL));
	}
	return NULL;
}

static int churn(int threads, long ops) {
	pthread_t t[64];
	ops_per_thread = ops;
	double t0 = now();
	for (int i = 0; i < threads && i < 64; i++)
		pthread_create(&t[i], NULL, churner, (void *)(uintptr_t)i);
	for (int i = 0; i < threads && i < 64; i++)
		pthread_join(t[i], NULL);
	double dt = now() - t0;
	sample();
	for (int i = 0; i < SLOTS; i++)
		free(ring[i]);
	printf("time_s=%.3f\nns_per_op=%.2f\npeak_kb=%ld\nhuge_kb=%ld\n", dt,
	    dt * 1e9 / (double)(ops * threads), peak, huge);
	return 0;
}

int main(int argc, char **argv) {
	if (argc >= 5 && strcmp(argv[1], "stranding") == 0)
		return stranding((size_t)atol(argv[2]), atoi(argv[3]), atof(argv[4]));
	if (argc >= 6 && strcmp(argv[1], "reuse") == 0)
		return reuse(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if (argc >= 5 && strcmp(argv[1], "objchase") == 0)
		return objchase((size_t)atol(argv[2]), (size_t)atol(argv[3]),
		    atol(argv[4]) * 1000000L);
	if (argc >= 4 && strcmp(argv[1], "churn") == 0)
		return churn(atoi(argv[2]), atol(argv[3]));
	fprintf(stderr, "usage: see bench/workloads.c\n");
	return 2;
}
