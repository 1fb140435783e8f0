/*
 * The purge a thread's exit asks of its arena.
 *
 * When a thread's cache is destroyed (the thread exits), jemalloc decays
 * the thread's arena, and when no other thread is assigned to it and its
 * background threads are off, purges every dirty page the arena holds
 * (tcache.c's tcache_destroy, decay "all"). The next thread given that
 * arena faults them back: a program that starts short-lived threads one
 * after another pays a purge and its faults for each (W12's 10,000 take
 * 0.86 s so, 0.54 without: docs/benchmarks.md). Until jemalloc's
 * background threads start (huge/huge.c: 10 s after the maintenance
 * thread), tcache.c's calls of arena_decay come here (scripts/
 * embed-jemalloc) and each is jemalloc's ordinary decay step: the pages
 * go back on the decay curve, through the next thread that uses the
 * arena, jemalloc's background threads once they start, malloc_trim, or
 * never, if the program exits first. When those threads will not come
 * (MALLOC_CONF background_thread:false, the program's own mallctl, or a
 * start that failed: hp_je_exit_purge), the purge is jemalloc's again.
 *
 * tcache.c's other calls (a cache's flush, and the first two of a
 * destroyed cache's) decay without "all" and are passed on as they are;
 * an explicit cache destroyed whose arena has no thread asks for "all"
 * as a thread's exit does, and is treated alike.
 *
 * Built against jemalloc's internal headers, as jefill.c is, so that the
 * compiler checks arena_decay's signature.
 */
#include <jemalloc/internal/jemalloc_preamble.h>
#include <jemalloc/internal/jemalloc_internal_includes.h>

#define HP_HIDDEN __attribute__((visibility("hidden")))

HP_HIDDEN void hp_je_exit_decay(tsdn_t *tsdn, arena_t *arena,
    bool is_background_thread, bool all);
HP_HIDDEN void hp_je_exit_purge(bool purge);
/* jeconf.c's, declared here: this file includes no header of the
 * library's (the two sets name things alike). */
HP_HIDDEN bool hp_jeconf_background_off(void);

static bool purge_all;

void hp_je_exit_purge(bool purge) {
	__atomic_store_n(&purge_all, purge, __ATOMIC_RELAXED);
}

void hp_je_exit_decay(tsdn_t *tsdn, arena_t *arena,
    bool is_background_thread, bool all) {
	bool purge = __atomic_load_n(&purge_all, __ATOMIC_RELAXED) ||
	    hp_jeconf_background_off();
	arena_decay(tsdn, arena, is_background_thread, all && purge);
}
