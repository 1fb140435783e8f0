/* Two call sites: one builds a long-lived index of 48 B nodes, the other
 * allocates and frees 48 B request buffers. Reports where the index nodes
 * (the first one, and those built after warm-up) and live request buffers
 * sit.
 * usage: lifetime index NODES [hold] the index built from this program;
 *                                   with hold, then waits (pid= child=)
 *        lifetime dl NODES LIB      the same, from a dlopen()ed library
 *        lifetime flip NODES        one site long-lived, then churny
 *        lifetime wrapped NODES     the same as index, but the index nodes
 *                                   and the request buffers are both
 *                                   allocated through one wrapper, xmalloc
 *        lifetime wrapped2 NODES    both through xdup, a wrapper of
 *                                   xmalloc, and a churny direct caller of
 *                                   xmalloc beside them
 *        lifetime spawn THREADS     threads that allocate once each
 *        lifetime samplers THREADS  threads that each keep 2 MiB of 256 B
 *                                   objects; RSS while all are alive
 *        lifetime handback THREADS  index nodes freed (by their thread, then
 *                                   across threads), then request buffers of
 *                                   the same size: where those are
 *        lifetime release KEEP      1,000,000 index nodes, all freed but every
 *                                   KEEP-th (0: all), malloc_trim, then two
 *                                   maintenance passes: the class's counters
 *        lifetime crossfork THREADS [BEFORE AFTER]
 *                                   threads making index nodes and freeing
 *                                   each other's while the main thread forks
 *                                   children that use and free them too;
 *                                   with blocks of BEFORE MiB (made before
 *                                   the threads start) and AFTER MiB (once
 *                                   a thread has made its first set), kept
 *                                   to the end (the huge class's pages)
 *        lifetime catchup MIB       one site keeps MIB of 2 KiB objects, made
 *                                   as fast as it can: what went to the small
 *                                   class before the site was promoted, on
 *                                   huge pages after three maintenance
 *                                   passes; then all but one object per
 *                                   2 MiB of it freed and malloc_trim(0):
 *                                   the kept ones' pages split
 *        lifetime holes MIB         one site makes 2 KiB objects until 16,384
 *                                   of them have gone to the huge class (at
 *                                   most MIB in all); after three passes,
 *                                   every other object caught up is freed
 *                                   and as many made again at the site:
 *                                   where the new ones are (the holes'
 *                                   collapsed ranges, the huge class, or
 *                                   neither), and how many it placed
 *        lifetime sizes THREADS     one site keeps objects of sizes from 8 B
 *                                   to 1000 KiB; 0.4 s later THREADS threads
 *                                   (up to 128) make 32,000 more between
 *                                   them, free a third of the first ones,
 *                                   realloc a third, and free half of
 *                                   another thread's: the class's live_bytes and
 *                                   allocations against malloc_usable_size
 *                                   and the count of what is left */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <malloc.h>
#include "hpclass.h"
#include "base/types.h"
#include "probe.h"

static void *(*node_fn)(void);
static void *(*req_fn)(void);

__attribute__((noinline)) static void *index_node(void) {
	return malloc(48);
}

__attribute__((noinline)) static void *request_buf(void) {
	return malloc(48);
}

/* A program's malloc wrapper, which no caller's inlining sees through;
 * not a tail call (it checks what malloc returned). noipa, here and in
 * its callers: no two of them folded into one, no clones. */
__attribute__((noipa)) static void *xmalloc(size_t n) {
	void *p = malloc(n);
	if (p == NULL)
		abort();
	return p;
}

/* A wrapper of the wrapper, as xstrdup is. */
__attribute__((noipa)) static void *xdup(size_t n) {
	char *p = xmalloc(n);
	p[0] = 1;
	return p;
}

__attribute__((noipa)) static void *index_node_w(void) {
	char *p = xmalloc(48);
	p[1] = 1;
	return p;
}

__attribute__((noipa)) static void *request_buf_w(void) {
	char *p = xmalloc(48);
	p[1] = 1;
	return p;
}

__attribute__((noipa)) static void *index_node_w2(void) {
	char *p = xdup(48);
	p[1] = 1;
	return p;
}

/* A request buffer through xdup, and a scratch buffer straight from
 * xmalloc, both freed at once. */
__attribute__((noipa)) static void *request_buf_w2(void) {
	char *scratch = xmalloc(48);
	scratch[1] = 1;
	free(scratch);
	char *p = xdup(48);
	p[1] = 1;
	return p;
}

/* One site that either keeps or frees, as the caller says. */
__attribute__((noinline)) static void *flip_site(void) {
	return malloc(48);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Request traffic: n buffers made, written and freed. */
__attribute__((noinline)) static void requests(int n) {
	for (int i = 0; i < n; i++) {
		volatile char *r = req_fn();
		r[0] = 1;
		free((void *)r);
	}
}

/* The index grows from one call site only, whichever phase calls; with
 * churn, each node is freed at once (the same site turned churny). */
/* Index allocations that succeeded and changed errno (no errno value is
 * 4242): a successful malloc leaves errno alone. */
static long errno_changed;

__attribute__((noipa)) static void add_nodes(void **nodes, long from,
    long to, bool flip, bool churn) {
	for (long i = from; i < to; i++) {
		errno = 4242;
		void *p = flip ? flip_site() : node_fn();
		if (p != NULL && errno != 4242)
			errno_changed++;
		memset(p, 1, 48);
		if (churn)
			free(p);
		else
			nodes[i] = p;
		requests(2);
	}
}

/* Share of objects on huge pages (THP or hugetlbfs), and whether they all
 * sit in nh mappings. */
static void where(const char *name, void **p, long n) {
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	long huge = 0, nh = 0, hg = 0, hugetlb = 0;
	long step = n > 4000 ? n / 4000 : 1, seen = 0;
	for (long i = 0; i < n; i += step, seen++) {
		const probe_vma_t *m = probe_find(v, nv, p[i]);
		if (m == NULL)
			continue;
		nh += probe_has_flag(m, "nh");
		hg += probe_has_flag(m, "hg");
		huge += m->kernel_page_kb > 4 || probe_thp_bytes(p[i], 1) > 0;
		hugetlb += m->kernel_page_kb > 4;
	}
	printf("%s_huge_frac=%.3f\n%s_nh_frac=%.3f\n%s_hg_frac=%.3f\n"
	    "%s_hugetlb_frac=%.3f\n%s_at=%lu\n", name, (double)huge / seen,
	    name, (double)nh / seen, name, (double)hg / seen, name,
	    (double)hugetlb / seen, name, (unsigned long)(uintptr_t)p[0]);
	free(v);
}

static char *volatile last;      /* the allocation escapes: not elided */

static void *once(void *arg) {
	char *p = malloc(64);
	memset(p, 7, 64);
	last = p;
	*(int *)arg = last[63] == 7;
	free(p);
	return NULL;
}

static int spawn(long n) {
	int ok = 1;
	for (long i = 0; i < n; i++) {
		pthread_t t;
		int r = 0;
		if (pthread_create(&t, NULL, once, &r) != 0)
			return 4;
		pthread_join(t, NULL);
		ok &= r;
	}
	printf("data_ok=%d\n", ok);
	return 0;
}

static pthread_barrier_t kept, measured;
static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;

/* 2 MiB of 256 B objects, kept until the main thread has measured. The
 * threads allocate in turn, so that none misses its samples because
 * another one is sampling (the library skips a sample then): the count
 * does not depend on how the threads are scheduled. */
static void *keeper(void *arg) {
	enum { N = 8192 };
	pthread_mutex_lock(&turn);
	char **p = malloc(N * sizeof *p);
	int ok = p != NULL;
	for (int i = 0; ok && i < N; i++) {
		ok = (p[i] = malloc(256)) != NULL;
		if (ok)
			memset(p[i], i & 0xff, 256);
	}
	pthread_mutex_unlock(&turn);
	pthread_barrier_wait(&kept);
	pthread_barrier_wait(&measured);
	for (int i = 0; ok && i < N; i++) {
		ok &= (unsigned char)p[i][255] == (i & 0xff);
		free(p[i]);
	}
	free(p);
	*(int *)arg = ok;
	return NULL;
}

static int samplers(long n) {
	pthread_t *t = calloc((size_t)n, sizeof *t);
	int *ok = calloc((size_t)n, sizeof *ok), all = 1;
	pthread_barrier_init(&kept, NULL, (unsigned)n + 1);
	pthread_barrier_init(&measured, NULL, (unsigned)n + 1);
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, keeper, &ok[i]) != 0)
			return 4;
	pthread_barrier_wait(&kept);
	printf("rss_kb=%ld\n", probe_rss_kb());
	pthread_barrier_wait(&measured);
	for (long i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		all &= ok[i];
	}
	printf("data_ok=%d\n", all);
	return 0;
}

/*
 * Handback: once the index site is promoted (run under a profile that
 * says so), its objects come from the huge class. Freed, they must go back
 * there: none may be handed to the next allocation of the same size from
 * another site, whichever thread freed it. The main thread frees its own
 * nodes; then each of THREADS threads frees its neighbour's. After each
 * round every freeing thread makes HB request buffers and reports any that
 * is not a small-class object in an nh mapping.
 */
enum { HB = 100000 };
static long hb_threads;
static void **hb_sets[64];
static pthread_barrier_t hb_made, hb_freed;
static long hb_node_huge[65], hb_not_small, hb_not_nh;
static pthread_mutex_t hb_lock = PTHREAD_MUTEX_INITIALIZER;

static void **make_nodes(long *huge) {
	void **set = malloc(HB * sizeof *set);
	*huge = 0;
	add_nodes(set, 0, HB, false, false);     /* the index's call site */
	for (long i = 0; i < HB; i++)
		*huge += hp_class_of(set[i]) == 2;
	return set;
}

/* HB request buffers, all kept until checked: where is each? */
static void check_requests(void) {
	void **r = malloc(HB * sizeof *r);
	long not_small = 0, not_nh = 0;
	for (long i = 0; i < HB; i++) {
		r[i] = request_buf();
		not_small += hp_class_of(r[i]) != 1;
	}
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	for (long i = 0; i < HB; i++) {
		const probe_vma_t *m = probe_find(v, nv, r[i]);
		not_nh += m == NULL || !probe_has_flag(m, "nh");
	}
	free(v);
	for (long i = 0; i < HB; i++)
		free(r[i]);
	free(r);
	pthread_mutex_lock(&hb_lock);
	hb_not_small += not_small;
	hb_not_nh += not_nh;
	pthread_mutex_unlock(&hb_lock);
}

static void *hb_thread(void *arg) {
	long id = (long)(intptr_t)arg;
	hb_sets[id] = make_nodes(&hb_node_huge[id + 1]);
	pthread_barrier_wait(&hb_made);
	void **peer = hb_sets[(id + 1) % hb_threads];
	for (long i = 0; i < HB; i++)
		free(peer[i]);
	pthread_barrier_wait(&hb_freed);
	check_requests();
	return NULL;
}

static int handback(long threads) {
	if (threads < 1 || threads > 64)
		return 2;
	/* The same thread first; jemalloc's counts of this thread's bytes
	 * (thread.allocated and thread.deallocated) take every node in and
	 * out, also those the thread's cache of the huge arena serves. While
	 * the nodes are made, what is allocated less what is freed: the
	 * nodes and their array (the request buffers are freed at once). */
	int (*ctl)(const char *, void *, size_t *, void *, size_t) =
	    (int (*)(const char *, void *, size_t *, void *, size_t))
	    dlsym(RTLD_DEFAULT, "mallctl");
	uint64_t a[2], d[3];
	size_t sz = sizeof a[0];
	if (ctl == NULL || ctl("thread.allocated", &a[0], &sz, NULL, 0) != 0 ||
	    ctl("thread.deallocated", &d[0], &sz, NULL, 0) != 0)
		return 5;
	void **own = make_nodes(&hb_node_huge[0]);
	ctl("thread.allocated", &a[1], &sz, NULL, 0);
	ctl("thread.deallocated", &d[1], &sz, NULL, 0);
	for (long i = 0; i < HB; i++)
		free(own[i]);
	ctl("thread.deallocated", &d[2], &sz, NULL, 0);
	free(own);
	check_requests();
	/* The thread's cache of the huge arena is the library's, not the
	 * program's to flush: mallctl refuses its id (EFAULT; a flush would
	 * free a cache the thread still takes from: the fork child below
	 * does), or destroy, which the program tries where its flush was
	 * refused. The program makes a cache of its own first, so that
	 * jemalloc's table of them is there; no cache has been destroyed yet,
	 * so every other id is one never made, and a flush of it does
	 * nothing (jemalloc's own rule: a destroy of it, or a flush of a
	 * destroyed one, would corrupt its list of free ids). */
	unsigned mine;
	size_t msz = sizeof mine;
	if (ctl("tcache.create", &mine, &msz, NULL, 0) != 0)
		return 7;
	int refused = 0;
	for (unsigned id = 0; id < 64; id++) {
		unsigned v = id;
		if (id != mine && ctl("tcache.flush", NULL, NULL, &v,
		    sizeof v) == EFAULT)
			refused += 1 + (ctl("tcache.destroy", NULL, NULL, &v,
			    sizeof v) == EFAULT);
	}
	if (ctl("tcache.flush", NULL, NULL, &mine, sizeof mine) != 0 ||
	    ctl("tcache.destroy", NULL, NULL, &mine, sizeof mine) != 0)
		return 8;
	printf("caches_refused=%d\n", refused);
	/* A fork child whose promoted objects all come from and go back to
	 * the thread's cache (one node at a time) still starts the huge
	 * class's threads, as its first huge-class allocation does: it
	 * counts its own threads. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		void *one[1];
		add_nodes(one, 0, 20, false, true);     /* made, freed */
		int n = 0;
		DIR *d = opendir("/proc/self/task");
		for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL; )
			n += e->d_name[0] != '.';
		if (d != NULL)
			closedir(d);
		printf("fork_child_threads=%d\n", n);
		fflush(stdout);
		_exit(0);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return 6;
	printf("thread_net_nodes=%.3f\nthread_deallocated_nodes=%.3f\n",
	    (double)((a[1] - a[0]) - (d[1] - d[0])) / (HB * 48.0),
	    (double)(d[2] - d[1]) / (HB * 48.0));
	/* Then across threads. */
	hb_threads = threads;
	pthread_barrier_init(&hb_made, NULL, (unsigned)threads);
	pthread_barrier_init(&hb_freed, NULL, (unsigned)threads);
	pthread_t t[64];
	for (long i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, hb_thread, (void *)(intptr_t)i))
			return 4;
	for (long i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	long min = HB;
	for (long i = 0; i <= threads; i++)
		min = hb_node_huge[i] < min ? hb_node_huge[i] : min;
	for (long i = 0; i < threads; i++)
		free(hb_sets[i]);
	printf("nodes_huge_frac_min=%.3f\nrequests_not_small=%ld\n"
	    "requests_not_nh=%ld\ndata_ok=1\n", (double)min / HB, hb_not_small,
	    hb_not_nh);
	return 0;
}

/*
 * Crossfork: THREADS threads each make sets of CF index nodes (the
 * promoted site), hand each set to the next thread, and check and free
 * the set handed to them; meanwhile the main thread forks 20 children,
 * each of which checks and frees the sets left in the slots, makes and
 * frees nodes of its own and exits 1 on a wrong byte.
 *
 * While a child lives, every thread goes through CF_CYCLES whole rounds
 * (make, hand over, check and free) that begin after the child has
 * started, so that the parent writes its sets and its pages while the
 * child still shares them; the child does not exit before they are
 * done. Then the threads wait until it has been reaped, and the child
 * has the CPUs to itself: with all eight threads writing to the end of
 * each child, on 2 cores a child of some 70 ms of work lived 0.25-0.5 s,
 * and the 20 of them most of the run.
 */
enum { CF = 20000, CF_FORKS = 20, CF_CYCLES = 2 };
static void **cf_slot[64];
static volatile int cf_stop, cf_started;
static long cf_bad, cf_sets, cf_huge, cf_seen;
/* Shared with the children (MAP_SHARED): each thread's count of whole
 * rounds, and the counts as the living child found them when it started
 * (snap_set once they are written). */
static struct cf_shared {
	long rounds[64], snap[64];
	int snap_set;
} *cf_sh;
static int cf_hold;                   /* a child lives: threads may wait */
static pthread_mutex_t cf_gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cf_reaped = PTHREAD_COND_INITIALIZER;

/* A thread's round is done: it waits, if the living child has seen it
 * through CF_CYCLES rounds since it started, until that child is reaped. */
static void cf_round_done(long id) {
	long done = __atomic_add_fetch(&cf_sh->rounds[id], 1, __ATOMIC_ACQ_REL);
	if (!__atomic_load_n(&cf_hold, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&cf_sh->snap_set, __ATOMIC_ACQUIRE) ||
	    done < __atomic_load_n(&cf_sh->snap[id], __ATOMIC_ACQUIRE) + CF_CYCLES)
		return;
	pthread_mutex_lock(&cf_gate);
	while (cf_hold && !cf_stop)
		pthread_cond_wait(&cf_reaped, &cf_gate);
	pthread_mutex_unlock(&cf_gate);
}

static void **cf_make(long id) {
	void **set = malloc(CF * sizeof *set);
	add_nodes(set, 0, CF, false, false);
	for (long i = 0; i < CF; i++)
		((unsigned char *)set[i])[0] = (unsigned char)id;
	return set;
}

static long cf_check_free(void **set, long id) {
	long bad = 0;
	for (long i = 0; i < CF; i++) {
		bad += ((unsigned char *)set[i])[0] != (unsigned char)id ||
		    ((unsigned char *)set[i])[47] != 1;
		free(set[i]);
	}
	free(set);
	return bad;
}

static void *cf_thread(void *arg) {
	long id = (long)(intptr_t)arg, bad = 0, sets = 0, huge = 0, seen = 0;
	long prev = (id + hb_threads - 1) % hb_threads;
	while (!cf_stop) {
		void **set = cf_make(id);
		__atomic_store_n(&cf_started, 1, __ATOMIC_RELEASE);
		for (long i = 0; i < CF; i += 97, seen++)
			huge += hp_class_of(set[i]) == 2;
		set = __atomic_exchange_n(&cf_slot[id], set, __ATOMIC_ACQ_REL);
		if (set != NULL)
			bad += cf_check_free(set, id);  /* not taken: our own */
		void **theirs = __atomic_exchange_n(&cf_slot[prev], NULL,
		    __ATOMIC_ACQ_REL);
		if (theirs != NULL)
			bad += cf_check_free(theirs, prev);
		sets++;
		cf_round_done(id);
	}
	__atomic_fetch_add(&cf_bad, bad, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cf_sets, sets, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cf_huge, huge, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cf_seen, seen, __ATOMIC_RELAXED);
	return NULL;
}

/* The blocks of the huge class (crossfork's BEFORE and AFTER). */
static char *cf_blk[2];
static long cf_blk_len[2];

typedef struct {
	uintptr_t arena;         /* the largest hugetlb mapping outside them */
	long long arena_len;
	long long blocks_hugetlb; /* bytes of the blocks in hugetlb mappings */
} cf_view_t;

/* The hugetlb mappings as the kernel shows them now: the largest outside
 * the blocks (the long-lived class's pool arena), and how much of the
 * blocks is in hugetlb mappings. */
static cf_view_t cf_look(void) {
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	cf_view_t w = {0, 0, 0};
	for (size_t i = 0; i < nv; i++) {
		if (v[i].kernel_page_kb <= 4)
			continue;
		bool in = false;
		for (int k = 0; k < 2; k++) {
			uintptr_t b = (uintptr_t)cf_blk[k], e = b + (uintptr_t)cf_blk_len[k];
			if (cf_blk[k] == NULL || v[i].start >= e || b >= v[i].end)
				continue;
			in = true;
			w.blocks_hugetlb += (long long)((v[i].end < e ? v[i].end : e) -
			    (v[i].start > b ? v[i].start : b));
		}
		if (!in && (long long)(v[i].end - v[i].start) > w.arena_len)
			w.arena = v[i].start, w.arena_len = (long long)(v[i].end -
			    v[i].start);
	}
	free(v);
	return w;
}

/* The parent's view just before a fork. */
static cf_view_t cf_before;

/* Exits 1 on a wrong byte; else the sum of 2 if the class's pool arena
 * is not hugetlb here (fork copied it) and 4 if part of the blocks is
 * not (fork copied pages of the huge class), as the kernel shows this
 * process's mappings before it allocates. */
static int cf_child(void) {
	for (long id = 0; id < hb_threads; id++)
		__atomic_store_n(&cf_sh->snap[id], __atomic_load_n(
		    &cf_sh->rounds[id], __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
	__atomic_store_n(&cf_sh->snap_set, 1, __ATOMIC_RELEASE);
	cf_view_t now = cf_look();
	int copied = 0;
	/* A copied arena is THP here: no longer the same hugetlb mapping. */
	if (cf_before.arena_len >= (32 << 20) && (now.arena != cf_before.arena ||
	    now.arena_len < cf_before.arena_len))
		copied |= 2;
	if (now.blocks_hugetlb < cf_before.blocks_hugetlb)
		copied |= 4;
	long bad = 0;
	for (long id = 0; id < hb_threads; id++)
		if (cf_slot[id] != NULL)
			bad += cf_check_free(cf_slot[id], id);
	for (int k = 0; k < 5; k++)
		bad += cf_check_free(cf_make(k), k);
	/* Not gone before the parent's threads have written through their
	 * rounds (at most 60 s). */
	for (int ms = 0; ms < 60000; ms++) {
		long id = 0;
		while (id < hb_threads && __atomic_load_n(&cf_sh->rounds[id],
		    __ATOMIC_ACQUIRE) >= cf_sh->snap[id] + CF_CYCLES)
			id++;
		if (id == hb_threads)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	return bad != 0 ? 1 : copied;
}

/* A block of mib MiB, written, kept to the end (NULL for 0). */
static char *cf_block(long mib) {
	if (mib <= 0)
		return NULL;
	char *b = malloc((size_t)mib << 20);
	if (b != NULL)
		memset(b, 7, (size_t)mib << 20);
	return b;
}

static int crossfork(long threads, long before_mib, long after_mib) {
	if (threads < 2 || threads > 64)
		return 2;
	hb_threads = threads;
	cf_sh = mmap(NULL, sizeof *cf_sh, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_ANONYMOUS, -1, 0);
	if (cf_sh == MAP_FAILED)
		return 5;
	char *before = cf_block(before_mib), *after = NULL;
	cf_blk[0] = before, cf_blk_len[0] = before_mib << 20;
	pthread_t t[64];
	for (long i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, cf_thread, (void *)(intptr_t)i))
			return 4;
	if (after_mib > 0) {
		/* Once the long-lived class has mapped its pool arena (32 MiB
		 * or more of hugetlb outside the block): a thread's first set
		 * alone does not say so, since threads allocate on jemalloc's
		 * path while the first one loads libmimalloc. At most 10 s. */
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			sched_yield();
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((!__atomic_load_n(&cf_started, __ATOMIC_ACQUIRE) ||
		    cf_look().arena_len < (32 << 20)) &&
		    t.tv_sec - t0.tv_sec < 10);
		after = cf_block(after_mib);
		cf_blk[1] = after, cf_blk_len[1] = after_mib << 20;
	}
	int failed = 0, copied = 0, huge_copied = 0;
	for (int f = 0; f < CF_FORKS; f++) {
		struct timespec d = {0, 50000000};
		nanosleep(&d, NULL);
		cf_before = cf_look();
		__atomic_store_n(&cf_sh->snap_set, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&cf_hold, 1, __ATOMIC_RELEASE);
		pid_t pid = fork();
		if (pid == 0)
			_exit(cf_child());
		int st = 0;
		bool done = pid > 0 && waitpid(pid, &st, 0) == pid &&
		    WIFEXITED(st) && WEXITSTATUS(st) != 1;
		pthread_mutex_lock(&cf_gate);
		__atomic_store_n(&cf_hold, 0, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&cf_reaped);
		pthread_mutex_unlock(&cf_gate);
		copied += done && (WEXITSTATUS(st) & 2);
		huge_copied += done && (WEXITSTATUS(st) & 4);
		failed += !done;
	}
	cf_stop = 1;
	for (long i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	for (long id = 0; id < threads; id++)
		if (cf_slot[id] != NULL)
			cf_bad += cf_check_free(cf_slot[id], id);
	for (long i = 0; before != NULL && i < before_mib << 20; i += 4096)
		cf_bad += before[i] != 7;
	for (long i = 0; after != NULL && i < after_mib << 20; i += 4096)
		cf_bad += after[i] != 7;
	free(before);
	free(after);
	printf("forks_class_copied=%d\nforks_huge_copied=%d\n", copied,
	    huge_copied);
	printf("forks_failed=%d\nsets=%ld\nnodes_huge_frac=%.3f\n"
	    "data_ok=%d\n", failed, cf_sets, cf_seen ? (double)cf_huge /
	    cf_seen : 0, cf_bad == 0);
	return 0;
}

/* A size_t statistic of jemalloc's API, where the library exports it
 * (the whole heap), after an "epoch"; 0 without it. */
static size_t heap_stat(const char *name) {
	int (*ctl)(const char *, void *, size_t *, void *, size_t) =
	    (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(
	    RTLD_DEFAULT, "mallctl");
	size_t v = 0, sz = sizeof v;
	uint64_t epoch = 1;
	if (ctl != NULL) {
		ctl("epoch", NULL, NULL, &epoch, sizeof epoch);
		ctl(name, &v, &sz, NULL, 0);
	}
	return v;
}

/* The library's counters page, as "hugepreload stat" reads it. */
static bool stats_now(hp_stats_t *st) {
	return probe_stats(st) && st->magic == HP_STATS_MAGIC;
}

/* Catch-up's work so far: ranges collapsed, skipped, failed, dropped. */
static uint64_t catchup_work(const hp_stats_t *st) {
	return st->lifetime.caught_up + st->lifetime.caught_up_skipped +
	    st->lifetime.caught_up_failed + st->lifetime.caught_up_dropped;
}

/* Waits for three maintenance passes from now, then for more until two
 * in a row found catch-up with nothing left to do (how many ranges a pass
 * collapses is the kernel's pace: on a slow host three passes did only
 * 67 to 131 of some 195), 600 passes at most; st: the page after. */
static bool three_passes(hp_stats_t *st) {
	if (!stats_now(st))
		return false;
	uint64_t from = st->maintenance.passes, seen = from;
	uint64_t work = catchup_work(st), idle = 0;
	while (stats_now(st) && st->maintenance.passes < from + 600) {
		if (st->maintenance.passes != seen) {
			seen = st->maintenance.passes;
			uint64_t w = catchup_work(st);
			idle = w == work ? idle + 1 : 0;
			work = w;
			if (seen >= from + 3 && idle >= 2)
				break;
		}
		struct timespec d = {0, 10000000};
		nanosleep(&d, NULL);
	}
	return true;
}

static int release(long keep) {
	enum { N = 1000000 };
	void **nodes = malloc(N * sizeof *nodes);
	add_nodes(nodes, 0, N, false, false);
	long huge = 0, kept = 0;
	for (long i = 0; i < N; i++) {
		huge += hp_class_of(nodes[i]) == 2;
		if (keep > 0 && i % keep == 0)
			kept++;
		else
			free(nodes[i]);
	}
	malloc_trim(0);
	hp_stats_t st;
	if (!three_passes(&st))
		return 3;
	/* jemalloc's "stats.active" after an "epoch" counts the class's
	 * resident bytes (mimalloc's pages), not its live ones; the page is
	 * read after, and the class only gives memory back meanwhile. */
	size_t active = heap_stat("stats.active");
	if (!stats_now(&st))
		return 3;
	printf("active=%zu\n", active);
	const hp_arena_stats_t *a = &st.arena[2];
	printf("huge_frac=%.3f\nkept=%ld\narenas=%u\nll_resident=%lu\n"
	    "ll_resident_huge=%lu\nll_stranded=%lu\nll_released=%lu\n"
	    "ll_split=%lu\nll_live=%lu\nll_limit=%lu\n", (double)huge / N,
	    kept, st.narenas, (unsigned long)a->resident_bytes,
	    (unsigned long)a->resident_huge_bytes,
	    (unsigned long)a->stranded_bytes, (unsigned long)a->pages_released,
	    (unsigned long)a->pages_split, (unsigned long)a->live_bytes,
	    (unsigned long)st.strand_limit_bytes);
	long bad = 0, thp = 0;
	for (long i = 0; keep > 0 && i < N; i += keep) {
		bad += ((unsigned char *)nodes[i])[47] != 1;
		thp += probe_thp_bytes(nodes[i], 1) > 0;
	}
	/* Kept nodes still in a transparent huge page (/proc/kpageflags). */
	printf("data_ok=%d\nkept_in_thp=%ld\n", bad == 0, thp);
	return 0;
}

__attribute__((noinline)) static void *big_node(void) {
	return malloc(2048);
}

/* Of the objects in the small class: how many sit in THP pages
 * (/proc/kpageflags), and with keep, how many of the kept ones. */
/* Whether the 2 MiB range of a lies wholly in anonymous read-write
 * mappings, with no gap and no other mapping in it (/proc/self/maps, read
 * by the first call): only such a range can become one huge page. Where
 * the kernel does not place jemalloc's growing mappings on 2 MiB
 * boundaries, another mapping or a gap sits in some of them. */
static bool range_whole(uintptr_t a) {
	enum { MAXSPANS = 4096 };
	static uintptr_t lo[MAXSPANS], hi[MAXSPANS];
	static int nspans = -1;
	if (nspans < 0) {
		nspans = 0;
		FILE *f = fopen("/proc/self/maps", "r");
		char line[512];
		while (f != NULL && fgets(line, sizeof line, f) != NULL) {
			unsigned long s, e;
			char perms[8], path[256] = "";
			if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &s, &e,
			    perms, path) < 3 || strcmp(perms, "rw-p") != 0 ||
			    path[0] != '\0')
				continue;
			if (nspans > 0 && hi[nspans - 1] == s)
				hi[nspans - 1] = e;          /* adjacent: joined */
			else if (nspans < MAXSPANS) {
				lo[nspans] = s;
				hi[nspans++] = e;
			}
		}
		if (f != NULL)
			fclose(f);
	}
	uintptr_t r = a & ~(uintptr_t)((2 << 20) - 1);
	for (int i = 0; i < nspans; i++)
		if (lo[i] <= r && r + (2 << 20) <= hi[i])
			return true;
	return false;
}

/* Small-class objects: how many, on THP pages, in whole 2 MiB ranges;
 * and by the mapping smaps puts them in: THP pages in nh mappings (none
 * should be: a collapsed range is hg), objects in nh mappings. */
static void small_in_thp(void **p, long n, const char *name) {
	long small = 0, thp = 0, whole = 0, whole_thp = 0, thp_nh = 0, nh = 0;
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	for (long i = 0; i < n; i++)
		if (p[i] != NULL && hp_class_of(p[i]) == 1) {
			bool huge = probe_thp_bytes(p[i], 2048) > 0;
			const probe_vma_t *m = probe_find(v, nv, p[i]);
			bool in_nh = m != NULL && probe_has_flag(m, "nh");
			small++;
			thp += huge;
			nh += in_nh;
			thp_nh += huge && in_nh;
			if (range_whole((uintptr_t)p[i])) {
				whole++;
				whole_thp += huge;
			}
		}
	free(v);
	printf("%s_small=%ld\n%s_small_in_thp=%ld\n%s_small_whole=%ld\n"
	    "%s_small_whole_in_thp=%ld\n%s_small_thp_in_nh=%ld\n"
	    "%s_small_in_nh=%ld\n", name, small, name, thp, name, whole,
	    name, whole_thp, name, thp_nh, name, nh);
}

static int catchup(long mib) {
	long n = (mib << 20) / 2048;
	void **p = malloc((size_t)n * sizeof *p);
	for (long i = 0; i < n; i++) {
		p[i] = big_node();
		memset(p[i], 1, 2048);
	}
	hp_stats_t st;
	if (!three_passes(&st))
		return 3;
	small_in_thp(p, n, "objects");
	printf("caught_up=%lu\ncaught_up_skipped=%lu\ncaught_up_failed=%lu\n"
	    "caught_up_dropped=%lu\n", (unsigned long)st.lifetime.caught_up,
	    (unsigned long)st.lifetime.caught_up_skipped,
	    (unsigned long)st.lifetime.caught_up_failed,
	    (unsigned long)st.lifetime.caught_up_dropped);
	/* Keep the first small-class object of each 2 MiB, free the rest. */
	long kept = 0;
	uintptr_t last = 0;
	for (long i = 0; i < n; i++) {
		uintptr_t hp = (uintptr_t)p[i] >> 21;
		if (hp_class_of(p[i]) == 1 && hp != last && probe_thp_bytes(p[i],
		    2048) > 0) {
			last = hp;
			kept++;
			continue;
		}
		free(p[i]);
		p[i] = NULL;
	}
	malloc_trim(0);
	small_in_thp(p, n, "kept");
	long bad = 0;
	for (long i = 0; i < n; i++)
		bad += p[i] != NULL && ((unsigned char *)p[i])[2047] != 1;
	printf("kept=%ld\ndata_ok=%d\n", kept, bad == 0);
	return 0;
}

/* Holes left in collapsed ranges by frees of a promoted site's objects
 * (its learning's) are where its new objects go (src/je/jefill.c). */
/* big_node is a tail call: the site is its caller's, this one's for both
 * of holes' sets. With more >= 0, it stops more objects after the first
 * one in the huge class (the site promoted), and says how many it made;
 * n if none was. */
__attribute__((noipa)) static long make_big(void **p, long n, int c,
    long more) {
	long stop = n;
	for (long i = 0; i < n && i < stop; i++) {
		p[i] = big_node();
		memset(p[i], c, 2048);
		if (more >= 0 && stop == n && hp_class_of(p[i]) == 2)
			stop = i + 1 + more;
	}
	return stop < n ? stop : n;
}

/* The site's learning fills the small class for as long as it takes (no
 * more than MIB), then HOLES_MORE objects go to the huge class. */
#define HOLES_MORE 16384
static int holes(long mib) {
	long max = (mib << 20) / 2048;
	void **p = malloc((size_t)max * sizeof *p);
	long n = make_big(p, max, 1, HOLES_MORE);
	hp_stats_t st;
	if (!three_passes(&st))
		return 3;
	printf("objects=%ld\npromoted=%d\n", n, n < max);
	small_in_thp(p, n, "objects");
	long freed = 0, odd = 0;
	for (long i = 0; i < n; i++)
		if (hp_class_of(p[i]) == 1 && probe_thp_bytes(p[i], 2048) > 0 &&
		    odd++ % 2 == 0) {
			free(p[i]);
			p[i] = NULL;
			freed++;
		}
	uint64_t placed = st.lifetime.placed;
	void **q = malloc((size_t)freed * sizeof *q);
	long small_thp = 0, small_other = 0, huge = 0;
	make_big(q, freed, 2, -1);
	for (long i = 0; i < freed; i++) {
		int c = hp_class_of(q[i]);
		if (c == 1 && probe_thp_bytes(q[i], 2048) > 0)
			small_thp++;
		else if (c == 1)
			small_other++;
		else
			huge++;
	}
	long bad = 0;
	for (long i = 0; i < n; i++)
		bad += p[i] != NULL && ((unsigned char *)p[i])[2047] != 1;
	for (long i = 0; i < freed; i++)
		bad += ((unsigned char *)q[i])[0] != 2 ||
		    ((unsigned char *)q[i])[2047] != 2;
	/* The counters are summed at each pass: the refill's, placed on huge
	 * pages by the site's decision, three passes on. */
	if (!three_passes(&st))
		return 3;
	printf("freed=%ld\nrefill_placed=%lu\nrefill_small_thp=%ld\n"
	    "refill_small_other=%ld\nrefill_other=%ld\ndata_ok=%d\n", freed,
	    (unsigned long)(st.lifetime.placed - placed), small_thp,
	    small_other, huge, bad == 0);
	return 0;
}

/* ---- sizes: the class's counters against the objects themselves ---- */

/* Not a tail call: the return address is this function's, whoever calls. */
__attribute__((noinline)) static void *sized_node(size_t n) {
	void *volatile p = malloc(n);
	return p;
}

#define SZ_MAIN 40000
#define SZ_OWN  32000                   /* over all the threads */
static void **sz_main, **sz_own[128];
static long sz_threads, sz_nown;
static pthread_barrier_t sz_made;

/* Mostly 8 B-4 KiB, one in 50 up to 200 KiB, one in 1000 up to 1000 KiB:
 * every kind of mimalloc page below large_threshold. */
static size_t sz_pick(uint64_t *r) {
	*r ^= *r << 13, *r ^= *r >> 7, *r ^= *r << 17;
	uint64_t x = *r >> 20;
	if (x % 1000 == 0)
		return 200000 + x / 1000 % 800000;
	if (x % 50 == 0)
		return 4096 + x / 50 % 196000;
	return 8 + x / 50 % 4089;
}

static void *sz_thread(void *arg) {
	long t = (long)arg;
	uint64_t r = 0x2545f4914f6cdd1dull * (uint64_t)(t + 7);
	/* Its own first: a thread's heaps are made at its first promoted
	 * allocation, and realloc keeps an object in the class only on a
	 * thread that has them. */
	void **own = sz_own[t] = calloc((size_t)sz_nown, sizeof *own);
	for (long i = 0; i < sz_nown; i++)
		own[i] = sized_node(sz_pick(&r));
	for (long i = t; i < SZ_MAIN; i += sz_threads) {
		if (i % 3 == 0) {
			free(sz_main[i]);
			sz_main[i] = NULL;
		} else if (i % 3 == 1) {
			void *q = realloc(sz_main[i], sz_pick(&r));
			if (q != NULL)
				sz_main[i] = q;
		}
	}
	pthread_barrier_wait(&sz_made);
	nanosleep(&(struct timespec){0, 400 * 1000000L}, NULL);   /* as above */
	void **other = sz_own[(t + 1) % sz_threads];
	for (long i = 0; i < sz_nown; i += 2) {
		free(other[i]);
		other[i] = NULL;
	}
	return NULL;
}

static void sz_count(void **p, long n, long *in, long *left, size_t *bytes) {
	for (long i = 0; i < n; i++) {
		if (p[i] == NULL)
			continue;
		(*left)++;
		if (hp_class_of(p[i]) == 2) {
			(*in)++;
			*bytes += malloc_usable_size(p[i]);
		}
	}
}

static int sizes(long threads) {
	if (threads < 1 || threads > 128)
		return 2;
	sz_threads = threads;
	sz_nown = SZ_OWN / threads;
	uint64_t r = 0x9e3779b97f4a7c15ull;
	sz_main = calloc(SZ_MAIN, sizeof *sz_main);
	for (long i = 0; i < SZ_MAIN; i++)
		sz_main[i] = sized_node(sz_pick(&r));
	/* Long-lived for a recording run (lifetime_ms's default is 250). */
	nanosleep(&(struct timespec){0, 400 * 1000000L}, NULL);
	pthread_t tid[128];
	pthread_barrier_init(&sz_made, NULL, (unsigned)threads);
	for (long t = 0; t < threads; t++)
		pthread_create(&tid[t], NULL, sz_thread, (void *)t);
	for (long t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	long in = 0, left = 0;
	size_t bytes = 0;
	sz_count(sz_main, SZ_MAIN, &in, &left, &bytes);
	for (long t = 0; t < threads; t++)
		sz_count(sz_own[t], sz_nown, &in, &left, &bytes);
	hp_stats_t st;
	if (!three_passes(&st))
		return 3;
	const hp_arena_stats_t *a = &st.arena[2];
	printf("objects=%ld\nin_class=%ld\nusable_bytes=%zu\nll_live=%lu\n"
	    "ll_objects=%lu\nll_fallbacks=%lu\ndata_ok=1\n", left, in, bytes,
	    (unsigned long)a->live_bytes,
	    (unsigned long)(a->nmalloc - a->ndalloc),
	    (unsigned long)a->fallback_mmap_failed);
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	long n = atol(argv[2]);
	if (strcmp(argv[1], "spawn") == 0)
		return spawn(n);
	if (strcmp(argv[1], "samplers") == 0)
		return samplers(n);
	node_fn = index_node;
	req_fn = request_buf;
	if (strcmp(argv[1], "wrapped") == 0)
		node_fn = index_node_w, req_fn = request_buf_w;
	if (strcmp(argv[1], "wrapped2") == 0)
		node_fn = index_node_w2, req_fn = request_buf_w2;
	if (strcmp(argv[1], "handback") == 0)
		return handback(n);
	if (strcmp(argv[1], "crossfork") == 0)
		return crossfork(n, argc > 3 ? atol(argv[3]) : 0,
		    argc > 4 ? atol(argv[4]) : 0);
	if (strcmp(argv[1], "release") == 0)
		return release(n);
	if (strcmp(argv[1], "catchup") == 0)
		return catchup(n);
	if (strcmp(argv[1], "holes") == 0)
		return holes(n);
	if (strcmp(argv[1], "sizes") == 0)
		return sizes(n);
	if (strcmp(argv[1], "dl") == 0) {
		requests(100000);        /* before the library is loaded */
		void *h = argc > 3 ? dlopen(argv[3], RTLD_NOW) : NULL;
		if (h == NULL)
			return 3;
		node_fn = (void *(*)(void))dlsym(h, "lt_node");
	}
	bool flip = strcmp(argv[1], "flip") == 0;
	void **nodes = calloc((size_t)n, sizeof *nodes);
	/* Phases, all through one call of add_nodes (one call stack): the
	 * first quarter of the index; warm-up, 2.5 s of traffic (past
	 * lifetime_ms's default; LT_WARMUP_S); with flip, the same site churning (4 n
	 * nodes made and freed); the rest of the index. */
	long q = n / 4;
	/* The warm-up's length: LT_WARMUP_S seconds, 2.5 by default. */
	const char *ws = getenv("LT_WARMUP_S");
	double warm = ws != NULL && atof(ws) > 0 ? atof(ws) : 2.5;
	static volatile int phases = 3;  /* no unrolling: one call of add_nodes */
	for (int ph = 0; ph < phases; ph++) {
		long from = ph == 0 ? 0 : q, to = ph == 0 ? q : n;
		bool churn = ph == 1;
		if (ph == 1) {
			double t0 = now();
			while (now() - t0 < warm)
				requests(10000);
			if (!flip)
				continue;
			to = q + 4 * n;
		}
		add_nodes(nodes, from, to, flip, churn);
	}
	void **live = calloc(4000, sizeof *live);
	for (int i = 0; i < 4000; i++)
		live[i] = req_fn();
	where("first_node", nodes, 1);
	where("late_nodes", nodes + n / 2, n - n / 2);
	where("promoted_first", nodes + q + n / 8, 1);   /* past the slot's
	                                                     credit */
	where("requests", live, 4000);
	long small = 0;
	for (int i = 0; i < 4000; i++)
		small += hp_class_of(live[i]) == 1;   /* HUGEPRELOAD_CLASS_SMALL */
	printf("requests_small_frac=%.3f\n", small / 4000.0);
	long bad = 0;
	for (long i = 0; i < n; i++)
		bad += ((unsigned char *)nodes[i])[47] != 1;
	printf("data_ok=%d\ncode_at=%lu\nerrno_changed=%ld\n", bad == 0,
	    (unsigned long)(uintptr_t)&index_node, errno_changed);
	printf("allocated=%zu\n", heap_stat("stats.allocated"));
	/* A huge-class request after the promotion, once the long-lived
	 * class is in use: still the huge class's. */
	char *big = malloc((size_t)64 << 20);
	printf("big_class=%d\n", big ? hp_class_of(big) : -1);
	free(big);
	if (argc > 3 && strcmp(argv[3], "hold") == 0) {
		printf("pid=%d\nchild=0\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	return 0;
}
