/*
 * The counters printed at exit (stats_print), on stderr or in
 * stats_file: replaced when the file holds an earlier run's, added to
 * when other processes of this run (a service tree) wrote it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/core.h"
#include "base/lock.h"
#include "base/stats_print.h"

static void to_fd(void *ctx, const char *s, size_t n) {
	int fd = *(int *)ctx;
	while (n > 0) {
		ssize_t w = hp_os_write(fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* When this run began, CLOCK_REALTIME: the start of this process's group
 * leader (the service's main process, the shell job: workers it forks,
 * and children run one after another, are in its group), from
 * /proc/PGID/stat, less two clock ticks for the kernel's coarse file
 * times; this process's own start if the leader is gone. */
static uint64_t run_start_ns(void) {
	char path[48], buf[1024];
	hp_fmt(path, sizeof path, "/proc/%d/stat", (int)getpgrp());
	ssize_t n = hp_os_read_file(path, buf, sizeof buf);
	const char *p = n > 0 ? strrchr(buf, ')') : NULL;
	unsigned long long ticks = 0;
	/* Field 22, starttime; the fields after the name's ')' start at 3. */
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec boot, real;
	if (p == NULL || sscanf(p + 1, "%llu", &ticks) != 1 || hz <= 0 ||
	    clock_gettime(CLOCK_BOOTTIME, &boot) != 0 ||
	    clock_gettime(CLOCK_REALTIME, &real) != 0)
		return hp_stats_started_ns();
	uint64_t since_boot = ticks * (1000000000ull / (uint64_t)hz);
	uint64_t boot_ns = (uint64_t)boot.tv_sec * 1000000000ull +
	    (uint64_t)boot.tv_nsec;
	uint64_t real_ns = (uint64_t)real.tv_sec * 1000000000ull +
	    (uint64_t)real.tv_nsec;
	uint64_t slack = 2 * (1000000000ull / (uint64_t)hz);
	if (since_boot > boot_ns || real_ns < boot_ns - since_boot + slack)
		return hp_stats_started_ns();
	return real_ns - (boot_ns - since_boot) - slack;
}

/* Whether stats_file (open as fd, locked) was written by another process
 * of this run (its mtime is later than the run's start): -1 if not
 * (empty, or left by an earlier run), else how many processes' counters it
 * holds (the first line each format prints, counted). Read, not mapped: a
 * file cut short meanwhile (logrotate) must not fault. */
static int shared_blocks(int fd) {
	static const char *const first[] = {"hugepreload stats: pid ",
	    "{\"pid\": ", "hugepreload_info{pid="};
	struct stat st;
	if (hp_os_fstat(fd, &st) != 0 || st.st_size == 0 ||
	    (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
	    (uint64_t)st.st_mtim.tv_nsec < run_start_ns())
		return -1;
	const char *marker = first[hp_conf.stats_format];
	size_t mlen = strlen(marker), have = 0;
	char buf[4096];
	int n = 0;
	for (;;) {
		ssize_t got = hp_os_read(fd, buf + have, sizeof buf - have);
		if (got <= 0)
			break;
		have += (size_t)got;
		for (char *q = buf; (q = memmem(q, have - (size_t)(q - buf),
		    marker, mlen)) != NULL; q += mlen)
			n++;
		/* Keep a marker's length less one: one cut in two is found
		 * whole next time, none is counted twice. */
		size_t keep = have < mlen - 1 ? have : mlen - 1;
		memmove(buf, buf + have - keep, keep);
		have = keep;
	}
	return n;
}

/* stats_file, open for this process's counters: replaced when it holds
 * an earlier run's; added to when another process of this run (a service
 * tree, stats_file without %p) wrote it, and that said once, by the
 * process that finds one other's there. Locked until closed, so that
 * processes exiting at once take turns. */
static int open_stats_file(const char *path) {
	int fd = hp_os_open(path, O_RDWR | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		return -1;
	hp_os_flock(fd, LOCK_EX);
	int shared = shared_blocks(fd);
	if (shared < 0)
		hp_os_ftruncate(fd, 0);
	if (shared == 1)
		hp_log("stats_file %s is shared by several processes: each adds "
		    "its counters after the others'; %%p in it gives each its own "
		    "file", path);
	return fd;
}

/* At exit: the last refresh, printed if asked. Not if exit interrupted
 * this thread holding a lock (exit called from a signal handler in the
 * middle of an allocation): the refresh asks jemalloc, which takes its
 * locks, and one could be that thread's own; nor if another thread keeps
 * the refresh lock (lock.h). */
__attribute__((destructor)) static void hp_report_exit(void) {
	static hp_stats_t last;
	if (hp_threshold == 0)          /* never started */
		return;
	int saved = errno;
	if (!hp_stats_last(&last)) {
		if (hp_conf.stats_print && hp_locks_held() != 0)
			hp_log("no counters at exit: exit came with the "
			    "allocator's locks held (exit from a signal "
			    "handler?)");
		else if (hp_conf.stats_print)
			hp_log("no counters at exit: another thread kept "
			    "their lock over a second");
		errno = saved;
		return;
	}
	if (hp_conf.stats_print) {
		int fd = STDERR_FILENO;
		char path[sizeof hp_conf.stats_file + 24];
		hp_conf_path(hp_conf.stats_file, path, sizeof path);
		if (hp_conf.stats_file[0] != '\0')
			fd = open_stats_file(path);
		if (fd < 0) {
			hp_log("could not open stats_file %s (%s)", path,
			    hp_strerror(errno));
		} else {
			hp_stats_meta_t m = {.alive = true};
			hp_stats_wrapper_names(&last, getpid(), &m);
			hp_stats_format(&last, &m, (hp_format_t)hp_conf.stats_format,
			    to_fd, &fd);
			if (fd != STDERR_FILENO)
				hp_os_close(fd);
		}
	}
	errno = saved;
}
