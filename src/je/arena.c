/*
 * The library's own jemalloc arenas: made over a class's extent hooks
 * (the huge class's, huge/huge.c; the sample zone's, lifetime/sample.c),
 * their metadata kept off those hooks, and their decay set.
 */
#include <limits.h>
#include <stdio.h>
#include <sys/types.h>
#include "je/je.h"

/* The arenas made here, each index published once it is made. */
static unsigned own[HP_OWN_ARENAS] = {HP_NO_ARENA, HP_NO_ARENA};

static void note_own(unsigned ind) {
	for (unsigned i = 0; i < HP_OWN_ARENAS; i++) {
		unsigned none = HP_NO_ARENA;
		if (__atomic_compare_exchange_n(&own[i], &none, ind, false,
		    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	hp_assert(!"more arenas made than HP_OWN_ARENAS");
}

bool hp_arena_is_own(unsigned ind) {
	for (unsigned i = 0; i < HP_OWN_ARENAS; i++)
		if (__atomic_load_n(&own[i], __ATOMIC_ACQUIRE) == ind)
			return ind != HP_NO_ARENA;
	return false;
}

static int arena_set_ssize(unsigned ind, const char *what, ssize_t v) {
	char name[64];
	hp_fmt(name, sizeof name, "arena.%u.%s", ind, what);
	return hp_je_mallctl(name, NULL, NULL, &v, sizeof v);
}

/* Free pages stay dirty for dirty_ms, then go back (the arenas made here
 * have no lazy purge, so no muzzy state); muzzy -1 also turns off
 * jemalloc's eager purge of freed extents over oversize_threshold. 0, or
 * jemalloc's error number. */
int hp_arena_decay(unsigned ind, long dirty_ms) {
	int err = arena_set_ssize(ind, "dirty_decay_ms", dirty_ms);
	return err ? err : arena_set_ssize(ind, "muzzy_decay_ms", -1);
}

/* An arena over hooks, its metadata on jemalloc's own 4 KiB pages (thp:never
 * advises them so): jemalloc 5.3's experimental.arenas_create_ext, whose
 * argument is this struct (its arena_config_t; scripts/embed-jemalloc
 * checks the version). With the metadata on the hooks, every arena would
 * hold a 2 MiB block of it, and the hooks could not tell it from data. */
unsigned hp_arena_create(extent_hooks_t *hooks, const char **why) {
	struct {
		extent_hooks_t *extent_hooks;
		bool metadata_use_hooks;
	} config = {hooks, false};
	unsigned ind, n;
	size_t sz = sizeof ind;
	/* With every index taken (jeconf.c leaves room, but the program may
	 * have made arenas of its own), jemalloc 5.3's ctl_arena_init would
	 * still write its stats pointer one slot past its array of them
	 * before it fails: not asked. (An arena the program destroyed would
	 * have been reused; it is not, then.) */
	if (hp_je_mallctl("arenas.narenas", &n, &sz, NULL, 0) == 0 &&
	    n >= HP_ARENA_INDICES) {
		*why = "all of jemalloc's arena indices are taken";
		return HP_NO_ARENA;
	}
	int err = hp_je_mallctl("experimental.arenas_create_ext", &ind, &sz,
	    &config, sizeof config);
	if (err != 0) {
		*why = hp_strerror(err);
		return HP_NO_ARENA;
	}
	note_own(ind);
	return ind;
}

unsigned hp_arena_create_early(extent_hooks_t *hooks, long dirty_ms,
    const char **why) {
	/* jemalloc boots on its first call: this one needs nothing else. */
	(void)hp_je_nallocx(1, 0);
	unsigned ind = hp_je_arena_create_early(hooks, dirty_ms,
	    HP_ARENA_INDICES);
	if (ind == UINT_MAX) {
		*why = "jemalloc could not make it";
		return HP_NO_ARENA;
	}
	note_own(ind);
	return ind;
}
