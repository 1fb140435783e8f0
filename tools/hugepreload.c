/*
 * hugepreload: run a program under the library, or read a running one's
 * counters.
 *
 *   hugepreload [--conf K:V,...] [--verbose] -- CMD ARGS...
 *   hugepreload stat PID [--json|--prometheus] [--watch SECONDS]
 *   hugepreload --help
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "hugepreload.h"
#include "stats_print.h"

static void usage(FILE *f) {
	fprintf(f,
	    "usage: hugepreload [--conf K:V,...] [--verbose] -- CMD [ARGS...]\n"
	    "       hugepreload stat PID [--json|--prometheus] [--watch SECONDS]"
	    "\n       hugepreload --version | --help\n\n"
	    "The first form runs CMD with libhugepreload.so preloaded (before any\n"
	    "LD_PRELOAD already set) and HUGEPRELOAD_CONF set, and exits with\n"
	    "CMD's status. --conf items are added after any HUGEPRELOAD_CONF in\n"
	    "the environment (later items win); --verbose adds verbose:true\n"
	    "and says which library it preloads: the installed one, the one\n"
	    "beside this command, or the build tree's, the first found.\n\n"
	    "stat reads a running program's counters from its memory (a page\n"
	    "the library keeps, through /proc/PID/mem) without signalling or\n"
	    "pausing it; as with a debugger, its user and root may read it.\n"
	    "--watch prints them again every SECONDS until it exits.\n\n"
	    "HUGEPRELOAD_CONF keys (key:value, comma-separated):\n");
	for (int i = 0; hp_conf_help[i][0] != NULL; i++)
		fprintf(f, "  %-16s %s (default %s)\n  %-16s   %s\n",
		    hp_conf_help[i][0], hp_conf_help[i][1], hp_conf_help[i][2], "",
		    hp_conf_help[i][3]);
}

#ifndef HP_LIB_FROM_BIN                 /* the Makefile's, for make install */
#define HP_LIB_FROM_BIN "../lib/hugepreload"
#endif
#ifndef HP_BUILD_DIR                    /* the build tree it was built in */
#define HP_BUILD_DIR "build"
#endif

/* The library to preload, where it is installed (beside the command's
 * bin directory: PREFIX/bin and LIBDIR/hugepreload, so DESTDIR and
 * PREFIX keep working), beside the command, or in the build tree the
 * command was built in, in that order; *where says which. */
static bool library_path(char *out, size_t n, const char **where) {
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[len > 0 ? len : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	const char *dirs[][2] = {
	    {exe, "/" HP_LIB_FROM_BIN}, {exe, ""}, {HP_BUILD_DIR, ""}};
	const char *names[] = {"installed", "beside the command",
	    "in the build tree"};
	for (int i = 0; i < 3; i++) {
		snprintf(out, n, "%s%s/libhugepreload.so", dirs[i][0], dirs[i][1]);
		*where = names[i];
		if (access(out, R_OK) == 0)
			return true;
	}
	snprintf(out, n, "%s%s/libhugepreload.so", exe, "/" HP_LIB_FROM_BIN);
	*where = "installed";
	return false;
}

static int run(int argc, char **argv) {
	const char *conf = NULL;
	int verbose = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--conf") == 0 && i + 1 < argc)
			conf = argv[++i];
		else if (strcmp(argv[i], "--verbose") == 0)
			verbose = 1;
		else {
			fprintf(stderr, "hugepreload: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i + 1 >= argc) {
		usage(stderr);
		return 2;
	}
	char lib[PATH_MAX + 64], preload[3 * PATH_MAX], hc[8192];
	const char *where;
	if (!library_path(lib, sizeof lib, &where)) {
		fprintf(stderr, "hugepreload: no libhugepreload.so installed, "
		    "beside the command or in %s (%s: %s)\n", HP_BUILD_DIR, lib,
		    strerror(errno));
		return 127;
	}
	if (verbose)
		fprintf(stderr, "hugepreload: library %s (%s)\n", lib, where);
	const char *old = getenv("LD_PRELOAD");
	snprintf(preload, sizeof preload, "%s%s%s", lib, old && *old ? " " : "",
	    old ? old : "");
	setenv("LD_PRELOAD", preload, 1);
	const char *env = getenv("HUGEPRELOAD_CONF");
	snprintf(hc, sizeof hc, "%s%s%s%s%s", env ? env : "",
	    env && *env && conf ? "," : "", conf ? conf : "",
	    verbose && ((env && *env) || conf) ? "," : "",
	    verbose ? "verbose:true" : "");
	if (hc[0] != '\0')
		setenv("HUGEPRELOAD_CONF", hc, 1);
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "hugepreload: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}

/* Where pid's stats page is mapped: the memfd's line in /proc/PID/maps.
 * 1 found, 0 not there, -1 (errno set) the maps could not be read. */
static int find_page(long pid, unsigned long *start, unsigned long *end) {
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return -1;
	int found = 0;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, "/memfd:" HP_STATS_NAME " ") != NULL &&
		    sscanf(line, "%lx-%lx", start, end) == 2;
	int err = errno;
	bool bad = ferror(f);
	fclose(f);
	errno = err;
	return bad ? -1 : found;
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

/* One consistent copy of the page (the library's seqlock), checked. */
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
		if (seq == buf.seq)
			return buf.pid == pid && hp_stats_copy(&buf, st);
	}
	return false;
}

static void to_stdout(void *ctx, const char *s, size_t n) {
	(void)ctx;
	fwrite(s, 1, n, stdout);
}

/* Present pages of [lo, hi) in process pid, from its pagemap (bit 63 of
 * each page's word); false if unreadable. */
static bool pagemap_present(int fd, uint64_t lo, uint64_t hi,
    uint64_t *bytes) {
	static uint64_t words[8192];
	for (uint64_t a = lo; a < hi;) {
		size_t n = (hi - a) / 4096 < 8192 ? (hi - a) / 4096 : 8192;
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
static bool smaps_ranges(long pid, const hp_stats_t *st,
    hp_stats_meta_t *m) {
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%ld/smaps", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	bool in = false, anon = false;
	uint64_t base = st->region_base, size = st->region_size;
	uint64_t rss = 0, thp = 0;             /* of the area being read */
	unsigned nr = st->small_nranges < HP_STATS_RANGES ? st->small_nranges :
	    HP_STATS_RANGES;
	while (fgets(line, sizeof line, f) != NULL) {
		unsigned long lo, hi, kb;
		char key[64];
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') <
		    strchr(line, ' ')) {
			in = size && lo >= base && hi <= base + size;
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
			if (!in && anon && strstr(line, " hg")) {
				m->smaps_mmap_resident += rss;
				m->smaps_mmap_huge += thp;
			}
			continue;
		}
		if (sscanf(line, "%63s %lu kB", key, &kb) != 2)
			continue;
		if (strcmp(key, "Rss:") == 0)
			rss = (uint64_t)kb << 10;
		else if (strcmp(key, "AnonHugePages:") == 0 ||
		    strcmp(key, "ShmemPmdMapped:") == 0)
			thp += (uint64_t)kb << 10;
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
	bool ok = fd >= 0 && st->small_nranges <= HP_STATS_RANGES;
	for (unsigned i = 0; ok && i < nr; i++)
		ok = pagemap_present(fd, st->small_ranges[i][0],
		    st->small_ranges[i][1], &m->smaps_small_resident);
	if (fd >= 0)
		close(fd);
	return ok;
}

static bool running(long pid) {
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld", pid);
	return access(path, F_OK) == 0;
}

static int stat_cmd(int argc, char **argv) {
	hp_format_t fmt = HP_FMT_TEXT;
	double watch = 0;
	long pid = 0;
	for (int i = 2; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--json") == 0) {
			fmt = HP_FMT_JSON;
		} else if (strcmp(argv[i], "--prometheus") == 0) {
			fmt = HP_FMT_PROM;
		} else if (strcmp(argv[i], "--watch") == 0) {
			if (i + 1 == argc || (watch = strtod(argv[++i], &end),
			    *end != '\0' || end == argv[i] || !(watch > 0 &&
			    watch <= 86400))) {
				fprintf(stderr, "hugepreload: --watch needs a number of "
				    "seconds, more than 0, at most 86400\n");
				return 2;
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "hugepreload: unknown option %s to stat (see "
			    "hugepreload --help)\n", argv[i]);
			return 2;
		} else if (pid != 0 || (pid = strtol(argv[i], &end, 10)) <= 0 ||
		    *end != '\0') {
			fprintf(stderr, "hugepreload: stat takes one process id, not "
			    "'%s'\n", argv[i]);
			return 2;
		}
	}
	if (pid <= 0) {
		fprintf(stderr, "hugepreload: stat needs a process id (see "
		    "hugepreload --help)\n");
		return 2;
	}
	for (int frames = 0;; frames++) {
		unsigned long start = 0, end = 0;
		int found = find_page(pid, &start, &end), fd = -1;
		off_t off = 0;
		hp_stats_t st;
		bool got = found == 1 && (fd = open_page(pid, start, end, &off)) >=
		    0 && load(fd, off, pid, &st);
		int err = errno;
		if (fd >= 0)
			close(fd);
		if (!got && !running(pid)) {
			if (frames > 0) {
				printf("hugepreload: pid %ld has exited\n", pid);
				return 0;
			}
			fprintf(stderr, "hugepreload: no process %ld\n", pid);
			return 1;
		}
		if (!got) {
			if (found < 0 || (found == 1 && fd < 0))
				fprintf(stderr, "hugepreload: cannot read process %ld: %s "
				    "(its user and root can)\n", pid, strerror(err));
			else
				fprintf(stderr, "hugepreload: process %ld has no counters "
				    "(not running under hugepreload, not using its huge "
				    "class yet, or stats_live:false)\n", pid);
			return 1;
		}
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		hp_stats_meta_t m = {true, (double)now.tv_sec + now.tv_nsec / 1e9 -
		    (double)st.updated_ns / 1e9, false, 0, 0, 0, 0, 0};
		m.smaps = smaps_ranges(pid, &st, &m);
		hp_stats_format(&st, &m, fmt, to_stdout, NULL);
		fflush(stdout);
		if (watch <= 0)
			return 0;
		struct timespec t = {(time_t)watch,
		    (long)((watch - (double)(time_t)watch) * 1e9)};
		nanosleep(&t, NULL);
	}
}

int main(int argc, char **argv) {
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		char lib[PATH_MAX + 64];
		const char *where;
		bool found = library_path(lib, sizeof lib, &where);
		printf("hugepreload %s\nlibrary: %s (%s)\n", HUGEPRELOAD_VERSION,
		    found ? lib : "not found", found ? where : "looked for it "
		    "installed, beside the command and in the build tree");
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "stat") == 0)
		return stat_cmd(argc, argv);
	return run(argc, argv);
}
