/*
 * The system calls the library makes on its own behalf, made so that the
 * host program cannot tell: descriptors are close-on-exec and never 0, 1
 * or 2 once the call returns (a program started with stdio closed must
 * find those numbers free), and address space is reserved PROT_NONE.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "base/base.h"

/* Called from the embedded jemalloc only; prototypes here, not in a
 * header, since nothing of ours calls them. */
#define HP_JE_OS __attribute__((visibility("hidden")))
int hp_je_creat(const char *path, mode_t mode);
long hp_je_syscall(long nr, ...);

bool hp_os_have_popcnt;
HP_TLS bool hp_os_own_maps;

void hp_os_probe_cpu(void) {
	__builtin_cpu_init();        /* a constructor may be the first caller */
	hp_os_have_popcnt = __builtin_cpu_supports("popcnt");
}

/*
 * The memory system calls, made directly: the library exports mmap,
 * munmap, mremap, mprotect and madvise for the program's own mappings
 * (mmap.c), and its own calls (and the embedded jemalloc's, renamed to
 * these by scripts/embed-jemalloc) must not go through them.
 */
void *hp_os_mmap(void *addr, size_t len, int prot, int flags, int fd,
    off_t off) {
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int hp_os_munmap(void *addr, size_t len) {
	return (int)syscall(SYS_munmap, addr, len);
}

void *hp_os_mremap(void *old, size_t old_len, size_t new_len, int flags,
    void *new_addr) {
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags,
	    new_addr);
}

int hp_os_mprotect(void *addr, size_t len, int prot) {
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

int hp_os_madvise(void *addr, size_t len, int advice) {
	return (int)syscall(SYS_madvise, addr, len, advice);
}

/* The other system calls the library makes, here so that this file is
 * its only door to the kernel: the files it reads and writes (profiles,
 * stats_file, /proc and /sys), the stats page's memfd, its messages. */
ssize_t hp_os_read(int fd, void *buf, size_t n) {
	return read(fd, buf, n);
}

ssize_t hp_os_write(int fd, const void *buf, size_t n) {
	return write(fd, buf, n);
}

int hp_os_close(int fd) {
	return close(fd);
}

ssize_t hp_os_readlink(const char *path, char *buf, size_t n) {
	return readlink(path, buf, n);
}

int hp_os_fstat(int fd, struct stat *st) {
	return fstat(fd, st);
}

int hp_os_rename(const char *from, const char *to) {
	return rename(from, to);
}

int hp_os_unlink(const char *path) {
	return unlink(path);
}

int hp_os_linkat(int fromdir, const char *from, int todir, const char *to,
    int flags) {
	return linkat(fromdir, from, todir, to, flags);
}

int hp_os_memfd_create(const char *name, unsigned flags) {
	return memfd_create(name, flags);
}

int hp_os_ftruncate(int fd, off_t len) {
	return ftruncate(fd, len);
}

int hp_os_flock(int fd, int op) {
	return flock(fd, op);
}

/* For the embedded jemalloc's dss (MALLOC_CONF=dss:primary; the library
 * overrides it, but jemalloc still probes). */
void *hp_os_sbrk(intptr_t increment) {
	return sbrk(increment);
}

/* The CPUs this process may run on, as jemalloc counts them for its
 * default narenas (sched_getaffinity); a mask of 8,192 CPUs, so that a
 * machine with more than glibc's cpu_set_t holds is counted too. 1 if the
 * kernel will not say. */
unsigned hp_os_cpus(void) {
	unsigned long mask[8192 / 64];
	long n = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
	unsigned cpus = 0;
	for (long i = 0; i < n / (long)sizeof mask[0]; i++)
		cpus += (unsigned)__builtin_popcountl(mask[i]);
	return cpus != 0 ? cpus : 1;
}

/* fd moved to a number of at least 3 (close-on-exec); -1 on failure, with
 * fd closed either way. */
int hp_os_fd_high(int fd) {
	if (fd < 0 || fd > STDERR_FILENO)
		return fd;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	close(fd);
	return high;
}

int hp_os_open(const char *path, int flags, int mode) {
	return hp_os_fd_high(open(path, flags | O_CLOEXEC, mode));
}

/* open(2) and syscall(2) with hp_os_open's treatment of the descriptors they
 * return: for the embedded jemalloc (scripts/embed-jemalloc renames its
 * calls of open, creat and syscall to these) and libunwind (unwind.c). */
int hp_os_open_va(const char *path, int flags, ...) {
	int mode = 0;
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, int);
		va_end(ap);
	}
	return hp_os_open(path, flags, mode);
}

HP_JE_OS int hp_je_creat(const char *path, mode_t mode) {
	return hp_os_open(path, O_WRONLY | O_CREAT | O_TRUNC, (int)mode);
}

void hp_os_va_longs(va_list ap, long a[6]) {
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
}

long hp_os_syscall_fds(long nr, const long a[6]) {
	long r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (nr == SYS_open || nr == SYS_openat)
		r = hp_os_fd_high((int)r);
	return r;
}

HP_JE_OS long hp_je_syscall(long nr, ...) {
	long a[6];
	va_list ap;
	va_start(ap, nr);
	hp_os_va_longs(ap, a);
	va_end(ap);
	return hp_os_syscall_fds(nr, a);
}

ssize_t hp_os_read_file(const char *path, char *buf, size_t n) {
	int fd = hp_os_open(path, O_RDONLY, 0);
	if (fd < 0)
		return -1;
	ssize_t got = 0, r;
	while ((size_t)got < n - 1 && (r = read(fd, buf + got, n - 1 -
	    (size_t)got)) > 0)
		got += r;
	close(fd);
	buf[got] = '\0';
	return got;
}

long hp_os_read_long(const char *path) {
	char buf[32];
	return hp_os_read_file(path, buf, sizeof buf) > 0 ?
	    hp_parse_long(buf, NULL) : -1;
}

int hp_os_page_exclusive(int fd, uintptr_t addr) {
	uint64_t e;
	if (pread(fd, &e, sizeof e, (off_t)(addr / HP_PAGE * sizeof e)) !=
	    (ssize_t)sizeof e)
		return -1;
	return !(e >> 63 & 1) || (e >> 56 & 1);     /* not there: not shared */
}

void *hp_os_map_aligned(size_t len, size_t align, int prot, int flags) {
	if (len > SIZE_MAX - align)
		return NULL;
	char *raw = hp_os_mmap(NULL, len + align, prot, MAP_PRIVATE | MAP_ANONYMOUS |
	    flags, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	char *p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	if (p != raw)
		hp_os_munmap(raw, (size_t)(p - raw));
	hp_os_munmap(p + len, align - (size_t)(p - raw));
	return p;
}

/* The reservation keeps its alignment slack above it, PROT_NONE (address
 * space only): mappings made later go below it (the kernel places them
 * top-down) instead of into a gap just above, where free()'s one compare
 * (hp_maybe_owned) would send their objects to the exact test. */
void *hp_os_reserve(size_t want, size_t min, size_t align, int flags,
    size_t *got) {
	for (size_t size = want; size >= min; size >>= 1) {
		if (size > SIZE_MAX - align)
			continue;
		char *raw = hp_os_mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE |
		    MAP_ANONYMOUS | flags, -1, 0);
		if (raw == MAP_FAILED)
			continue;
		char *p = (char *)(((uintptr_t)raw + align - 1) &
		    ~(uintptr_t)(align - 1));
		if (p != raw)
			hp_os_munmap(raw, (size_t)(p - raw));
		*got = size;
		return p;
	}
	return NULL;
}

/*
 * What the kernel holds of [start, end): resident runs, each on huge
 * pages (THP mapped whole, or hugetlb) or not, in address order, passed
 * to fn. Pages that only map the shared zero page are not resident (smaps
 * does not count them). One PAGEMAP_SCAN ioctl of /proc/self/pagemap per
 * batch of runs (Linux 6.7); before that, mincore, which cannot tell huge
 * pages from small ones or the zero page from a written page: there, a
 * 2 MiB-aligned run of 512 resident 4 KiB pages in a range the caller
 * says is huge-backed counts as on a huge page. Returns false if neither
 * worked (then fn saw nothing).
 */
#define HP_PM_SCAN        _IOWR('f', 16, hp_pm_scan_arg_t)
#define HP_PAGE_IS_PRESENT (1ull << 3)
#define HP_PAGE_IS_PFNZERO (1ull << 5)
#define HP_PAGE_IS_HUGE    (1ull << 6)
typedef struct {               /* struct pm_scan_arg, linux/fs.h */
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask;
	uint64_t return_mask;
} hp_pm_scan_arg_t;
typedef struct {               /* struct page_region */
	uint64_t start, end, categories;
} hp_pm_region_t;

static int pm_scan_broken;     /* the ioctl is not there: mincore */

static bool resident_scan(int fd, uintptr_t start, uintptr_t end,
    hp_pm_region_t *vec, size_t nvec, hp_resident_fn fn, void *ctx) {
	hp_pm_scan_arg_t arg = {
		.size = sizeof arg, .start = start, .end = end,
		.vec = (uintptr_t)vec, .vec_len = nvec,
		.category_inverted = HP_PAGE_IS_PFNZERO,
		.category_mask = HP_PAGE_IS_PRESENT | HP_PAGE_IS_PFNZERO,
		.return_mask = HP_PAGE_IS_HUGE,
	};
	while (arg.start < end) {
		long n = ioctl(fd, HP_PM_SCAN, &arg);
		if (n < 0)
			return false;
		for (long i = 0; i < n; i++)
			fn(ctx, vec[i].start, vec[i].end,
			    (vec[i].categories & HP_PAGE_IS_HUGE) != 0);
		if (arg.walk_end <= arg.start)
			break;
		arg.start = arg.walk_end;
	}
	return true;
}

static bool resident_mincore(uintptr_t start, uintptr_t end, bool huge_ok,
    hp_resident_fn fn, void *ctx, unsigned char *vec, size_t nvec) {
	for (uintptr_t a = start; a < end;) {
		uintptr_t e = end - a > nvec * HP_PAGE ? a + nvec * HP_PAGE : end;
		size_t n = (e - a) >> HP_PAGE_SHIFT;
		if (mincore((void *)a, e - a, vec) != 0)
			return false;
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && (vec[j] & 1) == (vec[i] & 1); j++)
				;
			if (!(vec[i] & 1))
				continue;
			uintptr_t s = a + (i << HP_PAGE_SHIFT);
			uintptr_t t = a + (j << HP_PAGE_SHIFT);
			/* Whole 2 MiB pages inside the run, and the rest. */
			uintptr_t hs = (s + HP_HUGE - 1) & ~(uintptr_t)(HP_HUGE - 1);
			uintptr_t he = t & ~(uintptr_t)(HP_HUGE - 1);
			if (!huge_ok || hs >= he) {
				fn(ctx, s, t, false);
				continue;
			}
			if (s < hs)
				fn(ctx, s, hs, false);
			fn(ctx, hs, he, true);
			if (he < t)
				fn(ctx, he, t, false);
		}
		a = e;
	}
	return true;
}

/* PAGEMAP_SCAN, else mincore, with the caller's buffers. */
static bool resident(uintptr_t start, uintptr_t end, bool huge_ok,
    hp_resident_fn fn, void *ctx, hp_pm_region_t *pm, size_t npm,
    unsigned char *in, size_t nin) {
	if (!__atomic_load_n(&pm_scan_broken, __ATOMIC_RELAXED)) {
		int fd = hp_os_open("/proc/self/pagemap", O_RDONLY, 0);
		bool ok = fd >= 0 && resident_scan(fd, start, end, pm, npm, fn,
		    ctx);
		int err = errno;
		if (fd >= 0)
			close(fd);
		if (ok)
			return true;
		/* Only a kernel without the ioctl falls back for good. */
		if (fd >= 0 && (err == ENOTTY || err == EINVAL))
			__atomic_store_n(&pm_scan_broken, 1, __ATOMIC_RELAXED);
	}
	return resident_mincore(start, end, huge_ok, fn, ctx, in, nin);
}

bool hp_os_resident(uintptr_t start, uintptr_t end, bool huge_ok,
    hp_resident_fn fn, void *ctx) {
	/* Callers hold the stats refresh lock. */
	static hp_pm_region_t pm[256];
	static unsigned char in[1 << 15];   /* 128 MiB a mincore call */
	return resident(start, end, huge_ok, fn, ctx, pm, 256, in, sizeof in);
}

static void count_pages(void *ctx, uintptr_t s, uintptr_t e, bool huge) {
	(void)huge;
	*(unsigned *)ctx += (unsigned)((e - s) >> HP_PAGE_SHIFT);
}

/* Pages mapped to the shared zero page are not counted: a collapse would
 * give them memory of their own. The fallback (mincore) cannot tell.
 * Buffers of its own: the maintenance thread calls it without the
 * refresh lock. */
unsigned hp_os_huge_resident(uintptr_t addr) {
	hp_pm_region_t pm[32];
	unsigned char in[HP_SUBPAGES];
	unsigned n = 0;
	if (!resident(addr, addr + HP_HUGE, false, count_pages, &n, pm, 32, in,
	    sizeof in))
		return 0;
	return n;
}

uint64_t hp_os_clock_ns(clockid_t clock) {
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
