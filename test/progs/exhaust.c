/* Allocates past what the huge class can map (run it under ulimit -v):
 * every request must still succeed, on 4 KiB pages, with its data
 * intact; growing a huge block by realloc must keep its data too.
 * usage: exhaust [blocks] [MiB each] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpclass.h"

int main(int argc, char **argv) {
	int blocks = argc > 1 ? atoi(argv[1]) : 12;
	size_t size = (size_t)(argc > 2 ? atol(argv[2]) : 100) << 20;
	unsigned char **b = calloc((size_t)blocks, sizeof *b);
	int huge = 0, small = 0, failed = 0;
	for (int i = 0; i < blocks; i++) {
		b[i] = malloc(size);
		if (b[i] == NULL) {
			failed++;
			continue;
		}
		memset(b[i], i + 1, size);
		huge += hp_class_of(b[i]) == 2;
		small += hp_class_of(b[i]) == 1;
	}
	/* Make room (two adjacent blocks: jemalloc keeps freed address space
	 * for reuse), then grow the first huge block past the huge class. */
	for (int i = blocks - 2; i < blocks; i++) {
		free(b[i]);
		b[i] = NULL;
	}
	unsigned char *g = realloc(b[0], size + (size >> 1));
	int realloc_ok = g != NULL;
	if (g) {
		b[0] = g;
		memset(g + size, 0x7f, size >> 1);
	}
	long bad = 0;
	for (int i = 0; i < blocks - 2; i++)
		for (size_t j = 0; b[i] && j < size; j += 4096)
			bad += b[i][j] != (unsigned char)(i + 1);
	printf("huge=%d\nsmall=%d\nfailed=%d\nrealloc_ok=%d\n"
	    "realloc_class=%d\nbad=%ld\n", huge, small, failed, realloc_ok,
	    g ? hp_class_of(g) : -1, bad);
	return 0;
}
