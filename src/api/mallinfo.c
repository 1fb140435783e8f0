/*
 * glibc's malloc extension API over the one heap: mallinfo2, mallinfo,
 * malloc_stats, malloc_info and mallopt. Without them a program's calls
 * reach glibc, which describes its own arena, empty under the library.
 *
 * The mapping onto glibc's fields: the small class is glibc's "arena"
 * (non-mmapped) space and the huge class its "mmapped" space, as the
 * sizes they serve suggest:
 *   arena     bytes in pages the small class has in use (jemalloc's
 *             active pages, whole)      uordblks  allocated, small class
 *   fordblks  arena - uordblks          ordblks   1 while fordblks > 0
 *   hblkhd    allocated, huge class     hblks     allocations in it
 *   smblks, fsmblks, usmblks, keepcost: 0 (no fastbins; no releasable
 *   top chunk: free pages go back on the decay curve or malloc_trim).
 * malloc_stats and malloc_info print these same figures; their "max"
 * lines are the current figures (jemalloc keeps no high-water marks).
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include "core/core.h"

typedef struct {
	size_t arena, ordblks, fordblks, uordblks, hblks, hblkhd;
	size_t system_total, inuse_total;
} info_t;

static info_t info(void) {
	hp_heap_t h = {0};
	if (hp_init())
		hp_stats_heap_totals(&h);
	info_t i = {0};
	i.arena = h.small_active;
	i.uordblks = h.small_live;
	i.fordblks = h.small_active - h.small_live;
	i.ordblks = i.fordblks > 0;
	i.hblks = h.huge_count;
	i.hblkhd = h.huge_live;
	i.system_total = h.small_active + h.huge_active;
	i.inuse_total = h.small_live + h.huge_live;
	return i;
}

HP_EXPORT struct mallinfo2 mallinfo2(void) {
	int saved = errno;
	info_t i = info();
	errno = saved;
	return (struct mallinfo2){.arena = i.arena, .ordblks = i.ordblks,
	    .hblks = i.hblks, .hblkhd = i.hblkhd, .uordblks = i.uordblks,
	    .fordblks = i.fordblks};
}

/* glibc's int fields wrap past 2 GiB; these stop at INT_MAX. */
static int clamp(size_t v) {
	return v > INT_MAX ? INT_MAX : (int)v;
}

HP_EXPORT struct mallinfo mallinfo(void) {
	struct mallinfo2 m = mallinfo2();
	return (struct mallinfo){.arena = clamp(m.arena),
	    .ordblks = clamp(m.ordblks), .hblks = clamp(m.hblks),
	    .hblkhd = clamp(m.hblkhd), .uordblks = clamp(m.uordblks),
	    .fordblks = clamp(m.fordblks)};
}

/* glibc's layout: one arena, then the totals with the mmapped space. */
HP_EXPORT void malloc_stats(void) {
	int saved = errno;
	info_t i = info();
	fprintf(stderr, "Arena 0:\nsystem bytes     = %10zu\n"
	    "in use bytes     = %10zu\nTotal (incl. mmap):\n"
	    "system bytes     = %10zu\nin use bytes     = %10zu\n"
	    "max mmap regions = %10zu\nmax mmap bytes   = %10zu\n", i.arena,
	    i.uordblks, i.system_total, i.inuse_total, i.hblks, i.hblkhd);
	errno = saved;
}

/* glibc's XML (malloc_info(3)): a heap element for the small class, then
 * the totals. Options other than 0 get what glibc returns for them:
 * EINVAL itself, errno untouched. */
HP_EXPORT int malloc_info(int options, FILE *fp) {
	if (options != 0)
		return EINVAL;
	int saved = errno;
	info_t i = info();
	fprintf(fp, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n</sizes>\n"
	    "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
	    "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
	    "<system type=\"current\" size=\"%zu\"/>\n"
	    "<system type=\"max\" size=\"%zu\"/>\n"
	    "<aspace type=\"total\" size=\"%zu\"/>\n"
	    "<aspace type=\"mprotect\" size=\"%zu\"/>\n</heap>\n"
	    "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
	    "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
	    "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
	    "<system type=\"current\" size=\"%zu\"/>\n"
	    "<system type=\"max\" size=\"%zu\"/>\n"
	    "<aspace type=\"total\" size=\"%zu\"/>\n"
	    "<aspace type=\"mprotect\" size=\"%zu\"/>\n</malloc>\n",
	    i.ordblks, i.fordblks, i.arena, i.arena, i.arena, i.arena,
	    i.ordblks, i.fordblks, i.hblks, i.hblkhd, i.system_total,
	    i.system_total, i.system_total, i.system_total);
	errno = saved;
	return 0;
}

/*
 * glibc's parameters tune glibc's heap, which the library replaces:
 * each is accepted and ignored (the library's own knobs are in
 * HUGEPRELOAD_CONF), returning what Debian 12's glibc 2.36 returns: 1,
 * but 0 for an M_MXFAST outside 0..160 (test_mallinfo compares the two
 * on a table of parameters).
 */
HP_EXPORT int mallopt(int param, int value) {
	if (param == M_MXFAST)
		return value >= 0 && value <= 80 * (int)sizeof(size_t) / 4;
	return 1;
}
