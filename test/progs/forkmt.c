/* fork() while 4 threads allocate in both classes; every child must be
 * able to allocate, write and free in both classes and exit 0.
 * Before each fork every thread has made 64 allocations since the last
 * one: all four are allocating when it forks. While the child runs they
 * wait, so that the child does not share the CPUs with them (on 2 cores,
 * most of the run's time went to that). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NT 4

static volatile int stop;
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
		char *p = malloc(n);
		memset(p, 1, n);
		free(p);
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

static int child(void) {
	for (int i = 0; i < 100; i++) {
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

int main(int argc, char **argv) {
	int forks = argc > 1 ? atoi(argv[1]) : 50, failed = 0;
	pthread_t t[NT];
	for (int i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, churn, &made[i]);
	for (int i = 0; i < forks; i++) {
		unsigned long base[NT];
		for (int k = 0; k < NT; k++)
			base[k] = __atomic_load_n(&made[k], __ATOMIC_ACQUIRE);
		set_go(1);
		for (int k = 0; k < NT; k++)
			while (__atomic_load_n(&made[k], __ATOMIC_ACQUIRE) < base[k] + 64)
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
	printf("forks=%d\nfailed=%d\n", forks, failed);
	return failed != 0;
}
