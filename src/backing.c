/*
 * How huge-class memory is backed: what the kernel offers (probe), how a
 * run of 2 MiB pages of the reservation is made usable (map), and how a
 * run of whole, empty 2 MiB pages goes back to the kernel (zap).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "internal.h"

static int warned_madvise;

/* Reads a small file into buf without stdio (no allocation). */
static ssize_t read_small(const char *path, char *buf, size_t n) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t got = 0, r;
	while ((size_t)got < n - 1 && (r = read(fd, buf + got, n - 1 -
	    (size_t)got)) > 0)
		got += r;
	close(fd);
	buf[got < 0 ? 0 : got] = '\0';
	return got;
}

/* The bracketed choice of a sysfs knob such as "always [madvise] never". */
static void sysfs_choice(const char *path, char *out, size_t n) {
	char buf[128];
	const char *lb, *rb;
	strncpy(out, "absent", n - 1);
	out[n - 1] = '\0';
	if (read_small(path, buf, sizeof buf) <= 0 ||
	    (lb = strchr(buf, '[')) == NULL || (rb = strchr(lb, ']')) == NULL)
		return;
	size_t len = (size_t)(rb - lb - 1) < n - 1 ? (size_t)(rb - lb - 1) : n - 1;
	memcpy(out, lb + 1, len);
	out[len] = '\0';
}

static long meminfo_field(const char *buf, const char *key) {
	const char *p = strstr(buf, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

void hp_backing_probe(hp_sys_t *s) {
	char buf[8192];
	sysfs_choice("/sys/kernel/mm/transparent_hugepage/enabled",
	    s->thp_enabled, sizeof s->thp_enabled);
	sysfs_choice("/sys/kernel/mm/transparent_hugepage/defrag",
	    s->thp_defrag, sizeof s->thp_defrag);
	s->hugetlb_total = s->hugetlb_free = -1;
	if (read_small("/proc/meminfo", buf, sizeof buf) > 0) {
		s->hugetlb_total = meminfo_field(buf, "HugePages_Total:");
		s->hugetlb_free = meminfo_field(buf, "HugePages_Free:");
	}
}

const char *hp_backing_effective(const hp_sys_t *s) {
	if (hp_conf.backing == HP_BACKING_NONE)
		return "4k (backing:none)";
	if (strcmp(s->thp_enabled, "always") == 0 ||
	    strcmp(s->thp_enabled, "madvise") == 0)
		return "thp";
	return "4k (THP unavailable)";
}

bool hp_backing_map(void *addr, size_t len) {
	if (mprotect(addr, len, PROT_READ | PROT_WRITE) != 0)
		return false;
	int advice = hp_conf.backing == HP_BACKING_THP ? MADV_HUGEPAGE :
	    MADV_NOHUGEPAGE;
	if (madvise(addr, len, advice) != 0)
		hp_warn_once(&warned_madvise, "madvise(%s) failed (errno %d); "
		    "the huge class stays on the kernel's default pages",
		    advice == MADV_HUGEPAGE ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE",
		    errno);
	return true;
}

static int warned_zap;

/* False if the pages could not be given back (mlock'ed memory, say). */
bool hp_backing_zap(void *addr, size_t len) {
	if (madvise(addr, len, MADV_DONTNEED) == 0)
		return true;
	hp_warn_once(&warned_zap, "madvise(MADV_DONTNEED) failed (errno %d); "
	    "free huge pages stay resident", errno);
	return false;
}
