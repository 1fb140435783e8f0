/* The library's counters beside the kernel's figures, after a known
 * workload. Each mode ends with malloc_trim (which refreshes the
 * counters), then prints, per arena, resident and its four parts, and the
 * smaps figures of the huge class's address range.
 *   written   100 MiB malloc'd, 10 MiB of it written
 *   strand    256 MiB of 64 KiB pieces (run with large_threshold:16k), all
 *             but one piece per 2 MiB page freed
 *   threads   3 threads moving objects between the classes with realloc;
 *             96 of them stay in the huge class, 3 MiB each
 *   w4 | w4r  the benchmark's W4 / W4r: 64 B objects in 256 MiB, all but
 *             one per 2 MiB (w4) or a random 1% (w4r) freed
 * usage: truth MODE */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "probe.h"
#include "base/types.h"

static void *volatile keep;            /* so the compiler keeps the blocks */

/* /proc/self files read with read(2) into a static buffer: no malloc. */
static char buf[4 << 20];
static size_t slurp(const char *path) {
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t r;
	if (fd < 0)
		return 0;
	while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 -
	    n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = '\0';
	return n;
}

typedef struct {
	long long range_rss, range_huge, small_rss;
} smaps_t;

/* smaps of the huge class's range, and of jemalloc's own mappings. */
static bool read_smaps(const hp_stats_t *st, smaps_t *sm) {
	if (slurp("/proc/self/smaps") == 0 || st->small_nranges >
	    HP_STATS_RANGES)
		return false;
	int in = 0;
	for (char *line = buf; line && *line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		unsigned long lo, hi;
		long kb;
		char key[32];
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = lo >= st->region_base && hi <= st->region_base +
			    st->region_size;
			for (unsigned i = 0; !in && i < st->small_nranges; i++)
				if (lo >= st->small_ranges[i][0] &&
				    hi <= st->small_ranges[i][1])
					in = 2;
			continue;
		}
		if (!in || sscanf(line, "%31s %ld kB", key, &kb) != 2)
			continue;
		long long b = (long long)kb << 10;
		if (in == 2 && strcmp(key, "Rss:") == 0)
			sm->small_rss += b;
		else if (in == 1 && (strcmp(key, "Rss:") == 0 ||
		    strcmp(key, "Private_Hugetlb:") == 0))
			sm->range_rss += b;
		if (in == 1 && (strcmp(key, "AnonHugePages:") == 0 ||
		    strcmp(key, "Private_Hugetlb:") == 0))
			sm->range_huge += b;
	}
	return true;
}

static void written(void) {
	char *p = malloc(100 << 20);
	memset(p, 1, 10 << 20);
	keep = p;
}

static void strand(void) {
	size_t n = (256 << 20) / (64 << 10);
	char **p = malloc(n * sizeof *p);
	for (size_t i = 0; i < n; i++) {
		p[i] = malloc(64 << 10);
		memset(p[i], 1, 64 << 10);
	}
	for (size_t i = 0; i < n; i++)
		if (((uintptr_t)p[i] & (HP_HUGE - 1)) >= (64 << 10))
			free(p[i]);              /* keeps the first of each page */
	keep = p;
}

static void *mover(void *arg) {
	uintptr_t seed = (uintptr_t)arg;
	char *kept[64];
	for (int round = 0; round < 64; round++) {
		size_t small = 200 + (seed * 7 + (unsigned)round * 13) % 4000;
		char *p = malloc(small);
		memset(p, (int)round, small);
		p = realloc(p, (3 << 20) + small);          /* to the huge class */
		memset(p, (int)round, (3 << 20) + small);
		if (round % 2 == 0)
			p = realloc(p, small);                   /* and back */
		if (p[0] != (char)round || p[small - 1] != (char)round)
			return (void *)1;
		kept[round] = p;
	}
	for (int round = 0; round < 64; round += 4)
		free(kept[round]);        /* small ones; the odd rounds' stay huge */
	return NULL;
}

static int threads(void) {
	pthread_t t[3];
	void *bad = NULL, *r;
	for (uintptr_t i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, mover, (void *)i);
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], &r);
		bad = bad ? bad : r;
	}
	return bad != NULL;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static int cmp_ptr(const void *a, const void *b) {
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static void w4(int keep_pct) {
	size_t n = (256 << 20) / 64, kept = 0;
	char **p = malloc(n * sizeof *p);
	for (size_t i = 0; i < n; i++) {
		p[i] = malloc(64);
		memset(p[i], 1, 64);
	}
	qsort(p, n, sizeof *p, cmp_ptr);
	uintptr_t last = 0;
	for (size_t i = 0; i < n; i++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		int k = keep_pct ? (int)(rng % 100) < keep_pct :
		    ((uintptr_t)p[i] >> 21) != last;
		last = (uintptr_t)p[i] >> 21;
		if (k)
			p[kept++] = p[i];
		else
			free(p[i]);
	}
	char **survivors = malloc((kept ? kept : 1) * sizeof *survivors);
	memcpy(survivors, p, kept * sizeof *p);
	free(p);
	keep = survivors;
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	int bad = 0;
	if (strcmp(mode, "written") == 0)
		written();
	else if (strcmp(mode, "strand") == 0)
		strand();
	else if (strcmp(mode, "threads") == 0)
		bad = threads();
	else if (strcmp(mode, "w4") == 0 || strcmp(mode, "w4r") == 0)
		w4(mode[2] == 'r');
	else {
		fprintf(stderr, "usage: truth written|strand|threads|w4|w4r\n");
		return 2;
	}
	/* From the refresh to the reading of smaps, no allocator call: the
	 * small class must not change in between. */
	malloc_trim(0);                      /* refreshes the counters */
	static hp_stats_t st;
	static smaps_t sm;
	if (!probe_stats(&st) || !read_smaps(&st, &sm))
		return 3;
	long long rss = sm.range_rss, huge = sm.range_huge;
	printf("data_intact=%d\n", !bad);
	printf("small_kernel=%u\nsmaps_small_resident=%lld\n",
	    (unsigned)st.small_kernel, sm.small_rss);
	for (unsigned a = 0; a < st.narenas; a++) {
		const hp_arena_stats_t *h = &st.arena[a];
		printf("%s_resident=%llu\n%s_in_use=%llu\n%s_stranded=%llu\n"
		    "%s_free_resident=%llu\n%s_metadata=%llu\n%s_live=%llu\n"
		    "%s_resident_huge=%llu\n%s_parts_add_up=%d\n",
		    st.name[a], (unsigned long long)h->resident_bytes,
		    st.name[a], (unsigned long long)h->in_use_bytes,
		    st.name[a], (unsigned long long)h->stranded_bytes,
		    st.name[a], (unsigned long long)h->free_resident_bytes,
		    st.name[a], (unsigned long long)h->metadata_bytes,
		    st.name[a], (unsigned long long)h->live_bytes,
		    st.name[a], (unsigned long long)h->resident_huge_bytes,
		    st.name[a], h->resident_bytes == h->in_use_bytes +
		    h->stranded_bytes + h->free_resident_bytes + h->metadata_bytes);
	}
	printf("smaps_range_resident=%lld\nsmaps_range_huge=%lld\n"
	    "counted_range_resident=%llu\n", rss, huge,
	    (unsigned long long)(st.arena[1].resident_bytes -
	    st.arena[1].metadata_bytes));
	return bad;
}
