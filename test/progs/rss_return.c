/* Frees all its large allocations, then either only sleeps (decay) or
 * calls malloc_trim(0) (trim), and reports when RSS came back. forkdecay:
 * the same as decay, in the child of a process that used the huge class.
 * usage: rss_return decay|trim|forkdecay [blocks] [MiB each] [wait s] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "probe.h"

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	int trim = argc > 1 && strcmp(argv[1], "trim") == 0;
	int blocks = argc > 2 ? atoi(argv[2]) : 32;
	size_t size = (size_t)(argc > 3 ? atol(argv[3]) : 16) << 20;
	double wait = argc > 4 ? atof(argv[4]) : 20;
	if (argc > 1 && strcmp(argv[1], "forkdecay") == 0) {
		void *x = malloc(8 << 20);
		free(x);
		fflush(stdout);
		pid_t pid = fork();
		if (pid > 0) {
			int st;
			waitpid(pid, &st, 0);
			return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
		}
	}
	void *keep = malloc(1);          /* the allocator is started */
	long start = probe_rss_kb();
	void **b = malloc((size_t)blocks * sizeof *b);
	for (int i = 0; i < blocks; i++) {
		b[i] = malloc(size);
		memset(b[i], i + 1, size);
	}
	long peak = probe_rss_kb();
	for (int i = 0; i < blocks; i++)
		free(b[i]);
	free(b);
	double t0 = now(), back = -1;
	long rss = probe_rss_kb();
	if (trim) {
		printf("trim_ret=%d\n", malloc_trim(0));
		rss = probe_rss_kb();
		back = rss <= start + 16 * 1024 ? now() - t0 : -1;
	} else {
		/* No allocator call from here on: decay must run by itself. */
		struct timespec tick = {0, 100 * 1000 * 1000};
		while ((rss = probe_rss_kb()) > start + 16 * 1024 &&
		    now() - t0 < wait)
			nanosleep(&tick, NULL);
		if (rss <= start + 16 * 1024)
			back = now() - t0;
	}
	printf("start_kb=%ld\npeak_kb=%ld\nend_kb=%ld\nback_s=%.2f\n",
	    start, peak, rss, back);
	free(keep);
	return 0;
}
