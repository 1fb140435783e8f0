/*
 * hugepreload stat: a running program's counters, read from outside.
 *
 *   hugepreload stat PID [--json|--prometheus] [--watch SECONDS] [-o FILE]
 *   hugepreload stat --all [--json|--prometheus] [-o FILE]
 *
 * The library keeps its counters in a page of the process's memory (a
 * memfd named hugepreload-stats, src/core/stats.c); this finds it in
 * /proc/PID/maps and reads it through /proc/PID/mem under the kernel's
 * own access check (the process's user, or root), and adds the kernel's
 * figures from /proc/PID/smaps and pagemap. --all does so for every
 * process that has the page; its Prometheus form is one exposition (each
 * metric's HELP and TYPE once, a series per pid), for node_exporter's
 * textfile collector. -o writes FILE whole or not at all (a temporary
 * file in its directory, renamed over it). The page is the process's to
 * write, and is checked as untrusted input (statpage.c).
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

/* A process skipped: one line, with the reason. */
static void skipped(const hp_statjob_t *j) {
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
		int found = hp_statpage_find(pid, &a, &b);
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
	hp_stat_all_deadline = hp_stat_mono() + HP_STAT_ALL_SECONDS;
	for (size_t i = 0; i < n; i++) {
		hp_stats_t st;
		hp_stats_meta_t m;
		hp_statjob_t j = {.pid = pids[i], .deadline = hp_stat_all_deadline};
		int r = hp_stat_late(&j) ? -3 : hp_statpage_read(pids[i], &st, &m, &j);
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
		hp_statjob_t j;
		int r = hp_statpage_read(pid, &st, &m, &j);
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
