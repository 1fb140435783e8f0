/* The seed's stranding demo in the huge class: fill MiB of huge-class
 * memory with pieces, free all but one piece per 2 MiB page, then make no
 * allocator call and watch this process's counters (its stats file) and
 * RSS for up to WAIT seconds, until stranded bytes reach WANT_MIB (mode
 * "strand") or RSS falls to limit + live + 16 MiB (mode "limit").
 * usage: strand strand|limit MiB PIECE_KIB WAIT [WANT_MIB] */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "probe.h"
#include "types.h"

static int read_stats(hp_stats_t *st) {
	char path[64];
	snprintf(path, sizeof path, "/dev/shm/hugepreload.%d", (int)getpid());
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	int ok = 0;
	for (int i = 0; i < 100 && !ok; i++) {
		ok = pread(fd, st, sizeof *st, 0) == (ssize_t)sizeof *st &&
		    !(st->seq & 1);
	}
	close(fd);
	return ok;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
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
		done = limit_mode ? (uint64_t)rss * 1024 <= st.strand_limit_bytes +
		    live + (16u << 20) && h->pages_split > 0 :
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
