/* One thread walks the loaded modules with dl_iterate_phdr, allocating in
 * its callback (as Rust's backtrace does), while others allocate enough to
 * be sampled, whose unwinding walks them too. Reports done=1 when all
 * finish; a sampler that waited for a lock held across dl_iterate_phdr
 * would hang it.
 * usage: dliter WALKS ALLOCS_PER_THREAD THREADS */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long walks, allocs;
static char *volatile sink;

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	char *p = malloc(64 + strlen(info->dlpi_name));
	strcpy(p, info->dlpi_name);
	sink = p;
	*(long *)arg += p[0] != 1;
	free(p);
	return 0;
}

static void *walker(void *arg) {
	long seen = 0;
	for (long i = 0; i < walks; i++)
		dl_iterate_phdr(visit, &seen);
	*(long *)arg = seen;
	return NULL;
}

static void *allocator(void *arg) {
	unsigned long x = (unsigned long)(uintptr_t)arg * 2654435761u + 1;
	for (long i = 0; i < allocs; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		char *p = malloc(16 + (x >> 54));
		p[0] = 1;
		sink = p;
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 4)
		return 2;
	walks = atol(argv[1]);
	allocs = atol(argv[2]);
	int n = atoi(argv[3]);
	pthread_t w, t[16];
	long seen = 0;
	if (n > 16 || pthread_create(&w, NULL, walker, &seen) != 0)
		return 3;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, allocator, (void *)(uintptr_t)i))
			return 3;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_join(w, NULL);
	printf("modules_seen=%ld\ndone=1\n", seen);
	return 0;
}
