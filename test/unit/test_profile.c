/* src/lifetime/profile.c: lifetime profiles in the format its header
 * comment gives, loaded into the site table (site.c, linked below it) and
 * written from it; a bad profile is reported with its line and ignored
 * whole. The frames are this test program's and libc's, module+offset. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lifetime/lifetime.h"
#include "base/lock.h"

/* Whether a direct call of malloc returning to key goes to huge pages. */
static bool hp_key_promoted(uintptr_t key) {
	uintptr_t stack[1] = {key};
	return hp_key_placed(key, (const char *)stack);
}

/* Version 1 is read as well as version 2 (strides), which is written. */
#define MAGIC "# hugepreload lifetime profile 1\n"
#define MAGIC2 "# hugepreload lifetime profile 2\n"
#define COUNTS "0 0 0 0 0 0 0 0 0 0"

static char dir[64], exe[PATH_MAX], libc_path[PATH_MAX];
static uintptr_t exe_base, libc_base;

static int find_modules(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size, (void)arg;
	if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') {
		if (exe_base == 0)
			exe_base = info->dlpi_addr;
	} else if (strstr(info->dlpi_name, "/libc.so.6")) {
		snprintf(libc_path, sizeof libc_path, "%s", info->dlpi_name);
		libc_base = info->dlpi_addr;
	}
	return 0;
}

static void setup(void) {
	cr_assert(hp_site_init());
	hp_slot_init(1 << 20, 0);
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';
	dl_iterate_phdr(find_modules, NULL);
	cr_assert_neq(exe_base, 0);
	cr_assert_neq(libc_path[0], '\0');
	strcpy(dir, "/tmp/hp-profile.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (dir[0])
		cr_assert_eq(system(cmd), 0);
}

TestSuite(profile, .init = setup, .fini = teardown);

/* Writes text (printf-style) to dir/name; returns the path. */
static const char *put(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *put(const char *name, const char *fmt, ...) {
	static char path[128];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	cr_assert_eq(fclose(f), 0);
	return path;
}

/* The whole of a file, in a static buffer. */
static const char *slurp(const char *path) {
	static char buf[16384];
	int fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s", path);
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	cr_assert_geq(n, 0);
	buf[n] = '\0';
	return buf;
}

/* stderr (hp_log's lines) into a file while a profile is read or written. */
static int saved_stderr = -1;

static void capture(void) {
	char path[128];
	snprintf(path, sizeof path, "%s/stderr", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	saved_stderr = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

static const char *captured(void) {
	char path[128];
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	snprintf(path, sizeof path, "%s/stderr", dir);
	return slurp(path);
}

/* The site of these frames, if the table has it: looked up by adding it
 * and seeing whether the count of sites moved. */
static hp_site_t *find(uintptr_t f0, uintptr_t f1, unsigned n) {
	uintptr_t f[2] = {f0, f1};
	uint64_t before = hp_site_counts.sites;
	hp_site_lock();
	int i = hp_site_get(f, n, NULL);
	hp_site_unlock();
	cr_assert_geq(i, 0);
	return hp_site_counts.sites == before ? &hp_sites[i] : NULL;
}

/* Three decisions, a comment and a blank line. */
static const char *three(const char *name) {
	return put(name, MAGIC "# decision samples ...\n"
	    "promote " COUNTS " %s+0x1000@48 %s+0x1008\n"
	    "\n"
	    "small 3 3 0 0 3 0 0 0 0 0 %s+0x1010 %s+0x30000\n"
	    "# a person's note\n"
	    "undecided 1 0 0 1 0 0 0 0 0 0 %s+0x1020\n"
	    "end 3\n", exe, exe, exe, libc_path, exe);
}

Test(profile, load_puts_decisions_in_the_site_table) {
	const char *path = three("three");
	capture();
	cr_assert(hp_profile_load(path));
	cr_assert_str_empty(captured(), "nothing to say");
	cr_assert_eq(hp_site_counts.sites, 3);
	hp_site_t *p = find(exe_base + 0x1000, exe_base + 0x1008, 2);
	cr_assert_not_null(p);
	cr_assert_eq(p->stride[0], 48, "the frame's stride, read");
	hp_site_t *s = find(exe_base + 0x1010, libc_base + 0x30000, 2);
	hp_site_t *u = find(exe_base + 0x1020, 0, 1);
	cr_assert(p && s && u, "all three are there");
	cr_assert(p->promoted && p->from_profile);
	cr_assert_eq(p->score, HP_PROMOTE_AT);
	cr_assert(hp_key_promoted(exe_base + 0x1000));
	cr_assert(!s->promoted && s->churny && s->from_profile);
	cr_assert(!u->promoted && !u->churny && u->from_profile);
	cr_assert_eq(u->score, 0);
	cr_assert_not(hp_key_promoted(exe_base + 0x1010));
	cr_assert_eq(hp_site_counts.sites_promoted, 1);
}

/* A bad profile is reported with its path, line and what is wrong, and
 * ignored whole: its good lines too. */
Test(profile, bad_profiles_are_reported_and_ignored) {
	static const struct {
		const char *text;        /* after the magic line, %s the exe */
		unsigned line;
		const char *why;
	} bad[] = {
		{"keep " COUNTS " %s+0x10\nend 1\n", 2,
		    "decision is not promote, small or undecided"},
		{"promote 1 2 3\nend 1\n", 2, "a count is missing or not a number"},
		{"# note\npromote 0 0 0 0 0 0 0 0 0 x %s+0x10\nend 1\n", 3,
		    "a count is missing or not a number"},
		{"promote -1 0 0 0 0 0 0 0 0 0 %s+0x10\nend 1\n", 2,
		    "a count is missing or not a number"},
		{"promote " COUNTS " %s\nend 1\n", 2,
		    "a frame is not module+0xoffset"},
		{"promote " COUNTS " +0x10\nend 1\n", 2,
		    "a frame is not module+0xoffset"},
		{"promote " COUNTS " %s+0xzz\nend 1\n", 2,
		    "a frame is not module+0xoffset"},
		{"promote " COUNTS " a+1 b+2 c+3 d+4 e+5\nend 1\n", 2,
		    "too many frames"},
		{"promote " COUNTS "\nend 1\n", 2, "no frames"},
		{"promote " COUNTS " %s+0x10@0 %s+0x20\nend 1\n", 2,
		    "a frame's stride is not @N, N a multiple of 8 up to 65536"},
		{"promote " COUNTS " %s+0x10@12 %s+0x20\nend 1\n", 2,
		    "a frame's stride is not @N, N a multiple of 8 up to 65536"},
		{"promote " COUNTS " %s+0x10@65544 %s+0x20\nend 1\n", 2,
		    "a frame's stride is not @N, N a multiple of 8 up to 65536"},
		{"promote " COUNTS " %s+0x10@ %s+0x20\nend 1\n", 2,
		    "a frame's stride is not @N, N a multiple of 8 up to 65536"},
		{"promote " COUNTS " a+1 b+2 c+3 d+4@8\nend 1\n", 2,
		    "a frame's stride is not @N, N a multiple of 8 up to 65536"},
		{"promote " COUNTS " %s+0x10\nend 2\n", 3,
		    "the end line does not count the sites"},
		{"promote " COUNTS " %s+0x10\n", 2, "no end line (truncated?)"},
		{"end 0\npromote " COUNTS " %s+0x10\n", 3,
		    "text after the end line"},
		{"promote " COUNTS " %s+0x10\nend 1", 3,
		    "last line not terminated (truncated?)"},
	};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		char text[PATH_MAX + 256], want[512];
		snprintf(text, sizeof text, bad[k].text, exe, exe);
		const char *path = put("bad", MAGIC "%s", text);
		capture();
		cr_assert_not(hp_profile_load(path), "case %zu", k);
		const char *err = captured();
		snprintf(want, sizeof want, "lifetime_profile %s:%u: %s; profile "
		    "ignored, sites are learned\n", path, bad[k].line, bad[k].why);
		cr_assert_not_null(strstr(err, want), "case %zu: %s", k, err);
		cr_assert_eq(hp_site_counts.sites, 0, "case %zu: nothing applied", k);
	}
	/* Not a profile at all, and files that cannot be read. */
	const char *path = put("other", "hello\n");
	capture();
	cr_assert_not(hp_profile_load(path));
	cr_assert_not_null(strstr(captured(), ":1: not a hugepreload lifetime "
	    "profile (version 1 or 2)"));
	path = put("empty", "%s", "");
	capture();
	cr_assert_not(hp_profile_load(path));
	cr_assert_not_null(strstr(captured(), "cannot be read (empty)"));
	capture();
	cr_assert_not(hp_profile_load(dir));
	cr_assert_not_null(strstr(captured(), "cannot be read (not a regular "
	    "file)"));
	capture();
	cr_assert_not(hp_profile_load("/nonexistent/profile"));
	cr_assert_not_null(strstr(captured(), "/nonexistent/profile: cannot be "
	    "read (No such file or directory)"));
	cr_assert_eq(hp_site_counts.sites, 0);
}

/* An entry whose module is not loaded waits, and applies once it is. The
 * module: libm, from libc's directory, by its full path (so that the
 * loader names it so). */
Test(profile, entries_wait_for_their_module) {
	char libm[PATH_MAX];
	snprintf(libm, sizeof libm, "%.*s/libm.so.6",
	    (int)(strrchr(libc_path, '/') - libc_path), libc_path);
	if (access(libm, R_OK) != 0 || dlopen(libm, RTLD_NOW | RTLD_NOLOAD))
		cr_skip_test("%s: not there, or loaded already", libm);
	const char *path = put("later", MAGIC "promote " COUNTS " %s+0x1000\n"
	    "promote " COUNTS " %s+0x1030\nend 2\n", libm, exe);
	cr_assert(hp_profile_load(path));
	cr_assert_eq(hp_site_counts.sites, 1, "the program's entry only");
	void *h = dlopen(libm, RTLD_NOW);
	cr_assert_not_null(h, "%s", dlerror());
	struct link_map *lm;
	cr_assert_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
	hp_profile_resolve();
	cr_assert_eq(hp_site_counts.sites, 2);
	hp_site_t *s = find(lm->l_addr + 0x1000, 0, 1);
	cr_assert_not_null(s);
	cr_assert(s->promoted && hp_key_promoted(lm->l_addr + 0x1000));
	hp_profile_resolve();
	cr_assert_eq(hp_site_counts.sites, 2, "applied once");
	dlclose(h);
}

/* Written back, a loaded profile says the same decisions and frames (its
 * counts are the run's: none here); "%p" in the path is the process id. */
Test(profile, write_round_trips) {
	cr_assert(hp_profile_load(three("three")));
	char where[128], path[128], line[3][PATH_MAX * 2 + 128];
	snprintf(where, sizeof where, "%s/out.%%p", dir);
	snprintf(path, sizeof path, "%s/out.%d", dir, (int)getpid());
	capture();
	cr_assert(hp_profile_write(where));
	cr_assert_str_empty(captured());
	snprintf(line[0], sizeof line[0], "promote " COUNTS " %s+0x1000@48 "
	    "%s+0x1008\n", exe, exe);
	snprintf(line[1], sizeof line[1], "small " COUNTS " %s+0x1010 "
	    "%s+0x30000\n", exe, libc_path);
	snprintf(line[2], sizeof line[2], "undecided " COUNTS " %s+0x1020\n",
	    exe);
	const char *out = slurp(path);
	cr_assert_eq(strncmp(out, MAGIC2 "# decision samples short long live "
	    "<1ms <10ms <100ms <1s <10s more frames", strlen(MAGIC2) + 40), 0,
	    "%s", out);
	for (int i = 0; i < 3; i++)
		cr_assert_not_null(strstr(out, line[i]), "%s in:\n%s", line[i], out);
	cr_assert_not_null(strstr(out, "\nend 3\n"));
	cr_assert_eq(out[strlen(out) - 1], '\n');
	/* No temporary file left beside it. */
	char cmd[160];
	snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", dir);
	cr_assert_neq(system(cmd), 0);
	/* Read again: the same three sites, nothing new. */
	cr_assert(hp_profile_load(path));
	cr_assert_eq(hp_site_counts.sites, 3);
	cr_assert_eq(hp_site_counts.sites_promoted, 1);
}

/* A learned site's line: its counts, its lifetimes by decade, its frames;
 * frames in no module as "?+0x..."; a site never sampled is left out. */
Test(profile, write_gives_a_learned_sites_counts) {
	uintptr_t f[2] = {exe_base + 0x1100, 0x10};
	hp_site_lock();
	int i = hp_site_get(f, 2, NULL);
	for (int k = 0; k < 8; k++)
		hp_site_outcome(i, true, 0);
	hp_site_outcome(i, false, 5000000);          /* 5 ms */
	hp_site_freed_long(i, 2000000000ull);        /* 2 s */
	hp_sites[i].samples = 11;                    /* sample.c's counts */
	hp_sites[i].live = 2;
	uintptr_t g[1] = {exe_base + 0x1200};
	hp_site_get(g, 1, NULL);                         /* never sampled */
	hp_site_unlock();
	char where[128], want[PATH_MAX + 128];
	snprintf(where, sizeof where, "%s/learned", dir);
	cr_assert(hp_profile_write(where));
	const char *out = slurp(where);
	snprintf(want, sizeof want, "\npromote 11 1 8 2 0 1 0 0 1 0 %s+0x1100 "
	    "?+0x10\nend 1\n", exe);
	cr_assert_not_null(strstr(out, want), "%s in:\n%s", want, out);
}

/* With a lock of the library held (exit from a signal handler that
 * interrupted it), the writer neither waits for the site lock nor asks
 * the loader: the modules come from /proc/self/maps, by the kernel's
 * paths, and it says so. Criterion's worker maps its arena file (not
 * ELF) below and above the program: the program's frames are still
 * written as the program's, not the arena's. */
Test(profile, write_with_a_lock_held_reads_maps) {
	static hp_lock_t held = HP_LOCK_INIT(HP_RANK_START);
	cr_assert(hp_profile_load(three("three")));
	char where[128], want[2 * PATH_MAX + 64], real[PATH_MAX];
	snprintf(where, sizeof where, "%s/at-exit", dir);
	cr_assert_not_null(realpath(libc_path, real));
	hp_lock(&held);
	capture();
	bool ok = hp_profile_write(where);
	const char *err = captured();
	hp_unlock(&held);
	cr_assert(ok);
	cr_assert_not_null(strstr(err, "written without the site table's lock"),
	    "%s", err);
	const char *out = slurp(where);
	snprintf(want, sizeof want, " %s+0x30000\n", real);
	cr_assert_not_null(strstr(out, want), "%s in:\n%s", want, out);
	cr_assert_not_null(realpath(exe, real));
	snprintf(want, sizeof want, " %s+0x1000@48 %s+0x1008\n", real, real);
	cr_assert_not_null(strstr(out, want), "%s in:\n%s", want, out);
	cr_assert_not_null(strstr(out, "\nend 3\n"));
}

Test(profile, write_failure_is_reported) {
	cr_assert(hp_profile_load(three("three")));
	capture();
	cr_assert_not(hp_profile_write("/nonexistent/dir/profile"));
	cr_assert_not_null(strstr(captured(), "could not write lifetime_record "
	    "/nonexistent/dir/profile (No such file or directory)"));
}
