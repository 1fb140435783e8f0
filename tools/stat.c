/*
 * hugepreload stat: a running program's counters, read from outside.
 *
 *   hugepreload stat PID [--json|--prometheus] [--watch SECONDS] [-o FILE]
 *   hugepreload stat --all [--json|--prometheus] [-o FILE]
 *
 * The library keeps its counters in a page of the process's memory (a
 * memfd named hugepreload-stats, src/stats.c); this finds it in
 * /proc/PID/maps and reads it through /proc/PID/mem under the kernel's
 * own access check (the process's user, or root), and adds the kernel's
 * figures from /proc/PID/smaps and pagemap. --all does so for every
 * process that has the page; its Prometheus form is one exposition (each
 * metric's HELP and TYPE once, a series per pid), for node_exporter's
 * textfile collector. -o writes FILE whole or not at all (a temporary
 * file in its directory, renamed over it). The page is the process's to
 * write, and is checked as untrusted input (page_valid, below).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "base/escape.h"
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
 * is 2 GiB of pagemap words, 0.2-0.3 s of system time where none is
 * resident (on the test VM); a program has far fewer. */
#define SCAN_MAX ((uint64_t)1 << 40)
#define PROC_SECONDS 2
/* stat --all in all: under the textfile unit's TimeoutSec (60 s), so that
 * many processes with pages slow to read cannot stop the textfile being
 * written; the processes left then are skipped, a line each. */
#define ALL_SECONDS 45
static double all_deadline;         /* 0: no bound over all processes */

/* One process being read: its deadline, and why it was skipped. */
typedef struct {
	long pid;
	double deadline;             /* CLOCK_MONOTONIC seconds */
	bool late;
	char why[200];
} job_t;

static double mono(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((format(printf, 2, 3)))
static bool skip(job_t *j, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->why, sizeof j->why, fmt, ap);
	va_end(ap);
	return false;
}

/* Whether the job is past its deadline (then the why says so). */
static bool late(job_t *j) {
	if (j == NULL || j->late || mono() < j->deadline)
		return j != NULL && j->late;
	j->late = true;
	if (j->deadline == all_deadline)
		skip(j, "stat --all ran out of its %d s", ALL_SECONDS);
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
static int read_maps(long pid, job_t *j, unsigned long *start,
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
		if (spans && (late(j) || !(ok = span_add(spans, lo, hi))))
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

static int find_page(long pid, unsigned long *start, unsigned long *end) {
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
static bool page_valid(job_t *j, const hp_stats_t *st, const spans_t *maps) {
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
static bool pagemap_present(job_t *j, int fd, uint64_t lo, uint64_t hi,
    uint64_t *bytes) {
	static uint64_t words[8192];
	for (uint64_t a = lo; a < hi;) {
		uint64_t pages = (hi - a) / 4096;
		size_t n = pages < 8192 ? (size_t)pages : 8192;
		if (n == 0 || late(j))
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
static bool smaps_ranges(job_t *j, long pid, const hp_stats_t *st,
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
	while (!late(j) && fgets(line, sizeof line, f) != NULL) {
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

/* Output collected in memory: written to stdout, or to -o FILE whole. */
typedef struct {
	char *p;
	size_t n, cap;
} buf_t;

static void put(void *ctx, const char *s, size_t n) {
	buf_t *b = ctx;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = realloc(b->p, cap);
		if (p == NULL) {
			perror("hugepreload");
			exit(1);
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

/* FILE replaced whole: a temporary file beside it, renamed over it. */
static int write_out(const buf_t *b, const char *file) {
	if (file == NULL) {
		fwrite(b->p ? b->p : "", 1, b->n, stdout);
		fflush(stdout);
		return 0;
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", file, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	bool ok = fd >= 0;
	for (size_t off = 0; ok && off < b->n;) {
		ssize_t w = write(fd, b->p + off, b->n - off);
		ok = w > 0;
		off += ok ? (size_t)w : 0;
	}
	ok = ok && fsync(fd) == 0;
	int err = errno;
	if (fd >= 0 && close(fd) != 0 && ok) {
		ok = false;
		err = errno;
	}
	if (ok && rename(tmp, file) == 0)
		return 0;
	err = ok ? errno : err;
	unlink(tmp);
	fprintf(stderr, "hugepreload: cannot write %s: %s\n", file,
	    strerror(err));
	return 1;
}

/* One process's counters: 1 read; 0 no counters; -1 cannot read (errno
 * set); -2 no such process; -3 skipped (its page is not what the library
 * writes, or reading it took too long), j's why says why. */
static int read_proc(long pid, hp_stats_t *st, hp_stats_meta_t *m,
    job_t *j) {
	*j = (job_t){.pid = pid, .deadline = mono() + PROC_SECONDS};
	if (all_deadline != 0 && all_deadline < j->deadline)
		j->deadline = all_deadline;
	unsigned long start = 0, end = 0;
	int found = find_page(pid, &start, &end), fd = -1;
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
	return j->late ? -3 : 1;
}

/* A process skipped: one line, with the reason. */
static void skipped(const job_t *j) {
	fprintf(stderr, "hugepreload: process %ld: skipped: %s\n", j->pid, j->why);
}

static void cannot_read(long pid, int err) {
	fprintf(stderr, "hugepreload: cannot read process %ld: %s (%s)\n",
	    pid, strerror(err), err == EACCES || err == EPERM ?
	    "permission: its user and root can read it" : "its user and root "
	    "can read it");
}

/* The program's name, from /proc/PID/comm (the program sets it, to any
 * bytes), escaped for a terminal. */
static void comm(long pid, char *out, size_t n) {
	char path[64], name[64];
	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	FILE *f = fopen(path, "re");
	size_t len = f ? fread(name, 1, sizeof name, f) : 0;
	if (len > 0 && name[len - 1] == '\n')   /* the kernel's own */
		len--;
	if (len == 0)
		len = (size_t)snprintf(name, sizeof name, "?");
	hp_escape(HP_ESC_TEXT, name, len, out, n, NULL);
	if (f)
		fclose(f);
}

/* The processes that have the counters' page, by pid; *refused counts
 * those whose maps this user may not read (permission). */
static size_t list_pids(long **out, size_t *refused) {
	DIR *d = opendir("/proc");
	size_t n = 0, cap = 64;
	long *v = malloc(cap * sizeof *v);
	struct dirent *e;
	while (d && v && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		unsigned long a, b;
		if (*end != '\0' || pid <= 0)
			continue;
		int found = find_page(pid, &a, &b);
		*refused += found < 0 && (errno == EACCES || errno == EPERM);
		if (found != 1)
			continue;
		if (n == cap) {
			long *w = realloc(v, (cap *= 2) * sizeof *v);
			if (w == NULL)
				break;
			v = w;
		}
		v[n++] = pid;
	}
	if (d)
		closedir(d);
	for (size_t i = 1; i < n; i++)           /* by pid */
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			long t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*out = v;
	return v ? n : 0;
}

/* The metric a line of an exposition is about (*len bytes): the name
 * after "# HELP " or "# TYPE ", or before a sample's labels; NULL for
 * other comments. */
static const char *metric(const char *l, size_t *len) {
	bool meta = strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0;
	if (l[0] == '#' && !meta)
		return NULL;
	const char *nm = meta ? l + 7 : l;
	*len = strcspn(nm, meta ? " \n" : "{ \n");
	return nm;
}

static bool same(const char *a, size_t alen, const char *b, size_t blen) {
	return a && b && alen == blen && memcmp(a, b, alen) == 0;
}

/* Prometheus expositions of several processes, merged into one: each
 * metric's HELP and TYPE once (the first process's), then its samples of
 * every process, in the order the metrics first appear. */
static void merge_prom(buf_t *all, buf_t *out) {
	size_t n = 0, cap = 256;
	char **line = malloc(cap * sizeof *line);
	for (char *l = all->p; line && l && *l; ) {
		if (n == cap && (line = realloc(line, (cap *= 2) *
		    sizeof *line)) == NULL)
			break;
		line[n++] = l;
		char *nl = strchr(l, '\n');
		l = nl ? nl + 1 : NULL;
	}
	char *done = calloc(n ? n : 1, 1);   /* lines written or dropped */
	for (size_t i = 0; line && done && i < n; i++) {
		size_t flen, len;
		const char *fam = metric(line[i], &flen);
		if (done[i] || strncmp(line[i], "# HELP ", 7) != 0)
			continue;
		bool help = false, type = false;
		for (size_t j = i; j < n; j++) {
			const char *nm = metric(line[j], &len);
			if (done[j] || !same(nm, len, fam, flen))
				continue;
			done[j] = 1;
			bool h = strncmp(line[j], "# HELP ", 7) == 0;
			bool t = strncmp(line[j], "# TYPE ", 7) == 0;
			if ((h && help) || (t && type))
				continue;             /* another process's: once */
			help |= h;
			type |= t;
			put(out, line[j], strcspn(line[j], "\n"));
			put(out, "\n", 1);
		}
	}
	free(done);
	free(line);
}

/* hugepreload stat --all: every process under the library. */
static int stat_all(hp_format_t fmt, const char *file) {
	long *pids;
	size_t refused = 0;
	size_t n = list_pids(&pids, &refused);
	buf_t out = {0}, prom = {0};
	size_t shown = 0;
	if (fmt == HP_FMT_TEXT)
		hp_outf(put, &out, "%8s %-16s %12s %14s %12s %13s %10s\n", "PID", "NAME",
		    "HUGE_MIB", "MMAP_HUGE_MIB", "LIVE_MIB", "STRANDED_MIB",
		    "FALLBACKS");
	if (fmt == HP_FMT_JSON)
		put(&out, "[", 1);
	all_deadline = mono() + ALL_SECONDS;
	for (size_t i = 0; i < n; i++) {
		hp_stats_t st;
		hp_stats_meta_t m;
		job_t j = {.pid = pids[i], .deadline = all_deadline};
		int r = late(&j) ? -3 : read_proc(pids[i], &st, &m, &j);
		if (r == -3)
			skipped(&j);
		if (r == -1 && (errno == EACCES || errno == EPERM))
			refused++;
		if (r != 1)
			continue;          /* gone, or not readable: not listed */
		if (fmt == HP_FMT_TEXT) {
			uint64_t live = 0, stranded = 0, fb = 0;
			for (unsigned a = 0; a < st.narenas && a < HP_STATS_ARENAS;
			    a++) {
				const hp_arena_stats_t *x = &st.arena[a];
				live += x->live_bytes;
				stranded += x->stranded_bytes;
				fb += x->fallback_pool_empty + x->fallback_thp_off +
				    x->fallback_mmap_failed;
			}
			char name[64];
			comm(pids[i], name, sizeof name);
			double mib = 1 << 20;
			hp_outf(put, &out, "%8ld %-16s %12.1f %14.1f %12.1f %13.1f %10llu\n",
			    pids[i], name, m.smaps_huge / mib, m.smaps_mmap_huge / mib,
			    live / mib, stranded / mib, (unsigned long long)fb);
		} else if (fmt == HP_FMT_JSON) {
			if (shown)
				put(&out, ",\n", 2);
			hp_stats_format(&st, &m, fmt, put, &out);
		} else {
			hp_stats_format(&st, &m, fmt, put, &prom);
		}
		shown++;
	}
	if (fmt == HP_FMT_JSON)
		put(&out, "]\n", 2);
	if (fmt == HP_FMT_PROM)
		merge_prom(&prom, &out);
	if (refused)
		fprintf(stderr, "hugepreload: %zu process%s not looked at: "
		    "permission (this user may not read %s memory map%s)\n",
		    refused, refused == 1 ? "" : "es", refused == 1 ? "its" :
		    "their", refused == 1 ? "" : "s");
	int rc = write_out(&out, file);
	free(out.p);
	free(prom.p);
	free(pids);
	return rc;
}

int hp_cli_stat(int argc, char **argv) {
	hp_format_t fmt = HP_FMT_TEXT;
	double watch = 0;
	long pid = 0;
	bool all = false;
	const char *file = NULL;
	for (int i = 2; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--json") == 0) {
			fmt = HP_FMT_JSON;
		} else if (strcmp(argv[i], "--prometheus") == 0) {
			fmt = HP_FMT_PROM;
		} else if (strcmp(argv[i], "--all") == 0) {
			all = true;
		} else if (strcmp(argv[i], "-o") == 0) {
			if (i + 1 == argc || argv[i + 1][0] == '\0')
				return hp_cli_bad("-o needs a file name");
			file = argv[++i];
		} else if (strcmp(argv[i], "--watch") == 0) {
			if (i + 1 == argc)
				return hp_cli_bad("--watch needs a number of seconds");
			watch = strtod(argv[++i], &end);
			if (*end != '\0' || end == argv[i] || !(watch > 0 &&
			    watch <= 86400))
				return hp_cli_bad("--watch takes seconds, more than 0, "
				    "at most 86400, not '%s'", argv[i]);
		} else if (argv[i][0] == '-') {
			return hp_cli_bad("unknown option '%s' to stat", argv[i]);
		} else if (pid != 0 || (pid = strtol(argv[i], &end, 10)) <= 0 ||
		    *end != '\0') {
			return hp_cli_bad("stat takes one process id, not '%s'",
			    argv[i]);
		}
	}
	if (all && (pid != 0 || watch > 0))
		return hp_cli_bad("stat --all takes no process id and no --watch");
	if (all)
		return stat_all(fmt, file);
	if (pid <= 0)
		return hp_cli_bad("stat needs a process id, or --all");
	for (int frames = 0;; frames++) {
		hp_stats_t st;
		hp_stats_meta_t m;
		job_t j;
		int r = read_proc(pid, &st, &m, &j);
		struct timespec t = {(time_t)watch,
		    (long)((watch - (double)(time_t)watch) * 1e9)};
		if (r == -3) {
			skipped(&j);
			/* Watching a process read before: one frame skipped
			 * (a slow read on a busy host, say), not the watch. */
			if (watch <= 0 || frames == 0)
				return 1;
			nanosleep(&t, NULL);
			continue;
		}
		if (r == -2) {
			if (frames > 0) {
				printf("hugepreload: pid %ld has exited\n", pid);
				return 0;
			}
			fprintf(stderr, "hugepreload: no process %ld\n", pid);
			return 1;
		}
		if (r == -1) {
			cannot_read(pid, errno);
			return 1;
		}
		if (r == 0) {
			fprintf(stderr, "hugepreload: process %ld has no counters "
			    "(not running under hugepreload, not using it yet, or "
			    "stats_live:false)\n", pid);
			return 1;
		}
		buf_t out = {0};
		hp_stats_format(&st, &m, fmt, put, &out);
		int rc = write_out(&out, file);
		free(out.p);
		if (rc != 0 || watch <= 0)
			return rc;
		nanosleep(&t, NULL);
	}
}
