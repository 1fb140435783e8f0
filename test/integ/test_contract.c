/* glibc's contract for the malloc family, checked in a process whose
 * malloc is hugepreload's (this binary links the library first). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hugepreload.h"

#define MIB ((size_t)1 << 20)

Test(contract, our_malloc_is_in_use) {
	void *s = malloc(64), *h = malloc(8 * MIB);
	cr_assert_eq(hugepreload_class(s), HUGEPRELOAD_CLASS_SMALL);
	cr_assert_eq(hugepreload_class(h), HUGEPRELOAD_CLASS_HUGE);
	cr_assert_str_eq(hugepreload_version(), HUGEPRELOAD_VERSION);
	cr_assert_eq(hugepreload_class(NULL), HUGEPRELOAD_CLASS_NONE);
	free(s);
	free(h);
}

Test(contract, malloc_zero_is_unique) {
	void *a = malloc(0), *b = malloc(0);
	cr_assert(a && b && a != b);
	free(a);
	free(b);
	free(NULL);
}

Test(contract, oversize_gives_enomem) {
	size_t sizes[] = {SIZE_MAX, SIZE_MAX / 2 + 1, (size_t)PTRDIFF_MAX + 1,
	    (size_t)1 << 62};
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		errno = 0;
		cr_assert_null(malloc(sizes[i]));
		cr_assert_eq(errno, ENOMEM, "malloc(%zu)", sizes[i]);
		errno = 0;
		cr_assert_null(calloc(1, sizes[i]));
		cr_assert_eq(errno, ENOMEM);
		void *p = malloc(16);
		errno = 0;
		cr_assert_null(realloc(p, sizes[i]));
		cr_assert_eq(errno, ENOMEM);
		cr_assert_eq(((char *)memset(p, 7, 16))[15], 7, "p still valid");
		free(p);
	}
}

Test(contract, calloc_overflow_and_zeroing) {
	errno = 0;
	cr_assert_null(calloc(SIZE_MAX / 2, 3));
	cr_assert_eq(errno, ENOMEM);
	errno = 0;
	cr_assert_null(calloc((size_t)1 << 33, (size_t)1 << 33));
	cr_assert_eq(errno, ENOMEM);
	/* Freed and purged huge-class memory comes back zeroed. */
	for (int round = 0; round < 3; round++) {
		unsigned char *p[16];
		for (int i = 0; i < 16; i++) {
			p[i] = calloc(1, 3 * MIB + (size_t)i * 4096);
			for (size_t j = 0; j < 3 * MIB; j += 512)
				cr_assert_eq(p[i][j], 0, "round %d block %d byte %zu",
				    round, i, j);
			memset(p[i], 0xff, 3 * MIB);
		}
		for (int i = 0; i < 16; i += 2)
			free(p[i]);
		malloc_trim(0);
		for (int i = 1; i < 16; i += 2)
			free(p[i]);
		if (round == 1)
			malloc_trim(0);
	}
}

Test(contract, bad_alignments) {
	void *p = (void *)1;
	cr_assert_eq(posix_memalign(&p, 0, 8), EINVAL);
	cr_assert_eq(posix_memalign(&p, 4, 8), EINVAL);
	cr_assert_eq(posix_memalign(&p, 24, 8), EINVAL);
	cr_assert_eq(p, (void *)1, "untouched on failure");
	errno = 0;
	cr_assert_null(aligned_alloc(3, 64));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(aligned_alloc(0, 64));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_null(memalign(SIZE_MAX / 2 + 2, 64));
	cr_assert_eq(errno, EINVAL);
}

Test(contract, good_alignments_both_classes) {
	size_t sizes[] = {1, 100, 4096, 3 * MIB};
	size_t aligns[] = {8, 16, 64, 4096, 65536, 2 * MIB};
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < 6; j++) {
			void *p = NULL;
			cr_assert_eq(posix_memalign(&p, aligns[j], sizes[i]), 0);
			cr_assert_eq((uintptr_t)p % aligns[j], 0);
			memset(p, 1, sizes[i]);
			free(p);
			p = aligned_alloc(aligns[j], sizes[i]);
			cr_assert((uintptr_t)p % aligns[j] == 0 && p);
			free(p);
			p = memalign(aligns[j], sizes[i]);
			cr_assert((uintptr_t)p % aligns[j] == 0 && p);
			free(p);
		}
	void *p = memalign(24, 100);              /* rounded up, as glibc */
	cr_assert((uintptr_t)p % 32 == 0 && p);
	free(p);
	p = valloc(10);
	cr_assert((uintptr_t)p % 4096 == 0 && p);
	free(p);
	p = pvalloc(0);
	cr_assert((uintptr_t)p % 4096 == 0 && malloc_usable_size(p) >= 4096);
	free(p);
	p = pvalloc(4097);
	cr_assert(malloc_usable_size(p) >= 8192);
	free(p);
	errno = 0;
	cr_assert_null(pvalloc(SIZE_MAX - 10));
	cr_assert_eq(errno, ENOMEM);
	void *h = NULL;
	cr_assert_eq(posix_memalign(&h, 2 * MIB, 8 * MIB), 0);
	cr_assert_eq(hugepreload_class(h), HUGEPRELOAD_CLASS_HUGE);
	free(h);
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 31 + seed);
}
static void check(const unsigned char *p, size_t n, unsigned seed) {
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 31 + seed))
			cr_assert_fail("byte %zu of %zu differs", i, n);
}

Test(contract, realloc_across_classes_keeps_data) {
	unsigned char *p = malloc(1000);
	fill(p, 1000, 1);
	p = realloc(p, 5 * MIB);                       /* small -> huge */
	cr_assert_eq(hugepreload_class(p), HUGEPRELOAD_CLASS_HUGE);
	check(p, 1000, 1);
	fill(p, 5 * MIB, 2);
	p = realloc(p, 9 * MIB);                       /* huge -> huge */
	cr_assert_eq(hugepreload_class(p), HUGEPRELOAD_CLASS_HUGE);
	check(p, 5 * MIB, 2);
	p = realloc(p, 3 * MIB);                       /* shrink in class */
	check(p, 3 * MIB, 2);
	p = realloc(p, 500);                           /* huge -> small */
	cr_assert_eq(hugepreload_class(p), HUGEPRELOAD_CLASS_SMALL);
	check(p, 500, 2);
	p = realloc(p, 600);
	check(p, 500, 2);
	cr_assert_null(realloc(p, 0), "realloc(p, 0) frees, as glibc");
	p = realloc(NULL, 2 * MIB);
	cr_assert_eq(hugepreload_class(p), HUGEPRELOAD_CLASS_HUGE);
	free(p);
	p = realloc(NULL, 0);
	cr_assert_not_null(p);
	free(p);
}

Test(contract, reallocarray) {
	unsigned char *p = reallocarray(NULL, 100, 10);
	fill(p, 1000, 3);
	errno = 0;
	cr_assert_null(reallocarray(p, SIZE_MAX / 2, 3));
	cr_assert_eq(errno, ENOMEM);
	p = reallocarray(p, 1000, 3000);               /* to the huge class */
	check(p, 1000, 3);
	cr_assert_eq(hugepreload_class(p), HUGEPRELOAD_CLASS_HUGE);
	free(p);
}

Test(contract, usable_size) {
	cr_assert_eq(malloc_usable_size(NULL), 0);
	size_t sizes[] = {1, 17, 1000, 40000, MIB, 3 * MIB + 1};
	for (size_t i = 0; i < 6; i++) {
		char *p = malloc(sizes[i]);
		size_t u = malloc_usable_size(p);
		cr_assert_geq(u, sizes[i]);
		memset(p, 1, u);                           /* all of it is ours */
		free(p);
	}
}

Test(contract, malloc_trim_without_anything_to_give) {
	malloc_trim(0);
	cr_assert_eq(malloc_trim(0), 0, "nothing left to release");
}

/* The fast path's one test (src/lifetime/slot.c) routes by size too: from
 * one call site, a request of large_threshold is huge whatever the site
 * allocated before (credit left or run out, a failed request of 2^63 bytes
 * or more, a new thread), and one byte less is small. */
static size_t threshold(void) {
	char policy[512];
	hugepreload_policy(policy, sizeof policy);
	const char *t = strstr(policy, "large_threshold:");
	cr_assert_not_null(t, "%s", policy);
	return strtoull(t + strlen("large_threshold:"), NULL, 10);
}

static __attribute__((noinline)) void *one_site(size_t size) {
	void *p = malloc(size);
	__asm__ volatile("" ::: "memory");   /* no tail call: one site */
	return p;
}

/* The first size that went to the wrong class (or failed), or 0. */
static void *both_classes_from_one_site(void *arg) {
	size_t t = *(size_t *)arg;
	size_t sizes[] = {t, 64, t - 1, t, 4096, SIZE_MAX - ((size_t)1 << 40),
	    t, t + 1, 64, SIZE_MAX, t, 64, (size_t)1 << 63, t, 0, t};
	for (int round = 0; round < 200; round++)
		for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
			void *p = one_site(sizes[i]);
			int want = sizes[i] > PTRDIFF_MAX ? HUGEPRELOAD_CLASS_NONE :
			    sizes[i] >= t ? HUGEPRELOAD_CLASS_HUGE :
			    HUGEPRELOAD_CLASS_SMALL;
			bool ok = (p != NULL) == (want != HUGEPRELOAD_CLASS_NONE) &&
			    hugepreload_class(p) == want;
			free(p);
			if (!ok)
				return (void *)(sizes[i] ? sizes[i] : 1);
		}
	return NULL;
}

Test(contract, one_call_site_both_classes) {
	size_t t = threshold();
	void *bad = both_classes_from_one_site(&t);
	cr_assert_null(bad, "malloc(%zu) from one site: wrong class", (size_t)bad);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, both_classes_from_one_site, &t), 0);
	pthread_join(th, &bad);
	cr_assert_null(bad, "new thread: malloc(%zu) from one site: wrong class",
	    (size_t)bad);
}

/* jemalloc's API (src/api/jeapi.c), both classes: flags honoured, errno kept
 * on success, sizes that agree with each other, mallctl's errors. */
void *mallocx(size_t, int);
void *rallocx(void *, size_t, int);
size_t xallocx(void *, size_t, size_t, int);
size_t sallocx(const void *, int);
void dallocx(void *, int);
void sdallocx(void *, size_t, int);
size_t nallocx(size_t, int);
int mallctl(const char *, void *, size_t *, void *, size_t);
#define LG_ALIGN(la) ((int)(la))
#define ZERO 0x40

Test(contract, mallocx_family_both_classes) {
	size_t sizes[] = {1, 100, 4096, 100000, 3 * MIB, 9 * MIB};
	for (size_t i = 0; i < 6; i++)
		for (unsigned la = 0; la <= 21; la += 3) {
			/* A dirty block first, so that ZERO has work to do. */
			unsigned char *d = malloc(sizes[i]);
			memset(d, 0xa5, sizes[i]);
			free(d);
			errno = 4321;
			unsigned char *p = mallocx(sizes[i], LG_ALIGN(la) | ZERO);
			cr_assert_not_null(p);
			cr_assert_eq(errno, 4321, "mallocx changed errno");
			cr_assert_eq((uintptr_t)p % ((size_t)1 << la), 0);
			for (size_t k = 0; k < sizes[i]; k++)
				if (p[k])
					cr_assert_fail("byte %zu of %zu not zero", k, sizes[i]);
			cr_assert_eq(sallocx(p, 0), malloc_usable_size(p));
			cr_assert_geq(sallocx(p, 0), sizes[i]);
			cr_assert_geq(xallocx(p, sizes[i], 0, 0), sizes[i]);
			if (la == 0)
				cr_assert_eq(nallocx(sizes[i], 0), sallocx(p, 0),
				    "nallocx %zu", sizes[i]);
			fill(p, sizes[i], (unsigned)i);
			/* Across the classes and back, data kept. */
			size_t to = sizes[(i + 3) % 6];
			unsigned char *q = rallocx(p, to, LG_ALIGN(la));
			cr_assert_not_null(q);
			cr_assert_eq((uintptr_t)q % ((size_t)1 << la), 0);
			check(q, sizes[i] < to ? sizes[i] : to, (unsigned)i);
			sdallocx(q, to, LG_ALIGN(la));
		}
	void *h = mallocx(8 * MIB, LG_ALIGN(21));
	cr_assert_eq(hugepreload_class(h), HUGEPRELOAD_CLASS_HUGE);
	dallocx(h, 0);
	cr_assert_null(mallocx(SIZE_MAX - 4096, 0));
}

/* sdallocx with the size of another class is the program's bug: jemalloc
 * checks it only in its debug builds, and so does the library (an
 * assertion that aborts); a release build frees the block. */
Test(contract, sdallocx_wrong_size_as_jemalloc) {
	pid_t pid = fork();
	if (pid == 0) {
		void *p = malloc(100);
		sdallocx(p, 5000, 0);
		void *q = malloc(3 * MIB);
		sdallocx(q, 100, 0);
		_exit(0);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
#ifdef HP_TEST_DEBUG
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
	    "debug build: the wrong size must abort (status %#x)", status);
#else
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "release build: the block is freed (status %#x)", status);
#endif
}

Test(contract, mallctl_answers_for_the_heap) {
	const char *v = NULL;
	size_t sz = sizeof v;
	cr_assert_eq(mallctl("version", &v, &sz, NULL, 0), 0);
	cr_assert(strncmp(v, "hugepreload ", 12) == 0 && strstr(v, "jemalloc"),
	    "%s", v);
	cr_assert_eq(mallctl("version", NULL, NULL, &v, sizeof v), EPERM);
	size_t small = 1;
	cr_assert_eq(mallctl("version", &v, &small, NULL, 0), EINVAL);
	cr_assert_eq(mallctl("no.such.name", NULL, NULL, NULL, 0), ENOENT);
	uint64_t epoch = 1;
	size_t esz = sizeof epoch, before = 0, after = 0, ssz = sizeof before;
	mallctl("epoch", &epoch, &esz, &epoch, esz);
	cr_assert_eq(mallctl("stats.allocated", &before, &ssz, NULL, 0), 0);
	void *volatile h = malloc(16 * MIB);     /* the huge class */
	cr_assert_eq(hugepreload_class(h), HUGEPRELOAD_CLASS_HUGE);
	mallctl("epoch", &epoch, &esz, &epoch, esz);
	mallctl("stats.allocated", &after, &ssz, NULL, 0);
	cr_assert_geq(after, before + 16 * MIB, "the huge class is counted");
	free(h);
}
