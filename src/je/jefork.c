/*
 * What jemalloc 5.3's own fork handlers get wrong or leave out.
 *
 * The count of arenas its prefork locks. jemalloc_prefork reads
 * narenas_total first, then waits for ctl's lock, the explicit caches'
 * and arenas_lock, and locks that many arenas; its postfork handlers
 * read the count again and unlock that many. An arena made while the
 * prefork waits (a thread's first allocation taking a new automatic
 * arena, arenas.create, the huge class's arena made at its first use,
 * the maintenance thread's first mallctl) is unlocked in the parent
 * without having been locked, and may be another thread's: that thread
 * and the next to lock it are then in the arena together. ctl's lock is
 * the long wait (a statistics refresh holds it), and the debug build's
 * lock count (base/lock.c) caught it: test/progs/forkmt 50 failed 10
 * runs of 30 under the debug library before this, none of 30 after.
 * jemalloc's pthread_atfork call comes here instead (scripts/
 * embed-jemalloc), and its prepare handler is replaced by one taking
 * the same locks in the same order, the count read after arenas_lock is
 * held: once jemalloc has booted, every arena is made under that lock
 * (arena_init, arena_choose_hard), so the count cannot change before the
 * postfork handlers, jemalloc's own, read it.
 *
 * A lock of the library's held across mallctl (the huge class's start:
 * huge/huge.c) must be held across a fork too, or a child forked in the
 * middle of the start sees it half done. Such a lock ranks above
 * jemalloc's and the library's other locks, so it is taken first in
 * this prepare handler and released last in the parent's
 * (hp_je_fork_hooks). That needs the library's other handlers (core/
 * init.c's, lifetime/sample.c's) registered before jemalloc's, so that
 * they run after it: both assert so (hp_je_atfork_registered). Its
 * holder must never wait for the forking thread, which may hold the
 * loader's lock (a constructor that forks during dlopen): jemalloc's
 * first "background_thread" mallctl looks pthread_create up with dlsym,
 * so that is done here, before; pthread_create itself takes glibc's TLS
 * lock, not the loader's (glibc 2.35 and later).
 *
 * The lock jemalloc's address map (arena_emap_global, an rtree) builds
 * its nodes under: init_lock, taken the first time an extent lands in a
 * new stretch of address space. The prefork does not take it, so a fork
 * while another thread holds it leaves it held in the child for good:
 * the child's first lookup that needs a new node waits forever, in
 * rtree_leaf_elm_lookup_hard (docs/backing.md). In the child only the
 * forking thread is left, and it was not inside the map (it was in
 * fork), so the lock is made anew, as rtree_new makes it. A node the
 * vanished thread was building is either published or still NULL, to
 * be built again; the bytes it took from the base are lost to the
 * child, nothing more.
 *
 * Built against jemalloc's internal headers, as jeexit.c is: the
 * compiler checks each call's signature and the lock's place.
 */
#include <jemalloc/internal/jemalloc_preamble.h>
#include <jemalloc/internal/jemalloc_internal_includes.h>
#include <jemalloc/internal/ctl.h>

#define HP_HIDDEN __attribute__((visibility("hidden")))

HP_HIDDEN int hp_je_atfork(void (*prepare)(void), void (*parent)(void),
    void (*child)(void));
HP_HIDDEN bool hp_je_atfork_registered(void);
HP_HIDDEN void hp_je_fork_hooks(void (*first)(void), void (*last)(void));
HP_HIDDEN void hp_jefork_child(void);
HP_HIDDEN size_t hp_je_nallocx(size_t size, int flags);

/* Set once, at the end of the library's start (core/init.c); a fork
 * before that runs without them. */
static void (*fork_first)(void), (*fork_last)(void);
/* Whether this thread's prepare handler called fork_first: its parent
 * handler calls fork_last only then. */
static __thread __attribute__((tls_model("initial-exec"))) bool first_called;

static void (*const arena_stage[])(tsdn_t *, arena_t *) = {
	arena_prefork0, arena_prefork1, arena_prefork2, arena_prefork3,
	arena_prefork4, arena_prefork5, arena_prefork6, arena_prefork7,
	arena_prefork8,
};

/* jemalloc_prefork's locks, in its order (each stage of every arena
 * before the next stage of any), the arenas counted under arenas_lock. */
static void prefork(void) {
	void (*first)(void) = __atomic_load_n(&fork_first, __ATOMIC_ACQUIRE);
	first_called = first != NULL;
	if (first != NULL)
		first();
	tsd_t *tsd = tsd_fetch();
	tsdn_t *tsdn = tsd_tsdn(tsd);
	witness_prefork(tsd_witness_tsdp_get(tsd));
	ctl_prefork(tsdn);
	tcache_prefork(tsdn);
	malloc_mutex_prefork(tsdn, &arenas_lock);
	unsigned narenas = narenas_total_get();
	if (have_background_thread)
		background_thread_prefork0(tsdn);
	prof_prefork0(tsdn);
	if (have_background_thread)
		background_thread_prefork1(tsdn);
	for (size_t s = 0; s < sizeof arena_stage / sizeof *arena_stage; s++)
		for (unsigned i = 0; i < narenas; i++) {
			arena_t *arena = arena_get(tsdn, i, false);
			if (arena != NULL)
				arena_stage[s](tsdn, arena);
		}
	prof_prefork1(tsdn);
	stats_prefork(tsdn);
	tsd_prefork(tsd);
}

static void postfork_parent(void) {
	jemalloc_postfork_parent();
	if (first_called)
		fork_last();
}

/* jemalloc's one pthread_atfork call (malloc_init_hard_recursible). The
 * tests safety::fork_while_arenas_are_made and
 * fork_while_the_huge_class_starts fail (debug suite) if its handlers
 * are not the ones given here. */
static bool registered;

int hp_je_atfork(void (*prepare)(void), void (*parent)(void),
    void (*child)(void)) {
	__atomic_store_n(&registered, true, __ATOMIC_RELEASE);
	if (prepare == jemalloc_prefork && parent == jemalloc_postfork_parent)
		return pthread_atfork(prefork, postfork_parent, child);
	return pthread_atfork(prepare, parent, child);
}

bool hp_je_atfork_registered(void) {
	return __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
}

void hp_je_fork_hooks(void (*first)(void), void (*last)(void)) {
	(void)hp_je_nallocx(1, 0);                    /* jemalloc booted */
	if (have_background_thread)
		background_thread_ctl_init(tsdn_fetch());
	fork_last = last;
	__atomic_store_n(&fork_first, first, __ATOMIC_RELEASE);
}

void hp_jefork_child(void) {
	malloc_mutex_init(&arena_emap_global.rtree.init_lock, "rtree",
	    WITNESS_RANK_RTREE, malloc_mutex_rank_exclusive);
}
