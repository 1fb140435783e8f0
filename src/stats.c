/*
 * The counters: collected from jemalloc's per-arena stats and from the
 * huge class's page states, and published in a shared page that
 * "hugepreload stat" reads from outside: <stats_dir>/hugepreload.<pid>,
 * 0600, created with O_EXCL | O_NOFOLLOW and removed at exit. Nothing
 * here runs on a fast path: a maintenance thread refreshes the page every
 * second and applies strand_limit; malloc_trim and exit refresh it too.
 * File and thread come with the first huge-class allocation, so the many
 * short processes that never use the huge class (shells, say, which end
 * with _exit and so would leave their file behind) make neither.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "je.h"
#include "stats_print.h"

#define REFRESH_NS (1000L * 1000 * 1000)

static hp_stats_t *shm;                /* the shared page, or NULL */
static pid_t shm_pid;                  /* the process that created it */
static char shm_path[320];
static hp_stats_t local;               /* the last refresh */
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;
static bool thread_on;
static int warned_file;

/* Field 22 of /proc/self/stat: the start time, which tells a process from
 * a later one with the same pid. */
static uint64_t start_ticks(void) {
	char buf[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static void open_file(void) {
	if (strcmp(hp_conf.stats_dir, "off") == 0)
		return;
	snprintf(shm_path, sizeof shm_path, "%s/hugepreload.%d",
	    hp_conf.stats_dir, (int)getpid());
	for (int tries = 0; tries < 2; tries++) {
		int fd = open(shm_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		if (fd >= 0) {
			void *p = ftruncate(fd, sizeof(hp_stats_t)) == 0 ?
			    mmap(NULL, sizeof(hp_stats_t), PROT_READ | PROT_WRITE,
			    MAP_SHARED, fd, 0) : MAP_FAILED;
			close(fd);
			if (p == MAP_FAILED) {
				unlink(shm_path);
				break;
			}
			hp_stats_t *page = p;
			uint64_t ticks = start_ticks();
			memcpy(page, &local, sizeof local);
			page->magic = 0;          /* valid once all is there */
			page->pid = getpid();
			page->start_ticks = ticks;
			__atomic_store_n(&page->magic, HP_STATS_MAGIC,
			    __ATOMIC_RELEASE);
			shm_pid = getpid();
			shm = page;
			return;
		}
		/* A file for this pid already: left by an earlier process
		 * with the same pid, or by this one before an exec. Ours to
		 * take over only if it is a plain file of ours. */
		struct stat st;
		if (errno != EEXIST || lstat(shm_path, &st) != 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
		    unlink(shm_path) != 0)
			break;
	}
	hp_warn_once(&warned_file, "could not create %s (errno %d); live "
	    "counters are off", shm_path, errno);
}

static void arena_stat(unsigned ind, const char *what, uint64_t *v) {
	char name[96];
	size_t sz = sizeof *v;
	snprintf(name, sizeof name, "stats.arenas.%u.%s", ind, what);
	uint64_t x = 0;
	if (hp_je_mallctl(name, &x, &sz, NULL, 0) == 0)
		*v += x;
}

/* Live bytes and counts of an arena (or 4096: all of them). */
static void je_counts(unsigned ind, hp_arena_stats_t *a) {
	arena_stat(ind, "small.allocated", &a->live_bytes);
	arena_stat(ind, "large.allocated", &a->live_bytes);
	arena_stat(ind, "small.nmalloc", &a->nmalloc);
	arena_stat(ind, "large.nmalloc", &a->nmalloc);
	arena_stat(ind, "small.ndalloc", &a->ndalloc);
	arena_stat(ind, "large.ndalloc", &a->ndalloc);
	arena_stat(ind, "mapped", &a->mapped_bytes);
	arena_stat(ind, "resident", &a->resident_bytes);
	arena_stat(ind, "base", &a->metadata_bytes);
}

static uint64_t limit_of(const hp_arena_stats_t *huge) {
	return hp_conf.strand_pct ? huge->resident_bytes / 100 *
	    hp_conf.strand_limit : hp_conf.strand_limit;
}

static void collect(hp_stats_t *st) {
	memset(st->arena, 0, sizeof st->arena);
	st->narenas = 2;
	strcpy(st->name[0], "small");
	strcpy(st->name[1], "huge0");
	hp_arena_stats_t *small = &st->arena[0], *huge = &st->arena[1], all = {0};
	uint64_t epoch = 1;
	size_t sz = sizeof epoch;
	hp_je_mallctl("epoch", &epoch, &sz, &epoch, sz);
	je_counts(4096, &all);
	if (hp_threshold != SIZE_MAX && hp_huge_arena() != HP_NO_ARENA)
		je_counts(hp_huge_arena(), huge);
	/* Two reads of jemalloc's stats: another thread's "epoch" between
	 * them could make a difference negative; clamp it. */
#define MINUS(f) small->f = all.f > huge->f ? all.f - huge->f : 0
	MINUS(live_bytes);
	MINUS(nmalloc);
	MINUS(ndalloc);
	MINUS(mapped_bytes);
	MINUS(resident_bytes);
	MINUS(metadata_bytes);
#undef MINUS
	small->small_page_bytes = small->mapped_bytes;
	/* The huge class's memory, from its page states. */
	huge->mapped_bytes = huge->resident_bytes = 0;
	hp_region_scan(huge);
	huge->fallback_pool_empty = hp_fallbacks.pool_empty;
	huge->fallback_thp_off = hp_fallbacks.thp_off;
	huge->fallback_mmap_failed = hp_fallbacks.mmap_failed;
	st->strand_limit_bytes = limit_of(huge);
	/* Written under the site lock (placed* atomically); read without it:
	 * each word is whole, and one refresh late at worst. */
	memcpy(&st->lifetime, (const void *)&hp_lifetime_counts,
	    sizeof st->lifetime);
	memcpy(&st->descriptors, (const void *)&hp_edata_counts,
	    sizeof st->descriptors);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	st->updated_ns = (uint64_t)ts.tv_sec * 1000000000ull +
	    (uint64_t)ts.tv_nsec;
}

static void publish(void) {
	if (shm == NULL || shm_pid != getpid())
		return;
	__atomic_fetch_add(&shm->seq, 1, __ATOMIC_RELAXED);     /* odd */
	__atomic_thread_fence(__ATOMIC_RELEASE);   /* before the data below */
	shm->narenas = local.narenas;
	shm->updated_ns = local.updated_ns;
	shm->strand_limit_bytes = local.strand_limit_bytes;
	memcpy(shm->name, local.name, sizeof local.name);
	memcpy(shm->arena, local.arena, sizeof local.arena);
	shm->lifetime = local.lifetime;
	shm->descriptors = local.descriptors;
	__atomic_fetch_add(&shm->seq, 1, __ATOMIC_RELEASE);     /* even */
}

void hp_stats_refresh(bool enforce) {
	pthread_mutex_lock(&refresh_lock);
	collect(&local);
	/* strand_limit: split the emptiest huge pages, then count again. A
	 * share p of resident bytes R, with S stranded now: splitting frees
	 * exactly the stranded bytes it removes, so S' <= p (R - S + S')
	 * holds once S' <= p / (1 - p) (R - S). */
	const hp_arena_stats_t *h = &local.arena[1];
	if (enforce && h->stranded_bytes > local.strand_limit_bytes) {
		uint64_t target = hp_conf.strand_limit;
		if (hp_conf.strand_pct && hp_conf.strand_limit < 100)
			target = (h->resident_bytes - h->stranded_bytes) /
			    (100 - hp_conf.strand_limit) * hp_conf.strand_limit;
		hp_region_enforce(target);
		collect(&local);
	}
	publish();
	pthread_mutex_unlock(&refresh_lock);
}

static void *maintain(void *arg) {
	(void)arg;
	char decay[64];
	snprintf(decay, sizeof decay, "arena.%u.decay", hp_huge_arena());
	for (;;) {
		struct timespec t = {REFRESH_NS / 1000000000L, REFRESH_NS % 1000000000L};
		nanosleep(&t, NULL);
		/* Purge what the decay curve says is due, so that free pages
		 * go back at this pace whatever jemalloc's own thread does. */
		hp_je_mallctl(decay, NULL, NULL, NULL, 0);
		hp_edata_trim();
		hp_stats_refresh(true);
	}
	return NULL;
}

/* With the huge class's first allocation (see huge.c). */
void hp_stats_start_thread(void) {
	if (__atomic_exchange_n(&thread_on, true, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&refresh_lock);
	if (shm == NULL)
		open_file();
	pthread_mutex_unlock(&refresh_lock);
	hp_stats_refresh(false);
	pthread_t t;
	pthread_attr_t attr;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);   /* no signal of the host's */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, maintain, NULL) != 0)
		hp_log("could not start the maintenance thread; counters are "
		    "refreshed only on malloc_trim and at exit");
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* At start-up: the header. */
void hp_stats_init(void) {
	local.magic = HP_STATS_MAGIC;
	local.version = HP_STATS_VERSION;
	local.pid = getpid();
	hp_conf_describe(&hp_conf, local.policy, sizeof local.policy);
	collect(&local);
}

/* In a fork child: the parent's page is not ours to write; the child
 * gets a file and a thread of its own with its own huge class. */
void hp_stats_atfork_child(void) {
	pthread_mutex_init(&refresh_lock, NULL);
	thread_on = false;
	if (shm != NULL)
		munmap(shm, sizeof *shm);
	shm = NULL;
	local.pid = getpid();
}

static void to_fd(void *ctx, const char *s, size_t n) {
	int fd = *(int *)ctx;
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* At exit: print if asked, and remove the file. */
__attribute__((destructor)) static void hp_stats_exit(void) {
	if (hp_threshold == 0)          /* never started */
		return;
	hp_stats_refresh(false);
	if (hp_conf.stats_print) {
		int fd = STDERR_FILENO;
		if (hp_conf.stats_file[0] != '\0')
			fd = open(hp_conf.stats_file, O_WRONLY | O_CREAT | O_TRUNC |
			    O_CLOEXEC, 0644);
		if (fd < 0) {
			hp_log("could not open stats_file %s (errno %d)",
			    hp_conf.stats_file, errno);
		} else {
			hp_stats_meta_t m = {true, 0};
			hp_stats_format(&local, &m, (hp_format_t)hp_conf.stats_format,
			    to_fd, &fd);
			if (fd != STDERR_FILENO)
				close(fd);
		}
	}
	if (shm != NULL && shm_pid == getpid()) {
		unlink(shm_path);
		shm = NULL;
	}
}
