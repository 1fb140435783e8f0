/* calloc over blocks just freed, at sizes on both sides of the small
 * class's memset limit (src/je/jezero.c: ranges up to 128 KiB; a range
 * is the size class and a page, so requests up to 112 KiB) and in the
 * huge class: 16 blocks of a size filled and freed, then 16 of the same
 * size asked for with calloc. Prints the bytes that were not zero, and
 * how many of the callocs fell where the freed blocks had been (the
 * recycled memory the limit is about), of requests up to 112 KiB
 * (memset) and of 132 KiB and more (jemalloc's purge); 124 and 128 KiB
 * are checked, on the purge's side, and not counted.
 * usage: zeroed */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 16

int main(void) {
	static const size_t kib[] = {40, 64, 100, 112, 124, 128, 132, 256,
	    640, 900, 3072};
	long bad = 0, below = 0, above = 0;
	for (size_t s = 0; s < sizeof kib / sizeof *kib; s++) {
		size_t n = kib[s] << 10;
		unsigned char *p[K];
		uintptr_t lo = UINTPTR_MAX, hi = 0;
		for (int i = 0; i < K; i++) {
			if ((p[i] = malloc(n)) == NULL)
				return 2;
			memset(p[i], 0xa5, n);
			uintptr_t a = (uintptr_t)p[i];
			lo = a < lo ? a : lo;
			hi = a + n > hi ? a + n : hi;
		}
		for (int i = 0; i < K; i++)
			free(p[i]);
		for (int i = 0; i < K; i++) {
			unsigned char *z = calloc(1, n);
			if ((p[i] = z) == NULL)
				return 2;
			for (size_t j = 0; j < n; j++)
				bad += z[j] != 0;
			if ((uintptr_t)z < hi && (uintptr_t)z + n > lo &&
			    (kib[s] <= 112 || kib[s] >= 132))
				*(kib[s] <= 112 ? &below : &above) += 1;
		}
		for (int i = 0; i < K; i++)
			free(p[i]);
	}
	printf("bad=%ld\nreused_memset=%ld\nreused_purged=%ld\n", bad,
	    below, above);
	return 0;
}
