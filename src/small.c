/*
 * The small class: jemalloc's automatic arenas and thread caches, kept on
 * 4 KiB pages. jemalloc's own thp:never advises MADV_NOHUGEPAGE on every
 * mapping it makes for them, so freed memory returns to the kernel at
 * 4 KiB granularity even when THP is "always".
 */
#include <stdio.h>
#include "internal.h"
#include "je.h"

/* jemalloc's options, read after MALLOC_CONF so a user's MALLOC_CONF can
 * tune the embedded jemalloc but not undo these. */
const char *hp_small_jemalloc_conf(const hp_conf_t *c) {
	static char buf[160];
	/* No size class the huge class hands out may enter a thread cache,
	 * or a later small request could be served from a huge page. */
	size_t tcache_max = 32768;
	while (tcache_max >= c->large_threshold)
		tcache_max >>= 1;
	snprintf(buf, sizeof buf, "thp:never,background_thread:true,"
	    "zero_realloc:free,tcache_max:%zu", tcache_max);
	return buf;
}

/* malloc_trim: flush this thread's cache and purge every arena. Returns 1
 * if there were unused pages to give back, as glibc does. */
int hp_purge_all(void) {
	uint64_t epoch = 1;
	size_t sz = sizeof epoch, unused = 0, v, vsz = sizeof v;
	hp_je_mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
	hp_je_mallctl("epoch", &epoch, &sz, &epoch, sz);
	if (hp_je_mallctl("stats.arenas.4096.pdirty", &v, &vsz, NULL, 0) == 0)
		unused += v;
	if (hp_je_mallctl("stats.arenas.4096.pmuzzy", &v, &vsz, NULL, 0) == 0)
		unused += v;
	hp_je_mallctl("arena.4096.purge", NULL, NULL, NULL, 0);
	return unused > 0;
}
