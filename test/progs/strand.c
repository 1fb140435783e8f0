/* The seed's stranding demo in the huge class: fill MiB of huge-class
 * memory with pieces, free all but one piece per 2 MiB page, then make no
 * allocator call and watch this process's counters (its stats page) and
 * RSS for up to WAIT seconds, until stranded bytes reach WANT_MIB (mode
 * "strand") or RSS falls to limit + live + 16 MiB (mode "limit").
 * Mode "tail": one live object of PIECE_KIB in a THP page the rest of
 * which was never handed out; prints what stays resident of the page once
 * strand_limit has split it, and what of it is still in a transparent
 * huge page (/proc/kpageflags: a page only unmapped in part stays whole).
 * Mode "small": the same in the small class, with 64 B objects; prints
 * RSS and jemalloc's extent descriptors (edata.c), whose peak was one per
 * 4 KiB slab, after WAIT s, or as soon as RSS is within EXCESS_KIB of what
 * it was at the start plus what is live and the descriptors' resident
 * bytes are DESC_KIB or less (polled every 0.1 s, with no allocator call).
 * usage: strand strand|limit MiB PIECE_KIB WAIT [WANT_MIB]
 *        strand tail PIECE_KIB WAIT
 *        strand small MiB WAIT [EXCESS_KIB DESC_KIB] */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "probe.h"
#include "base/types.h"

static int read_stats(hp_stats_t *st) {
	return probe_stats(st);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int tail(size_t piece, double wait) {
	char *p = malloc(piece);
	memset(p, 1, piece);
	char *page = (char *)((uintptr_t)p & ~(uintptr_t)(HP_HUGE - 1));
	long long thp = probe_thp_bytes(page, HP_HUGE);
	long long before = probe_resident_bytes(page, HP_HUGE);
	hp_stats_t st;
	memset(&st, 0, sizeof st);
	double t0 = now();
	struct timespec tick = {0, 100 * 1000 * 1000};
	while (now() - t0 < wait && !(read_stats(&st) && st.arena[1].pages_split))
		nanosleep(&tick, NULL);
	printf("object_kb=%zu\nthp_before_kb=%lld\nresident_before_kb=%lld\n"
	    "resident_after_kb=%lld\nthp_after_kb=%lld\npages_split=%llu\n"
	    "object_intact=%d\n",
	    piece >> 10, thp >> 10, before >> 10,
	    probe_resident_bytes(page, HP_HUGE) >> 10,
	    probe_thp_bytes(page, HP_HUGE) >> 10,
	    (unsigned long long)st.arena[1].pages_split,
	    p[0] == 1 && p[piece - 1] == 1);
	free(p);
	return 0;
}

static int small(size_t total, double wait, long excess_kb, long desc_kb) {
	long rss_start = probe_rss_kb();
	size_t n = total / 64, kept = 0;
	char **p = malloc(n * sizeof *p);
	for (size_t i = 0; i < n; i++) {
		p[i] = malloc(64);
		memset(p[i], 1, 64);
	}
	long rss_peak = probe_rss_kb();
	uintptr_t lo = UINTPTR_MAX;
	for (size_t i = 0; i < n; i++)
		lo = (uintptr_t)p[i] < lo ? (uintptr_t)p[i] : lo;
	/* Keep the object at the start of each 2 MiB of the objects' span. */
	for (size_t i = 0; i < n; i++) {
		if (((uintptr_t)p[i] - lo) % HP_HUGE < 64)
			p[kept++] = p[i];
		else
			free(p[i]);
	}
	/* From here on no allocator call. */
	size_t live_kb = (kept * 64 + n * sizeof *p) >> 10;
	hp_stats_t st;
	memset(&st, 0, sizeof st);
	long rss = probe_rss_kb();
	double t0 = now();
	struct timespec tick = {0, 100 * 1000 * 1000};
	while (now() - t0 < wait && (excess_kb < 0 || !read_stats(&st) ||
	    rss - rss_start - (long)live_kb > excess_kb ||
	    st.descriptors.resident_bytes > (unsigned long long)desc_kb << 10)) {
		nanosleep(&tick, NULL);
		rss = probe_rss_kb();
	}
	int intact = 1;
	for (size_t i = 0; i < kept; i++)
		intact &= p[i][0] == 1 && p[i][63] == 1;
	memset(&st, 0, sizeof st);
	read_stats(&st);
	printf("kept=%zu\nlive_kb=%zu\nrss_start_kb=%ld\nrss_peak_kb=%ld\n"
	    "rss_end_kb=%ld\nintact=%d\ndescriptors_live=%llu\n"
	    "descriptors_resident_bytes=%llu\ndescriptors_released_bytes=%llu\n"
	    "seconds=%.2f\n",
	    kept, live_kb, rss_start, rss_peak,
	    probe_rss_kb(), intact, (unsigned long long)st.descriptors.live,
	    (unsigned long long)st.descriptors.resident_bytes,
	    (unsigned long long)st.descriptors.released_bytes, now() - t0);
	return 0;
}

int main(int argc, char **argv) {
	if (strcmp(argv[1], "small") == 0)
		return small((size_t)atol(argv[2]) << 20, atof(argv[3]),
		    argc > 5 ? atol(argv[4]) : -1, argc > 5 ? atol(argv[5]) : -1);
	if (strcmp(argv[1], "tail") == 0)
		return tail((size_t)atol(argv[2]) << 10, atof(argv[3]));
	int limit_mode = strcmp(argv[1], "limit") == 0;
	size_t total = (size_t)atol(argv[2]) << 20, piece = (size_t)atol(argv[3]) << 10;
	double wait = atof(argv[4]);
	uint64_t want = (uint64_t)(argc > 5 ? atol(argv[5]) : 0) << 20;
	size_t n = total / piece, live = 0, kept = 0;
	char **p = malloc(n * sizeof *p);
	for (size_t i = 0; i < n; i++) {
		p[i] = malloc(piece);
		memset(p[i], 1, piece);
	}
	/* Keep the first piece that starts in each 2 MiB page. */
	uintptr_t last = 0;
	for (size_t i = 0; i < n; i++) {
		uintptr_t page = (uintptr_t)p[i] >> 21;
		if (page != last) {
			last = page;
			live += piece;
			kept++;
		} else {
			free(p[i]);
		}
	}
	long rss0 = probe_rss_kb();
	/* From here on no allocator call: only reads of files. */
	hp_stats_t st;
	memset(&st, 0, sizeof st);
	double t0 = now(), t = 0;
	struct timespec tick = {0, 250 * 1000 * 1000};
	long rss = rss0;
	int done = 0;
	while (!done && (t = now() - t0) < wait) {
		nanosleep(&tick, NULL);
		rss = probe_rss_kb();
		if (!read_stats(&st))
			continue;
		const hp_arena_stats_t *h = &st.arena[1];
		/* Limit mode: RSS is read now, the counters as of the last
		 * maintenance pass, and a pass splits at most
		 * HP_SPLITS_PER_PASS pages: RSS can fall before the pass that
		 * caused it publishes, so both must agree. */
		done = limit_mode ? (uint64_t)rss * 1024 <= st.strand_limit_bytes +
		    live + (16u << 20) && h->pages_split > 0 &&
		    h->stranded_bytes <= st.strand_limit_bytes :
		    h->stranded_bytes >= want;
	}
	const hp_arena_stats_t *h = &st.arena[1];
	printf("kept=%zu\nlive_bytes=%zu\nrss_after_free_kb=%ld\nrss_kb=%ld\n"
	    "seconds=%.2f\ndone=%d\nstranded_bytes=%llu\nhist_0_10=%llu\n"
	    "pages_split=%llu\nstrand_limit_bytes=%llu\ncounted_live_bytes=%llu\n"
	    "counted_resident=%llu\npages_full=%llu\npages_partial=%llu\n"
	    "small_resident=%llu\n",
	    kept, live, rss0, rss, t, done, (unsigned long long)h->stranded_bytes,
	    (unsigned long long)h->live_hist[0],
	    (unsigned long long)h->pages_split,
	    (unsigned long long)st.strand_limit_bytes,
	    (unsigned long long)h->live_bytes,
	    (unsigned long long)h->resident_bytes,
	    (unsigned long long)h->pages_full,
	    (unsigned long long)h->pages_partial,
	    (unsigned long long)st.arena[0].resident_bytes);
	return 0;
}
