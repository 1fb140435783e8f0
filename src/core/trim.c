/*
 * malloc_trim's purge of every class. The small class is jemalloc's
 * automatic arenas and thread caches, kept on 4 KiB pages: jemalloc's own
 * thp:never (je/jeconf.c) advises MADV_NOHUGEPAGE on every mapping it
 * makes for them, so what a purge frees returns to the kernel at 4 KiB
 * granularity even when THP is "always". Then the extent descriptors'
 * empty pages and the long-lived class's empty segments go back, and
 * the counters are refreshed.
 */
#include <time.h>
#include "core/core.h"
#include "je/je.h"

static size_t unused_pages(void) {
	uint64_t epoch = 1;
	size_t sz = sizeof epoch, unused = 0, v, vsz = sizeof v;
	hp_je_mallctl("epoch", &epoch, &sz, &epoch, sz);
	if (hp_je_mallctl("stats.arenas.4096.pdirty", &v, &vsz, NULL, 0) == 0)
		unused += v;
	if (hp_je_mallctl("stats.arenas.4096.pmuzzy", &v, &vsz, NULL, 0) == 0)
		unused += v;
	return unused;
}

/*
 * malloc_trim: flush this thread's cache and purge every arena. jemalloc
 * skips an arena whose decay thread is purging at that moment, so this
 * purges again until nothing unused is left (for 100 ms at most, in case
 * other threads keep freeing). Returns 1 if there were pages to give
 * back, as glibc does.
 */
int hp_trim_all(void) {
	hp_je_mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
	size_t unused = unused_pages();
	for (int i = 0; i < 100; i++) {
		hp_je_mallctl("arena.4096.purge", NULL, NULL, NULL, 0);
		if (unused_pages() == 0)
			break;
		struct timespec ms = {0, 1000 * 1000};
		nanosleep(&ms, NULL);
	}
	hp_edata_trim();
	hp_ll_collect(0, true);
	hp_stats_refresh(false);
	return unused > 0;
}
