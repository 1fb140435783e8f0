#define _GNU_SOURCE
/*
 * Lifetime profiles: the site table as text, written at exit
 * (lifetime_record) and read at start-up (lifetime_profile).
 *
 *   # hugepreload lifetime profile 2
 *   # decision samples short long live <1ms <10ms <100ms <1s <10s more frames...
 *   promote 181 0 181 181 0 0 0 0 0 0 /usr/bin/prog+0x1234@48 /usr/bin/prog+0x5f0
 *   end 1
 *
 * decision is promote (huge pages), small (churny: held to 4 KiB pages) or
 * undecided (not enough evidence either way); the counts say why (samples,
 * how many ended short- and long-lived, how many were live at exit, and
 * the lifetimes of the freed ones by decade); a frame is a module's path
 * and an offset into it, so a profile holds across runs under ASLR, and
 * then, after an @, its stride where one was measured: the bytes from
 * where its return address is kept to where the next frame's is (site.c
 * finds a wrapper's callers with it). Version 1, written before strides
 * were, is read too. A
 * person may edit decisions; "end N" closes the file so that a truncated
 * one is known. Entries whose modules are not loaded yet wait and apply
 * once they are (dlopen). Nothing here allocates.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lifetime/lifetime.h"
#include "base/lock.h"

#define HP_PROFILE_MAGIC "# hugepreload lifetime profile 2"
#define HP_PROFILE_MAGIC1 "# hugepreload lifetime profile 1"
#define HP_MODULES       256
#define HP_PROFILE_MAX   ((size_t)16 << 20)

/* ---- the modules loaded now ------------------------------------------ */

typedef struct {
	char path[PATH_MAX];
	uintptr_t base, lo, hi;      /* load bias; extent of its segments */
} module_t;

typedef struct {
	module_t *mods;              /* HP_MODULES, mapped on first use */
	unsigned n;
} modlist_t;

/* Under sample_lock (hp_profile_resolve); the writer at exit keeps its
 * own, so that it needs no sample_lock. */
static modlist_t loaded;

static int add_module(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	modlist_t *ml = arg;
	if (ml->n == HP_MODULES)
		return 1;
	module_t *m = &ml->mods[ml->n];
	if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') {
		if (ml->n != 0)          /* only the program has no name */
			return 0;
		ssize_t n = hp_os_readlink("/proc/self/exe", m->path,
		    sizeof m->path - 1);
		if (n <= 0)
			return 0;
		m->path[n] = '\0';
	} else {
		size_t n = strlen(info->dlpi_name);
		if (n >= sizeof m->path)
			return 0;
		memcpy(m->path, info->dlpi_name, n + 1);
	}
	m->base = info->dlpi_addr;
	m->lo = UINTPTR_MAX, m->hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = m->base + ph->p_vaddr, e = a + ph->p_memsz;
		m->lo = a < m->lo ? a : m->lo;
		m->hi = e > m->hi ? e : m->hi;
	}
	if (m->hi > m->lo)
		ml->n++;
	return 0;
}

/* Refreshes a module list: dl_iterate_phdr, so never under the site
 * lock. */
static void scan_modules(modlist_t *ml) {
	ml->n = 0;
	if (ml->mods == NULL && (ml->mods = hp_site_map(HP_MODULES *
	    sizeof *ml->mods)) == NULL)
		return;
	dl_iterate_phdr(add_module, ml);
}

/* Adds the mapping [lo, hi) of file path at offset off to ml: to the
 * module of the same path, or as a new one. A module's load
 * bias is where its file's first page is mapped, less nothing for a
 * shared object or a PIE, and 0 for a fixed-address program (ET_EXEC,
 * from the ELF header in that first page). */
static void add_mapping(modlist_t *ml, const char *path, size_t len,
    uintptr_t lo, uintptr_t hi, uint64_t off) {
	module_t *m;
	for (unsigned i = ml->n; i-- > 0;) {
		m = &ml->mods[i];
		if (strlen(m->path) == len && memcmp(m->path, path, len) == 0) {
			m->lo = lo < m->lo ? lo : m->lo;
			m->hi = hi > m->hi ? hi : m->hi;
			return;
		}
	}
	if (off != 0 || ml->n == HP_MODULES || len >= sizeof m->path)
		return;                  /* a module starts at its first page */
	/* And is an ELF file: a data file mapped twice, far apart, would
	 * otherwise take in every module between its two mappings. */
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)lo;
	if (hi - lo < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return;
	m = &ml->mods[ml->n++];
	memcpy(m->path, path, len);
	m->path[len] = '\0';
	m->base = eh->e_type == ET_EXEC ? 0 : lo;
	m->lo = lo;
	m->hi = hi;
}

/* The module list from /proc/self/maps, for a writer at exit that must
 * not call dl_iterate_phdr: the exiting thread may have been interrupted
 * inside the allocator (exit from a signal handler), where another
 * thread, inside its own dl_iterate_phdr callback with the loader's lock,
 * may wait for a lock of this one's. Paths are the kernel's (a library
 * found through a link is named by its target), so a replay matches the
 * program's own frames and those of libraries loaded by their real path.
 * buf (cap bytes) is scratch. */
static void maps_modules(modlist_t *ml, char *buf, size_t cap) {
	ml->n = 0;
	if (ml->mods == NULL && (ml->mods = hp_site_map(HP_MODULES *
	    sizeof *ml->mods)) == NULL)
		return;
	int fd = hp_os_open("/proc/self/maps", O_RDONLY, 0);
	if (fd < 0)
		return;
	size_t have = 0;
	for (;;) {
		ssize_t got = hp_os_read(fd, buf + have, cap - 1 - have);
		if (got <= 0)
			break;
		have += (size_t)got;
		buf[have] = '\0';
		char *line = buf, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = '\0';
			unsigned long lo, hi, off;
			char perms[5] = "";
			int at = 0;
			if (sscanf(line, "%lx-%lx %4s %lx %*s %*s %n", &lo, &hi,
			    perms, &off, &at) == 4 && at > 0 && line[at] == '/' &&
			    perms[0] == 'r')
				add_mapping(ml, line + at, strlen(line + at), lo, hi,
				    off);
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == cap - 1)
			have = 0;            /* a line longer than buf: dropped */
	}
	hp_os_close(fd);
}

static const module_t *module_of(const modlist_t *ml, uintptr_t a) {
	for (unsigned i = 0; i < ml->n; i++)
		if (a >= ml->mods[i].lo && a < ml->mods[i].hi)
			return &ml->mods[i];
	return NULL;
}

/* ---- writing --------------------------------------------------------- */

/* Appends to a line buffer; false once it is full. */
static bool put(char *buf, size_t *len, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool put(char *buf, size_t *len, size_t cap, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = hp_vfmt(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap - *len)
		return false;
	*len += (size_t)n;
	return true;
}

static bool write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = hp_os_write(fd, p, n);
		if (w <= 0)
			return false;
		p += w, n -= (size_t)w;
	}
	return true;
}

/* One site as a line, or false if it does not fit (a path too long). */
static bool site_line(const hp_site_t *s, const modlist_t *ml, char *buf,
    size_t cap, size_t *len) {
	*len = 0;
	bool ok = put(buf, len, cap, "%s %u %u %u %u", s->promoted ? "promote" :
	    s->churny ? "small" : "undecided", s->samples, s->nshort, s->nlong, s->live);
	for (int b = 0; b < HP_LIFE_BUCKETS; b++)
		ok = ok && put(buf, len, cap, " %u", s->hist[b]);
	for (unsigned f = 0; f < s->nframes; f++) {
		const module_t *m = module_of(ml, s->frames[f]);
		ok = ok && (m != NULL ? put(buf, len, cap, " %s+%#lx", m->path,
		    (unsigned long)(s->frames[f] - m->base)) : put(buf, len, cap,
		    " ?+%#lx", (unsigned long)s->frames[f]));
		if (f + 1 < s->nframes && s->stride[f] > 0)
			ok = ok && put(buf, len, cap, "@%d", (int)s->stride[f]);
	}
	return ok && put(buf, len, cap, "\n");
}

/* The profile into fd, synced; false, with errno, if a write fails. The
 * site table is read under its lock if hp_lock_at_exit takes it, else
 * without (*unlocked): each count is a whole word, a site's frames are
 * whole once its hash shows (site.c), and a count may be a sample off. */
static bool write_profile(int fd, const modlist_t *ml, char *line,
    size_t cap, bool *unlocked) {
	const char *head = HP_PROFILE_MAGIC "\n# decision samples short long "
	    "live <1ms <10ms <100ms <1s <10s more frames (module+offset; the "
	    "first is the caller of malloc)\n";
	bool ok = write_all(fd, head, strlen(head));
	unsigned n = 0;
	bool locked = hp_site_lock_at_exit();
	*unlocked = !locked;
	for (size_t i = 0; i < HP_SITES && ok; i++) {
		const hp_site_t *s = &hp_sites[i];
		size_t len;
		if (__atomic_load_n(&s->hash, __ATOMIC_ACQUIRE) == 0 ||
		    (s->samples == 0 && !s->from_profile) ||
		    !site_line(s, ml, line, cap, &len))
			continue;
		ok = write_all(fd, line, len);
		n++;
	}
	if (locked)
		hp_site_unlock();
	size_t len = 0;
	put(line, &len, cap, "end %u\n", n);
	return ok && write_all(fd, line, len) && fsync(fd) == 0;
}

/* path, written whole, then put in place by rename from tmp. First as an
 * unnamed file in path's directory (O_TMPFILE), named tmp only once it is
 * whole, so that a kill mid-write leaves nothing; where the file system
 * cannot (no O_TMPFILE, or no /proc to link it by), as tmp from the
 * start, removed if the write fails. 0, or an errno. */
static int write_file(const char *path, const char *tmp, const modlist_t *ml,
    char *line, size_t cap, bool *unlocked) {
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		hp_fmt(dir, sizeof dir, ".");
	else
		hp_fmt(dir, sizeof dir, "%.*s", slash == path ? 1 :
		    (int)(slash - path), path);
	int err = 0;
	for (int named = 0; named < 2; named++) {
		int fd = named ? hp_os_open(tmp, O_WRONLY | O_CREAT | O_TRUNC |
		    O_NOFOLLOW, 0644) : hp_os_open(dir, O_TMPFILE | O_WRONLY, 0644);
		if (fd < 0) {
			err = errno;
			continue;
		}
		bool ok = write_profile(fd, ml, line, cap, unlocked);
		err = ok ? 0 : errno;
		if (ok && !named) {
			char self[40];
			hp_fmt(self, sizeof self, "/proc/self/fd/%d", fd);
			hp_os_unlink(tmp);       /* an earlier process's, same pid */
			if (hp_os_linkat(AT_FDCWD, self, AT_FDCWD, tmp,
			    AT_SYMLINK_FOLLOW) != 0) {
				hp_os_close(fd);
				err = errno;
				continue;            /* write it again, named */
			}
		}
		if (hp_os_close(fd) != 0 && ok) {
			ok = false;
			err = errno;
		}
		if (ok && hp_os_rename(tmp, path) != 0) {
			ok = false;
			err = errno;
		}
		if (!ok)
			hp_os_unlink(tmp);
		return err;
	}
	return err;
}

bool hp_profile_write(const char *where) {
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	if (hp_sites == NULL)            /* said at start-up */
		return false;
	hp_conf_path(where, path, sizeof path);
	hp_fmt(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
	size_t cap = HP_SITE_DEPTH * (PATH_MAX + 24) + 128;
	char *line = hp_site_map(cap);
	modlist_t ml = {NULL, 0};
	if (line != NULL && hp_locks_held() != 0)
		maps_modules(&ml, line, cap);
	else if (line != NULL)
		scan_modules(&ml);
	bool unlocked = false;
	int err = line == NULL || ml.mods == NULL ? ENOMEM :
	    write_file(path, tmp, &ml, line, cap, &unlocked);
	if (line != NULL)
		hp_os_munmap(line, cap);
	if (ml.mods != NULL)
		hp_os_munmap(ml.mods, HP_MODULES * sizeof *ml.mods);
	if (err != 0) {
		hp_log("could not write lifetime_record %s (%s)", path,
		    hp_strerror(err));
		return false;
	}
	if (unlocked)
		hp_log("lifetime_record %s written without the site table's "
		    "lock, which exit could not take (exit from a signal "
		    "handler?): a count may be a sample off", path);
	return true;
}

/* ---- reading --------------------------------------------------------- */

typedef struct {
	uint16_t mod[HP_SITE_DEPTH];     /* index into names */
	uintptr_t off[HP_SITE_DEPTH];
	int32_t stride[HP_SITE_DEPTH - 1];   /* 0: none given */
	uint8_t nframes;
	int8_t decision;                 /* 1 promote, -1 small, 0 undecided */
	bool applied;
} entry_t;

static entry_t *entries;         /* HP_SITES, mapped by the first load */
static unsigned nentries, napplied;
static char (*names)[PATH_MAX];  /* HP_MODULES */
static unsigned nnames;

static int intern(const char *s, size_t n) {
	for (unsigned i = 0; i < nnames; i++)
		if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
			return (int)i;
	if (nnames == HP_MODULES || n >= PATH_MAX)
		return -1;
	memcpy(names[nnames], s, n);
	names[nnames][n] = '\0';
	return (int)nnames++;
}

/* One whitespace-separated token of [*p, end); false at end of line. */
static bool token(const char **p, const char *end, const char **t,
    size_t *n) {
	const char *s = *p;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	const char *e = s;
	while (e < end && *e != ' ' && *e != '\t')
		e++;
	*p = e, *t = s, *n = (size_t)(e - s);
	return e > s;
}

static bool number(const char *t, size_t n, int base, unsigned long *v) {
	char buf[32];
	if (n == 0 || n >= sizeof buf)
		return false;
	memcpy(buf, t, n);
	buf[n] = '\0';
	char *end;
	*v = strtoul(buf, &end, base);
	return *end == '\0' && buf[0] != '-';
}

/* Parses one site line; NULL, or what is wrong with it. */
static const char *parse_line(const char *p, const char *end, entry_t *e) {
	const char *t;
	size_t n;
	unsigned long v;
	if (!token(&p, end, &t, &n))
		return "empty line";
	if (n == 7 && memcmp(t, "promote", 7) == 0)
		e->decision = 1;
	else if (n == 5 && memcmp(t, "small", 5) == 0)
		e->decision = -1;
	else if (n == 9 && memcmp(t, "undecided", 9) == 0)
		e->decision = 0;
	else
		return "decision is not promote, small or undecided";
	for (int i = 0; i < 4 + HP_LIFE_BUCKETS; i++)
		if (!token(&p, end, &t, &n) || !number(t, n, 10, &v))
			return "a count is missing or not a number";
	e->nframes = 0;
	memset(e->stride, 0, sizeof e->stride);
	while (token(&p, end, &t, &n)) {
		const char *plus = NULL;
		for (const char *q = t + n; q-- > t;)
			if (*q == '+') {
				plus = q;
				break;
			}
		if (e->nframes == HP_SITE_DEPTH)
			return "too many frames";
		const char *at = plus ? memchr(plus, '@', (size_t)(t + n - plus)) :
		    NULL;
		unsigned long stride = 0;
		if (at != NULL && (e->nframes + 1 == HP_SITE_DEPTH ||
		    !number(at + 1, (size_t)(t + n - at - 1), 10, &stride) ||
		    stride == 0 || stride > HP_STRIDE_MAX || stride % 8 != 0))
			return "a frame's stride is not @N, N a multiple of 8 up "
			    "to 65536";
		if (e->nframes + 1 < HP_SITE_DEPTH)
			e->stride[e->nframes] = (int32_t)stride;
		if (plus == NULL || plus == t || !number(plus + 1,
		    (size_t)((at ? at : t + n) - plus - 1), 16, &v))
			return "a frame is not module+0xoffset";
		int m = intern(t, (size_t)(plus - t));
		if (m < 0)
			return "too many modules";
		e->mod[e->nframes] = (uint16_t)m;
		e->off[e->nframes++] = v;
	}
	return e->nframes ? NULL : "no frames";
}

bool hp_profile_load(const char *path) {
	int fd = hp_os_open(path, O_RDONLY, 0);
	struct stat st;
	const char *why = NULL;
	if (fd < 0 || hp_os_fstat(fd, &st) != 0)
		why = hp_strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_size == 0)
		why = "empty";
	else if ((size_t)st.st_size > HP_PROFILE_MAX)
		why = "over 16 MiB";
	if (why != NULL) {
		hp_log("lifetime_profile %s: cannot be read (%s); profile "
		    "ignored, sites are learned", path, why);
		if (fd >= 0)
			hp_os_close(fd);
		return false;
	}
	size_t size = (size_t)st.st_size;
	if (entries == NULL) {
		entries = hp_site_map(HP_SITES * sizeof *entries);
		names = hp_site_map(HP_MODULES * sizeof *names);
	}
	char *buf = entries && names ? hp_os_mmap(NULL, size, PROT_READ, MAP_PRIVATE,
	    fd, 0) : MAP_FAILED;
	int err = errno;
	hp_os_close(fd);
	if (buf == MAP_FAILED) {
		hp_log("lifetime_profile %s: cannot be read (%s); profile "
		    "ignored, sites are learned", path, hp_strerror(err));
		return false;
	}
	const char *p = buf, *end = buf + size;
	unsigned line = 0, count = 0;
	bool ended = false;
	nentries = 0, nnames = 0;
	while (p < end && why == NULL) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		line++;
		if (nl == NULL)
			why = "last line not terminated (truncated?)";
		else if (ended)
			why = "text after the end line";
		else if (line == 1)
			why = (size_t)(le - p) == strlen(HP_PROFILE_MAGIC) &&
			    (memcmp(p, HP_PROFILE_MAGIC, (size_t)(le - p)) == 0 ||
			    memcmp(p, HP_PROFILE_MAGIC1, (size_t)(le - p)) == 0) ?
			    NULL : "not a hugepreload lifetime profile (version 1 "
			    "or 2)";
		else if (le == p || *p == '#')
			;                    /* blank or comment */
		else if (le - p > 4 && memcmp(p, "end ", 4) == 0) {
			unsigned long v;
			if (!number(p + 4, (size_t)(le - p - 4), 10, &v) ||
			    v != count)
				why = "the end line does not count the sites";
			ended = true;
		} else if (nentries == HP_SITES)
			why = "more sites than the table holds";
		else if ((why = parse_line(p, le, &entries[nentries])) == NULL) {
			nentries++;
			count++;
		}
		p = le + 1;
	}
	if (why == NULL && !ended)
		why = "no end line (truncated?)";
	hp_os_munmap(buf, size);
	if (why != NULL) {
		hp_log("lifetime_profile %s:%u: %s; profile ignored, sites are "
		    "learned", path, line, why);
		nentries = 0;
		return false;
	}
	hp_profile_resolve();
	return true;
}

void hp_profile_resolve(void) {
	if (napplied == nentries || hp_sites == NULL)
		return;
	scan_modules(&loaded);
	hp_site_lock();
	for (unsigned i = 0; i < nentries; i++) {
		entry_t *e = &entries[i];
		if (e->applied)
			continue;
		uintptr_t frames[HP_SITE_DEPTH];
		unsigned f = 0;
		for (; f < e->nframes; f++) {
			unsigned m = 0;
			while (m < loaded.n && strcmp(loaded.mods[m].path,
			    names[e->mod[f]]))
				m++;
			if (m == loaded.n)
				break;               /* not loaded (yet) */
			frames[f] = loaded.mods[m].base + e->off[f];
		}
		if (f < e->nframes)
			continue;
		/* A frame past the last has no stride: the one before it
		 * keeps what was read (0). */
		int idx = hp_site_get(frames, e->nframes, e->stride);
		if (idx >= 0)
			hp_site_decide(idx, e->decision);
		e->applied = true;
		napplied++;
	}
	hp_site_unlock();
}

/* At exit: the site table, where lifetime_record says. */
__attribute__((destructor)) static void record_at_exit(void) {
	if (hp_conf.lifetime != HP_LIFETIME_OFF &&
	    hp_conf.lifetime_record[0] != '\0' && hp_threshold != 0)
		hp_profile_write(hp_conf.lifetime_record);
}
