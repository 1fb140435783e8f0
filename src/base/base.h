/* hugepreload's bottom layer (src/base/README): what every file may use.
 * Nothing here allocates, and all of it works before start-up. */
#ifndef HP_BASE_H
#define HP_BASE_H

#include <stdarg.h>
#include <sys/types.h>
#include "base/types.h"
#include "base/fmt.h"
#include "base/nocache.h"

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
 * __popcountdi2 on the bitmaps' busiest path (every commit and decommit,
 * each of jemalloc's slab commits among them; docs/long-lived-class.md
 * has the cost); the instruction is used when start-up found it (os.c).
 * Without it, the words that are most often all clear or all set take
 * no count. The asm is volatile so that gcc never moves it ahead of its
 * test, onto a CPU without the instruction. */
extern bool hp_os_have_popcnt;
static inline unsigned hp_popcount64(uint64_t x) {
#ifdef __POPCNT__
	return (unsigned)__builtin_popcountll(x);
#else
	if (hp_likely(hp_os_have_popcnt)) {
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


/* conf.c: the policy in force, set once by start-up (core/init.c) and
 * read by every layer; components that keep it are given their part. */
extern hp_conf_t hp_conf;
/* Requests >= hp_threshold take the slow path; 0 until start-up is done,
 * so the size check on the fast path is also the "initialised?" check.
 * Stored by core/init.c last but one. */
extern size_t hp_threshold;

/* conf.c: HUGEPRELOAD_CONF parsing. */
typedef void (*hp_conf_report_t)(void *ctx, const char *msg);
void hp_conf_defaults(hp_conf_t *c);
void hp_conf_parse(hp_conf_t *c, const char *s, hp_conf_report_t rep, void *ctx);
typedef void (*hp_conf_item_t)(void *ctx, const char *k, size_t klen,
    const char *v, size_t vlen);
void hp_conf_each(const char *s, hp_conf_item_t item, void (*bad)(void *ctx,
    const char *it, size_t len), void *ctx);
bool hp_conf_parse_size(const char *s, size_t len, size_t *out);
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


/* os.c: the library's only door to the kernel: every system call it makes
 * on its own behalf (scripts/embed-jemalloc sends the embedded jemalloc's
 * there too; test exports::system_calls_only_in_os_c checks). Descriptors
 * are close-on-exec and at least 3 when these return. */
/* This thread's mmap calls are the library's own (libmimalloc's, while
 * it sets up): the exported mmap family passes them straight on. */
extern HP_TLS bool hp_os_own_maps;
/* What the CPU has (hp_os_have_popcnt), once, first thing at start-up. */
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
/* A clock's time in nanoseconds (clock_gettime: the vDSO, no system call
 * on x86-64). */
uint64_t hp_os_clock_ns(clockid_t clock);
int hp_os_fd_high(int fd);
int hp_os_open(const char *path, int flags, int mode);
/* open(2) and syscall(2) whose descriptors are treated as hp_os_open's. */
int hp_os_open_va(const char *path, int flags, ...);
void hp_os_va_longs(va_list ap, long a[6]);     /* six syscall arguments */
long hp_os_syscall_fds(long nr, const long a[6]);
/* Up to n - 1 bytes of a small file, NUL-terminated; -1 if unreadable. */
ssize_t hp_os_read_file(const char *path, char *buf, size_t n);
long hp_os_read_long(const char *path);     /* -1 if unreadable */
/* Whether the page at addr is this process's alone (pagemap's exclusive
 * bit, read from fd, /proc/self/pagemap; a page not present is shared
 * with no one): 1, 0, or -1 if unreadable. */
int hp_os_page_exclusive(int fd, uintptr_t addr);
/* len bytes of new anonymous memory at an align-aligned address (a power
 * of two), or NULL; flags are added to MAP_PRIVATE | MAP_ANONYMOUS. */
void *hp_os_map_aligned(size_t len, size_t align, int prot, int flags);
/* A PROT_NONE reservation of want bytes, align-aligned, halved until the
 * kernel grants it (ulimit -v, valgrind), down to min. Its size in *got;
 * NULL if not even min was granted. */
void *hp_os_reserve(size_t want, size_t min, size_t align, int flags,
    size_t *got);
/* The kernel's resident runs of [start, end), in address order, each on
 * huge pages or not; huge_ok says the range is huge-backed, for kernels
 * that cannot tell (mincore). False if nothing could be read. */
typedef void (*hp_resident_fn)(void *ctx, uintptr_t start, uintptr_t end,
    bool huge);
bool hp_os_resident(uintptr_t start, uintptr_t end, bool huge_ok,
    hp_resident_fn fn, void *ctx);


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

/* thread.c: one thread's state on the allocation paths, one thread-local
 * object, so that a path reads any of it through one offset: each
 * thread-local variable of a shared library costs a load of its own
 * offset (from the GOT) before its first use on a path. Each field
 * belongs to the file named beside it, and the layers above reach it
 * through their own headers. */
#define HP_SLOTS 256                   /* a return address's low byte */
#define HP_RA_WAYS 8
typedef struct {
	uint64_t slots[HP_SLOTS];      /* lifetime/slot.c: credits (first:
	                                  SLOT_TAKE's asm reads them) */
	uint64_t credited[HP_SLOTS / 64]; /* lifetime/slot.c: slots credited */
	uintptr_t ra[HP_RA_WAYS];      /* lifetime/site.c: placed callers */
	uint64_t ra_gen;               /* lifetime/site.c: their generation;
	                                  its top bit, sample.c's busy flag */
	union {                        /* lifetime/sample.c: to the next sample */
		int64_t budget;
		uint64_t budget_bits;  /* the same, for hp_sample_skip's
		                          modular arithmetic */
	};
	hp_shard_t *shard;             /* tally.c: this thread's shard */
	void *huge_cache;              /* huge/huge.c: its cache of the arena,
	                                  else hp_no_cache */
} hp_thread_t;
extern HP_TLS hp_thread_t hp_thread;

hp_shard_t *hp_shard_take(void);
static inline hp_shard_t *hp_shard(void) {
	hp_shard_t *s = hp_thread.shard;
	return hp_likely(s != NULL) ? s : hp_shard_take();
}
/* Adds d (a difference, modulo 2^64) to counter t of shard s. */
static inline void hp_tally(hp_shard_t *s, hp_tally_t t, uint64_t d) {
	hp_assert(s >= hp_shards && s < hp_shards + HP_SHARDS && t < HP_TALLY_N);
	__atomic_fetch_add(&s->v[t], d, __ATOMIC_RELAXED);
}
uint64_t hp_tally_sum(hp_tally_t t);


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

#pragma GCC visibility pop

#endif
