/*
 * The hugetlb cgroup limits that bind this process. A hugetlb page is
 * charged to the process's cgroup, and to every ancestor, twice: to the
 * reservation counter when a mapping reserves it (rsvd.max: mmap fails
 * with ENOMEM past it) and to the fault counter when it is faulted in
 * (max: SIGBUS at the fault past it, with no warning at mmap). A fork
 * child's copy of a private page is charged to both. So the pages a new
 * run (backing.c) or a fork's copies (huge/region_fork.c) can still get
 * is the least, over the cgroup and its ancestors, of min(max, rsvd.max)
 * less what is charged (the reservation counter, which also counts what
 * is reserved and not yet faulted; the fault counter where there is
 * none).
 *
 * Both hierarchies: cgroup v2 (hugetlb.SIZE.max, .current, .rsvd.max,
 * .rsvd.current) and the v1 hugetlb controller (hugetlb.SIZE.limit_in_bytes,
 * .usage_in_bytes, and their rsvd. forms), found through /proc/self/cgroup
 * and /proc/self/mountinfo. Ancestors are read up to the hierarchy's
 * mount point: in a cgroup namespace, limits above it are not visible
 * (the kernel still enforces them).
 *
 * Off the fast path and cheap: the directories, and which of them have a
 * limit at all, are found once (lazily, the first time a run would use
 * the pool) and again at each maintenance pass (hp_cgroup_refresh); a
 * room reads only the limit and usage files of the limited levels, none
 * when nothing is limited. One writer at a time (an atomic flag); readers
 * copy under a sequence count, so none takes a lock.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pages/pages.h"

#define CG_LEVELS 16          /* from the leaf up to the mount point */
#define CG_PATH   320

enum { SIZE_2M, SIZE_1G, NSIZES };
static const char *const size_name[NSIZES] = {"2MB", "1GB"};

typedef struct {
	unsigned n;
	bool v1[CG_LEVELS];
	uint8_t limited[CG_LEVELS];   /* bit s: a limit of size s is set */
	char dir[CG_LEVELS][CG_PATH];
} cg_view_t;

static cg_view_t view;
static unsigned seq;              /* odd while view is being written */
static int writing;               /* one writer at a time */
static bool resolved;             /* view was found at least once */
static const char *src_cgroup = "/proc/self/cgroup";
static const char *src_mountinfo = "/proc/self/mountinfo";

/* A limit or usage file in bytes; -1 if absent, LONG_MAX if unlimited
 * ("max", or v1's page-counter maximum). */
static long read_bytes(const char *dir, const char *size, const char *name) {
	char path[CG_PATH + 64], buf[32];
	hp_fmt(path, sizeof path, "%s/hugetlb.%s.%s", dir, size, name);
	if (hp_os_read_file(path, buf, sizeof buf) <= 0)
		return -1;
	if (strncmp(buf, "max", 3) == 0)
		return LONG_MAX;
	const char *end;
	long v = hp_parse_long(buf, &end);
	if (end == buf || v < 0)
		return -1;
	return v >= (1l << 62) ? LONG_MAX : v;
}

static const char *limit_file(bool v1, bool rsvd) {
	return v1 ? (rsvd ? "rsvd.limit_in_bytes" : "limit_in_bytes") :
	    (rsvd ? "rsvd.max" : "max");
}

static const char *usage_file(bool v1, bool rsvd) {
	return v1 ? (rsvd ? "rsvd.usage_in_bytes" : "usage_in_bytes") :
	    (rsvd ? "rsvd.current" : "current");
}

/* Mountinfo's octal escapes (\040 for a space) undone, in place. */
static void unescape(char *s) {
	char *d = s;
	for (; *s; s++, d++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + s[3] - '0');
			s += 3;
		} else {
			*d = *s;
		}
	}
	*d = '\0';
}

/* Whether comma-separated list has the item word. */
static bool has_item(const char *list, const char *word) {
	size_t n = strlen(word);
	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') +
	    1 : NULL)
		if (strncmp(p, word, n) == 0 && (p[n] == ',' || p[n] == '\0' ||
		    p[n] == '\n'))
			return true;
	return false;
}

/* Scratch for the writer only (held by the writing flag). */
static char cg_buf[4096], line[4096], chunk[4096];
static char path_v1[CG_PATH], path_v2[CG_PATH];
static cg_view_t next;

/* The paths of the v1 hugetlb hierarchy and of the v2 one, from
 * /proc/self/cgroup ("ID:CONTROLLERS:PATH"); false if neither. */
static bool own_paths(void) {
	path_v1[0] = path_v2[0] = '\0';
	if (hp_os_read_file(src_cgroup, cg_buf, sizeof cg_buf) <= 0)
		return false;
	for (char *l = cg_buf, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/' || strlen(c2 + 1) >= CG_PATH)
			continue;
		*c1 = *c2 = '\0';
		if (strcmp(l, "0") == 0 && c1[1] == '\0')
			strcpy(path_v2, c2 + 1);
		else if (has_item(c1 + 1, "hugetlb"))
			strcpy(path_v1, c2 + 1);
	}
	return path_v1[0] || path_v2[0];
}

/* One mountinfo line: if it mounts the hierarchy that path is in, the
 * directories from path's up to the mount point go into next. */
static void mount_line(char *l) {
	char *f[6];
	for (int i = 0; i < 6; i++) {            /* id parent dev root mnt opts */
		f[i] = l;
		l = strchr(l, ' ');
		if (!l)
			return;
		*l++ = '\0';
	}
	char *dash = strstr(l, "- ");
	if (!dash || (dash != l && dash[-1] != ' '))
		return;
	char *type = dash + 2, *src = strchr(type, ' ');
	if (!src)
		return;
	*src++ = '\0';
	char *opts = strchr(src, ' ');
	if (!opts)
		return;
	opts++;
	bool v1;
	const char *path;
	if (strcmp(type, "cgroup2") == 0 && path_v2[0]) {
		v1 = false;
		path = path_v2;
	} else if (strcmp(type, "cgroup") == 0 && path_v1[0] &&
	    has_item(opts, "hugetlb")) {
		v1 = true;
		path = path_v1;
	} else {
		return;
	}
	char *root = f[3], *mnt = f[4];
	unescape(root);
	unescape(mnt);
	/* The cgroup's path is under the mount's root, or not reachable. */
	size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (strncmp(path, root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0'))
		return;
	for (unsigned i = 0; i < next.n; i++)
		if (next.v1[i] == v1)
			return;                  /* this hierarchy is found already */
	char dir[CG_PATH];
	size_t ml = strlen(mnt);
	if (hp_fmt(dir, sizeof dir, "%s%s", mnt, strcmp(path + rl, "/") == 0 ?
	    "" : path + rl) >= (int)sizeof dir)
		return;
	for (;;) {
		if (next.n == CG_LEVELS)
			return;
		unsigned i = next.n;
		next.v1[i] = v1;
		next.limited[i] = 0;
		strcpy(next.dir[i], dir);
		for (unsigned s = 0; s < NSIZES; s++)
			for (int r = 0; r < 2; r++) {
				long lim = read_bytes(dir, size_name[s], limit_file(v1, r));
				if (lim >= 0 && lim != LONG_MAX)
					next.limited[i] |= (uint8_t)(1u << s);
			}
		if (next.limited[i])
			next.n++;
		char *slash = strrchr(dir, '/');
		if (strlen(dir) <= ml || !slash || (size_t)(slash - dir) < ml)
			return;
		*slash = '\0';
		if (strlen(dir) < ml)
			return;
	}
}

/* Reads mountinfo a line at a time (it may be large) without allocating. */
static void scan_mounts(void) {
	int fd = hp_os_open(src_mountinfo, O_RDONLY, 0);
	if (fd < 0)
		return;
	size_t len = 0;
	bool skip = false;               /* a line longer than the buffer */
	ssize_t got;
	while ((got = hp_os_read(fd, chunk, sizeof chunk)) > 0)
		for (ssize_t i = 0; i < got; i++) {
			if (chunk[i] != '\n') {
				if (len < sizeof line - 1)
					line[len++] = chunk[i];
				else
					skip = true;
				continue;
			}
			line[len] = '\0';
			if (!skip)
				mount_line(line);
			len = 0;
			skip = false;
		}
	hp_os_close(fd);
}

void hp_cgroup_refresh(void) {
	if (__atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE))
		return;                      /* another thread is at it */
	memset(&next, 0, sizeof next);
	if (own_paths())
		scan_mounts();
	__atomic_store_n(&seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(&view, &next, sizeof view);
	__atomic_store_n(&seq, seq + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&resolved, true, __ATOMIC_RELEASE);
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
}

bool hp_cgroup_use(const char *cgroup_file, const char *mountinfo_file) {
	src_cgroup = cgroup_file;
	src_mountinfo = mountinfo_file;
	hp_cgroup_refresh();
	return view.n != 0;
}

void hp_cgroup_atfork_child(void) {
	/* A thread that was writing is gone: what it wrote is discarded. */
	if (__atomic_load_n(&writing, __ATOMIC_RELAXED)) {
		view.n = 0;
		seq += seq & 1;
		resolved = false;
		writing = 0;
	}
}

/* The room of one level in pages of size bytes, LONG_MAX if unlimited;
 * the binding limit's file and value in *file, *limit. */
static long level_room(const char *dir, bool v1, unsigned s, size_t bytes,
    const char **file, long *limit) {
	long lim = LONG_MAX, used = 0;
	*file = NULL;
	for (int r = 0; r < 2; r++) {
		long l = read_bytes(dir, size_name[s], limit_file(v1, r));
		long u = read_bytes(dir, size_name[s], usage_file(v1, r));
		if (l >= 0 && l < lim) {
			lim = l;
			*file = limit_file(v1, r);
		}
		if (u > used)
			used = u;    /* rsvd counts reserved and faulted: the larger */
	}
	*limit = lim;
	if (lim == LONG_MAX)
		return LONG_MAX;
	return lim > used ? (long)((size_t)(lim - used) / bytes) : 0;
}

long hp_cgroup_room(size_t page, char *why, size_t n) {
	unsigned s = page == HP_GIB ? SIZE_1G : SIZE_2M;
	/* Said where no limit is read steadily (the returns of 0 below). */
	if (why && n)
		hp_fmt(why, n, "the hugetlb cgroup's files, not read steadily");
	if (!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)) {
		hp_cgroup_refresh();
		/* Another thread may be finding them first, which takes a
		 * fraction of a millisecond (docs/backing.md): wait for it,
		 * within a bound. Until then, nothing is known, so no room. */
		for (int spin = 0; !__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) &&
		    spin < 1000000; spin++)
			__builtin_ia32_pause();
		if (!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
			return 0;
	}
	for (int tries = 0; tries < 8; tries++) {
		unsigned before;
		for (int spin = 0; ((before = __atomic_load_n(&seq,
		    __ATOMIC_ACQUIRE)) & 1) && spin < 100000; spin++)
			__builtin_ia32_pause();      /* a copy of 5 KiB, no more */
		if (before & 1)
			break;
		long room = LONG_MAX;
		unsigned levels = view.n < CG_LEVELS ? view.n : CG_LEVELS;
		for (unsigned i = 0; i < levels; i++) {
			if (!(view.limited[i] & (1u << s)))
				continue;
			char dir[CG_PATH];
			memcpy(dir, view.dir[i], sizeof dir);
			dir[sizeof dir - 1] = '\0';
			const char *file;
			long limit, r = level_room(dir, view.v1[i], s, page, &file,
			    &limit);
			if (r < room) {
				room = r;
				if (why && n)
					hp_fmt(why, n, "%.200s/hugetlb.%s.%s is %ld "
					    "bytes", dir, size_name[s], file, limit);
			}
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&seq, __ATOMIC_RELAXED) == before)
			return room;
	}
	return 0;     /* could not read it steadily: no hugetlb page this time */
}
