/* The hugetlb cgroup's limits (issue 30, defect 3): a process in a cgroup
 * whose hugetlb.2MB.max or rsvd.max is below what the pool offers gets
 * no more hugetlb pages than the limit leaves room for, and its fork
 * children's copies fit in it; never SIGBUS. Each test makes a cgroup v2
 * child of the hierarchy's root with the hugetlb controller enabled, and
 * a pool of 64 free pages, and puts all of it back in .fini. Skipped
 * where the host has no cgroup v2 hugetlb controller. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness.h"

#define POOL_2M "/proc/sys/vm/nr_hugepages"

static hp_knob_t pool;
static char v2[256], cg[320];
static bool enabled_here;

static bool put(const char *dir, const char *file, const char *text) {
	char path[400];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return false;
	bool ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok;
}

static void get(const char *dir, const char *file, char *out, size_t n) {
	char path[400];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return;
	size_t got = fread(out, 1, n - 1, f);
	out[got] = '\0';
	fclose(f);
}

static bool has_word(const char *list, const char *w) {
	size_t n = strlen(w);
	for (const char *p = list; (p = strstr(p, w)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' ||
		    p[n] == '\0'))
			return true;
	return false;
}

static void restore(void) {
	if (cg[0]) {
		char procs[4096];
		get(cg, "cgroup.procs", procs, sizeof procs);
		for (char *p = strtok(procs, "\n"); p; p = strtok(NULL, "\n"))
			put(v2, "cgroup.procs", p);
		rmdir(cg);
		cg[0] = '\0';
	}
	if (enabled_here)
		put(v2, "cgroup.subtree_control", "-hugetlb");
	enabled_here = false;
	hp_knob_restore(&pool);
}

/* The cgroup v2 mount point, from mountinfo; "" if none. */
static void find_v2(void) {
	v2[0] = '\0';
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[1024];
	while (f && fgets(line, sizeof line, f)) {
		char mnt[256], type[64];
		const char *dash = strstr(line, " - ");
		if (dash && sscanf(dash + 3, "%63s", type) == 1 &&
		    strcmp(type, "cgroup2") == 0 &&
		    sscanf(line, "%*s %*s %*s %*s %255s", mnt) == 1) {
			strcpy(v2, mnt);
			break;
		}
	}
	if (f)
		fclose(f);
}

/* A new cgroup with the hugetlb controller, or the test is skipped. */
static void make_cgroup(void) {
	find_v2();
	if (v2[0] == '\0')
		cr_skip_test("no cgroup v2 hierarchy is mounted");
	char buf[512];
	get(v2, "cgroup.controllers", buf, sizeof buf);
	if (!has_word(buf, "hugetlb"))
		cr_skip_test("the cgroup v2 hierarchy at %s has no hugetlb "
		    "controller", v2);
	get(v2, "cgroup.subtree_control", buf, sizeof buf);
	if (!has_word(buf, "hugetlb")) {
		if (!put(v2, "cgroup.subtree_control", "+hugetlb"))
			cr_skip_test("could not enable hugetlb in %s", v2);
		enabled_here = true;
	}
	snprintf(cg, sizeof cg, "%s/hp-test-%d", v2, (int)getpid());
	if (mkdir(cg, 0755) != 0) {
		cg[0] = '\0';
		cr_skip_test("could not make a cgroup under %s", v2);
	}
}

/* Sets one limit of the cgroup, the other to max. */
static void limit(const char *file, const char *bytes) {
	cr_assert(put(cg, "hugetlb.2MB.max", "max"));
	cr_assert(put(cg, "hugetlb.2MB.rsvd.max", "max"));
	cr_assert(put(cg, file, bytes), "%s/%s", cg, file);
}

static long meminfo(const char *key) {
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, key, strlen(key)) == 0)
			v = atol(line + strlen(key));
	if (f)
		fclose(f);
	return v;
}

/* 64 free pages in the pool, beside any other process's. */
static void pool_of_64_free(void) {
	char n[32];
	snprintf(n, sizeof n, "%ld", meminfo("HugePages_Total:") -
	    meminfo("HugePages_Free:") + 64);
	hp_knob_require(&pool, POOL_2M, n);
	if (meminfo("HugePages_Free:") < 64)
		cr_skip_test("the kernel reserved %ld free huge pages of the 64 "
		    "asked for (memory too fragmented)", meminfo("HugePages_Free:"));
}

/* Runs argv inside the cgroup (the shell moves itself in, then execs). */
static hp_run_t run_in(const char *const *argv, bool preload) {
	char script[512];
	snprintf(script, sizeof script, "echo $$ > %s/cgroup.procs && exec "
	    "\"$@\"", cg);
	const char *args[16] = {"/bin/sh", "-c", script, "sh"};
	int n = 4;
	for (; *argv && n < 15; argv++)
		args[n++] = *argv;
	args[n] = NULL;
	return hp_run(args, NULL, preload, NULL);
}

/* The Kubernetes pod that requests no huge pages: max 0. Python's 64 MiB
 * buffer and place_large's blocks go to THP, with one line. */
Test(hugetlb, cgroup_limit_zero_no_sigbus, .fini = restore) {
	make_cgroup();
	pool_of_64_free();
	limit("hugetlb.2MB.max", "0");
	const char *py[] = {"python3", "-c", "b = bytearray(64 << 20)", NULL};
	hp_run_t r = run_in(py, true);
	cr_assert_eq(r.code, 0, "python3 exit %d (135: SIGBUS)\n%s", r.code,
	    r.err);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "hugetlb cgroup limit (") && strstr(r.err,
	    "hugetlb.2MB.max is 0 bytes) leaves room for 0 more 2 MiB pages"),
	    "%s", r.err);
	hp_run_free(&r);
	const char *pl[] = {hp_path("place_large"), "64", NULL};
	r = run_in(pl, true);
	cr_assert_eq(r.code, 0, "place_large exit %d\n%s", r.code, r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	cr_assert_eq(hp_kv(&r, "vma_hugetlb_kb"), 0, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "thp_bytes"), 0.9 * hp_kv(&r, "size"), "%s",
	    r.out);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	hp_run_free(&r);
}

/* 32 MiB by max, then by rsvd.max: ten children alive at once, each
 * writing a block the parent holds on hugetlb pages (16 MiB: within the
 * limit, so the fork must keep room for the copies; 64 MiB: beyond it).
 * The control maps the block with plain mmap(MAP_HUGETLB). */
Test(hugetlb, cgroup_limit_forks_no_sigbus, .fini = restore) {
	make_cgroup();
	pool_of_64_free();
	const char *files[] = {"hugetlb.2MB.max", "hugetlb.2MB.rsvd.max"};
	for (int f = 0; f < 2; f++) {
		limit(files[f], "33554432");
		const char *ctl[] = {hp_path("cgfork"), "16", "10", "raw", NULL};
		hp_run_t c = run_in(ctl, false);
		cr_assert_eq(c.code, 0, "%s", c.err);
		cr_assert_gt(hp_kv(&c, "sigbus"), 0, "control under %s: no SIGBUS\n"
		    "%s", files[f], c.out);
		hp_run_free(&c);
		const char *mib[] = {"16", "64"};
		for (int m = 0; m < 2; m++) {
			const char *argv[] = {hp_path("cgfork"), mib[m], "10", NULL};
			char before[256], events[256];
			get(cg, "hugetlb.2MB.events", before, sizeof before);
			hp_run_t r = run_in(argv, true);
			cr_assert_eq(r.code, 0, "%s MiB under %s: exit %d\n%s", mib[m],
			    files[f], r.code, r.err);
			cr_assert_gt(hp_kv(&r, "hugetlb_kb_before_fork"), 0,
			    "the pool was not used\n%s", r.out);
			get(cg, "hugetlb.2MB.events", events, sizeof events);
			cr_assert_eq(hp_kv(&r, "sigbus"), 0, "%s MiB under %s:\n%s"
			    "hugetlb.2MB.events %s before, %s after; pool pages "
			    "free now %ld of %ld", mib[m], files[f], r.out, before,
			    events, meminfo("HugePages_Free:"),
			    meminfo("HugePages_Total:"));
			cr_assert_eq(hp_kv(&r, "failed"), 0, "%s", r.out);
			cr_assert_eq(hp_kv(&r, "parent_bad"), 0);
			cr_assert_leq(hp_err_lines(&r), 1, "%s", r.err);
			hp_run_free(&r);
		}
	}
}
