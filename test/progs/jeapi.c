/* A program linked with -ljemalloc, as Redis is, using jemalloc's API on
 * the heap its malloc made: run under the library, every call must
 * describe and serve the library's heap. 100 x 1 MiB and 1,000,000 x
 * 100 B by malloc, then mallctl's stats, the mallocx family's flags,
 * a purge, malloc_stats_print.
 * prints: key=value lines (see test_jeapi.c) */
#include <jemalloc/jemalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long rss_kb(void) {
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL || fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	if (f)
		fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static size_t stat(const char *name) {
	uint64_t epoch = 1;
	size_t sz = sizeof epoch, v = 0;
	mallctl("epoch", &epoch, &sz, &epoch, sz);
	sz = sizeof v;
	return mallctl(name, &v, &sz, NULL, 0) == 0 ? v : 0;
}

static int all_zero(const char *p, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void count(void *ctx, const char *s) {
	*(size_t *)ctx += strlen(s);
}

int main(void) {
	enum { BIG = 100, SMALL = 1000000 };
	static char *big[BIG], *small[SMALL];
	size_t requested = 0;
	const char *version = "";
	size_t sz = sizeof version;
	mallctl("version", &version, &sz, NULL, 0);
	printf("version=%s\n", version);
	/* Options as in force: the library's overrides included. */
	const char *thp = "", *zr = "";
	ssize_t decay = 0;
	sz = sizeof thp;
	mallctl("opt.thp", &thp, &sz, NULL, 0);
	sz = sizeof zr;
	mallctl("opt.zero_realloc", &zr, &sz, NULL, 0);
	sz = sizeof decay;
	mallctl("opt.dirty_decay_ms", &decay, &sz, NULL, 0);
	int wr = mallctl("opt.thp", NULL, NULL, &thp, sizeof thp);
	printf("opt_thp=%s\nopt_zero_realloc=%s\nopt_dirty_decay_ms=%zd\n"
	    "opt_write=%d\n", thp, zr, decay, wr);
	for (int i = 0; i < BIG; i++) {
		big[i] = malloc(1 << 20);
		memset(big[i], 1, 1 << 20);
		requested += 1 << 20;
	}
	for (int i = 0; i < SMALL; i++) {
		small[i] = malloc(100);
		small[i][0] = 1;
		requested += 100;
	}
	printf("requested=%zu\nallocated=%zu\nactive=%zu\nresident=%zu\n"
	    "rss_full_kb=%ld\n", requested, stat("stats.allocated"),
	    stat("stats.active"), stat("stats.resident"), rss_kb());
	char *z = mallocx(1000, MALLOCX_ZERO);
	char *a = mallocx(1000, MALLOCX_LG_ALIGN(12));
	char *h = mallocx(4 << 20, MALLOCX_ALIGN(2 << 20) | MALLOCX_ZERO);
	printf("zero_ok=%d\nalign_ok=%d\nhuge_ok=%d\n", all_zero(z, 1000),
	    ((uintptr_t)a & 4095) == 0, ((uintptr_t)h & ((2 << 20) - 1)) == 0 &&
	    all_zero(h, 4 << 20));
	memset(z, 7, 1000);
	z = rallocx(z, 5000, MALLOCX_ZERO);
	printf("rallocx_ok=%d\n", z[999] == 7 && all_zero(z + 1000, 4000));
	printf("sallocx_ok=%d\nnallocx_100=%zu\nxallocx_ok=%d\n",
	    sallocx(a, 0) == malloc_usable_size(a), nallocx(100, 0),
	    xallocx(a, 1000, 0, 0) >= 1000);
	sdallocx(z, 5000, 0);
	dallocx(a, 0);
	dallocx(h, MALLOCX_TCACHE_NONE);
	/* Every other 1 MiB block freed and purged: the huge pages they
	 * share with live ones stay resident (stranded), and stats.resident
	 * must still say so, as the kernel does. */
	for (int i = 1; i < BIG; i += 2)
		free(big[i]);
	mallctl("arena.4096.purge", NULL, NULL, NULL, 0);
	printf("resident_stranded=%zu\nrss_stranded_kb=%ld\n",
	    stat("stats.resident"), rss_kb());
	for (int i = 0; i < SMALL; i++)
		free(small[i]);
	for (int i = 0; i < BIG; i += 2)
		free(big[i]);
	long before = rss_kb();
	mallctl("arena.4096.purge", NULL, NULL, NULL, 0);
	printf("rss_before_purge_kb=%ld\nrss_after_purge_kb=%ld\n", before,
	    rss_kb());
	size_t printed = 0;
	malloc_stats_print(count, &printed, NULL);
	printf("stats_print_bytes=%zu\nallocated_after=%zu\n", printed,
	    stat("stats.allocated"));
	return 0;
}
