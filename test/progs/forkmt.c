/* fork() while 4 threads allocate in both classes; every child must be
 * able to allocate, write and free in both classes and exit 0.
 * Before each fork every thread has made 64 allocations since the last
 * one: all four are allocating when it forks. While the child runs they
 * wait, so that the child does not share the CPUs with them (on 2 cores,
 * most of the run's time went to that).
 *
 * forkmt N arenas: a fifth thread makes jemalloc arenas (mallctl
 * "arenas.create", as a program linked with jemalloc may) while the
 * others allocate, one at least before each fork and up to 15 more
 * during it (jemalloc 5.3's own prepare handler counted them before it
 * took the lock they are made under: je/jefork.c).
 * forkmt N first: N times, a child that has not yet used the huge class
 * starts a thread whose first allocation is huge (it makes the huge
 * class's arena) and forks meanwhile; the grandchild allocates in both
 * classes (a fork in the middle of that start left a grandchild that
 * made a second arena: huge/huge.c). */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NT 4

static volatile int stop;
/* Through it, the compiler keeps each malloc and free (gcc 12 dropped
 * churn's pair, memset and all, once first_huge was written). */
static __thread char *volatile kept;
static int go;                        /* the threads allocate while set */
static unsigned long made[NT];        /* allocations by each thread */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opened = PTHREAD_COND_INITIALIZER;

static void *churn(void *arg) {
	unsigned long *count = arg;
	unsigned r = 1;
	while (!stop) {
		if (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) {
			pthread_mutex_lock(&gate);
			while (!go && !stop)
				pthread_cond_wait(&opened, &gate);
			pthread_mutex_unlock(&gate);
			continue;
		}
		r = r * 1103515245 + 12345;
		size_t n = (r >> 8) % 64 == 0 ? (size_t)(1 + r % 4) << 20 : 1 + r % 4096;
		char *p = kept = malloc(n);
		memset(p, 1, n);
		free(kept);
		__atomic_store_n(count, *count + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void set_go(int v) {
	pthread_mutex_lock(&gate);
	__atomic_store_n(&go, v, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&opened);
	pthread_mutex_unlock(&gate);
}

static int child_n(int count) {
	for (int i = 0; i < count; i++) {
		size_t n = i % 10 == 0 ? (size_t)(8 + i) << 20 : (size_t)(16 + i * 7);
		char *p = malloc(n);
		if (p == NULL)
			return 2;
		memset(p, i, n);
		if (p[n - 1] != (char)i)
			return 3;
		free(p);
	}
	return 0;
}

static int child(void) {
	return child_n(100);
}

/* Arenas made by the fifth thread: PER_FORK at most between one fork
 * and the next, the first before it and the rest during it, and
 * MAX_ARENAS in all (jemalloc has 4095 indices; each arena keeps some
 * 100 KiB). */
#define PER_FORK 16
#define MAX_ARENAS 400
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
static mallctl_fn ctl;
static unsigned long arenas_made, period_base;
static int maker_done;

static bool may_make(void) {
	return __atomic_load_n(&go, __ATOMIC_ACQUIRE) && arenas_made <
	    __atomic_load_n(&period_base, __ATOMIC_ACQUIRE) + PER_FORK;
}

static void *make_arenas(void *arg) {
	(void)arg;
	while (!stop && arenas_made < MAX_ARENAS) {
		if (!may_make()) {
			pthread_mutex_lock(&gate);
			while (!may_make() && !stop)
				pthread_cond_wait(&opened, &gate);
			pthread_mutex_unlock(&gate);
			continue;
		}
		unsigned ind;
		size_t sz = sizeof ind;
		if (ctl("arenas.create", &ind, &sz, NULL, 0) != 0) {
			fprintf(stderr, "forkmt: arenas.create failed\n");
			break;
		}
		__atomic_store_n(&arenas_made, arenas_made + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&maker_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int starting;

static void *first_huge(void *arg) {
	(void)arg;
	__atomic_store_n(&starting, 1, __ATOMIC_RELEASE);
	char *p = malloc(4 << 20);
	kept = p;
	if (p != NULL)
		memset(p, 1, 4 << 20);
	free(kept);
	return NULL;
}

/* jemalloc's statistics refreshed over and over: each refresh holds
 * ctl's lock, which the huge class's start takes several times and
 * jemalloc's prepare handler once, so that the fork often falls in the
 * middle of the start. */
static void *refresh(void *arg) {
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		uint64_t epoch = 1;
		ctl("epoch", NULL, NULL, &epoch, sizeof epoch);
	}
	return NULL;
}

static int first(int forks) {
	int failed = 0;
	for (int i = 0; i < forks; i++) {
		pid_t g = fork();
		if (g == 0) {
			pthread_t t, r;
			pthread_create(&r, NULL, refresh, NULL);
			pthread_create(&t, NULL, first_huge, NULL);
			/* The fork falls at a different point of the start
			 * each time: 0 to 189 us after the thread's first
			 * step. */
			while (!__atomic_load_n(&starting, __ATOMIC_ACQUIRE))
				sched_yield();
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			long wait_ns = (long)(i % 256) * 750;
			do
				clock_gettime(CLOCK_MONOTONIC, &t1);
			while ((t1.tv_sec - t0.tv_sec) * 1000000000L +
			    (t1.tv_nsec - t0.tv_nsec) < wait_ns);
			pid_t pid = fork();
			if (pid == 0)
				_exit(child_n(20));
			int st;
			waitpid(pid, &st, 0);
			pthread_join(t, NULL);
			stop = 1;
			pthread_join(r, NULL);
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 9);
		}
		int st;
		waitpid(g, &st, 0);
		failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	printf("forks=%d\nfailed=%d\n", forks, failed);
	return failed != 0;
}

int main(int argc, char **argv) {
	int forks = argc > 1 ? atoi(argv[1]) : 50, failed = 0;
	const char *mode = argc > 2 ? argv[2] : "";
	bool arenas = strcmp(mode, "arenas") == 0;
	if (arenas || strcmp(mode, "first") == 0) {
		ctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
		if (ctl == NULL) {
			fprintf(stderr, "forkmt: no mallctl\n");
			return 2;
		}
	}
	if (!arenas && ctl != NULL)
		return first(forks);
	pthread_t t[NT], maker;
	if (arenas)
		pthread_create(&maker, NULL, make_arenas, NULL);
	for (int i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, churn, &made[i]);
	for (int i = 0; i < forks; i++) {
		unsigned long base[NT], abase = arenas_made;
		for (int k = 0; k < NT; k++)
			base[k] = __atomic_load_n(&made[k], __ATOMIC_ACQUIRE);
		__atomic_store_n(&period_base, abase, __ATOMIC_RELEASE);
		set_go(1);
		for (int k = 0; k < NT; k++)
			while (__atomic_load_n(&made[k], __ATOMIC_ACQUIRE) < base[k] + 64)
				sched_yield();
		while (arenas && !__atomic_load_n(&maker_done, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&arenas_made, __ATOMIC_ACQUIRE) == abase)
			sched_yield();
		pid_t pid = fork();
		if (pid == 0)
			_exit(child());
		set_go(0);
		int st;
		waitpid(pid, &st, 0);
		failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	stop = 1;
	set_go(0);
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	if (arenas) {
		pthread_join(maker, NULL);
		printf("arenas_made=%lu\n", arenas_made);
		failed += arenas_made < (unsigned long)forks;
	}
	printf("forks=%d\nfailed=%d\n", forks, failed);
	return failed != 0;
}
