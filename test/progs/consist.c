/* Known huge-class allocations (100 x 3 MiB, every other one freed, then
 * malloc_trim), and what the library's counters and /proc/self/smaps say
 * about them. */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "probe.h"
#include "base/types.h"

int main(void) {
	char *b[100];
	size_t live = 0;
	for (int i = 0; i < 100; i++) {
		b[i] = malloc(3 << 20);
		memset(b[i], i, 3 << 20);
	}
	for (int i = 1; i < 100; i += 2)
		free(b[i]);
	for (int i = 0; i < 100; i += 2)
		live += malloc_usable_size(b[i]);
	malloc_trim(0);                      /* also refreshes the counters */
	hp_stats_t st;
	if (!probe_stats(&st))
		return 2;
	/* The mappings that hold the live blocks. */
	probe_vma_t *v;
	size_t nv = probe_vmas(&v), vmas = 0;
	char *seen = calloc(nv, 1);
	long rss = 0, huge = 0;
	for (int i = 0; i < 100; i += 2) {
		const probe_vma_t *m = probe_find(v, nv, b[i]);
		if (m == NULL || seen[m - v]++)
			continue;
		vmas++;
		rss += m->rss_kb + m->private_hugetlb_kb;
		huge += m->anon_huge_kb + m->private_hugetlb_kb;
	}
	const hp_arena_stats_t *h = &st.arena[1];
	printf("live_expected=%zu\nlive_counted=%llu\nsmaps_rss_kb=%ld\n"
	    "counted_resident_kb=%llu\nsmaps_huge_kb=%ld\ncounted_huge_kb=%llu\n"
	    "mappings=%zu\n", live, (unsigned long long)h->live_bytes, rss,
	    (unsigned long long)h->resident_bytes >> 10, huge,
	    (unsigned long long)h->resident_huge_bytes >> 10, vmas);
	return 0;
}
