/* The cache a thread's block names before it has one of the huge arena's
 * (huge/huge.c): zeroes the size of a jemalloc thread cache, whose every
 * bin then reads as both empty and full to je/jetc.c's paths (which check
 * the size), so that those need no test of their own. A header of its
 * own, which names nothing jemalloc names: jetc.c, built against
 * jemalloc's headers, includes it. */
#ifndef HP_NOCACHE_H
#define HP_NOCACHE_H

#define HP_NO_CACHE_SIZE 2048
/* The largest request a cache's fast path serves: jemalloc's size-class
 * lookup table's last (jetc.c checks). */
#define HP_CACHE_MAX 4096
extern const char hp_no_cache[HP_NO_CACHE_SIZE]
    __attribute__((visibility("hidden")));
/* It is read-only: a write through it, which no path makes, faults. */
#define HP_NO_CACHE ((void *)hp_no_cache)

#endif
