#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "probe.h"
#include "base/types.h"

size_t probe_vmas(probe_vma_t **out) {
	FILE *f = fopen("/proc/self/smaps", "r");
	size_t n = 0, cap = 256;
	probe_vma_t *v = calloc(cap, sizeof *v), *cur = NULL;
	char line[512];
	while (f && fgets(line, sizeof line, f)) {
		unsigned long a, b;
		long kb;
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') <
		    strchr(line, ' ')) {
			if (n == cap)
				v = realloc(v, (cap *= 2) * sizeof *v);
			cur = &v[n++];
			memset(cur, 0, sizeof *cur);
			cur->start = a;
			cur->end = b;
		} else if (cur == NULL) {
			continue;
		} else if (sscanf(line, "Rss: %ld kB", &kb) == 1) {
			cur->rss_kb = kb;
		} else if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
			cur->anon_huge_kb = kb;
		} else if (sscanf(line, "ShmemPmdMapped: %ld kB", &kb) == 1) {
			cur->shmem_pmd_kb = kb;
		} else if (sscanf(line, "Private_Hugetlb: %ld kB", &kb) == 1 ||
		    sscanf(line, "Shared_Hugetlb: %ld kB", &kb) == 1) {
			/* The kernel files a private page under Shared when it
			 * guesses it mapped twice: count both. */
			cur->private_hugetlb_kb += kb;
		} else if (sscanf(line, "KernelPageSize: %ld kB", &kb) == 1) {
			cur->kernel_page_kb = kb;
		} else if (strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(cur->vmflags, sizeof cur->vmflags, "%.120s", line + 8);
			cur->vmflags[strcspn(cur->vmflags, "\n")] = '\0';
		}
	}
	if (f)
		fclose(f);
	*out = v;
	return n;
}

const probe_vma_t *probe_find(const probe_vma_t *v, size_t n, const void *p) {
	uintptr_t a = (uintptr_t)p;
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (a < v[mid].start)
			hi = mid;
		else if (a >= v[mid].end)
			lo = mid + 1;
		else
			return &v[mid];
	}
	return NULL;
}

bool probe_has_flag(const probe_vma_t *v, const char *flag) {
	char padded[8];
	char flags[sizeof v->vmflags + 2];
	snprintf(padded, sizeof padded, " %s ", flag);
	snprintf(flags, sizeof flags, " %s ", v->vmflags);
	return strstr(flags, padded) != NULL;
}

#define KPF_THP 22

long long probe_thp_bytes(const void *p, size_t len) {
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY);
	long long bytes = -1;
	if (pm < 0 || kf < 0)
		goto out;
	bytes = 0;
	for (uintptr_t a = (uintptr_t)p & ~4095UL; a < (uintptr_t)p + len;
	    a += 4096) {
		uint64_t ent, flags;
		if (pread(pm, &ent, 8, (off_t)(a / 4096 * 8)) != 8)
			continue;
		if (!(ent >> 63) || (ent & ((1ULL << 55) - 1)) == 0)
			continue;           /* not present, or PFN hidden */
		uint64_t pfn = ent & ((1ULL << 55) - 1);
		if (pread(kf, &flags, 8, (off_t)(pfn * 8)) == 8 &&
		    (flags >> KPF_THP & 1))
			bytes += 4096;
	}
out:
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	return bytes;
}

long long probe_resident_bytes(const void *p, size_t len) {
	int pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0)
		return -1;
	long long bytes = 0;
	for (uintptr_t a = (uintptr_t)p & ~4095UL; a < (uintptr_t)p + len;
	    a += 4096) {
		uint64_t ent;
		if (pread(pm, &ent, 8, (off_t)(a / 4096 * 8)) == 8 && (ent >> 63))
			bytes += 4096;
	}
	close(pm);
	return bytes;
}

/* Reads a small /proc file into buf without stdio (no malloc call). */
static int slurp(const char *path, char *buf, size_t n) {
	int fd = open(path, O_RDONLY);
	ssize_t got = fd < 0 ? -1 : read(fd, buf, n - 1);
	if (fd >= 0)
		close(fd);
	buf[got > 0 ? got : 0] = '\0';
	return got > 0;
}

/* Without stdio: callers poll it while making no malloc calls. */
long probe_rss_kb(void) {
	char buf[4096];
	const char *p = slurp("/proc/self/status", buf, sizeof buf) ?
	    strstr(buf, "VmRSS:") : NULL;
	return p ? strtol(p + 6, NULL, 10) : -1;
}

long probe_hugetlb_kb(void) {
	char buf[4096];
	if (!slurp("/proc/self/smaps_rollup", buf, sizeof buf))
		return 0;
	long kb = 0;
	for (const char *k = buf; (k = strstr(k, "_Hugetlb:")) != NULL; k += 9)
		kb += strtol(k + 9, NULL, 10);
	return kb;
}

long probe_huge_kb(void) {
	char buf[4096];
	const char *p = slurp("/proc/self/smaps_rollup", buf, sizeof buf) ?
	    strstr(buf, "AnonHugePages:") : NULL;
	return (p ? strtol(p + 14, NULL, 10) : 0) + probe_hugetlb_kb();
}

long probe_meminfo(const char *key) {
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	long v = -1;
	size_t k = strlen(key);
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, key, k) == 0) {
			v = atol(line + k);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

long probe_sysfs_long(const char *path) {
	FILE *f = fopen(path, "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

long long probe_vmstat(const char *key) {
	FILE *f = fopen("/proc/vmstat", "r");
	char name[128];
	long long v, found = -1;
	while (f && fscanf(f, "%127s %lld", name, &v) == 2)
		if (strcmp(name, key) == 0) {
			found = v;
			break;
		}
	if (f)
		fclose(f);
	return found;
}

bool probe_stats(void *out) {
	/* read(2) into a static buffer: no allocator call. */
	static char maps[1 << 20];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;
	while (fd >= 0 && n < sizeof maps - 1 && (r = read(fd, maps + n,
	    sizeof maps - 1 - n)) > 0)
		n += (size_t)r;
	if (fd >= 0)
		close(fd);
	maps[n] = '\0';
	char *hit = strstr(maps, "/memfd:" HP_STATS_NAME " ");
	if (hit == NULL)
		return false;
	while (hit > maps && hit[-1] != '\n')
		hit--;
	unsigned long a = 0, b;
	if (sscanf(hit, "%lx-%lx", &a, &b) != 2)
		return false;
	const volatile hp_stats_t *page = (const volatile hp_stats_t *)a;
	hp_stats_t *st = out;
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t s1 = __atomic_load_n(&page->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		memcpy(st, (const void *)page, sizeof *st);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&page->seq, __ATOMIC_RELAXED) == s1)
			return st->magic == HP_STATS_MAGIC;
	}
	return false;
}
