/* A tight loop of malloc(size) + free: the fast path, for callgrind.
 * usage: mfloop [iterations] [size] */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
	void *volatile sink;
	for (long i = 0; i < n; i++) {
		void *p = malloc(size);
		sink = p;
		free(p);
	}
	(void)sink;
	return 0;
}
