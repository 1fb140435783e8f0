/* The program's own mmap calls, as a test sees them (mmap.c).
 * usage: progmap big|ops|reserve|untouched|shared|hold|errors|unaligned
 *   big        256 MiB anonymous mapping, written: its share on huge pages
 *   ops        munmap, mremap, mprotect and MADV_DONTNEED of parts of a
 *              64 MiB mapping: every result, errno and byte checked; the
 *              output is the same with and without the library
 *   reserve    a 512 MiB PROT_NONE reservation, 64 MiB committed with
 *              mprotect, and another 64 MiB with mmap(MAP_FIXED), written
 *   untouched  a private and a MAP_SHARED file mapping and a 1 MiB
 *              anonymous one: no advice
 *   shared     256 MiB anonymous MAP_SHARED (shared memory), written
 *   hold       256 MiB private and 256 MiB shared, written; prints pid=
 *              and child= and waits for a signal (hugepreload stat)
 *   errors     a table of calls the kernel refuses: result and errno of
 *              each, the same with and without the library
 *   unaligned  no address space for the alignment's slack: mapped as asked
 * prints key=value lines */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "probe.h"

#define MIB ((size_t)1 << 20)

/* The share of [p, p + len) on huge pages (smaps of its area), in
 * percent, and whether the area is advised. */
static void report(const char *what, void *p, size_t len) {
	probe_vma_t *v;
	size_t n = probe_vmas(&v);
	const probe_vma_t *m = probe_find(v, n, p);
	long huge = m ? m->anon_huge_kb + m->shmem_pmd_kb : 0;
	printf("%s_huge_pct=%ld\n%s_hg=%d\n%s_aligned=%d\n", what,
	    huge * 1024 * 100 / (long)len, what, m && probe_has_flag(m, "hg"),
	    what, ((uintptr_t)p & (2 * MIB - 1)) == 0);
	free(v);
}

static int big(void) {
	size_t len = 256 * MIB;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memset(p, 1, len);
	report("big", p, len);
	return 0;
}

static int ops(void) {
	size_t len = 64 * MIB, pg = 4096;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < len; i += pg)
		p[i] = (char)(i / pg);
	/* A 4 KiB hole in the middle. */
	char *hole = p + 32 * MIB;
	int r = munmap(hole, pg);
	printf("munmap_hole=%d\n", r);
	/* The part below it grown by mremap (it may move). */
	char *q = mremap(p, 32 * MIB, 48 * MIB, MREMAP_MAYMOVE);
	int ok = q != MAP_FAILED;
	for (size_t i = 0; ok && i < 32 * MIB; i += pg)
		ok = q[i] == (char)(i / pg);
	printf("mremap_grow=%d\n", ok);
	if (q != MAP_FAILED) {
		q[48 * MIB - 1] = 5;                 /* the new part is usable */
		printf("mremap_new_zero=%d\n", q[40 * MIB] == 0);
	}
	/* The part above the hole: mprotect of a 2 MiB-unaligned range. */
	char *up = hole + pg;
	r = mprotect(up + 3 * pg, 3 * MIB + 5 * pg, PROT_READ);
	printf("mprotect_unaligned=%d\n", r);
	ok = up[2 * pg] == (char)((size_t)(up + 2 * pg - p) / pg);
	up[2 * pg] = 9;                          /* below it: still writable */
	ok = ok && up[3 * pg] == (char)((size_t)(up + 3 * pg - p) / pg);
	printf("mprotect_data=%d\n", ok);
	/* MADV_DONTNEED of 4 KiB: zero there, the neighbours kept. */
	char *d = up + 8 * MIB;
	r = madvise(d, pg, MADV_DONTNEED);
	printf("dontneed=%d\ndontneed_zero=%d\ndontneed_neighbours=%d\n", r,
	    d[0] == 0 && d[pg - 1] == 0, d[-pg] == (char)((size_t)(d - pg - p) /
	    pg) && d[pg] == (char)((size_t)(d + pg - p) / pg));
	/* Errors as the kernel's. */
	errno = 0;
	r = munmap(p + 1, pg);
	printf("munmap_unaligned=%d errno=%d\n", r, errno);
	errno = 0;
	r = mprotect(p + 1, pg, PROT_READ);
	printf("mprotect_unaligned_addr=%d errno=%d\n", r, errno);
	errno = 0;
	void *bad = mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("mmap_zero=%d errno=%d\n", bad == MAP_FAILED, errno);
	errno = 0;
	bad = mremap(p + 1, pg, 2 * pg, MREMAP_MAYMOVE);
	printf("mremap_unaligned=%d errno=%d\n", bad == MAP_FAILED, errno);
	errno = 1234;
	void *good = mmap(NULL, 8 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	printf("errno_kept_on_success=%d\n", good != MAP_FAILED && errno == 1234);
	return 0;
}

static int reserve(void) {
	size_t len = 512 * MIB, part = 64 * MIB;
	char *r = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return 1;
	/* Committed with mprotect, 2 MiB in. */
	char *a = r + 2 * MIB;
	if (mprotect(a, part, PROT_READ | PROT_WRITE) != 0)
		return 2;
	memset(a, 1, part);
	report("mprotect", a, part);
	/* Committed with mmap(MAP_FIXED), higher up. */
	char *b = r + 256 * MIB;
	if (mmap(b, part, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_FIXED, -1, 0) != b)
		return 3;
	memset(b, 1, part);
	report("fixed", b, part);
	return 0;
}

static int untouched(void) {
	char path[] = "/tmp/progmap.XXXXXX";
	int fd = mkstemp(path);
	size_t len = 16 * MIB;
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
		return 1;
	unlink(path);
	char *f = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	char *s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	char *small = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (f == MAP_FAILED || s == MAP_FAILED || small == MAP_FAILED)
		return 2;
	memset(f, 1, len);
	memset(s, 1, len);
	memset(small, 1, MIB);
	report("file", f, len);
	report("shared_file", s, len);
	report("small", small, MIB);
	return 0;
}

static int shared(void) {
	size_t len = 256 * MIB;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memset(p, 1, len);
	report("shared", p, len);
	/* Still shared memory: a child's write is seen here. */
	pid_t c = fork();
	if (c == 0) {
		p[len / 2] = 42;
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);
	printf("shared_by_child=%d\n", p[len / 2] == 42);
	return 0;
}

static int hold(void) {
	size_t len = 256 * MIB;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	char *s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || s == MAP_FAILED)
		return 1;
	memset(p, 1, len);
	memset(s, 1, len);
	printf("pid=%d\nchild=%d\n", (int)getpid(), (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}

/* One refused call: its result (1 failed, 0 succeeded) and errno. */
static void refused(const char *name, bool failed) {
	printf("%s=%d errno=%d\n", name, failed, failed ? errno : 0);
	errno = 0;
}

/* Calls the kernel refuses, most at sizes the library would place (64
 * MiB, above mmap_threshold): each must fail with the kernel's errno. */
static int errors(void) {
	size_t len = 64 * MIB;
	int rw = PROT_READ | PROT_WRITE, ap = MAP_PRIVATE | MAP_ANONYMOUS;
	char path[] = "/tmp/progmap.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
		return 1;
	unlink(path);
	int ro = open("/proc/self/exe", O_RDONLY), dir = open("/", O_RDONLY);
	char *p = mmap(NULL, len, rw, ap, -1, 0);
	if (p == MAP_FAILED || ro < 0 || dir < 0)
		return 2;
	errno = 0;
	refused("zero_length", mmap(NULL, 0, rw, ap, -1, 0) == MAP_FAILED);
	refused("neither_private_nor_shared", mmap(NULL, len, rw,
	    MAP_ANONYMOUS, -1, 0) == MAP_FAILED);
	refused("unknown_flag_validated", mmap(NULL, len, rw,
	    MAP_SHARED_VALIDATE | MAP_ANONYMOUS | 0x40000000, -1, 0) ==
	    MAP_FAILED);
	refused("bad_fd", mmap(NULL, len, rw, MAP_PRIVATE, 1000, 0) ==
	    MAP_FAILED);
	refused("unaligned_offset_file", mmap(NULL, len, rw, MAP_PRIVATE, fd,
	    1) == MAP_FAILED);
	refused("unaligned_offset_anonymous", mmap(NULL, len, rw, ap, -1,
	    100) == MAP_FAILED);
	refused("fixed_unaligned_address", mmap(p + 1, len, rw, ap |
	    MAP_FIXED, -1, 0) == MAP_FAILED);
	refused("fixed_noreplace_taken", mmap(p, len, rw, ap |
	    MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED);
	refused("length_too_large", mmap(NULL, (size_t)1 << 62, rw, ap, -1,
	    0) == MAP_FAILED);
	refused("length_wraps", mmap(NULL, SIZE_MAX - 4095, rw, ap, -1, 0) ==
	    MAP_FAILED);
	refused("hugetlb_unsupported_size", mmap(NULL, len, rw, ap |
	    MAP_HUGETLB | (25 << MAP_HUGE_SHIFT), -1, 0) == MAP_FAILED);
	refused("shared_write_readonly_fd", mmap(NULL, len, rw, MAP_SHARED, ro,
	    0) == MAP_FAILED);
	refused("directory_fd", mmap(NULL, len, PROT_READ, MAP_PRIVATE, dir,
	    0) == MAP_FAILED);
	refused("munmap_zero_length", munmap(p, 0) != 0);
	refused("mprotect_unknown_prot", mprotect(p, len, 0x1000) != 0);
	refused("mremap_to_zero", mremap(p, len, 0, MREMAP_MAYMOVE) ==
	    MAP_FAILED);
	refused("mremap_fixed_without_maymove", mremap(p, len, 2 * len,
	    MREMAP_FIXED, p + 4 * len) == MAP_FAILED);
	refused("madvise_unknown_advice", madvise(p, len, 9999) != 0);
	refused("madvise_unaligned", madvise(p + 1, len, MADV_DONTNEED) != 0);
	return 0;
}

/* Address space for the mapping but not for its 2 MiB of slack
 * (RLIMIT_AS): the mapping is made as asked, unaligned, and works. */
static int unaligned(void) {
	size_t len = 64 * MIB;
	printf("start=1\n");                  /* stdout's buffer, before */
	fflush(stdout);
	long kb = 0;
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	struct rlimit rl = {(rlim_t)kb * 1024 + len + MIB,
	    (rlim_t)kb * 1024 + len + MIB};
	if (kb == 0 || setrlimit(RLIMIT_AS, &rl) != 0)
		return 1;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	int ok = p != MAP_FAILED;
	if (ok) {
		memset(p, 7, len);
		ok = p[0] == 7 && p[len - 1] == 7;
	}
	printf("mapped=%d\n", ok);
	return 0;
}

int main(int argc, char **argv) {
	const char *m = argc > 1 ? argv[1] : "";
	if (strcmp(m, "unaligned") == 0)
		return unaligned();
	if (strcmp(m, "big") == 0)
		return big();
	if (strcmp(m, "ops") == 0)
		return ops();
	if (strcmp(m, "reserve") == 0)
		return reserve();
	if (strcmp(m, "untouched") == 0)
		return untouched();
	if (strcmp(m, "shared") == 0)
		return shared();
	if (strcmp(m, "errors") == 0)
		return errors();
	if (strcmp(m, "hold") == 0)
		return hold();
	fprintf(stderr, "usage: progmap big|ops|reserve|untouched|shared|"
	    "hold|errors|unaligned\n");
	return 2;
}
