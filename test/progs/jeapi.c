/* A program linked with -ljemalloc, as Redis is, using jemalloc's API on
 * the heap its malloc made: run under the library, every call must
 * describe and serve the library's heap. 100 x 1 MiB and 1,000,000 x
 * 100 B by malloc, then mallctl's stats, the mallocx family's flags,
 * a purge, malloc_stats_print.
 * "jeapi zero": mallocx and rallocx with MALLOCX_ZERO and alignments, in
 * the small class's small and large sizes and the huge class's, counted
 * against jemalloc's manual (the same under plain jemalloc, the control).
 * prints: key=value lines (see test_jeapi.c) */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <jemalloc/jemalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
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

/* Memory handed back dirty: blocks of the sizes below filled and freed,
 * so that what jemalloc hands out next is not fresh zero pages. */
static void dirty(void) {
	static const size_t sizes[] = {8, 64, 128, 224, 65536, 73728,
	    3 << 20, 5 << 20};
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		void *p[64];
		int n = sizes[i] < (1 << 20) ? 64 : 2;
		for (int j = 0; j < n; j++) {
			p[j] = malloc(sizes[i]);
			memset(p[j], 0xff, sizes[i]);
		}
		for (int j = 0; j < n; j++)
			free(p[j]);
	}
}

static size_t count_not(const unsigned char *p, size_t from, size_t to,
    unsigned char want) {
	size_t n = 0;
	for (size_t i = from; i < to; i++)
		n += p[i] != want;
	return n;
}

/* mallocx(n, MALLOCX_ALIGN(a) | MALLOCX_ZERO), 64 times (8 from 1 MiB),
 * after as many without MALLOCX_ZERO were filled and freed: the non-zero
 * bytes inside sallocx, which jemalloc zeroes whole. */
static void mallocx_zero(const char *name, size_t n, size_t a) {
	size_t bad = 0;
	void *p[64];
	int k = n < (1 << 20) ? 64 : 8;
	for (int j = 0; j < k; j++) {
		p[j] = mallocx(n, MALLOCX_ALIGN(a));
		memset(p[j], 0xff, sallocx(p[j], 0));
	}
	for (int j = 0; j < k; j++)
		dallocx(p[j], 0);
	for (int j = 0; j < k; j++) {
		p[j] = mallocx(n, MALLOCX_ALIGN(a) | MALLOCX_ZERO);
		bad += p[j] == NULL ? 1 : ((uintptr_t)p[j] & (a - 1)) != 0 ? 1 :
		    count_not(p[j], 0, sallocx(p[j], 0), 0);
	}
	for (int j = 0; j < k; j++)
		dallocx(p[j], 0);
	printf("mallocx_nonzero.%s=%zu\n", name, bad);
}

/* rallocx(mallocx(from, flags & ~ZERO) filled with 0xaa, to, flags), as
 * jemalloc's manual has it: the old bytes kept up to the smaller usable
 * size (lost), with MALLOCX_ZERO everything from the old usable size to
 * the new one zero (nonzero), and the object left where it was when its
 * usable size already is the new size's and it is aligned (moved). */
static void rallocx_case(const char *name, size_t from, size_t to,
    int flags) {
	unsigned char *p = mallocx(from, flags & ~MALLOCX_ZERO);
	size_t old = sallocx(p, 0);
	memset(p, 0xaa, old);
	size_t align = (size_t)1 << (flags & 0x3f);
	int stays = nallocx(to, flags) == old &&
	    ((uintptr_t)p & (align - 1)) == 0;
	unsigned char *q = rallocx(p, to, flags);
	if (q == NULL) {
		printf("rallocx_failed.%s=1\n", name);
		return;
	}
	size_t now = sallocx(q, 0);
	printf("lost.%s=%zu\n", name, count_not(q, 0, old < now ? old : now,
	    0xaa));
	if (flags & MALLOCX_ZERO)
		printf("nonzero.%s=%zu\n", name, now > old ?
		    count_not(q, old, now, 0) : 0);
	printf("moved.%s=%d\n", name, stays && q != p);
	dallocx(q, 0);
}

static int zero_cases(void) {
	dirty();
	mallocx_zero("1_a64", 1, 64);
	mallocx_zero("70000_a64", 70000, 64);
	mallocx_zero("3m_a4k", (3 << 20) - 100, 4096);
	dirty();
	const int z = MALLOCX_ZERO;
	rallocx_case("1_2_zero", 1, 2, z);
	rallocx_case("100_200_zero", 100, 200, z);
	rallocx_case("64512_64513_zero", 64512, 64513, z);
	rallocx_case("64512_70000_zero", 64512, 70000, z);
	rallocx_case("3m_5m_zero", 3 << 20, 5 << 20, z);
	rallocx_case("3m_3m1_zero", (3 << 20) - 100, 3 << 20, z);
	rallocx_case("1_2_a64_zero", 1, 2, MALLOCX_ALIGN(64) | z);
	rallocx_case("100_300_a64_zero", 100, 300, MALLOCX_ALIGN(64) | z);
	rallocx_case("100_120_a32", 100, 120, MALLOCX_ALIGN(32));
	rallocx_case("64512_64513_a4k", 64512, 64513, MALLOCX_ALIGN(4096));
	rallocx_case("3m_3m1_a4k", (3 << 20) - 100, 3 << 20,
	    MALLOCX_ALIGN(4096));
	rallocx_case("3m_5m_a2m_zero", 3 << 20, 5 << 20,
	    MALLOCX_ALIGN(2 << 20) | z);
	return 0;
}

/* 48 B objects kept from one call site, the long-lived class's kind of
 * site under lifetime:learn,long_lived:mimalloc; another site's churn. */
__attribute__((noinline)) static void *node(void) {
	return malloc(48);
}

__attribute__((noinline)) static void churn(int n) {
	for (int i = 0; i < n; i++) {
		volatile char *r = malloc(48);
		r[0] = 1;
		free((void *)r);
	}
}

static double now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* "jeapi ll": once the node site is promoted (the last nodes in the
 * huge class's or the long-lived class's range: hugepreload_class says
 * huge for a 48 B object), the rallocx cases on such objects. */
static int ll_cases(void) {
	enum { N = 400000 };
	static void *nodes[2 * N];
	static volatile int phases = 3;  /* one call stack for node() */
	long k = 0;
	for (int ph = 0; ph < phases; ph++) {
		if (ph == 1) {
			double t0 = now_s();
			while (now_s() - t0 < 2.5)
				churn(10000);
			continue;
		}
		for (int i = 0; i < N; i++) {
			nodes[k] = node();
			memset(nodes[k++], 1, 48);
			churn(2);
		}
	}
	int (*cls)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT,
	    "hugepreload_class");
	long promoted = 0;
	for (long i = k - 1000; i < k; i++)
		promoted += cls != NULL && cls(nodes[i]) == 2;
	printf("promoted=%ld\n", promoted);
	/* The long-lived class is mimalloc's: loaded by now, if it serves. */
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	int mi = 0;
	while (maps != NULL && fgets(line, sizeof line, maps) != NULL)
		mi |= strstr(line, "libmimalloc") != NULL;
	if (maps != NULL)
		fclose(maps);
	printf("mimalloc_loaded=%d\n", mi);
	/* Each case on its own promoted node, filled to its usable size;
	 * the last into an arena of the program's (MALLOCX_ARENA: jemalloc's
	 * rallocx must not be handed mimalloc's object). */
	unsigned arena = 0;
	size_t asz = sizeof arena;
	if (mallctl("arenas.create", &arena, &asz, NULL, 0) != 0)
		printf("arenas_create_failed=1\n");
	struct { const char *name; size_t to; int flags; } c[] = {
		{"ll_48_100_zero", 100, MALLOCX_ZERO},
		{"ll_48_40_zero", 40, MALLOCX_ZERO},
		{"ll_48_4000_zero", 4000, MALLOCX_ZERO},
		{"ll_48_40_a32", 40, MALLOCX_ALIGN(32)},
		{"ll_48_100_a64_zero", 100, MALLOCX_ALIGN(64) | MALLOCX_ZERO},
		{"ll_48_2m_zero", 2 << 20, MALLOCX_ZERO},
		{"ll_48_100_arena_zero", 100, MALLOCX_ZERO |
		    MALLOCX_ARENA(arena)},
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
		unsigned char *p = nodes[k - 1 - (long)i];
		size_t old = sallocx(p, 0);
		memset(p, 0xaa, old);
		unsigned char *q = rallocx(p, c[i].to, c[i].flags);
		size_t now = sallocx(q, 0), align = (size_t)1 <<
		    (c[i].flags & 0x3f);
		printf("lost.%s=%zu\n", c[i].name, count_not(q, 0,
		    old < now ? old : now, 0xaa));
		printf("nonzero.%s=%zu\n", c[i].name, now > old &&
		    (c[i].flags & MALLOCX_ZERO) ? count_not(q, old, now, 0) : 0);
		printf("misaligned.%s=%d\n", c[i].name,
		    ((uintptr_t)q & (align - 1)) != 0);
		printf("stayed.%s=%d\n", c[i].name, q == p);
		nodes[k - 1 - (long)i] = q;
	}
	return 0;
}

static void *second(void *arg) {
	(void)arg;
	free(malloc(64));          /* a second thread: the library's start */
	return NULL;
}

/* Arenas of the program's own, made, used and destroyed again and again
 * while the library's maintenance thread refreshes its counters (run
 * with a short maintain_ms): the library must not read an arena being
 * destroyed (jemalloc unmaps it). And one such arena's objects counted
 * in mallinfo2's in-use bytes. */
static int destroy_cases(int rounds) {
	pthread_t t;
	pthread_create(&t, NULL, second, NULL);
	pthread_join(t, NULL);
	enum { N = 64, SIZE = 65536 };
	void *p[N];
	unsigned ind = 0;
	size_t sz = sizeof ind;
	struct mallinfo2 before = mallinfo2();
	if (mallctl("arenas.create", &ind, &sz, NULL, 0) != 0)
		return 1;
	for (int k = 0; k < N; k++) {
		p[k] = mallocx(SIZE, MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE);
		memset(p[k], 1, SIZE);
	}
	struct mallinfo2 after = mallinfo2();
	printf("in_use_before=%zu\nin_use_after=%zu\n", before.uordblks, after.uordblks);
	/* Within one object: the program's other small objects move. */
	printf("arena_counted=%d\n", after.uordblks + SIZE >=
	    before.uordblks + (size_t)N * SIZE);
	long destroyed = 0;
	for (int r = 0; r < rounds; r++) {
		if (r > 0) {
			sz = sizeof ind;
			if (mallctl("arenas.create", &ind, &sz, NULL, 0) != 0)
				return 1;
			for (int k = 0; k < 4; k++)
				p[k] = mallocx(4096 << k, MALLOCX_ARENA(ind) |
				    MALLOCX_TCACHE_NONE);
		}
		for (int k = 0; k < (r > 0 ? 4 : N); k++)
			dallocx(p[k], MALLOCX_TCACHE_NONE);
		char name[64];
		snprintf(name, sizeof name, "arena.%u.destroy", ind);
		destroyed += mallctl(name, NULL, NULL, NULL, 0) == 0;
		if (r % 64 == 0)
			(void)mallinfo2();
	}
	printf("destroyed=%ld\n", destroyed);
	return 0;
}

int main(int argc, char **argv) {
	if (argc > 2 && strcmp(argv[1], "destroy") == 0)
		return destroy_cases(atoi(argv[2]));
	if (argc > 1 && strcmp(argv[1], "zero") == 0)
		return zero_cases();
	if (argc > 1 && strcmp(argv[1], "ll") == 0)
		return ll_cases();
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
