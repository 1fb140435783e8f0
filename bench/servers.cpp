/*
 * Server-shaped allocation workloads, one per run, for make bench (issue
 * 33): the shapes where the library was once behind jemalloc or the best
 * peer. The figures are printed as key=value; every mode prints ops (the
 * operations done), time_s, its main figure, and peak_kb (the most memory
 * held, hugetlbfs pages included) with huge_kb (on huge pages then).
 *
 *   larson THREADS SECONDS SIZED   a server simulation: each thread
 *                                  replaces random objects of 8-512 B in
 *                                  an array of its own, and after every
 *                                  round hands the array to another
 *                                  thread, which frees what it did not
 *                                  make. SIZED 1: frees through C++'s
 *                                  sized operator delete. ns_per_op
 *                                  (wall time per replacement)
 *   prodcons PAIRS SECONDS         producers allocate 16-256 B messages,
 *                                  consumers on other threads free them.
 *                                  ns_per_op (wall time per message)
 *   threads N                      N short-lived threads, two at a time,
 *                                  each making and freeing 2,000 objects
 *                                  of 16-512 B. time_s
 *   leak OPS                       one thread, objects of 16-4,096 B
 *                                  replaced in a window of 10,000, one in
 *                                  20 leaked: a growing heap. time_s
 *   small OPS                      one thread, batches of 64 objects of
 *                                  16-128 B freed in a shuffled order: a
 *                                  program of a few MB. ns_per_op
 */
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <pthread.h>
#include <time.h>

extern "C" {
#include "probe.h"
}

static double now() {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct rng_t {
	uint64_t s;
	uint64_t next() {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		return s;
	}
	size_t in(size_t lo, size_t hi) {       /* lo..hi inclusive */
		return lo + (size_t)(next() % (hi - lo + 1));
	}
};

/* Peak memory held, sampled by whoever calls sample() (a thread that
 * allocates: at most every 1/64 s of its own). */
static std::atomic<long> peak{0}, peak_huge{0};
static void sample() {
	long h = probe_rss_kb() + probe_hugetlb_kb();
	long p = peak.load(std::memory_order_relaxed);
	while (h > p && !peak.compare_exchange_weak(p, h))
		;
	if (h > p)
		peak_huge.store(probe_huge_kb(), std::memory_order_relaxed);
}

/* main: the mode's figure beside time_s (NULL: time_s is it). */
static void report(const char *main, double value, uint64_t ops,
    double secs) {
	sample();
	printf("ops=%llu\ntime_s=%.4f\n", (unsigned long long)ops, secs);
	if (main != NULL)
		printf("%s=%.4f\n", main, value);
	printf("peak_kb=%ld\nhuge_kb=%ld\n", peak.load(), peak_huge.load());
}

/* ---- larson ------------------------------------------------------------ */

enum { L_SLOTS = 1000, L_ROUND = 10000, L_MAXARR = 64 };
struct larr_t {
	void *p[L_SLOTS];
	uint32_t n[L_SLOTS];
};
static larr_t *exch[L_MAXARR];      /* arrays between rounds */
static unsigned nexch;
static pthread_mutex_t exch_lock = PTHREAD_MUTEX_INITIALIZER;
static std::atomic<bool> stop{false};
static bool sized;

static void *l_alloc(size_t n) {
	void *p = sized ? ::operator new(n) : malloc(n);
	if (p == NULL)
		abort();
	memset(p, (int)n, n < 16 ? n : 16);
	return p;
}

static void l_free(void *p, size_t n) {
	if (sized)
		::operator delete(p, n);
	else
		free(p);
}

static void *larson_thread(void *arg) {
	rng_t r{(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1};
	uint64_t ops = 0;
	double last = now();
	larr_t *a = NULL;
	while (!stop.load(std::memory_order_relaxed)) {
		/* Take an array another thread filled (or one of its own). */
		pthread_mutex_lock(&exch_lock);
		unsigned k = (unsigned)r.in(0, nexch - 1);
		a = exch[k];
		exch[k] = exch[--nexch];
		pthread_mutex_unlock(&exch_lock);
		for (int i = 0; i < L_ROUND; i++) {
			unsigned s = (unsigned)r.in(0, L_SLOTS - 1);
			l_free(a->p[s], a->n[s]);
			a->n[s] = (uint32_t)r.in(8, 512);
			a->p[s] = l_alloc(a->n[s]);
		}
		ops += L_ROUND;
		pthread_mutex_lock(&exch_lock);
		exch[nexch++] = a;
		pthread_mutex_unlock(&exch_lock);
		if (now() - last > 1.0 / 64)
			sample(), last = now();
	}
	return (void *)(uintptr_t)ops;
}

static int larson(int threads, double secs) {
	rng_t r{42};
	/* Two arrays per thread, so that a thread finds one waiting. */
	nexch = (unsigned)threads * 2;
	for (unsigned i = 0; i < nexch; i++) {
		exch[i] = (larr_t *)malloc(sizeof(larr_t));
		for (int s = 0; s < L_SLOTS; s++) {
			exch[i]->n[s] = (uint32_t)r.in(8, 512);
			exch[i]->p[s] = l_alloc(exch[i]->n[s]);
		}
	}
	pthread_t t[L_MAXARR / 2];
	double t0 = now();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, larson_thread, (void *)(uintptr_t)(i + 1));
	struct timespec d = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
	nanosleep(&d, NULL);
	stop = true;
	uint64_t ops = 0;
	for (int i = 0; i < threads; i++) {
		void *v;
		pthread_join(t[i], &v);
		ops += (uintptr_t)v;
	}
	double el = now() - t0;
	report("ns_per_op", el * 1e9 / (double)ops, ops, el);
	for (unsigned i = 0; i < nexch; i++) {
		for (int s = 0; s < L_SLOTS; s++)
			l_free(exch[i]->p[s], exch[i]->n[s]);
		free(exch[i]);
	}
	return 0;
}

/* ---- producer / consumer ------------------------------------------------ */

enum { Q_SIZE = 4096 };
struct alignas(64) queue_t {
	std::atomic<uint64_t> head{0};
	char pad1[56];
	std::atomic<uint64_t> tail{0};
	char pad2[56];
	void *slot[Q_SIZE];
	uint64_t made = 0;
};

static void *producer(void *arg) {
	queue_t *q = (queue_t *)arg;
	rng_t r{(uintptr_t)q | 1};
	uint64_t h = 0, made = 0;
	double last = now();
	while (!stop.load(std::memory_order_relaxed)) {
		if (h - q->tail.load(std::memory_order_acquire) == Q_SIZE) {
			sched_yield();
			continue;
		}
		size_t n = r.in(16, 256);
		char *p = (char *)malloc(n);
		if (p == NULL)
			abort();
		memset(p, 7, n < 32 ? n : 32);
		q->slot[h % Q_SIZE] = p;
		q->head.store(++h, std::memory_order_release);
		if (++made % 65536 == 0 && now() - last > 1.0 / 64)
			sample(), last = now();
	}
	q->made = made;
	return NULL;
}

static void *consumer(void *arg) {
	queue_t *q = (queue_t *)arg;
	uint64_t t = 0;
	for (;;) {
		uint64_t h = q->head.load(std::memory_order_acquire);
		if (t == h) {
			if (stop.load(std::memory_order_relaxed) &&
			    q->head.load(std::memory_order_acquire) == t)
				break;
			sched_yield();
			continue;
		}
		while (t < h) {
			char *p = (char *)q->slot[t % Q_SIZE];
			if (p[0] != 7)
				abort();
			free(p);
			q->tail.store(++t, std::memory_order_release);
		}
	}
	return NULL;
}

static int prodcons(int pairs, double secs) {
	queue_t *q = new queue_t[pairs];
	pthread_t pt[64], ct[64];
	double t0 = now();
	for (int i = 0; i < pairs; i++) {
		pthread_create(&pt[i], NULL, producer, &q[i]);
		pthread_create(&ct[i], NULL, consumer, &q[i]);
	}
	struct timespec d = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
	nanosleep(&d, NULL);
	stop = true;
	uint64_t ops = 0;
	for (int i = 0; i < pairs; i++) {
		pthread_join(pt[i], NULL);
		pthread_join(ct[i], NULL);
		ops += q[i].made;
	}
	double el = now() - t0;
	report("ns_per_op", el * 1e9 / (double)ops, ops, el);
	delete[] q;
	return 0;
}

/* ---- short-lived threads ------------------------------------------------ */

static void *short_thread(void *arg) {
	rng_t r{(uintptr_t)arg * 2654435761u + 1};
	void *live[100] = {0};
	for (int i = 0; i < 2000; i++) {
		unsigned k = (unsigned)r.in(0, 99);
		free(live[k]);
		live[k] = malloc(r.in(16, 512));
		if (live[k] == NULL)
			abort();
		*(char *)live[k] = 1;
	}
	for (int k = 0; k < 100; k++)
		free(live[k]);
	return NULL;
}

static int threads(long n) {
	double t0 = now();
	for (long i = 0; i < n; i += 2) {
		pthread_t a, b;
		pthread_create(&a, NULL, short_thread, (void *)(uintptr_t)(i + 1));
		pthread_create(&b, NULL, short_thread, (void *)(uintptr_t)(i + 2));
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		if (i % 256 == 0)
			sample();
	}
	double el = now() - t0;
	report(NULL, 0, (uint64_t)n, el);
	return 0;
}

/* ---- a growing heap with leaks ------------------------------------------ */

static int leak(long ops) {
	enum { W = 10000 };
	static void *win[W];
	rng_t r{7};
	double t0 = now();
	for (long i = 0; i < ops; i++) {
		unsigned k = (unsigned)r.in(0, W - 1);
		if (r.in(0, 19) != 0)        /* one in 20 is never freed */
			free(win[k]);
		size_t n = r.in(16, 4096);
		win[k] = malloc(n);
		if (win[k] == NULL)
			abort();
		memset(win[k], 3, n < 64 ? n : 64);
		if (i % 262144 == 0)
			sample();
	}
	double el = now() - t0;
	report(NULL, 0, (uint64_t)ops, el);
	return 0;
}

/* ---- a small single-thread loop ----------------------------------------- */

static int small(long ops) {
	enum { B = 64 };
	void *p[B];
	unsigned order[B];
	rng_t r{11};
	for (unsigned i = 0; i < B; i++)
		order[i] = i;
	double t0 = now();
	long done = 0;
	while (done < ops) {
		for (unsigned i = 0; i < B; i++) {
			size_t n = r.in(16, 128);
			p[i] = malloc(n);
			if (p[i] == NULL)
				abort();
			*(char *)p[i] = (char)n;
		}
		for (unsigned i = B - 1; i > 0; i--) {   /* shuffled frees */
			unsigned j = (unsigned)r.in(0, i), t = order[i];
			order[i] = order[j], order[j] = t;
		}
		for (unsigned i = 0; i < B; i++)
			free(p[order[i]]);
		done += B;
		if (done % (B * 65536) == 0)
			sample();
	}
	double el = now() - t0;
	report("ns_per_op", el * 1e9 / (double)done, (uint64_t)done, el);
	return 0;
}

int main(int argc, char **argv) {
	const char *m = argc > 1 ? argv[1] : "";
	long a = argc > 2 ? atol(argv[2]) : 0;
	double s = argc > 3 ? atof(argv[3]) : 0;
	if (strcmp(m, "larson") == 0 && a >= 1 && a <= L_MAXARR / 2 && s > 0) {
		sized = argc > 4 && atoi(argv[4]) != 0;
		return larson((int)a, s);
	}
	if (strcmp(m, "prodcons") == 0 && a >= 1 && a <= 64 && s > 0)
		return prodcons((int)a, s);
	if (strcmp(m, "threads") == 0 && a >= 2)
		return threads(a);
	if (strcmp(m, "leak") == 0 && a >= 1)
		return leak(a);
	if (strcmp(m, "small") == 0 && a >= 1)
		return small(a);
	fprintf(stderr, "usage: servers larson THREADS SECONDS SIZED | "
	    "prodcons PAIRS SECONDS | threads N | leak OPS | small OPS\n");
	return 2;
}
