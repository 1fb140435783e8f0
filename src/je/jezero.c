/*
 * How jemalloc zeroes memory it hands out again (calloc, and its own
 * zeroed allocations: every new thread's cache bins, 32 KiB), for the
 * arenas on its default extent hooks, the small class's. The library's
 * own arenas have hooks of their own, and jemalloc memsets those.
 *
 * jemalloc's default is MADV_DONTNEED, then the pages fault in again as
 * zeros when touched: a system call that shoots down the other threads'
 * TLBs, and a fault per 4 KiB page. Up to 128 KiB, glibc's default mmap
 * threshold (below which glibc's own calloc clears a reused chunk), a
 * memset costs less: W12's threads each clear their 32 KiB of cache
 * bins, which took a purge and 8 faults each (docs/benchmarks.md).
 * Larger ranges keep jemalloc's way, which touches nothing the program
 * does not. A large object's range is its size class and a page (the
 * cache-oblivious offset), so calloc is cleared so up to 112 KiB.
 * scripts/embed-jemalloc sends extent.c's one call here.
 */
#include <string.h>
#include "je/je.h"

#define MEMSET_MAX ((size_t)128 << 10)

void je_ehooks_default_zero_impl(void *addr, size_t size);

void hp_je_zero(void *addr, size_t size) {
	if (size <= MEMSET_MAX)
		memset(addr, 0, size);
	else
		je_ehooks_default_zero_impl(addr, size);
}
