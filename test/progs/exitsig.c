/* exit() from a signal handler while threads allocate: the main thread
 * and the workers allocate and free without end; once each worker has
 * made ROUNDS allocations, the last of them sends SIGUSR1 to the main
 * thread, whose handler calls exit(0) in the middle of whatever that
 * thread was doing, most likely an allocation. The workers go on
 * allocating while exit runs the destructors. (exit is not
 * async-signal-safe, but programs call it from handlers, and glibc's
 * malloc survives it.) usage: exitsig [workers] */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 20000
#define KEEP   512              /* live blocks per thread, replaced at random */

static pthread_t main_thread;
static _Atomic unsigned ready;
static unsigned nworkers;

static void on_usr1(int sig) {
	(void)sig;
	exit(0);
}

/* Frees and replaces one of the thread's live blocks, forever. */
static void churn(uint64_t r, long *count) {
	void *live[KEEP] = {0};
	for (;;) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		unsigned i = (unsigned)(r % KEEP);
		free(live[i]);
		size_t n = 16 + (r >> 16) % 4096;
		live[i] = (r >> 32) % 4 ? malloc(n) : calloc(1, n);
		if (live[i] != NULL)
			memset(live[i], 1, 8);
		if (count != NULL && ++*count == ROUNDS &&
		    ++ready == nworkers)
			pthread_kill(main_thread, SIGUSR1);
	}
}

static void *worker(void *arg) {
	long count = 0;
	churn(0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1), &count);
	return NULL;
}

int main(int argc, char **argv) {
	nworkers = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
	if (nworkers == 0 || nworkers > 64)
		nworkers = 3;
	main_thread = pthread_self();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	/* The workers block it: the main thread alone takes it. */
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	for (unsigned i = 0; i < nworkers; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, worker, (void *)(uintptr_t)i) != 0) {
			perror("pthread_create");
			return 2;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	churn(0x2545f4914f6cdd1dull, NULL);
	return 1;                    /* not reached */
}
