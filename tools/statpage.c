/*
 * One process's counters page, read from outside and checked as
 * untrusted input (for hugepreload stat, stat.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "base/stats_print.h"

/*
 * The page is untrusted input: any local user's program can map a memfd of
 * that name and write what it likes in it. Before anything from it drives
 * a loop or a read, its ranges are checked (whole pages, 2 MiB ones where
 * the format says so, not empty, in the user address space, in order and
 * not overlapping, and jemalloc's, which stat reads through pagemap,
 * mapped in the process), and each process's work is bounded: at most
 * SCAN_MAX bytes of ranges and PROC_SECONDS seconds. A process that fails
 * either is skipped with one line, and the others are read.
 */
/* x86-64's user address space with 4-level page tables (TASK_SIZE): mmap
 * places nothing above it unless asked to, and neither the library nor
 * jemalloc asks. */
#define USER_TOP 0x7ffffffff000ull
/* Bytes of jemalloc's mappings read through pagemap for one process: 1 TiB
 * is 2 GiB of pagemap words, a good part of a second of system time even
 * where none is resident (docs/limits.md); a program has far fewer. */
#define SCAN_MAX ((uint64_t)1 << 40)
#define PROC_SECONDS 2
double hp_stat_all_deadline;        /* 0: no bound over all processes */

double hp_stat_mono(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((format(printf, 2, 3)))
static bool skip(hp_statjob_t *j, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->why, sizeof j->why, fmt, ap);
	va_end(ap);
	return false;
}

/* Whether the job is past its deadline (then the why says so). */
bool hp_stat_late(hp_statjob_t *j) {
	if (j == NULL || j->late || hp_stat_mono() < j->deadline)
		return j != NULL && j->late;
	j->late = true;
	if (j->deadline == hp_stat_all_deadline)
		skip(j, "stat --all ran out of its %d s", HP_STAT_ALL_SECONDS);
	else
		skip(j, "took more than %d s", PROC_SECONDS);
	return true;
}

/* Address space a process has: /proc/PID/maps, adjacent mappings joined. */
typedef struct {
	uint64_t lo, hi;
} span_t;
typedef struct {
	span_t *v;
	size_t n, cap;
} spans_t;

static bool span_add(spans_t *s, uint64_t lo, uint64_t hi) {
	if (s->n > 0 && lo <= s->v[s->n - 1].hi) {     /* adjacent (in order) */
		if (hi > s->v[s->n - 1].hi)
			s->v[s->n - 1].hi = hi;
		return true;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		span_t *v = realloc(s->v, cap * sizeof *v);
		if (v == NULL)
			return false;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (span_t){lo, hi};
	return true;
}

/* Whether [lo, hi) is all mapped: inside one joined span. */
static bool spans_hold(const spans_t *s, uint64_t lo, uint64_t hi) {
	size_t a = 0, b = s->n;              /* the last span starting <= lo */
	while (b - a > 1) {
		size_t mid = a + (b - a) / 2;
		if (s->v[mid].lo <= lo)
			a = mid;
		else
			b = mid;
	}
	return s->n > 0 && s->v[a].lo <= lo && hi <= s->v[a].hi;
}

/* pid's /proc/PID/maps, line by line (a line is whole, however long its
 * path): where its stats page is mapped, the memfd's line, and with spans
 * all its mappings. 1 found, 0 not there, -1 (errno set) the maps could
 * not be read, or (j's why set) the job is late or out of memory. */
static int read_maps(long pid, hp_statjob_t *j, unsigned long *start,
    unsigned long *end, spans_t *spans) {
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return -1;
	int found = 0;
	bool ok = true;
	char *line = NULL;
	size_t cap = 0;
	while ((spans || !found) && getline(&line, &cap, f) > 0) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || lo >= hi)
			continue;
		if (!found && strstr(line, "/memfd:" HP_STATS_NAME " ")) {
			*start = lo;
			*end = hi;
			found = 1;
		}
		if (spans && (hp_stat_late(j) || !(ok = span_add(spans, lo, hi))))
			break;
	}
	int err = errno;
	bool bad = ferror(f);
	free(line);
	fclose(f);
	if (!ok)
		skip(j, "out of memory for its maps");
	errno = err;
	return bad ? -1 : !ok || (j && j->late) ? -1 : found;
}

int hp_statpage_find(long pid, unsigned long *start, unsigned long *end) {
	return read_maps(pid, NULL, start, end, NULL);
}

/* Why [lo, hi) is not whole pages of align, in the user address space;
 * NULL if it is. */
static const char *bad_range(uint64_t lo, uint64_t hi, uint64_t align) {
	if ((lo | hi) & (align - 1))
		return align == HP_PAGE ? "not whole 4 KiB pages" :
		    "not whole 2 MiB pages";
	if (lo >= hi)
		return "empty";
	if (hi > USER_TOP)
		return "outside the user address space";
	return NULL;
}

static bool overlap(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
	return a < d && c < b;
}

/* Whether the ranges of the page st, read from process pid, are what the
 * library writes (see above); maps are the process's mappings, read after
 * the page. */
static bool page_valid(hp_statjob_t *j, const hp_stats_t *st, const spans_t *maps) {
	typedef unsigned long long ull;
	const char *e;
	uint64_t rb = st->region_base, rs = st->region_size;
	uint64_t lb = st->ll_base, ls = st->ll_size;
	if (st->small_nranges > HP_STATS_RANGES)
		return skip(j, "%u ranges, more than a page holds (%d)",
		    st->small_nranges, HP_STATS_RANGES);
	if (rs != 0 && (e = rs > USER_TOP || rb > USER_TOP - rs ?
	    "outside the user address space" : bad_range(rb, rb + rs, HP_HUGE)))
		return skip(j, "the huge class's range %#llx+%#llx is %s",
		    (ull)rb, (ull)rs, e);
	if (ls != 0 && (e = ls > USER_TOP || lb > USER_TOP - ls ?
	    "outside the user address space" : bad_range(lb, lb + ls, HP_HUGE)))
		return skip(j, "the long-lived class's range %#llx+%#llx is %s",
		    (ull)lb, (ull)ls, e);
	if (rs != 0 && ls != 0 && overlap(rb, rb + rs, lb, lb + ls))
		return skip(j, "the huge and long-lived classes' ranges overlap");
	uint64_t total = 0, prev = 0;
	for (unsigned i = 0; i < st->small_nranges; i++) {
		uint64_t lo = st->small_ranges[i][0], hi = st->small_ranges[i][1];
		if ((e = bad_range(lo, hi, HP_PAGE)) != NULL)
			return skip(j, "range %u (%#llx-%#llx) is %s", i, (ull)lo,
			    (ull)hi, e);
		if (lo < prev)
			return skip(j, "range %u (%#llx-%#llx) overlaps or comes "
			    "before range %u", i, (ull)lo, (ull)hi, i - 1);
		if ((rs && overlap(lo, hi, rb, rb + rs)) ||
		    (ls && overlap(lo, hi, lb, lb + ls)))
			return skip(j, "range %u (%#llx-%#llx) overlaps a class's "
			    "range", i, (ull)lo, (ull)hi);
		if (!spans_hold(maps, lo, hi))
			return skip(j, "range %u (%#llx-%#llx) is not mapped in the "
			    "process", i, (ull)lo, (ull)hi);
		total += hi - lo;
		prev = hi;
	}
	if (total > SCAN_MAX)
		return skip(j, "its ranges cover %llu GiB, more than the %llu GiB "
		    "stat reads", (ull)(total >> 30), (ull)(SCAN_MAX >> 30));
	return true;
}

/* Opens what reads pid's page: /proc/PID/mem at *off, or where the kernel
 * refuses that (ptrace restrictions), the memfd through
 * /proc/PID/map_files at 0. -1 with errno from the first attempt. */
static int open_page(long pid, unsigned long start, unsigned long end,
    off_t *off) {
	char path[96];
	snprintf(path, sizeof path, "/proc/%ld/mem", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	*off = (off_t)start;
	if (fd >= 0)
		return fd;
	int err = errno;
	snprintf(path, sizeof path, "/proc/%ld/map_files/%lx-%lx", pid, start,
	    end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	*off = 0;
	if (fd < 0)
		errno = err;
	return fd;
}

/* pid as the process itself sees it: the last of NSpid in
 * /proc/PID/status (in a container, its own namespace's), else pid. */
static long own_pid(long pid) {
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	FILE *f = fopen(path, "re");
	long last = pid;
	while (f && fgets(line, sizeof line, f)) {
		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		char *p = line + 6, *end;
		for (long v; (v = strtol(p, &end, 10)), end != p; p = end)
			last = v;
		break;
	}
	if (f)
		fclose(f);
	return last;
}

/* One consistent copy of the page (the library's seqlock), checked: the
 * page is this process's (the pid the library wrote is the process's own,
 * also in a container), and is labelled with the pid given, unique on
 * this host. */
static bool load(int fd, off_t off, long pid, hp_stats_t *st) {
	hp_stats_t buf;
	uint64_t seq;
	for (int tries = 0; tries < 1000; tries++) {
		if (tries)
			sched_yield();
		if (pread(fd, &buf, sizeof buf, off) != (ssize_t)sizeof buf ||
		    (buf.seq & 1) || pread(fd, &seq, sizeof seq, off +
		    (off_t)offsetof(hp_stats_t, seq)) != (ssize_t)sizeof seq)
			continue;
		if (seq != buf.seq)
			continue;
		if (buf.pid != pid && buf.pid != own_pid(pid))
			return false;
		buf.pid = pid;
		return hp_stats_copy(&buf, st);
	}
	return false;
}

/* Present pages of [lo, hi) in process pid, from its pagemap (bit 63 of
 * each page's word); false if unreadable or late. [lo, hi) is whole pages
 * (page_valid), so each pass takes at least one. */
static bool pagemap_present(hp_statjob_t *j, int fd, uint64_t lo, uint64_t hi,
    uint64_t *bytes) {
	static uint64_t words[8192];
	for (uint64_t a = lo; a < hi;) {
		uint64_t pages = (hi - a) / 4096;
		size_t n = pages < 8192 ? (size_t)pages : 8192;
		if (n == 0 || hp_stat_late(j))
			return false;
		ssize_t got = pread(fd, words, n * 8, (off_t)(a / 4096 * 8));
		if (got != (ssize_t)(n * 8))
			return false;
		for (size_t i = 0; i < n; i++)
			*bytes += (words[i] >> 63) ? 4096 : 0;
		a += n * 4096;
	}
	return true;
}

/* From process pid's smaps: the resident bytes, and those on huge pages,
 * of its mappings inside the huge class's range; from its pagemap, the
 * resident bytes of jemalloc's own mappings (the small class's), whose
 * vmas the kernel may have merged with the program's. */
static bool smaps_ranges(hp_statjob_t *j, long pid, const hp_stats_t *st,
    hp_stats_meta_t *m) {
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%ld/smaps", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	bool in = false, in_ll = false, anon = false;
	uint64_t ll = st->ll_base, ll_size = st->ll_size;
	uint64_t base = st->region_base, size = st->region_size;
	uint64_t rss = 0, thp = 0;             /* of the area being read */
	while (!hp_stat_late(j) && fgets(line, sizeof line, f) != NULL) {
		unsigned long lo, hi, kb;
		char key[64];
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') <
		    strchr(line, ' ')) {
			in = size && lo >= base && hi <= base + size;
			in_ll = ll_size && lo >= ll && hi <= ll + ll_size;
			/* An anonymous area: no path after the inode, or
			 * "/dev/zero (deleted)" for shared memory. */
			char path_field[16] = "";
			anon = sscanf(line, "%*s %*s %*s %*s %*s %15s",
			    path_field) != 1 || strcmp(path_field, "/dev/zero") == 0;
			rss = thp = 0;
			continue;
		}
		/* The program's own advised areas (mmap.c, or its own advice):
		 * anonymous, "hg", outside the huge class; jemalloc's are "nh". */
		if (strncmp(line, "VmFlags:", 8) == 0) {
			if (in_ll) {
				m->smaps_ll_resident += rss;
				m->smaps_ll_huge += thp;
			} else if (!in && anon && strstr(line, " hg")) {
				m->smaps_mmap_resident += rss;
				m->smaps_mmap_huge += thp;
			}
			continue;
		}
		if (sscanf(line, "%63s %lu kB", key, &kb) != 2)
			continue;
		if (strcmp(key, "Rss:") == 0)
			rss += (uint64_t)kb << 10;
		else if (strcmp(key, "AnonHugePages:") == 0 ||
		    strcmp(key, "ShmemPmdMapped:") == 0)
			thp += (uint64_t)kb << 10;
		else if (in_ll && (strcmp(key, "Private_Hugetlb:") == 0 ||
		    strcmp(key, "Shared_Hugetlb:") == 0)) {
			rss += (uint64_t)kb << 10;   /* not in Rss: */
			thp += (uint64_t)kb << 10;
		}
		if (!in)
			continue;
		uint64_t b = (uint64_t)kb << 10;
		if (strcmp(key, "Rss:") == 0) {
			m->smaps_resident += b;
		} else if (strcmp(key, "Private_Hugetlb:") == 0 ||
		    strcmp(key, "Shared_Hugetlb:") == 0) {
			m->smaps_resident += b;
			m->smaps_huge += b;
		} else if (strcmp(key, "AnonHugePages:") == 0) {
			m->smaps_huge += b;
		}
	}
	fclose(f);
	snprintf(path, sizeof path, "/proc/%ld/pagemap", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && !j->late;
	for (unsigned i = 0; ok && i < st->small_nranges; i++)
		ok = pagemap_present(j, fd, st->small_ranges[i][0],
		    st->small_ranges[i][1], &m->smaps_small_resident);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Whether pid runs: there, and not a zombie (ended, its memory gone, not
 * yet reaped): the state after the name in /proc/PID/stat. */
static bool running(long pid) {
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p == NULL || p[1] != ' ' || (p[2] != 'Z' && p[2] != 'X');
}

/* One process's counters: 1 read; 0 no counters; -1 cannot read (errno
 * set); -2 no such process; -3 skipped (its page is not what the library
 * writes, or reading it took too long), j's why says why. */
int hp_statpage_read(long pid, hp_stats_t *st, hp_stats_meta_t *m,
    hp_statjob_t *j) {
	*j = (hp_statjob_t){.pid = pid, .deadline = hp_stat_mono() + PROC_SECONDS};
	if (hp_stat_all_deadline != 0 && hp_stat_all_deadline < j->deadline)
		j->deadline = hp_stat_all_deadline;
	unsigned long start = 0, end = 0;
	int found = hp_statpage_find(pid, &start, &end), fd = -1;
	if (found == 1 && end - start < sizeof *st)
		return skip(j, "its page is mapped in %lu bytes, fewer than a "
		    "page's %zu", end - start, sizeof *st), -3;
	off_t off = 0;
	bool got = found == 1 && (fd = open_page(pid, start, end, &off)) >= 0 &&
	    load(fd, off, pid, st);
	int err = errno;
	if (fd >= 0)
		close(fd);
	/* Its mappings as they are now, after the page was read; the page
	 * still among them (else the process is ending, or dropped it). */
	spans_t maps = {0};
	int again = got ? read_maps(pid, j, &start, &end, &maps) : 0;
	bool valid = again == 1 && page_valid(j, st, &maps);
	if (again < 0)
		err = errno;
	free(maps.v);
	if (j->why[0] != '\0')
		return -3;
	if (!valid && !running(pid))
		return -2;
	if (!valid) {
		errno = err;
		return found < 0 || (found == 1 && fd < 0) || again < 0 ? -1 : 0;
	}
	char why[64];
	if (!hp_stats_names_ok(st, why, sizeof why))
		return skip(j, "its counters' page is not the library's (%s)",
		    why), -3;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	memset(m, 0, sizeof *m);
	m->alive = true;
	m->age_s = (double)now.tv_sec + now.tv_nsec / 1e9 -
	    (double)st->updated_ns / 1e9;
	m->smaps = smaps_ranges(j, pid, st, m);
	hp_stats_wrapper_names(st, pid, m);
	return j->late ? -3 : 1;
}
