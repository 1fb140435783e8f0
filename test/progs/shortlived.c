/* Short-lived threads, two at a time, each making and freeing 2,000 small
 * objects (W12's shape); prints the minor page faults the process took
 * per thread over the second half of them (getrusage: the kernel's
 * count). usage: shortlived [threads] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static void *worker(void *arg) {
	uint64_t r = (uintptr_t)arg * 2654435761u + 1;
	void *live[100] = {0};
	for (int i = 0; i < 2000; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		unsigned k = (unsigned)(r % 100);
		free(live[k]);
		live[k] = malloc(16 + (size_t)(r >> 32) % 497);
		if (live[k] == NULL)
			abort();
		*(char *)live[k] = 1;
	}
	for (int k = 0; k < 100; k++)
		free(live[k]);
	return NULL;
}

static long minflt(void) {
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_minflt;
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000, half = 0;
	if (n < 4)
		return 2;
	for (long i = 0; i < n; i += 2) {
		if (i == n / 2)
			half = minflt();
		pthread_t a, b;
		if (pthread_create(&a, NULL, worker, (void *)(uintptr_t)(i + 1)) ||
		    pthread_create(&b, NULL, worker, (void *)(uintptr_t)(i + 2)))
			return 3;
		pthread_join(a, NULL);
		pthread_join(b, NULL);
	}
	printf("faults_per_thread=%.2f\n", (double)(minflt() - half) /
	    (double)(n - n / 2));
	return 0;
}
