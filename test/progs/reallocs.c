/* realloc, calloc and free of many small objects, checked byte by byte:
 * under heavy sampling most of them are sampled ones.
 * usage: reallocs [count] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 200000, bad = 0;
	for (long i = 0; i < n; i++) {
		size_t a = 16 + (size_t)(i % 500), b = 16 + (size_t)(i * 7 % 900);
		unsigned char *p = malloc(a);
		memset(p, (int)(i & 0xff), a);
		p = realloc(p, b);
		for (size_t j = 0; j < (a < b ? a : b); j++)
			bad += p[j] != (i & 0xff);
		unsigned char *z = calloc(1, a);
		for (size_t j = 0; j < a; j++)
			bad += z[j] != 0;
		memset(z, 0xee, a);
		free(z);
		free(p);
	}
	printf("bad=%ld\n", bad);
	return 0;
}
