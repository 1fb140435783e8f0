/* Issue 30, defect 5: "hugepreload stat can be stopped by any local user".
 * The counters page is found by its name, so any program can map one: a
 * process not under the library (test/progs/craftpage) maps a page with a
 * valid header and crafted ranges, and a real process (sleeper, under the
 * library) runs beside it. stat PID, stat --all and the textfile form end
 * (timeout's 124 for a hang: 5bb5b39 looped for ever on an unaligned
 * range), say once why the crafted page was skipped, and still report
 * the real process. (Other processes' pages, which other tests may be
 * running, are left out of what is checked.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

/* Runs the crafted page of this kind beside a sleeper; valid: whether the
 * page is one stat should read (the control). */
static void crafted(const char *kind, bool valid, const char *why) {
	char body[4096];
	snprintf(body, sizeof body,
	    "start ${B}craftpage %s; bad=$pid; rm -f $T/out; "
	    "start $HP -- ${B}sleeper; good=$pid; "
	    "until_ok $HP stat $good >/dev/null 2>&1; "
	    "timeout 60 $HP stat $bad >$T/one 2>$T/one.err; echo one=$?; "
	    "timeout 60 $HP stat --all >$T/all 2>$T/all.err; echo all=$?; "
	    "timeout 60 $HP stat --all --prometheus -o $T/p.prom 2>$T/p.err; "
	    "echo prom=$?; "
	    "echo one_lines=$(wc -l < $T/one.err) "
	    "one_out=$(grep -c \"^hugepreload stats: pid $bad\" $T/one); "
	    "echo all_bad_lines=$(grep -c \"\\b$bad\\b\" $T/all.err) "
	    "all_skip=$(grep -c \"^hugepreload: process $bad: skipped: \" "
	    "$T/all.err) all_bad_row=$(grep -c \"^ *$bad \" $T/all) "
	    "all_good_row=$(grep -c \"^ *$good \" $T/all); "
	    "echo prom_bad_lines=$(grep -c \"\\b$bad\\b\" $T/p.err) "
	    "prom_bad=$(grep -c \"pid=\\\"$bad\\\"\" $T/p.prom) "
	    "prom_good=$(grep -c \"pid=\\\"$good\\\"\" $T/p.prom); "
	    "grep -E \"^#|pid=\\\"$good\\\"\" $T/p.prom | "
	    "python3 ${B}promcheck.py >/dev/null && echo promcheck=ok; "
	    "echo ---; cat $T/one.err; grep \"\\b$bad\\b\" $T/all.err; "
	    "kill $bad $good; wait", kind);
	hp_run_t r = hp_script(body, NULL);
	cr_log_info("%s: %s%s", kind, r.out, r.err);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	/* All three ended (no 124) and the real process is there. */
	cr_assert(strstr(r.out, valid ? "one=0\n" : "one=1\n"), "%s", r.out);
	cr_assert(strstr(r.out, "all=0\nprom=0\n"), "%s", r.out);
	cr_assert(strstr(r.out, "all_good_row=1\n") &&
	    strstr(r.out, "prom_good=0\n") == NULL &&
	    strstr(r.out, "promcheck=ok\n"), "%s", r.out);
	if (valid) {
		cr_assert(strstr(r.out, "one_lines=0 one_out=1\n"), "%s", r.out);
		cr_assert(strstr(r.out, "all_bad_lines=0 all_skip=0 "
		    "all_bad_row=1 "), "%s", r.out);
		cr_assert(strstr(r.out, "prom_bad_lines=0 prom_bad=") &&
		    strstr(r.out, "prom_bad=0 ") == NULL, "%s", r.out);
	} else {
		/* One line, naming the pid and why; nothing else of it. */
		cr_assert(strstr(r.out, "one_lines=1 one_out=0\n"), "%s", r.out);
		cr_assert(strstr(r.out, "all_bad_lines=1 all_skip=1 "
		    "all_bad_row=0 "), "%s", r.out);
		cr_assert(strstr(r.out, "prom_bad_lines=1 prom_bad=0 "), "%s",
		    r.out);
		cr_assert(strstr(r.out, why), "%s: no '%s' in %s", kind, why,
		    r.out);
	}
	hp_run_free(&r);
}

Test(statpage, stat_not_stopped_by_unaligned_range) {
	crafted("unaligned", false, "range 0 (0x1000-0x1800) is not whole 4 KiB "
	    "pages");
}

Test(statpage, stat_not_stopped_by_huge_ranges) {
	crafted("huge", false, "range 0 (0-0x7ffffffff000) is not mapped");
}

Test(statpage, stat_not_stopped_by_overlapping_ranges) {
	crafted("overlap", false, ") overlaps or comes before range 0");
}

Test(statpage, stat_not_stopped_by_unmapped_range) {
	crafted("unmapped", false, ") is not mapped in the process");
}

Test(statpage, stat_not_stopped_by_range_count) {
	crafted("count", false, "1000 ranges, more than a page holds (128)");
}

Test(statpage, stat_not_stopped_by_unaligned_class_range) {
	crafted("region", false, "is not whole 2 MiB pages");
}

Test(statpage, stat_not_stopped_by_ranges_over_the_scan_limit) {
	crafted("big", false, "its ranges cover 2048 GiB, more than the 1024 "
	    "GiB stat reads");
}

/* The control: a crafted page whose ranges are what the library writes is
 * read like any other. */
Test(statpage, stat_reads_a_crafted_valid_page) {
	crafted("valid", true, "");
}
