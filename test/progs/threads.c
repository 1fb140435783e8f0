/* 8 threads allocate, hand their blocks to other threads, which check
 * and free them: cross-thread frees in both classes. Exit 0 if every
 * block arrived intact. usage: threads [rounds] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 8
#define SLOTS 1024
static void *_Atomic slot[NT][SLOTS];
static long rounds;
static _Atomic long bad;

static size_t size_of(uint64_t r) {
	if (r % 500 == 0)
		return (1 + r % 8) << 20;          /* huge class */
	return 1 + r % 2048;
}

static void *worker(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg;
	uint64_t r = 0x9e3779b97f4a7c15ull * (id + 1);
	for (long i = 0; i < rounds; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		size_t n = size_of(r);
		unsigned char *p = malloc(n + sizeof(size_t));
		memcpy(p, &n, sizeof n);
		memset(p + sizeof n, (int)(n & 0xff), n);
		/* Swap into another thread's slot; check what was there. */
		unsigned char *old = __atomic_exchange_n(
		    &slot[(id + 1 + r % (NT - 1)) % NT][r % SLOTS], p,
		    __ATOMIC_ACQ_REL);
		if (old) {
			size_t m;
			memcpy(&m, old, sizeof m);
			for (size_t j = 0; j < m; j += 61)
				if (old[sizeof m + j] != (unsigned char)(m & 0xff))
					bad++;
			free(old);
		}
	}
	return NULL;
}

int main(int argc, char **argv) {
	rounds = argc > 1 ? atol(argv[1]) : 200000;
	pthread_t t[NT];
	for (unsigned i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	for (unsigned i = 0; i < NT; i++)
		for (unsigned j = 0; j < SLOTS; j++)
			free(slot[i][j]);
	printf("bad=%ld\n", (long)bad);
	return bad != 0;
}
