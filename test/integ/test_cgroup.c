/* The hugetlb cgroup's limits (issue 30, defect 3): a process in a cgroup
 * whose hugetlb.2MB.max or rsvd.max is below what the pool offers gets
 * no more hugetlb pages than the limit leaves room for, and its fork
 * children's copies fit in it; never SIGBUS. Each test makes a cgroup
 * with the hugetlb controller (a cgroup v2 child of the hierarchy's root,
 * the controller enabled; or the v1 controller mounted on a temporary
 * directory, possible only while v2 does not use it) and a pool of 64
 * free pages, and puts all of it back in .fini. Skipped where the host
 * has no such controller. */
#include <sys/mount.h>
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
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
static char v1[64];                 /* the v1 mount, if made here */

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

static void find_v2(void);

static void restore(void) {
	const char *root = v1[0] ? v1 : v2;
	if (cg[0]) {
		char procs[4096];
		get(cg, "cgroup.procs", procs, sizeof procs);
		for (char *p = strtok(procs, "\n"); p; p = strtok(NULL, "\n"))
			put(root, "cgroup.procs", p);
		rmdir(cg);
		cg[0] = '\0';
	}
	if (enabled_here)
		put(v2, "cgroup.subtree_control", "-hugetlb");
	enabled_here = false;
	if (v1[0]) {
		/* A v1 hierarchy ends at the unmount that finds it without
		 * children; the cgroup removed just now may still be going, so
		 * mount and unmount again until the controller is back in cgroup
		 * v2, for the tests that follow (up to 60 s). */
		umount2(v1, 0);
		find_v2();
		char buf[512] = "";
		for (int i = 0; v2[0] && i < 600; i++) {
			get(v2, "cgroup.controllers", buf, sizeof buf);
			if (has_word(buf, "hugetlb"))
				break;
			usleep(100 * 1000);
			if (i % 10 == 9 && mount("none", v1, "cgroup", 0,
			    "hugetlb") == 0)
				umount2(v1, 0);
		}
		if (v2[0] && !has_word(buf, "hugetlb"))
			cr_log_warn("the v1 hugetlb hierarchy is still alive; cgroup "
			    "v2 tests will skip until it goes");
		rmdir(v1);
		v1[0] = '\0';
	}
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

/* The v1 hugetlb controller mounted on a directory of its own, and a
 * cgroup in it, or the test is skipped. */
static void make_v1_cgroup(void) {
	snprintf(v1, sizeof v1, "/tmp/hp-cgv1.%d", (int)getpid());
	if (mkdir(v1, 0755) != 0) {
		v1[0] = '\0';
		cr_skip_test("could not make a mount point in /tmp");
	}
	/* EBUSY while cgroup v2 lets go of the controller (a test before
	 * this one enabled it there): polled for up to 10 s. */
	int ok = mount("none", v1, "cgroup", 0, "hugetlb");
	for (int i = 0; ok != 0 && errno == EBUSY && i < 100; i++) {
		usleep(100 * 1000);
		ok = mount("none", v1, "cgroup", 0, "hugetlb");
	}
	if (ok != 0) {
		rmdir(v1);
		v1[0] = '\0';
		cr_skip_test("could not mount the v1 hugetlb controller (cgroup v2 "
		    "may be using it, or it is not built)");
	}
	snprintf(cg, sizeof cg, "%s/hp-test", v1);
	if (mkdir(cg, 0755) != 0) {
		cg[0] = '\0';
		cr_skip_test("could not make a cgroup under %s", v1);
	}
}

/* Sets one limit of the cgroup (rsvd: the reservation's), the other to
 * none; the file's name in the hierarchy in use is returned. */
static const char *limit(bool rsvd, const char *bytes) {
	const char *fault = v1[0] ? "hugetlb.2MB.limit_in_bytes" :
	    "hugetlb.2MB.max";
	const char *resv = v1[0] ? "hugetlb.2MB.rsvd.limit_in_bytes" :
	    "hugetlb.2MB.rsvd.max";
	const char *none = v1[0] ? "-1" : "max";
	cr_assert(put(cg, fault, none));
	cr_assert(put(cg, resv, none));
	cr_assert(put(cg, rsvd ? resv : fault, bytes), "%s/%s", cg,
	    rsvd ? resv : fault);
	return rsvd ? resv : fault;
}

/* What the kernel says of limits hit: v2's events, v1's failcnt. */
static void hits(char *out, size_t n) {
	char rsvd[64];
	get(cg, v1[0] ? "hugetlb.2MB.failcnt" : "hugetlb.2MB.events", out, n);
	if (v1[0]) {
		get(cg, "hugetlb.2MB.rsvd.failcnt", rsvd, sizeof rsvd);
		snprintf(out + strlen(out), n - strlen(out), " rsvd %s", rsvd);
	}
	for (char *c = out; (c = strchr(c, '\n')); )
		*c = ' ';
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
static void limit_zero(void) {
	pool_of_64_free();
	const char *file = limit(false, "0");
	const char *py[] = {"python3", "-c", "b = bytearray(64 << 20)", NULL};
	hp_run_t r = run_in(py, true);
	cr_assert_eq(r.code, 0, "python3 exit %d (135: SIGBUS)\n%s", r.code,
	    r.err);
	char want[128];
	snprintf(want, sizeof want, "%s is 0 bytes) leaves room for 0 more "
	    "2 MiB pages", file);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "hugetlb cgroup limit (") && strstr(r.err, want),
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
static void limit_forks(void) {
	pool_of_64_free();
	for (int f = 0; f < 2; f++) {
		const char *file = limit(f == 1, "33554432");
		const char *ctl[] = {hp_path("cgfork"), "16", "10", "raw", NULL};
		hp_run_t c = run_in(ctl, false);
		cr_assert_eq(c.code, 0, "%s", c.err);
		cr_assert_gt(hp_kv(&c, "sigbus"), 0, "control under %s: no SIGBUS\n"
		    "%s", file, c.out);
		hp_run_free(&c);
		const char *mib[] = {"16", "64"};
		for (int m = 0; m < 2; m++) {
			const char *argv[] = {hp_path("cgfork"), mib[m], "10", NULL};
			char before[256], after[256];
			hits(before, sizeof before);
			hp_run_t r = run_in(argv, true);
			cr_assert_eq(r.code, 0, "%s MiB under %s: exit %d\n%s", mib[m],
			    file, r.code, r.err);
			cr_assert_gt(hp_kv(&r, "hugetlb_kb_before_fork"), 0,
			    "the pool was not used\n%s", r.out);
			hits(after, sizeof after);
			cr_assert_eq(hp_kv(&r, "sigbus"), 0, "%s MiB under %s:\n%s"
			    "limits hit: %s before, %s after; pool pages free now "
			    "%ld of %ld", mib[m], file, r.out, before, after,
			    meminfo("HugePages_Free:"), meminfo("HugePages_Total:"));
			cr_assert_eq(hp_kv(&r, "failed"), 0, "%s", r.out);
			cr_assert_eq(hp_kv(&r, "parent_bad"), 0);
			cr_assert_leq(hp_err_lines(&r), 1, "%s", r.err);
			hp_run_free(&r);
		}
	}
}

Test(hugetlb, cgroup_limit_zero_no_sigbus, .fini = restore) {
	make_cgroup();
	limit_zero();
}

Test(hugetlb, cgroup_limit_forks_no_sigbus, .fini = restore) {
	make_cgroup();
	limit_forks();
}

/* The same under the v1 hugetlb controller (limit_in_bytes and
 * rsvd.limit_in_bytes). */
Test(hugetlb, cgroup_v1_limits_no_sigbus, .fini = restore) {
	make_v1_cgroup();
	limit_zero();
	limit_forks();
}
