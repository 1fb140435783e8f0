/*
 * The counters: collected from jemalloc's per-arena stats and from the
 * huge class's page states, and published in a shared page that
 * "hugepreload stat" reads from outside. The page is a memfd, mapped and
 * its descriptor closed at once: the process holds no descriptor for it,
 * nothing of it is on any file system, and it goes with the process
 * however the process ends. The command finds it by its name in
 * /proc/PID/maps and reads it through /proc/PID/mem, under the kernel's
 * own access check (the process's user, or root). MADV_DONTFORK keeps it
 * from a fork child, which makes its own.
 *
 * Nothing here runs on a fast path: the maintenance thread (maint.c)
 * refreshes the page every maintain_ms and applies strand_limit;
 * malloc_trim and exit refresh it too. Page and thread come with the
 * first huge-class allocation or a program's second thread (route.c),
 * so the many short single-threaded processes that never use the huge
 * class make neither; a program's own advised mappings
 * (mmap.c) make the page alone and publish their counters as they
 * happen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "core/core.h"
#include "base/lock.h"
#include "je/je.h"
#include "base/stats_print.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U         /* Linux 6.3 */
#endif


HP_STATIC_ASSERT(sizeof(hp_stats_t) <= 4096,
    "the stats page is one 4 KiB page");

static hp_stats_t *shm;                /* the shared page, or NULL */
static pid_t shm_pid;                  /* the process that mapped it */
static hp_stats_t local;               /* the last refresh */
static hp_lock_t refresh_lock = HP_LOCK_INIT(HP_RANK_REFRESH);
static int warned_page;
static uint64_t start_ns;              /* CLOCK_REALTIME at start, or fork */

static void open_page(void) {
	if (!hp_conf.stats_live)
		return;
	/* Sealed against exec where the kernel knows how (else it logs a
	 * warning for every memfd made without it). */
	int fd = hp_os_memfd_create(HP_STATS_NAME, MFD_CLOEXEC | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)
		fd = hp_os_memfd_create(HP_STATS_NAME, MFD_CLOEXEC);
	fd = hp_os_fd_high(fd);
	void *p = MAP_FAILED;
	if (fd >= 0 && hp_os_ftruncate(fd, HP_PAGE) == 0)
		p = hp_os_mmap(NULL, HP_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = errno;
	if (fd >= 0)
		hp_os_close(fd);
	if (p == MAP_FAILED) {
		hp_warn_once(&warned_page, "could not make the live counters' "
		    "page (%s); hugepreload stat cannot read this process",
		    hp_strerror(err));
		return;
	}
	hp_os_madvise(p, HP_PAGE, MADV_DONTFORK);
	hp_stats_t *page = p;
	memcpy(page, &local, sizeof local);
	page->magic = 0;                   /* valid once all is there */
	page->pid = getpid();
	__atomic_store_n(&page->magic, HP_STATS_MAGIC, __ATOMIC_RELEASE);
	shm_pid = getpid();
	shm = page;
}

/* The figures of the arenas the program made itself ("arenas.create"),
 * which it may destroy at any moment: through mallctl, whose lock
 * jemalloc destroys an arena under. Its ctl exists already (the program
 * made them with it). */
static void program_arena(unsigned ind, uint64_t *v) {
	static const char *const what[] = {
		"small.allocated", "large.allocated", "small.nmalloc",
		"large.nmalloc", "small.ndalloc", "large.ndalloc", "mapped",
		"pactive", "pdirty", "resident",
	};
	static const unsigned to[] = {0, 0, 1, 1, 2, 2, 3, 4, 5, 6};
	for (unsigned k = 0; k < sizeof what / sizeof *what; k++) {
		char name[96];
		uint64_t x = 0;
		size_t sz = sizeof x;
		hp_fmt(name, sizeof name, "stats.arenas.%u.%s", ind, what[k]);
		if (hp_je_mallctl(name, &x, &sz, NULL, 0) == 0)
			v[to[k]] += x;
	}
}

/* Arena ind's figures, or (4096) every arena's summed, into v: live
 * bytes, nmalloc, ndalloc, mapped bytes, pactive, pdirty, resident bytes.
 * jemalloc's automatic arenas and the library's own are read without
 * mallctl (je/jectl.c): ctl's copy of every arena's statistics is not
 * made on the program's behalf. Under refresh_lock. */
static void je_figures(unsigned ind, uint64_t v[7]) {
	hp_lock_assert_held(&refresh_lock);
	unsigned base = hp_je_manual_base(), n = hp_je_narenas();
	bool epoch = false, counted = false;
	for (unsigned i = 0; i < n; i++) {
		if (ind != 4096 && i != ind)
			continue;
		if (i < base || hp_arena_is_own(i)) {
			hp_je_counts(i, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
			    &v[6]);
			counted = true;
			continue;
		}
		if (!epoch) {
			uint64_t e = 1;
			size_t sz = sizeof e;
			hp_je_mallctl("epoch", &e, &sz, &e, sz);
			epoch = true;
		}
		program_arena(i, v);
	}
	/* The buffer hp_je_counts merged in goes back (je/jectl.c). */
	if (counted)
		hp_je_counts_release();
}

/* Live bytes and counts of an arena (or 4096: all of them), and its
 * resident bytes as jemalloc counts them: the pages it holds (active
 * extents and its cache of dirty ones) and its base's resident pages,
 * which is its resident figure less those pages (arena_stats_merge). */
static void je_counts(unsigned ind, hp_arena_stats_t *a) {
	uint64_t v[7] = {0};
	je_figures(ind, v);
	a->live_bytes += v[0];
	a->nmalloc += v[1];
	a->ndalloc += v[2];
	a->mapped_bytes += v[3];
	a->in_use_bytes = (v[4] + v[5]) * HP_PAGE;
	/* Arenas read one after another: clamped all the same. */
	a->metadata_bytes = v[6] > a->in_use_bytes ?
	    v[6] - a->in_use_bytes : 0;
	a->resident_bytes = a->in_use_bytes + a->metadata_bytes;
	hp_assert(a->resident_bytes >= v[6]);
}

/* The heap as jemalloc counts it now, for the allocator extension APIs
 * (api/mallinfo.c, which starts the library first): both classes, read
 * without mallctl (je/jectl.c). */
void hp_stats_heap_totals(hp_heap_t *h) {
	memset(h, 0, sizeof *h);
	uint64_t all[7] = {0}, hg[7] = {0};
	hp_lock(&refresh_lock);
	je_figures(4096, all);
	unsigned ind = hp_huge_arena();
	if (hp_threshold != SIZE_MAX && ind != HP_NO_ARENA)
		je_figures(ind, hg);
	hp_unlock(&refresh_lock);
	uint64_t small_live = all[0], huge_live = hg[0], nmalloc = hg[1],
	    ndalloc = hg[2], all_pactive = all[4], huge_pactive = hg[4],
	    all_mapped = all[3], huge_mapped = hg[3];
	/* Merged "all" includes the huge arena: take it out, clamped (the
	 * two reads are not one snapshot). */
#define LESS(a, b) ((a) > (b) ? (a) - (b) : 0)
	h->small_live = LESS(small_live, huge_live);
	h->small_active = LESS(all_pactive, huge_pactive) * HP_PAGE;
	if (h->small_active < h->small_live)
		h->small_active = h->small_live;
	h->small_mapped = LESS(all_mapped, huge_mapped);
	h->huge_live = huge_live;
	h->huge_count = LESS(nmalloc, ndalloc);
	h->huge_active = huge_pactive * HP_PAGE;
	h->huge_mapped = huge_mapped;
	/* The long-lived class's objects are on huge pages too. */
	hp_arena_stats_t ll = {0};
	if (hp_ll_scan(&ll)) {
		h->huge_live += ll.live_bytes;
		h->huge_count += LESS(ll.nmalloc, ll.ndalloc);
		h->huge_active += ll.resident_bytes;
		h->huge_mapped += ll.mapped_bytes;
	}
#undef LESS
}

static uint64_t limit_of(const hp_arena_stats_t *huge) {
	return hp_conf.strand_pct ? huge->resident_bytes / 100 *
	    hp_conf.strand_limit : hp_conf.strand_limit;
}

static void collect(hp_stats_t *st) {
	memset(st->arena, 0, sizeof st->arena);
	st->narenas = 2;
	hp_arena_stats_t *small = &st->arena[0], *huge = &st->arena[1], all = {0};
	je_counts(4096, &all);
	if (hp_threshold != SIZE_MAX && hp_huge_arena() != HP_NO_ARENA)
		je_counts(hp_huge_arena(), huge);
	/* Two reads of jemalloc's stats, the program running between them:
	 * a difference could be negative; clamp it. */
#define MINUS(f) small->f = all.f > huge->f ? all.f - huge->f : 0
	MINUS(live_bytes);
	MINUS(nmalloc);
	MINUS(ndalloc);
	MINUS(mapped_bytes);
	MINUS(in_use_bytes);
	MINUS(metadata_bytes);
#undef MINUS
	small->resident_bytes = small->in_use_bytes + small->metadata_bytes;
	small->small_page_bytes = small->mapped_bytes;
	/* The kernel's figures for jemalloc's own mappings (jemap.c), which
	 * hold the small class and every arena's metadata. */
	uint64_t kres, kmeta, khuge;
	unsigned nr = 0;
	st->small_kernel = hp_jemap_resident(&kres, &kmeta, &khuge,
	    st->small_ranges, HP_STATS_RANGES, &nr);
	st->small_nranges = nr;
	if (st->small_kernel) {
		small->resident_bytes = kres;
		small->metadata_bytes = kmeta;
		small->in_use_bytes = kres - kmeta;
		huge->metadata_bytes = 0;
		/* The ranges catch-up collapsed (catchup.c). */
		small->resident_huge_bytes = khuge;
		small->small_page_bytes = small->mapped_bytes > khuge ?
		    small->mapped_bytes - khuge : 0;
	}
	/* The huge class's memory: its page states, and what the kernel
	 * holds of it (resident.c); its metadata is on jemalloc's pages. If
	 * the kernel cannot be asked, the pages jemalloc holds stand for
	 * resident. */
	uint64_t meta = huge->metadata_bytes;
	huge->mapped_bytes = huge->resident_bytes = 0;
	hp_region_scan(huge);
	/* The pages' states: stranded parts are resident ones. */
	hp_assert(huge->stranded_bytes <= huge->resident_bytes &&
	    huge->resident_bytes <= huge->mapped_bytes);
	huge->in_use_bytes = huge->resident_bytes - huge->stranded_bytes;
	huge->free_resident_bytes = 0;
	hp_resident_scan(huge);
	/* Each resident part one of in use, stranded, free (resident.c). */
	hp_assert(huge->resident_bytes == huge->in_use_bytes +
	    huge->stranded_bytes + huge->free_resident_bytes);
	huge->resident_bytes += meta;
	huge->fallback_pool_empty = hp_backing_fallbacks.pool_empty;
	huge->fallback_thp_off = hp_backing_fallbacks.thp_off;
	huge->fallback_mmap_failed = hp_backing_fallbacks.mmap_failed;
	huge->hooks_refused = hp_backing_fallbacks.foreign;
	st->strand_limit_bytes = limit_of(huge);
	st->region_base = hp_region.base;
	st->region_size = hp_region.size;
	/* The long-lived class, once it is in use. */
	if (hp_ll_scan(&st->arena[2])) {
		st->narenas = 3;
		st->ll_base = hp_ll_base;
		st->ll_size = hp_ll_size;
	}
	/* Written under the site lock (placed* in tally.c's shards); read
	 * without it: each word is whole, and one refresh late at worst. */
	memcpy(&st->lifetime, (const void *)&hp_site_counts,
	    sizeof st->lifetime);
	st->lifetime.placed = hp_tally_sum(HP_TALLY_PLACED);
	st->lifetime.placed_bytes = hp_tally_sum(HP_TALLY_PLACED_BYTES);
	memcpy(&st->descriptors, (const void *)&hp_edata_counts,
	    sizeof st->descriptors);
	memcpy(&st->mmap, (const void *)&hp_mmap_counts, sizeof st->mmap);
	/* The small class's and the long-lived class's totals add up. */
	hp_assert(small->resident_bytes == small->in_use_bytes +
	    small->metadata_bytes && st->narenas <= HP_STATS_ARENAS &&
	    (st->narenas < 3 || st->arena[2].resident_bytes ==
	    st->arena[2].in_use_bytes + st->arena[2].stranded_bytes +
	    st->arena[2].metadata_bytes));
	hp_stats_name_arenas(st);            /* by slot: no name twice */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	st->updated_ns = (uint64_t)ts.tv_sec * 1000000000ull +
	    (uint64_t)ts.tv_nsec;
}

static void publish(void) {
	hp_assert(local.magic == HP_STATS_MAGIC &&       /* hp_stats_init's */
	    local.version == HP_STATS_VERSION && local.narenas <= HP_STATS_ARENAS);
	if (shm == NULL || shm_pid != getpid())
		return;
#ifdef HP_DEBUG
	char why[64];
	hp_assert(hp_stats_names_ok(&local, why, sizeof why));
#endif
	__atomic_fetch_add(&shm->seq, 1, __ATOMIC_RELAXED);     /* odd */
	__atomic_thread_fence(__ATOMIC_RELEASE);   /* before the data below */
	shm->narenas = local.narenas;
	shm->updated_ns = local.updated_ns;
	shm->strand_limit_bytes = local.strand_limit_bytes;
	shm->region_base = local.region_base;
	shm->region_size = local.region_size;
	shm->ll_base = local.ll_base;
	shm->ll_size = local.ll_size;
	shm->small_nranges = local.small_nranges;
	shm->small_kernel = local.small_kernel;
	memcpy(shm->small_ranges, local.small_ranges,
	    sizeof local.small_ranges);
	memcpy(shm->name, local.name, sizeof local.name);
	memcpy(shm->arena, local.arena, sizeof local.arena);
	shm->lifetime = local.lifetime;
	shm->descriptors = local.descriptors;
	shm->maintenance = local.maintenance;
	shm->mmap = local.mmap;
	__atomic_fetch_add(&shm->seq, 1, __ATOMIC_RELEASE);     /* even */
}

/* strand_limit: what the stranded bytes of a class must come down to. A
 * share p of resident bytes R, with S stranded now: splitting frees
 * exactly the stranded bytes it removes, so S' <= p (R - S + S') holds
 * once S' <= p / (1 - p) (R - S). */
static uint64_t strand_target(const hp_arena_stats_t *a) {
	if (hp_conf.strand_pct && hp_conf.strand_limit < 100)
		return (a->resident_bytes - a->stranded_bytes) /
		    (100 - hp_conf.strand_limit) * hp_conf.strand_limit;
	return hp_conf.strand_limit;
}

/* Lock held. */
static void refresh(bool enforce) {
	hp_lock_assert_held(&refresh_lock);
	collect(&local);
	/* Split the emptiest huge pages, then count again: the huge class,
	 * then the long-lived class over its own resident bytes. */
	const hp_arena_stats_t *h = &local.arena[1];
	if (enforce && h->stranded_bytes > local.strand_limit_bytes) {
		hp_region_enforce(strand_target(h));
		collect(&local);
	}
	const hp_arena_stats_t *l = &local.arena[2];
	if (enforce && local.narenas > 2 && l->stranded_bytes > limit_of(l)) {
		hp_llpages_enforce(strand_target(l));
		collect(&local);
	}
	publish();
}

void hp_stats_refresh(bool enforce) {
	hp_lock(&refresh_lock);
	refresh(enforce);
	hp_unlock(&refresh_lock);
}

/* The heap's resident bytes as of the last refresh: both classes (the
 * kernel's figures) and the extent descriptors' pages (mallctl's
 * "stats.resident", jeapi.c). */
uint64_t hp_stats_heap_resident(void) {
	hp_lock(&refresh_lock);
	uint64_t r = local.arena[0].resident_bytes +
	    local.arena[1].resident_bytes + local.arena[2].resident_bytes +
	    local.descriptors.resident_bytes;
	hp_unlock(&refresh_lock);
	return r;
}

/* The long-lived class's resident bytes as of the last refresh. */
uint64_t hp_stats_ll_resident(void) {
	hp_lock(&refresh_lock);
	/* The class's pages, its table of block sizes (metadata) left out,
	 * as jemalloc's "stats.active" leaves out its own. */
	uint64_t r = local.narenas > 2 ? local.arena[2].resident_bytes -
	    local.arena[2].metadata_bytes : 0;
	hp_unlock(&refresh_lock);
	return r;
}

/* With the maintenance thread's start: the page, and a first refresh. */
void hp_stats_open(void) {
	hp_lock(&refresh_lock);
	if (shm == NULL)
		open_page();
	hp_unlock(&refresh_lock);
	hp_stats_refresh(false);
}

/* A maintenance pass ended; ns: how long it held the region's lock.
 * Read by the next refresh. */
void hp_stats_maint_pass(uint64_t ns) {
	hp_lock(&refresh_lock);
	hp_maint_counts_t *m = &local.maintenance;
	m->passes++;
	m->region_lock_ns += ns;
	if (ns > m->region_lock_max_ns)
		m->region_lock_max_ns = ns;
	/* The longest pass is one of them (a fork child starts all three
	 * again). */
	hp_assert(m->region_lock_max_ns <= m->region_lock_ns);
	hp_unlock(&refresh_lock);
}

/* The program advised a mapping of its own (mmap.c): its counters are
 * published at once, the page made on the first. No thread: a process
 * that only maps memory stays single-threaded (huge.c says why). */
void hp_stats_mmap_changed(void) {
	hp_lock(&refresh_lock);
	hp_assert(local.magic == HP_STATS_MAGIC);    /* after hp_stats_init */
	if (shm == NULL)
		open_page();
	memcpy(&local.mmap, (const void *)&hp_mmap_counts, sizeof local.mmap);
	publish();
	hp_unlock(&refresh_lock);
}

/* At start-up: the header. */
void hp_stats_init(void) {
	hp_assert(local.magic == 0);             /* once per process */
	local.magic = HP_STATS_MAGIC;
	local.version = HP_STATS_VERSION;
	local.pid = getpid();
	local.maintenance.interval_ms = (uint64_t)hp_conf.maintain_ms;
	start_ns = hp_os_clock_ns(CLOCK_REALTIME);
	hp_conf_describe(&hp_conf, local.policy, sizeof local.policy);
	hp_lock(&refresh_lock);
	collect(&local);
	hp_unlock(&refresh_lock);
}

/* In a fork child: the parent's page is not ours to write; the child
 * gets a file and a thread of its own with its own huge class. */
void hp_stats_atfork_child(void) {
	hp_lock_reinit(&refresh_lock);
	shm = NULL;          /* MADV_DONTFORK: not mapped in the child */
	local.pid = getpid();
	start_ns = hp_os_clock_ns(CLOCK_REALTIME);
	local.maintenance.passes = local.maintenance.region_lock_ns = 0;
	local.maintenance.region_lock_max_ns = 0;
}

/* At exit: the last refresh into *out. False, with nothing done, if
 * exit came with this thread holding one of the allocator's locks (exit
 * from a signal handler in the middle of an allocation: the refresh asks
 * jemalloc, which takes its locks, and one could be that thread's own),
 * or another thread kept the refresh lock over a second (lock.h). */
uint64_t hp_stats_started_ns(void) {
	return start_ns;
}

bool hp_stats_last(hp_stats_t *out) {
	if (!hp_lock_at_exit(&refresh_lock))
		return false;
	refresh(false);
	*out = local;
	hp_unlock(&refresh_lock);
	return true;
}
