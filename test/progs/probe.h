/* What the kernel shows about this process's memory, for the helper
 * programs that integration tests run under the library. */
#ifndef HP_PROBE_H
#define HP_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
	uintptr_t start, end;
	long rss_kb, anon_huge_kb, private_hugetlb_kb, kernel_page_kb;
	long shmem_pmd_kb;           /* shared memory on huge pages */
	char vmflags[128];
} probe_vma_t;

/* All mappings of /proc/self/smaps, sorted by address; returns the count.
 * *out is malloc'd (the caller frees it). */
size_t probe_vmas(probe_vma_t **out);
/* The mapping that holds p, or NULL. */
const probe_vma_t *probe_find(const probe_vma_t *v, size_t n, const void *p);
bool probe_has_flag(const probe_vma_t *v, const char *flag);
/* Bytes of [p, p + len) that sit in transparent huge pages
 * (/proc/self/pagemap and /proc/kpageflags; needs root). -1 if unreadable. */
long long probe_thp_bytes(const void *p, size_t len);
/* Bytes of [p, p + len) resident (/proc/self/pagemap); makes no malloc
 * call. -1 if unreadable. */
long long probe_resident_bytes(const void *p, size_t len);
/* VmRSS of /proc/self/status in kB; makes no malloc call. */
long probe_rss_kb(void);
/* Private_Hugetlb + Shared_Hugetlb of /proc/self/smaps_rollup in kB; makes
 * no malloc call. */
long probe_hugetlb_kb(void);
/* AnonHugePages of /proc/self/smaps_rollup plus probe_hugetlb_kb(): the
 * process's memory on huge pages, in kB; makes no malloc call. */
long probe_huge_kb(void);
/* A consistent copy of this process's live counters (the library's stats
 * page, found by its name in /proc/self/maps); false if there is none.
 * Makes no malloc call. */
bool probe_stats(void *st);
/* One field of /proc/meminfo ("HugePages_Free:"), or -1. */
long probe_meminfo(const char *key);
/* A number in a sysfs file, or -1. */
long probe_sysfs_long(const char *path);
/* One field of /proc/vmstat, or -1. */
long long probe_vmstat(const char *key);

#endif
