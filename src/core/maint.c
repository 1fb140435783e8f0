/*
 * Maintenance: all the purging that is not jemalloc's own, periodic and
 * on demand.
 *
 * The maintenance thread: once every maintain_ms, the periodic work that
 * must happen while the program makes no malloc call. It polls the
 * hugetlb pool, drives the huge arena's decay (free huge pages go back
 * at this pace whatever jemalloc's own threads do), gives back the
 * extent descriptors' and the long-lived class's empty pages, collapses
 * what a promoted site filled while it was learned (lifetime/catchup.c),
 * and refreshes the counters, applying strand_limit. It starts with the
 * first huge-class allocation or the first allocation of a program's
 * second thread (route.c), not at load: a single-threaded process that
 * never uses the huge class stays single-threaded.
 *
 * malloc_trim (hp_maint_trim): the same on demand, every class at once.
 * The small class is jemalloc's automatic arenas and thread caches, kept
 * on 4 KiB pages: jemalloc's own thp:never (je/jeconf.c) advises
 * MADV_NOHUGEPAGE on every mapping it makes for them, so what a purge
 * frees returns to the kernel at 4 KiB granularity even when THP is
 * "always". Then the extent descriptors' empty pages and the long-lived
 * class's empty segments go back, and the counters are refreshed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include "core/core.h"
#include "je/je.h"

static bool thread_on;

static void *maintain(void *arg) {
	(void)arg;
	char decay[64] = "";
	long ms = hp_conf.maintain_ms;
	unsigned passes = 0;
	for (;;) {
		struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
		nanosleep(&t, NULL);
		/* A program that has run this long gets jemalloc's threads too
		 * (huge/huge.c). */
		if (passes < HP_BG_AFTER_PASSES && ++passes == HP_BG_AFTER_PASSES)
			hp_huge_start_background();
		/* Purge what the decay curve says is due, so that free pages
		 * go back at this pace whatever jemalloc's own thread does. */
		hp_backing_poll();
		hp_region_timing(true);
		/* The huge arena may come after the thread (started for the
		 * long-lived class). */
		if (decay[0] == '\0' && hp_huge_arena() != HP_NO_ARENA)
			hp_fmt(decay, sizeof decay, "arena.%u.decay",
			    hp_huge_arena());
		if (decay[0] != '\0')
			hp_je_mallctl(decay, NULL, NULL, NULL, 0);
		hp_edata_trim();
		hp_ll_collect(hp_os_clock_ns(CLOCK_REALTIME), false);
		hp_catchup_run();
		hp_stats_refresh(true);
		hp_stats_maint_pass(hp_region_timing(false));
	}
	return NULL;
}

/* When the threads start (huge/huge.c calls it through
 * hp_huge_on_threads), once per process and again in a fork child. */
void hp_maint_start(void) {
	if (__atomic_exchange_n(&thread_on, true, __ATOMIC_ACQ_REL))
		return;
	hp_stats_open();
	pthread_t t;
	pthread_attr_t attr;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);   /* no signal of the host's */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int err = pthread_create(&t, &attr, maintain, NULL);
	if (err != 0)
		hp_log("could not start the maintenance thread (%s); counters "
		    "are refreshed only on malloc_trim and at exit",
		    hp_strerror(err));
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* In a fork child, whose huge class starts its own thread. */
void hp_maint_atfork_child(void) {
	thread_on = false;
}

/* ---- malloc_trim ----------------------------------------------------- */

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
int hp_maint_trim(void) {
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
