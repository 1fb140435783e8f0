/* src/pages/cgroup.c: the hugetlb cgroup limits, read from a fake tree (a
 * /proc/self/cgroup, a mountinfo and the cgroup directories under a
 * temporary directory), v1 and v2, ancestors included. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "pages/pages.h"

#define MIB (1L << 20)

static char top[64];

static void make_top(void) {
	strcpy(top, "/tmp/hp-cgunit.XXXXXX");
	cr_assert_not_null(mkdtemp(top));
}

static void remove_top(void) {
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (top[0])
		cr_assert_eq(system(cmd), 0);
	/* Back to the real files for whatever runs next. */
	hp_cgroup_use("/proc/self/cgroup", "/proc/self/mountinfo");
}

/* Writes text to top/rel, making the directories on the way. */
static void put(const char *rel, const char *text) {
	char path[256];
	snprintf(path, sizeof path, "%s/%s", top, rel);
	for (char *p = path + strlen(top) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void putf(const char *rel, const char *fmt, ...) {
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	put(rel, text);
}

static bool use(void) {
	char cg[128], mi[128];
	snprintf(cg, sizeof cg, "%s/cgroup", top);
	snprintf(mi, sizeof mi, "%s/mountinfo", top);
	return hp_cgroup_use(cg, mi);
}

/* Mountinfo lines of a real host around the one that matters. */
static const char *noise =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "
    "rw,memory\n";

/* v2: the leaf's own limit and its parent's; the least room wins, and the
 * message names the level that binds. */
Test(cgroup, v2_least_room_over_the_path, .init = make_top,
    .fini = remove_top) {
	put("cgroup", "0::/kubepods/pod1\n");
	putf("mountinfo", "%s40 30 0:37 / %s/v2 rw,relatime - cgroup2 cgroup2 "
	    "rw\n", noise, top);
	put("v2/kubepods/hugetlb.2MB.max", "max\n");
	put("v2/kubepods/pod1/hugetlb.2MB.max", "33554432\n");
	put("v2/kubepods/pod1/hugetlb.2MB.current", "4194304\n");
	put("v2/kubepods/pod1/hugetlb.2MB.rsvd.max", "max\n");
	put("v2/kubepods/pod1/hugetlb.2MB.rsvd.current", "8388608\n");
	cr_assert(use());
	/* 32 MiB less the 8 MiB reserved (faulted or not): 12 pages. */
	char why[320];
	cr_assert_eq(hp_cgroup_room(HP_HUGE, why, sizeof why), 12);
	cr_assert(strstr(why, "/v2/kubepods/pod1/hugetlb.2MB.max is 33554432"),
	    "%s", why);
	/* The parent limits harder: 16 MiB with 12 MiB charged, 2 pages. */
	put("v2/kubepods/hugetlb.2MB.max", "16777216\n");
	put("v2/kubepods/hugetlb.2MB.rsvd.current", "12582912\n");
	cr_assert(use());
	cr_assert_eq(hp_cgroup_room(HP_HUGE, why, sizeof why), 2);
	cr_assert(strstr(why, "/v2/kubepods/hugetlb.2MB.max is 16777216"),
	    "%s", why);
	/* Limits are read at each room: a change shows without a refresh. */
	put("v2/kubepods/pod1/hugetlb.2MB.max", "0\n");
	cr_assert_eq(hp_cgroup_room(HP_HUGE, NULL, 0), 0);
	/* No 1 GiB limit anywhere. */
	cr_assert_eq(hp_cgroup_room(HP_GIB, NULL, 0), LONG_MAX);
}

/* v2's rsvd.max binds as max does; over-charged reads as no room. */
Test(cgroup, v2_rsvd_max_and_overcharge, .init = make_top,
    .fini = remove_top) {
	put("cgroup", "0::/a\n");
	putf("mountinfo", "40 30 0:37 / %s/v2 rw - cgroup2 cgroup2 rw\n", top);
	put("v2/a/hugetlb.2MB.max", "max\n");
	put("v2/a/hugetlb.2MB.current", "0\n");
	put("v2/a/hugetlb.2MB.rsvd.max", "4194304\n");
	put("v2/a/hugetlb.2MB.rsvd.current", "0\n");
	cr_assert(use());
	char why[320];
	cr_assert_eq(hp_cgroup_room(HP_HUGE, why, sizeof why), 2);
	cr_assert(strstr(why, "hugetlb.2MB.rsvd.max is 4194304"), "%s", why);
	put("v2/a/hugetlb.2MB.rsvd.current", "8388608\n");
	cr_assert_eq(hp_cgroup_room(HP_HUGE, NULL, 0), 0);
}

/* v1: the hugetlb hierarchy mounted with other controllers, a mount
 * point with a space (mountinfo escapes it), the mount's root a subtree
 * (a container's view), v1's "unlimited" value, and 1 GiB pages. */
Test(cgroup, v1_subtree_mount_escapes_and_1g, .init = make_top,
    .fini = remove_top) {
	put("cgroup", "9:name=systemd:/\n6:cpuset,hugetlb:/docker/c1/app\n"
	    "0::/\n");
	putf("mountinfo", "%s41 30 0:40 /docker/c1 %s/v1\\040dir rw,relatime "
	    "shared:9 - cgroup cgroup rw,cpuset,hugetlb\n", noise, top);
	put("v1 dir/app/hugetlb.2MB.limit_in_bytes", "9223372036854771712\n");
	put("v1 dir/app/hugetlb.2MB.usage_in_bytes", "0\n");
	put("v1 dir/app/hugetlb.1GB.limit_in_bytes", "2147483648\n");
	put("v1 dir/app/hugetlb.1GB.usage_in_bytes", "1073741824\n");
	put("v1 dir/hugetlb.2MB.limit_in_bytes", "10485760\n");
	put("v1 dir/hugetlb.2MB.usage_in_bytes", "2097152\n");
	put("v1 dir/hugetlb.2MB.rsvd.limit_in_bytes", "9223372036854771712\n");
	put("v1 dir/hugetlb.2MB.rsvd.usage_in_bytes", "6291456\n");
	cr_assert(use());
	char why[320];
	/* 10 MiB less the larger of the two charges (6 MiB): 2 pages. */
	cr_assert_eq(hp_cgroup_room(HP_HUGE, why, sizeof why), 2);
	cr_assert(strstr(why, "/v1 dir/hugetlb.2MB.limit_in_bytes is 10485760"),
	    "%s", why);
	cr_assert_eq(hp_cgroup_room(HP_GIB, why, sizeof why), 1);
	cr_assert(strstr(why, "/v1 dir/app/hugetlb.1GB.limit_in_bytes"), "%s",
	    why);
}

/* Nothing limited, no hugetlb files, a path outside the mount's root, no
 * hugetlb hierarchy: no limit (and nothing to read at each room). */
Test(cgroup, no_limit_found, .init = make_top, .fini = remove_top) {
	put("cgroup", "0::/a\n4:memory:/m\n");
	putf("mountinfo", "%s40 30 0:37 / %s/v2 rw - cgroup2 cgroup2 rw\n",
	    noise, top);
	put("v2/a/hugetlb.2MB.max", "max\n");
	put("v2/a/hugetlb.2MB.rsvd.max", "max\n");
	cr_assert_not(use());
	cr_assert_eq(hp_cgroup_room(HP_HUGE, NULL, 0), LONG_MAX);
	putf("mountinfo", "40 30 0:37 /other %s/v2 rw - cgroup2 cgroup2 rw\n",
	    top);
	put("v2/a/hugetlb.2MB.max", "0\n");
	cr_assert_not(use());
	put("cgroup", "4:memory:/m\n");
	cr_assert_not(use());
	cr_assert_eq(hp_cgroup_room(HP_HUGE, NULL, 0), LONG_MAX);
}
