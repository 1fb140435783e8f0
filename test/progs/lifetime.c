/* Two call sites: one builds a long-lived index of 48 B nodes, the other
 * allocates and frees 48 B request buffers. Reports where the index nodes
 * (the first one, and those built after warm-up) and live request buffers
 * sit.
 * usage: lifetime index NODES       the index built from this program
 *        lifetime dl NODES LIB      the same, from a dlopen()ed library
 *        lifetime flip NODES        one site long-lived, then churny
 *        lifetime spawn THREADS     threads that allocate once each
 *        lifetime samplers THREADS  threads that each keep 2 MiB of 256 B
 *                                   objects; RSS while all are alive */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "probe.h"

static void *(*node_fn)(void);

__attribute__((noinline)) static void *index_node(void) {
	return malloc(48);
}

__attribute__((noinline)) static void *request_buf(void) {
	return malloc(48);
}

/* One site that either keeps or frees, as the caller says. */
__attribute__((noinline)) static void *flip_site(void) {
	return malloc(48);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Request traffic: n buffers made, written and freed. */
__attribute__((noinline)) static void requests(int n) {
	for (int i = 0; i < n; i++) {
		volatile char *r = request_buf();
		r[0] = 1;
		free((void *)r);
	}
}

/* The index grows from one call site only, whichever phase calls; with
 * churn, each node is freed at once (the same site turned churny). */
__attribute__((noipa)) static void add_nodes(void **nodes, long from,
    long to, bool flip, bool churn) {
	for (long i = from; i < to; i++) {
		void *p = flip ? flip_site() : node_fn();
		memset(p, 1, 48);
		if (churn)
			free(p);
		else
			nodes[i] = p;
		requests(2);
	}
}

/* Share of objects on huge pages (THP or hugetlbfs), and whether they all
 * sit in nh mappings. */
static void where(const char *name, void **p, long n) {
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	long huge = 0, nh = 0, hg = 0;
	long step = n > 4000 ? n / 4000 : 1, seen = 0;
	for (long i = 0; i < n; i += step, seen++) {
		const probe_vma_t *m = probe_find(v, nv, p[i]);
		if (m == NULL)
			continue;
		nh += probe_has_flag(m, "nh");
		hg += probe_has_flag(m, "hg");
		huge += m->kernel_page_kb > 4 || probe_thp_bytes(p[i], 1) > 0;
	}
	printf("%s_huge_frac=%.3f\n%s_nh_frac=%.3f\n%s_hg_frac=%.3f\n", name,
	    (double)huge / seen, name, (double)nh / seen, name,
	    (double)hg / seen);
	free(v);
}

static char *volatile last;      /* the allocation escapes: not elided */

static void *once(void *arg) {
	char *p = malloc(64);
	memset(p, 7, 64);
	last = p;
	*(int *)arg = last[63] == 7;
	free(p);
	return NULL;
}

static int spawn(long n) {
	int ok = 1;
	for (long i = 0; i < n; i++) {
		pthread_t t;
		int r = 0;
		if (pthread_create(&t, NULL, once, &r) != 0)
			return 4;
		pthread_join(t, NULL);
		ok &= r;
	}
	printf("data_ok=%d\n", ok);
	return 0;
}

static pthread_barrier_t kept, measured;

/* 2 MiB of 256 B objects, kept until the main thread has measured. */
static void *keeper(void *arg) {
	enum { N = 8192 };
	char **p = malloc(N * sizeof *p);
	int ok = p != NULL;
	for (int i = 0; ok && i < N; i++) {
		ok = (p[i] = malloc(256)) != NULL;
		if (ok)
			memset(p[i], i & 0xff, 256);
	}
	pthread_barrier_wait(&kept);
	pthread_barrier_wait(&measured);
	for (int i = 0; ok && i < N; i++) {
		ok &= (unsigned char)p[i][255] == (i & 0xff);
		free(p[i]);
	}
	free(p);
	*(int *)arg = ok;
	return NULL;
}

static int samplers(long n) {
	pthread_t *t = calloc((size_t)n, sizeof *t);
	int *ok = calloc((size_t)n, sizeof *ok), all = 1;
	pthread_barrier_init(&kept, NULL, (unsigned)n + 1);
	pthread_barrier_init(&measured, NULL, (unsigned)n + 1);
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, keeper, &ok[i]) != 0)
			return 4;
	pthread_barrier_wait(&kept);
	printf("rss_kb=%ld\n", probe_rss_kb());
	pthread_barrier_wait(&measured);
	for (long i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		all &= ok[i];
	}
	printf("data_ok=%d\n", all);
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	long n = atol(argv[2]);
	if (strcmp(argv[1], "spawn") == 0)
		return spawn(n);
	if (strcmp(argv[1], "samplers") == 0)
		return samplers(n);
	node_fn = index_node;
	if (strcmp(argv[1], "dl") == 0) {
		requests(100000);        /* before the library is loaded */
		void *h = argc > 3 ? dlopen(argv[3], RTLD_NOW) : NULL;
		if (h == NULL)
			return 3;
		node_fn = (void *(*)(void))dlsym(h, "lt_node");
	}
	bool flip = strcmp(argv[1], "flip") == 0;
	void **nodes = calloc((size_t)n, sizeof *nodes);
	/* Phases, all through one call of add_nodes (one call stack): the
	 * first quarter of the index; warm-up, 2.5 s of traffic (past
	 * lifetime_ms's default); with flip, the same site churning (4 n
	 * nodes made and freed); the rest of the index. */
	long q = n / 4;
	static volatile int phases = 3;  /* no unrolling: one call of add_nodes */
	for (int ph = 0; ph < phases; ph++) {
		long from = ph == 0 ? 0 : q, to = ph == 0 ? q : n;
		bool churn = ph == 1;
		if (ph == 1) {
			double t0 = now();
			while (now() - t0 < 2.5)
				requests(10000);
			if (!flip)
				continue;
			to = q + 4 * n;
		}
		add_nodes(nodes, from, to, flip, churn);
	}
	void **live = calloc(4000, sizeof *live);
	for (int i = 0; i < 4000; i++)
		live[i] = request_buf();
	where("first_node", nodes, 1);
	where("late_nodes", nodes + n / 2, n - n / 2);
	where("requests", live, 4000);
	long bad = 0;
	for (long i = 0; i < n; i++)
		bad += ((unsigned char *)nodes[i])[47] != 1;
	printf("data_ok=%d\ncode_at=%lu\n", bad == 0,
	    (unsigned long)(uintptr_t)&index_node);
	return 0;
}
