/* hugepreload: internal prototypes shared between the library's files. */
#ifndef HP_INTERNAL_H
#define HP_INTERNAL_H

#include <stdarg.h>
#include <sys/types.h>
#include "types.h"

/* Nothing declared here leaves the library. */
#pragma GCC visibility push(hidden)

#define hp_likely(x)    __builtin_expect(!!(x), 1)
#define hp_unlikely(x)  __builtin_expect(!!(x), 0)
#define HP_EXPORT       __attribute__((visibility("default")))
#define HP_TLS          __thread __attribute__((tls_model("initial-exec")))

/* Invariants. hp_assert is checked in debug builds (make check-debug,
 * -DHP_DEBUG) and costs nothing otherwise; layouts are checked at compile
 * time. */
#ifdef HP_DEBUG
#define hp_assert(c) (hp_likely(c) ? (void)0 : \
    hp_assert_fail(#c, __FILE__, __LINE__, __func__))
#else
#define hp_assert(c) ((void)0)
#endif
#define HP_STATIC_ASSERT(c, why) _Static_assert(c, why)
void hp_assert_fail(const char *expr, const char *file, int line,
    const char *func) __attribute__((noreturn, cold));

/* Set bits of a page bitmap's word. Debian builds for the x86-64
 * baseline, which has no POPCNT, and gcc then calls libgcc's
 * __popcountdi2 (a tenth of a learn run's instructions at jemalloc's
 * slab commits, region.c); the instruction is used when start-up found
 * it (os.c). Without it, the words that are most often all clear or all
 * set take no count. The asm is volatile so that gcc never moves it
 * ahead of its test, onto a CPU without the instruction. */
extern bool hp_have_popcnt;
static inline unsigned hp_popcount64(uint64_t x) {
#ifdef __POPCNT__
	return (unsigned)__builtin_popcountll(x);
#else
	if (hp_likely(hp_have_popcnt)) {
		uint64_t r;
		__asm__ volatile("popcnt %1, %0" : "=r"(r) : "rm"(x) : "cc");
		return (unsigned)r;
	}
	if (x == 0 || x == ~(uint64_t)0)
		return x ? 64 : 0;
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (unsigned)((x * 0x0101010101010101ull) >> 56);
#endif
}

/* init.c: the policy in force and the start-up sequence. */
extern hp_conf_t hp_conf;
/* Requests >= hp_threshold take the slow path; 0 until start-up is done,
 * so the size check on the fast path is also the "initialised?" check. */
extern size_t hp_threshold;
bool hp_init(void);

/* conf.c: HUGEPRELOAD_CONF parsing. */
typedef void (*hp_conf_report_t)(void *ctx, const char *msg);
void hp_conf_defaults(hp_conf_t *c);
void hp_conf_parse(hp_conf_t *c, const char *s, hp_conf_report_t rep, void *ctx);
typedef void (*hp_conf_item_t)(void *ctx, const char *k, size_t klen,
    const char *v, size_t vlen);
void hp_conf_each(const char *s, hp_conf_item_t item, void (*bad)(void *ctx,
    const char *it, size_t len), void *ctx);
bool hp_parse_size(const char *s, size_t len, size_t *out);
/* path with "%p" made the process id, into out (n bytes). */
void hp_conf_path(const char *path, char *out, size_t n);
int hp_conf_describe(const hp_conf_t *c, char *buf, size_t n);
/* One HUGEPRELOAD_CONF key (conf.c): the table that drives the parser,
 * the defaults, --help, hugepreload(7) and docs/reference.md. */
typedef struct {
	const char *name;
	int kind;                /* conf.c's kind_t */
	size_t offset;           /* of its field in hp_conf_t */
	long long min, max;      /* sizes and numbers: the range */
	const char *const *words;/* words: the values, by index */
	const char *values;      /* the values, for people */
	const char *dflt;        /* the default, as a value */
	const char *shown;       /* the default, for people */
	const char *help;
} hp_option_t;
extern const hp_option_t hp_options[];   /* ends with a NULL name */

/* log.c: one-line messages on stderr, without allocating. */
void hp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hp_warn_once(int *flag, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The text of an error number, in English, without allocating. */
const char *hp_strerror(int err);

/* region.c: the huge-class reservation and its per-2 MiB page state. The
 * reservation also holds the sample zone (sample.c) after the region:
 * together they are the owned range, which free() tests first. */
extern hp_region_t hp_region;
extern uintptr_t hp_owned_base;         /* UINTPTR_MAX until reserved */
extern size_t hp_owned_size;
/* free()'s one compare. The reservation is made first thing at start-up,
 * top-down below what the loader mapped, so the program's heap, mapped
 * after it, lies below it: only the rare object above it (say, in a gap
 * between libraries) takes the exact test, hp_owned(). */
static inline bool hp_maybe_owned(const void *p) {
	return (uintptr_t)p >= hp_owned_base;
}
static inline bool hp_owned(const void *p) {
	return (uintptr_t)p - hp_owned_base < hp_owned_size;
}
bool hp_region_init(size_t want, bool with_zone, unsigned ll_share,
    uintptr_t *ll, size_t *ll_size, uintptr_t *zone, size_t *zone_size);
bool hp_region_owns(const void *addr, size_t len);
void *hp_region_alloc(size_t size, size_t align, bool commit);
void hp_region_release(void *addr, size_t len);
bool hp_region_reuse(void *addr, size_t len);
void hp_region_scan(hp_arena_stats_t *a);
/* A page's state as resident.c needs it. */
typedef struct {
	uint64_t held[HP_SUBWORDS];   /* 4 KiB parts jemalloc holds */
	uint16_t nheld;
	bool may_be_huge;             /* THP not split, or hugetlb */
} hp_page_view_t;
uintptr_t hp_region_mapped_end(void);
/* Views of the pages first + i, i each bit of pages (at most 64). */
void hp_region_view(uintptr_t first, uint64_t pages, hp_page_view_t *v);
/* resident.c: the huge class's resident parts as the kernel holds them,
 * into a's resident, in_use, stranded, free_resident and resident_huge
 * fields; false (a untouched) if the kernel could not be asked. */
bool hp_resident_scan(hp_arena_stats_t *a);
uint64_t hp_region_timing(bool on);
size_t hp_region_enforce(size_t limit);
void hp_region_prefork(void);
/* Fork copies these 2 MiB hugetlb pages outside the region too, when the
 * pool could not back both sides (the long-lived class's pool arena). */
void hp_region_fork_also(uintptr_t addr, size_t len);
void hp_region_postfork_parent(void);
void hp_region_postfork_child(void);
static inline bool hp_region_contains(const void *p) {
	return (uintptr_t)p - hp_region.base < hp_region.size;
}
/* The pure bitmap step, exposed for unit tests: marks [first, first+n)
 * subpages of *pg released; true when the page is empty and dirty, so it
 * should be given back. */
bool hp_hpage_release(hp_hpage_t *pg, unsigned first, unsigned n);
/* Marks them reused; sets bits in *zero for subpages that must be zeroed. */
void hp_hpage_reuse(hp_hpage_t *pg, unsigned first, unsigned n, uint64_t *zero);
/* Gives back the free 4 KiB parts of the page at hp that may still be
 * resident (MADV_DONTNEED) and marks them clean: those handed out since
 * it was last given back or, to split a THP page, every free part (it is
 * resident whole, parts never handed out included). With split, each run
 * is first
 * advised MADV_FREE: MADV_DONTNEED alone splits only the mapping of a THP
 * page, which then stays allocated whole on the kernel's deferred-split
 * queue until memory runs short (out of RSS and AnonHugePages, not back
 * in MemFree); MADV_FREE splits a large folio only partly in its range
 * (mm/madvise.c), so the parts go back at once. */
void hp_hpage_purge(uintptr_t hp, hp_hpage_t *pg, bool split);

/* os.c: the library's only door to the kernel: every system call it makes
 * on its own behalf (scripts/embed-jemalloc sends the embedded jemalloc's
 * there too; test exports::system_calls_only_in_os_c checks). Descriptors
 * are close-on-exec and at least 3 when these return. */
/* What the CPU has (hp_have_popcnt), once, first thing at start-up. */
void hp_os_probe_cpu(void);
/* The memory system calls, made directly (not through the library's own
 * exported mmap family); as the libc functions, -1 or MAP_FAILED and
 * errno on failure. */
void *hp_os_mmap(void *addr, size_t len, int prot, int flags, int fd,
    off_t off);
int hp_os_munmap(void *addr, size_t len);
void *hp_os_mremap(void *old, size_t old_len, size_t new_len, int flags,
    void *new_addr);
int hp_os_mprotect(void *addr, size_t len, int prot);
int hp_os_madvise(void *addr, size_t len, int advice);
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
/* How many 4 KiB pages of the 2 MiB at addr are resident, the shared
 * zero page left out (/proc/self/pagemap; mincore, which counts it, where
 * the kernel has no PAGEMAP_SCAN); 0 if it cannot tell. */
unsigned hp_os_huge_resident(uintptr_t addr);
/* The rest of the library's system calls, as libc's. */
struct stat;
ssize_t hp_os_read(int fd, void *buf, size_t n);
ssize_t hp_os_write(int fd, const void *buf, size_t n);
int hp_os_close(int fd);
ssize_t hp_os_readlink(const char *path, char *buf, size_t n);
int hp_os_fstat(int fd, struct stat *st);
int hp_os_rename(const char *from, const char *to);
int hp_os_unlink(const char *path);
int hp_os_linkat(int fromdir, const char *from, int todir, const char *to,
    int flags);
int hp_os_memfd_create(const char *name, unsigned flags);
int hp_os_ftruncate(int fd, off_t len);
int hp_os_flock(int fd, int op);
void *hp_os_sbrk(intptr_t increment);
unsigned hp_os_cpus(void);
int hp_fd_high(int fd);
int hp_open(const char *path, int flags, int mode);
/* open(2) and syscall(2) whose descriptors are treated as hp_open's. */
int hp_open_va(const char *path, int flags, ...);
void hp_va_longs(va_list ap, long a[6]);     /* six syscall arguments */
long hp_syscall_fds(long nr, const long a[6]);
/* Up to n - 1 bytes of a small file, NUL-terminated; -1 if unreadable. */
ssize_t hp_read_file(const char *path, char *buf, size_t n);
long hp_read_long(const char *path);     /* -1 if unreadable */
/* Whether the page at addr is this process's alone (pagemap's exclusive
 * bit, read from fd, /proc/self/pagemap; a page not present is shared
 * with no one): 1, 0, or -1 if unreadable. */
int hp_os_page_exclusive(int fd, uintptr_t addr);
/* len bytes of new anonymous memory at an align-aligned address (a power
 * of two), or NULL; flags are added to MAP_PRIVATE | MAP_ANONYMOUS. */
void *hp_map_aligned(size_t len, size_t align, int prot, int flags);
/* A PROT_NONE reservation of want bytes, align-aligned, halved until the
 * kernel grants it (ulimit -v, valgrind), down to min. Its size in *got;
 * NULL if not even min was granted. */
void *hp_reserve(size_t want, size_t min, size_t align, int flags,
    size_t *got);
/* The kernel's resident runs of [start, end), in address order, each on
 * huge pages or not; huge_ok says the range is huge-backed, for kernels
 * that cannot tell (mincore). False if nothing could be read. */
typedef void (*hp_resident_fn)(void *ctx, uintptr_t start, uintptr_t end,
    bool huge);
bool hp_os_resident(uintptr_t start, uintptr_t end, bool huge_ok,
    hp_resident_fn fn, void *ctx);

/* cgroup.c: the hugetlb cgroup limits that bind this process. Pages of
 * size page it may still reserve and fault, the least over its cgroup and
 * their ancestors (LONG_MAX if none is limited); why, if not NULL, names
 * the limit that binds. */
long hp_cgroup_room(size_t page, char *why, size_t n);
/* Finds the cgroup directories again (maintenance pass). */
void hp_cgroup_refresh(void);
/* For tests: read these files instead of /proc/self's; true if a limited
 * level was found. */
bool hp_cgroup_use(const char *cgroup_file, const char *mountinfo_file);
void hp_cgroup_atfork_child(void);

/* backing.c: how 2 MiB pages are mapped and given back. */
typedef struct {
	char thp_enabled[16];    /* always | madvise | never | absent */
	char thp_defrag[16];
	long pool_total, pool_avail;   /* of the configured hugetlb size */
} hp_sys_t;
void hp_backing_probe(hp_sys_t *s);
void hp_backing_poll(void);
const char *hp_backing_describe(const hp_sys_t *s, char *buf, size_t n);
long hp_backing_pool_avail(size_t page);
/* The pool's available pages, as far as the hugetlb cgroup lets this
 * process have them. */
long hp_backing_room(size_t page);
/* Maps a prefix of the PROT_NONE run [addr, addr + len) with the best
 * backing available; returns its length (0 on failure) and its type. */
size_t hp_backing_map(uintptr_t addr, size_t len, hp_map_t *type);
bool hp_backing_map_gib(uintptr_t addr);
void hp_backing_collapse(uintptr_t addr, size_t len);
bool hp_backing_zap(uintptr_t addr, size_t len, hp_map_t type);
void *hp_backing_copy(uintptr_t addr, size_t len);
bool hp_backing_thp_usable(void);
/* The long-lived class's arenas: pool pages mapped at addr (a multiple of
 * unit, at most max; 0 for none), and the advice for the rest. */
size_t hp_backing_map_pool(uintptr_t addr, size_t max, size_t unit);
bool hp_backing_advise(uintptr_t addr, size_t len);

/* Fallbacks by cause, counted where they happen (backing.c, huge.c):
 * regions that wanted the pool and found it empty, that wanted THP with
 * THP off, and requests the huge class could not map at all. */
typedef struct {
	uint64_t pool_empty, thp_off, mmap_failed;
	uint64_t foreign;        /* hook calls with a range not ours: refused */
} hp_fallbacks_t;
extern hp_fallbacks_t hp_fallbacks;

/* small.c: the small class, jemalloc's automatic arenas on 4 KiB pages. */
int hp_purge_all(void);

/* jeconf.c: jemalloc's options. The string jemalloc reads last (after the
 * user's MALLOC_CONF), with one line for each user setting it overrides. */
const char *hp_jeconf(const hp_conf_t *c);
/* MALLOC_CONF said background_thread:false: jemalloc's threads stay off. */
bool hp_jeconf_background_off(void);

/* huge.c: the huge class, jemalloc arenas over the reservation. */
bool hp_huge_init(const hp_conf_t *c);
void *hp_huge_alloc(size_t size, size_t align, bool zero);
void *hp_huge_realloc(void *p, size_t size);
void hp_huge_atfork_child(void);
#define HP_NO_ARENA (~0u)
/* jemalloc 5.3's arena indices (MALLOCX_ARENA_LIMIT: MALLOCX_ARENA keeps 12
 * bits): its automatic arenas take the lowest narenas of them, its
 * oversize arena the next, arenas.create the rest in order. The library
 * makes HP_OWN_ARENAS of them: the huge class's and the sample zone's. */
#define HP_ARENA_INDICES 4095u
#define HP_OWN_ARENAS 2u
/* The huge arena's index; HP_NO_ARENA until the first huge allocation. */
unsigned hp_huge_arena(void);
/* A small object of a promoted site, on huge pages (a per-thread tcache);
 * NULL if the huge class cannot take it. */
void *hp_huge_small(size_t size, bool zero);
/* An arena's decay: dirty_ms, no muzzy state; 0 or jemalloc's error. */
struct extent_hooks_s;
int hp_arena_decay(unsigned ind, long dirty_ms);
/* A new arena over these hooks, its metadata off them; HP_NO_ARENA if
 * jemalloc refuses, with the reason in *why. */
unsigned hp_arena_create(struct extent_hooks_s *hooks, const char **why);
/* Starts the huge class's threads (the maintenance thread), for a class
 * that uses huge pages without the huge arena. */
void hp_huge_start_threads(void);
/* Frees an object of the region (free()'s owned-range path). */
void hp_huge_free(void *p);

/* stats.c: counters, the shared stats page, the maintenance thread. */
void hp_stats_init(void);
void hp_stats_refresh(bool enforce);
/* The heap's resident bytes, both classes and the descriptors, as of the
 * last refresh (mallctl's "stats.resident"). */
uint64_t hp_stats_heap_resident(void);
uint64_t hp_stats_ll_resident(void);
void hp_stats_start_thread(void);
void hp_stats_mmap_changed(void);   /* mmap.c advised a mapping */
void hp_stats_atfork_child(void);
void hp_heap_totals(hp_heap_t *h);

/* tally.c: the promoted path's counters, in shards summed when read, one
 * per thread while there are no more threads than shards. */
typedef enum {
	HP_TALLY_PLACED,             /* hp_lifetime_counts_t's placed */
	HP_TALLY_PLACED_BYTES,
	HP_TALLY_LL_LIVE,            /* the long-lived class's live_bytes */
	HP_TALLY_LL_NMALLOC,
	HP_TALLY_LL_NDALLOC,
	HP_TALLY_N
} hp_tally_t;
#define HP_SHARDS 64
typedef struct {
	uint64_t v[HP_TALLY_N];
} __attribute__((aligned(128))) hp_shard_t;
HP_STATIC_ASSERT(sizeof(hp_shard_t) == 128,
    "a shard is two cache lines: the pair the L2 prefetcher fetches");
extern hp_shard_t hp_shards[HP_SHARDS];
extern HP_TLS hp_shard_t *hp_my_shard;
hp_shard_t *hp_shard_take(void);
static inline hp_shard_t *hp_shard(void) {
	hp_shard_t *s = hp_my_shard;
	return hp_likely(s != NULL) ? s : hp_shard_take();
}
/* Adds d (a difference, modulo 2^64) to counter t of shard s. */
static inline void hp_tally(hp_shard_t *s, hp_tally_t t, uint64_t d) {
	__atomic_fetch_add(&s->v[t], d, __ATOMIC_RELAXED);
}
uint64_t hp_tally_sum(hp_tally_t t);

/* site.c: allocation sites, keys and lifetime decisions. */
extern hp_site_t *hp_sites;           /* HP_SITES, from hp_site_init */
extern uintptr_t *hp_key_tab;         /* HP_KEYS */
extern uint8_t *hp_key_on;            /* HP_KEYS */
/* Under the site lock, but for the caught_up counters (catchup.c). */
extern hp_lifetime_counts_t hp_lifetime_counts;
/* A zeroed mapping of 4 KiB pages (MADV_NOHUGEPAGE), or NULL. */
void *hp_lifetime_map(size_t size);
bool hp_site_init(void);
void hp_site_lock(void);
void hp_site_unlock(void);
/* At exit: the site lock if hp_lock_at_exit takes it (lock.h). */
bool hp_site_lock_at_exit(void);
void hp_site_atfork_child(void);
/* The site of these frames, added if new: its index, or -1 (table full).
 * Lock held. */
int hp_site_get(const uintptr_t *frames, unsigned n);
/* A sampled object ended short-lived, or turned long-lived. Lock held. */
void hp_site_outcome(int idx, bool long_lived, uint64_t life_ns);
/* A long-lived sampled object was freed after life_ns. Lock held. */
void hp_site_freed_long(int idx, uint64_t life_ns);
/* Sets a site's decision from a profile: 1 promote, -1 small (churny),
 * 0 undecided. Lock held. */
void hp_site_decide(int idx, int decision);
static inline size_t hp_key_hash(uintptr_t key) {
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 51) & (HP_KEYS - 1);
}
/* Whether allocations from this return address go to huge pages. No lock:
 * slots are filled once and never emptied. */
static inline bool hp_key_promoted(uintptr_t key) {
	for (size_t i = hp_key_hash(key);; i = (i + 1) & (HP_KEYS - 1)) {
		uintptr_t k = __atomic_load_n(&hp_key_tab[i], __ATOMIC_ACQUIRE);
		if (k == key)
			return __atomic_load_n(&hp_key_on[i], __ATOMIC_ACQUIRE);
		if (k == 0)
			return false;
	}
}

/* longlived.c: the long-lived class (long_lived:mimalloc), mimalloc heaps
 * over [hp_ll_base, hp_ll_base + hp_ll_size), inside the owned range. */
extern uintptr_t hp_ll_base;
extern size_t hp_ll_size;
extern hp_ll_counts_t hp_ll_counts;
static inline bool hp_ll_contains(const void *p) {
	return (uintptr_t)p - hp_ll_base < hp_ll_size;
}
bool hp_ll_init(const hp_conf_t *c, uintptr_t base, size_t size);
/* A promoted small object, or NULL: jemalloc's path (hp_huge_small). */
void *hp_ll_alloc(size_t size, bool zero);
void hp_ll_free(void *p);
size_t hp_ll_usable(const void *p);
/* p resized within the class, or NULL with p untouched. */
void *hp_ll_realloc(void *p, size_t size);
/* Gives empty segments back: due ones (every decay_ms, from the
 * maintenance thread), or all at once (trim, malloc_trim). */
void hp_ll_collect(uint64_t now_ns, bool trim);
/* llpages.c: the class's THP arena, whose decommits (mimalloc's, through
 * the exported madvise) give back only whole 2 MiB pages. */
extern uintptr_t hp_llpages_base;
extern size_t hp_llpages_size;
static inline bool hp_llpages_contains(const void *p) {
	return (uintptr_t)p - hp_llpages_base < hp_llpages_size;
}
bool hp_llpages_init(uintptr_t base, size_t size);
int hp_llpages_mprotect(void *addr, size_t len, int prot);
int hp_llpages_madvise(void *addr, size_t len, int advice);
void hp_llpages_scan(hp_arena_stats_t *a);
size_t hp_llpages_enforce(size_t limit);
void hp_llpages_prefork(void);
void hp_llpages_postfork_parent(void);
void hp_llpages_postfork_child(void);
/* The class's counters into *a; false (a untouched) if it is not in use. */
bool hp_ll_scan(hp_arena_stats_t *a);

/* sample.c: sampling, the sample zone, sampled objects' lifetimes. */
extern uintptr_t hp_zone_base;          /* sampled objects live here */
extern size_t hp_zone_size;
bool hp_lifetime_init(const hp_conf_t *c, uintptr_t zone, size_t zone_size);
/* The allocation that ran out its slot's credit (slot.c), ret being the
 * return address of the call: used bytes go to the sampling count, and a
 * pinned slot is looked up by ret. */
void *hp_lifetime_alloc(size_t size, uintptr_t ret, bool zero, uint64_t used,
    bool pinned);
void hp_lifetime_free(void *p);
static inline bool hp_zone_contains(const void *p) {
	return (uintptr_t)p - hp_zone_base < hp_zone_size;
}

/* slot.c: the fast path's per-thread credits, one per slot (the low byte
 * of the return address). malloc and calloc go to hp_slot_alloc when
 * theirs runs out. */
#define HP_SLOTS 256
extern HP_TLS uint64_t hp_slots[HP_SLOTS];
void hp_slot_init(size_t threshold, size_t pace);
void hp_slot_pin(uintptr_t key, bool on);
void *hp_slot_alloc(size_t size, uintptr_t ret, bool zero);
/* The fast path's step, in the exported entry points themselves (entry.c,
 * cxx.c), so that the return address is their caller's. */
#if defined(__x86_64__)
/* Subtracts size from the caller's slot credit in place; jumps to slow
 * when it runs out (a borrow, or exactly zero). */
#define SLOT_TAKE(size, slow) asm goto( \
	"movq hp_slots@gottpoff(%%rip), %%rdx\n\t" \
	"subq %[sz], %%fs:(%%rdx,%[slot],8)\n\t" \
	"jbe %l[" #slow "]" \
	: : [sz] "r"(size), [slot] "r"((uintptr_t)(uint8_t) \
	    (uintptr_t)__builtin_return_address(0)) \
	: "rdx", "cc", "memory" : slow)
#else
#define SLOT_TAKE(size, slow) do { \
	uint64_t *c_ = &hp_slots[(uint8_t)(uintptr_t) \
	    __builtin_return_address(0)]; \
	if (hp_unlikely(*c_ <= (size))) { *c_ -= (size); goto slow; } \
	*c_ -= (size); \
} while (0)
#endif

/* unwind.c: call stacks through libunwind, which then opens no descriptor
 * of its own. */
bool hp_unwind_init(const char **why);
/* The frames of the caller of malloc, from the one returning to ret: at
 * most HP_SITE_DEPTH, at least 1 (ret alone). */
unsigned hp_unwind_frames(uintptr_t ret, uintptr_t *out);

/* profile.c: the site table written at exit and loaded at start-up. */
bool hp_profile_load(const char *path);
void hp_profile_resolve(void);       /* newly loaded modules */
bool hp_profile_write(const char *path);

/* edata.c: jemalloc's extent descriptors, on pages given back when free.
 * The build routes jemalloc's edata_cache_get/put here. */
extern hp_edata_counts_t hp_edata_counts;
void *hp_edata_get(void *tsdn, void *cache);
void hp_edata_put(void *tsdn, void *cache, void *edata);
void hp_edata_trim(void);
void hp_edata_prefork(void);
void hp_edata_postfork_parent(void);
void hp_edata_postfork_child(void);
/* ranges.c: sorted, disjoint address ranges in a caller's array, under
 * the caller's lock; overflow set when one could not be kept. */
typedef struct {
	uintptr_t start, end;
} hp_range_t;
typedef struct {
	hp_range_t *r;
	unsigned n, max;
	bool overflow;
} hp_ranges_t;
void hp_ranges_add(hp_ranges_t *set, uintptr_t start, uintptr_t end);
void hp_ranges_del(hp_ranges_t *set, uintptr_t start, uintptr_t end);
bool hp_ranges_hold(const hp_ranges_t *set, uintptr_t start, uintptr_t end);
/* Whether some range of the set overlaps [start, end). */
bool hp_ranges_touch(const hp_ranges_t *set, uintptr_t start, uintptr_t end);

/* mmap.c: the program's own mappings. hp_mmap_own: this thread's calls
 * are the library's (libmimalloc's, while it sets up), passed straight on. */
extern HP_TLS bool hp_mmap_own;
extern size_t hp_mmap_threshold;       /* SIZE_MAX until started, or off */
extern hp_mmap_counts_t hp_mmap_counts;
void hp_mmap_prefork(void);
void hp_mmap_postfork_parent(void);
void hp_mmap_postfork_child(void);
/* jemap.c: jemalloc's own mappings, and the kernel's view of them. */
/* Whether [start, end) lies in jemalloc's own mappings and in none of
 * its bases: the small class's data. */
bool hp_jemap_data(uintptr_t start, uintptr_t end);
/* catchup.c: what a site filled in the small class while it was learned,
 * collapsed onto huge pages once it is promoted. probe: where this
 * thread's next small object of size goes (0 above HP_CATCHUP_MAX_SIZE,
 * jemalloc's largest slab size); queue: a 2 MiB range a promoted site's
 * sample noted (site lock held); run: the maintenance thread's pass. */
#define HP_CATCHUP_MAX_SIZE ((size_t)14336)
uintptr_t hp_catchup_probe(size_t size);
void hp_catchup_queue(uintptr_t addr);
void hp_catchup_run(void);
void hp_catchup_prefork(void);
void hp_catchup_postfork_parent(void);
void hp_catchup_postfork_child(void);
bool hp_jemap_resident(uint64_t *resident, uint64_t *metadata,
    uint64_t *huge, uint64_t (*ranges)[2], unsigned max, unsigned *nranges);
void hp_jemap_prefork(void);
void hp_jemap_postfork_parent(void);
void hp_jemap_postfork_child(void);
/* jefork.c: what jemalloc's own fork handlers leave held, made anew. */
void hp_jefork_child(void);

/* route.c: slow paths of the entry points. */
void *hp_alloc_slow(size_t size, size_t align, bool zero);
void *hp_realloc_slow(void *p, size_t size);
void hp_free_owned(void *p);
/* malloc_usable_size of an object of any class. */
size_t hp_usable_size(const void *p);

#pragma GCC visibility pop

#endif
