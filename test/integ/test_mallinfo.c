/* glibc's malloc extension API describes the library's heap, both
 * classes, not glibc's empty arena; mallopt answers as glibc does. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

/* The value of "<tag ... type="TYPE" ... size="N"/>" after FROM in s. */
static unsigned long long xml(const char *s, const char *from,
    const char *elem) {
	const char *p = strstr(s, from);
	cr_assert_not_null(p, "no %s in:\n%s", from, s);
	p = strstr(p, elem);
	cr_assert_not_null(p, "no %s after %s", elem, from);
	const char *sz = strstr(p, "size=\"");
	cr_assert_not_null(sz);
	return strtoull(sz + 6, NULL, 10);
}

/* "label = N" of malloc_stats, the n-th (1-based) such line. */
static unsigned long long stat_line(const char *err, const char *label,
    int nth) {
	const char *p = err;
	for (int i = 0; i < nth; i++) {
		p = strstr(p, label);
		cr_assert_not_null(p, "%s #%d missing:\n%s", label, nth, err);
		p += strlen(label);
	}
	return strtoull(strchr(p, '=') + 1, NULL, 10);
}

Test(mallinfo, describes_the_library_heap) {
	const char *argv[] = {hp_path("mallinfo"), NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	long long req = hp_kv(&r, "requested");
	long long small = hp_kv(&r, "mi2_uordblks"), huge = hp_kv(&r,
	    "mi2_hblkhd");
	/* 100 x 1 MiB in the huge class; the rest, 1,000,000 x 100 B in
	 * 112 B size classes, in either class (lifetime:learn promotes the
	 * long-lived site): both within 10% of what was asked. */
	cr_assert_geq(huge, 100ll << 20, "%s", r.out);
	cr_assert(small + huge >= req && small + huge <= req + req / 10,
	    "uordblks %lld + hblkhd %lld against %lld requested", small, huge,
	    req);
	cr_assert_geq(hp_kv(&r, "mi2_arena"), small);
	cr_assert_eq(hp_kv(&r, "mi2_fordblks"), hp_kv(&r, "mi2_arena") - small);
	cr_assert_eq(hp_kv(&r, "mi_uordblks"), small, "mallinfo = mallinfo2");
	cr_assert_eq(hp_kv(&r, "mi_hblkhd"), huge);
	cr_assert_eq(hp_kv(&r, "errno_kept"), 1);
	cr_assert_eq(hp_kv(&r, "info_rc"), 0);
	/* malloc_stats (stderr) and malloc_info (XML) print the same totals,
	 * within 1% (other threads of the library may allocate between). */
	unsigned long long inuse = stat_line(r.err, "in use bytes", 2);
	unsigned long long mmap = stat_line(r.err, "max mmap bytes", 1);
	unsigned long long total = (unsigned long long)(small + huge);
	cr_assert(inuse >= total - total / 100 && inuse <= total + total / 100,
	    "malloc_stats in use %llu, mallinfo2 %llu", inuse, total);
	cr_assert_eq(mmap, (unsigned long long)huge);
	cr_assert_eq(xml(r.out, "</heap>", "type=\"mmap\""),
	    (unsigned long long)huge, "malloc_info's mmap total");
	unsigned long long sys = xml(r.out, "</heap>", "<system type=\"current\"");
	cr_assert_eq(sys, stat_line(r.err, "system bytes", 2),
	    "malloc_info and malloc_stats: system bytes");
	/* Freed and trimmed: nearly nothing left. */
	cr_assert_lt(hp_kv(&r, "after_inuse"), 1 << 20, "%s", r.out);
	hp_run_free(&r);
}

/* Each mallopt parameter, and malloc_info with bad options, answer as
 * glibc does without the library. */
Test(mallinfo, mallopt_and_bad_options_as_glibc) {
	const char *argv[] = {hp_path("mallinfo"), NULL};
	hp_run_t with = hp_run(argv, NULL, true, NULL);
	hp_run_t without = hp_run(argv, NULL, false, NULL);
	cr_assert_eq(with.code, 0);
	cr_assert_eq(without.code, 0);
	for (int i = 0; i < 14; i++) {
		char k[32];
		snprintf(k, sizeof k, "mallopt_%d", i);
		cr_assert_eq(hp_kv(&with, k), hp_kv(&without, k), "%s", k);
	}
	const char *a = strstr(with.out, "info_bad="), *b = strstr(without.out,
	    "info_bad=");
	cr_assert(a && b);
	cr_assert_eq(strncmp(a, b, strcspn(b, "\n")), 0, "%.20s against %.20s",
	    a, b);
	hp_run_free(&with);
	hp_run_free(&without);
}
