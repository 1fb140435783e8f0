/* Counts this process's threads after small allocations only, then after
 * one huge-class allocation: the library's decay thread must not exist
 * before the huge class is used. With "threads": then a second thread's
 * small allocations, and how many threads there are after it ended.
 * With "fork": a second thread that has not allocated forks, and the
 * child, single-threaded, counts its threads after small allocations.
 * With "arenas": while a second thread that allocated is still alive
 * (bound to an automatic arena of its own), waits until the library's
 * maintenance thread is bound to an arena, and says which: arena 0's
 * thread count, and how many automatic arenas besides 0 and 1 exist. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int tasks(void) {
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void *small(void *arg) {
	(void)arg;
	for (int i = 0; i < 100000; i++) {
		char *volatile p = malloc((size_t)(i % 4000) + 1);
		*p = 1;              /* volatile and written: not optimised out */
		free(p);
	}
	return NULL;
}

static void *forker(void *arg) {
	(void)arg;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		small(NULL);
		printf("child_threads=%d\n", tasks());
		fflush(stdout);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return (void *)(intptr_t)(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The preloaded library's mallctl (the program is not linked with one). */
static int mallctl(const char *name, void *old, size_t *oldlen, void *new_,
    size_t newlen) {
	static int (*fn)(const char *, void *, size_t *, void *, size_t);
	if (fn == NULL)
		*(void **)&fn = dlsym(RTLD_DEFAULT, "mallctl");
	return fn ? fn(name, old, oldlen, new_, newlen) : -1;
}

static pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;

static void *small_held(void *arg) {
	small(arg);
	pthread_mutex_lock(&hold);           /* alive until main is done */
	pthread_mutex_unlock(&hold);
	return NULL;
}

static unsigned arena_threads(unsigned i) {
	uint64_t epoch = 1;
	size_t sz = sizeof epoch;
	unsigned n = 0;
	mallctl("epoch", &epoch, &sz, &epoch, sz);
	char name[64];
	snprintf(name, sizeof name, "stats.arenas.%u.nthreads", i);
	sz = sizeof n;
	return mallctl(name, &n, &sz, NULL, 0) == 0 ? n : 0;
}

static unsigned other_arenas(void) {
	unsigned auto_n = 0, count = 0;
	size_t sz = sizeof auto_n;
	mallctl("opt.narenas", &auto_n, &sz, NULL, 0);
	for (unsigned i = 2; i < auto_n; i++) {
		char name[64];
		bool init = false;
		sz = sizeof init;
		snprintf(name, sizeof name, "arena.%u.initialized", i);
		if (mallctl(name, &init, &sz, NULL, 0) == 0 && init)
			count++;
	}
	return count;
}

/* Main (arena 0) and a second thread (arena 1) both allocate; the
 * maintenance thread starts with the second thread's first allocation
 * and is bound either way: to arena 0 (the library binds it), or, by
 * jemalloc at its first call, to a new automatic arena. Waits for one
 * of the two events (bounded by a deadline on the count of checks, not
 * on time taken). */
static int arenas(void) {
	small(NULL);
	pthread_mutex_lock(&hold);
	pthread_t t;
	pthread_create(&t, NULL, small_held, NULL);
	unsigned a0 = 0, others = 0;
	for (int tries = 0; tries < 600; tries++) {
		a0 = arena_threads(0);
		others = other_arenas();
		if (a0 >= 2 || others > 0)
			break;
		usleep(50000);
	}
	pthread_mutex_unlock(&hold);
	pthread_join(t, NULL);
	printf("arena0_threads=%u\nother_arenas=%u\n", a0, others);
	return 0;
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "arenas") == 0)
		return arenas();
	if (argc > 1) {
		small(NULL);
		pthread_t t;
		void *ok = (void *)1;
		bool fork_mode = strcmp(argv[1], "fork") == 0;
		pthread_create(&t, NULL, fork_mode ? forker : small, NULL);
		pthread_join(t, fork_mode ? &ok : NULL);
		printf("threads_after_second=%d\nok=%d\n", tasks(), ok != NULL);
		return 0;
	}
	for (int i = 0; i < 100000; i++)
		free(malloc((size_t)(i % 4000) + 1));
	printf("threads_small_only=%d\n", tasks());
	char *volatile p = malloc(8 << 20);    /* volatile: not optimised out */
	memset(p, 1, 8 << 20);
	printf("threads_after_huge=%d\n", tasks());
	free(p);
	return 0;
}
