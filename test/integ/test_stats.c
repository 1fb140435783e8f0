/* The counters: at exit in three formats, live from outside through
 * "hugepreload stat", consistent with smaps, the stranding demo and
 * strand_limit, and the wrapper. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

Test(stats, print_at_exit_text_json_prometheus) {
	const char *argv[] = {hp_path("place_large"), "8", NULL};
	const char *env_t[] = {"HUGEPRELOAD_CONF=stats_print:true", NULL};
	hp_run_t r = hp_run(argv, env_t, true, NULL);
	cr_assert_eq(r.code, 0);
	cr_assert(strstr(r.err, "hugepreload stats: pid") &&
	    strstr(r.err, "stranded_bytes") && strstr(r.err, "huge0"), "%s",
	    r.err);
	hp_run_free(&r);
	r = hp_script("f=$(mktemp); HUGEPRELOAD_CONF=stats_print:true,"
	    "stats_format:json,stats_file:$f LD_PRELOAD=${B}libhugepreload.so "
	    "${B}place_large 8 >/dev/null && python3 -m json.tool $f >/dev/null "
	    "&& echo json=ok && grep -c huge_pages_by_live_tenth $f; rm -f $f",
	    NULL);
	cr_assert(strstr(r.out, "json=ok\n1\n"), "%s%s", r.out, r.err);
	hp_run_free(&r);
	r = hp_script("HUGEPRELOAD_CONF=stats_print:true,stats_format:prometheus "
	    "LD_PRELOAD=${B}libhugepreload.so ${B}place_large 8 2>&1 >/dev/null "
	    "| python3 ${B}promcheck.py", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "ok "), "%s", r.out);
	hp_run_free(&r);
}

/* The maintenance thread's own counters, live: with maintain_ms:20 its
 * passes add up (polled until there are ten), each holds the huge class's
 * page lock for some nanoseconds, and the longest no longer than all. */
Test(stats, maintenance_counted) {
	hp_run_t r = hp_script("start $HP -- ${B}sleeper; "
	    "passes() { $HP stat $pid > $T/s 2>/dev/null && test \"$(sed -n "
	    "'s/^maintenance_passes *//p' $T/s)\" -ge 10; }; "
	    "until_ok passes; grep '^maintenance_' $T/s; kill $pid; wait",
	    "maintain_ms:20");
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	unsigned long long passes = 0, ns = 0, max = 0, ms = 0;
	const char *p = strstr(r.out, "maintenance_passes");
	cr_assert(p && sscanf(p, "maintenance_passes %llu", &passes) == 1, "%s",
	    r.out);
	p = strstr(r.out, "maintenance_region_lock_ns");
	cr_assert(p && sscanf(p, "maintenance_region_lock_ns %llu", &ns) == 1);
	p = strstr(r.out, "maintenance_region_lock_max_ns");
	cr_assert(p && sscanf(p, "maintenance_region_lock_max_ns %llu", &max) ==
	    1);
	p = strstr(r.out, "maintenance_interval_ms");
	cr_assert(p && sscanf(p, "maintenance_interval_ms %llu", &ms) == 1);
	cr_assert_geq(passes, 10, "%s", r.out);
	cr_assert_gt(ns, 0, "%s", r.out);
	cr_assert(max > 0 && max <= ns, "%s", r.out);
	cr_assert_eq(ms, 20, "%s", r.out);
	hp_run_free(&r);
}

/* A stats_file that cannot be opened: one line with the error's text, and
 * the program's own exit status. */
Test(stats, stats_file_error_has_its_text) {
	const char *argv[] = {hp_path("place_large"), "8", NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=stats_print:true,"
	    "stats_file:/nonexistent/dir/stats", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "could not open stats_file /nonexistent/dir/"
	    "stats (No such file or directory)"), "%s", r.err);
	hp_run_free(&r);
}

/* While the program runs, stat reads its counters from outside in all
 * three formats, with no signal sent and no descriptor held by the
 * program; once it has exited there is nothing to read. */
Test(stats, live_from_outside) {
	hp_run_t r = hp_script(
	    "start $HP -- ${B}sleeper; "
	    "live() { $HP stat $pid > $T/s 2>/dev/null && "
	    "awk '/^live_bytes/ { exit !($3 >= 67108864) }' $T/s; }; "
	    "until_ok live; grep -E '^live_bytes' $T/s; "
	    "$HP stat $pid --json | python3 -m json.tool >/dev/null && "
	    "echo json=ok; "
	    "$HP stat $pid --json | python3 -c 'import json, sys; "
	    "k = json.load(sys.stdin)[\"kernel\"]; "
	    "print(\"kernel=%d\" % (k[\"huge_range_resident_bytes\"] == "
	    "k[\"huge_counted_resident_bytes\"] and "
	    "k[\"huge_range_resident_bytes\"] >= 64 << 20))'; "
	    "$HP stat $pid --prometheus | python3 ${B}promcheck.py; "
	    "echo pages=$(grep -c /memfd:hugepreload-stats /proc/$pid/maps); "
	    "echo fds=$(ls -l /proc/$pid/fd | grep -c memfd:hugepreload); "
	    "kill $pid; wait; $HP stat $pid; echo rc=$?", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	long small, huge;
	const char *l = strstr(r.out, "live_bytes");
	cr_assert(l && sscanf(l, "live_bytes %ld %ld", &small, &huge) == 2,
	    "%s", r.out);
	cr_assert_geq(huge, 64 << 20, "the 64 MiB block: %ld", huge);
	cr_assert(strstr(r.out, "json=ok\n") && strstr(r.out, "ok "), "%s%s",
	    r.out, r.err);
	cr_assert(strstr(r.out, "pages=1\nfds=0\n"), "%s", r.out);
	/* The kernel's figure for the huge class's range (smaps), the same
	 * as the counters' (the sleeper is still). */
	cr_assert(strstr(r.out, "kernel=1\n"), "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "rc=1\n") && strstr(r.err, "no process"),
	    "%s%s", r.out, r.err);
	hp_run_free(&r);
}

/* --watch prints until the program exits, then says so. */
Test(stats, watch_until_exit) {
	hp_run_t r = hp_script("start $HP -- ${B}sleeper; "
	    "until_ok $HP stat $pid >/dev/null 2>&1; "
	    "$HP stat $pid --watch 0.2 > $T/w & w=$!; "
	    "frames() { test \"$(grep -c '^hugepreload stats' $T/w)\" -ge 2; }; "
	    "until_ok frames; "
	    "kill $pid; wait $w; echo rc=$?; grep -c '^hugepreload stats' $T/w; "
	    "tail -n 1 $T/w", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "rc=0\n"), "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "has exited\n"), "%s", r.out);
	cr_assert_geq(atoi(strstr(r.out, "rc=0\n") + 5), 2, "%s", r.out);
	hp_run_free(&r);
}

/* A fork child does not share its parent's page: it has its own, with its
 * own counters, and the parent's is not mapped in it. */
Test(stats, fork_child_has_its_own_page) {
	hp_run_t r = hp_script("start $HP -- ${B}sleeper fork; "
	    "child_live() { $HP stat $child > $T/c 2>/dev/null && "
	    "awk '/^live_bytes/ { exit !($3 >= 100663296) }' $T/c; }; "
	    "until_ok child_live; grep -E '^live_bytes' $T/c; "
	    "echo parent_pages=$(grep -c /memfd:hugepreload-stats "
	    "/proc/$pid/maps) child_pages=$(grep -c "
	    "/memfd:hugepreload-stats /proc/$child/maps); "
	    "grep -E '^hugepreload stats: pid' $T/c; "
	    "echo child=$child; kill $pid $child; wait", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	long small, huge;
	const char *l = strstr(r.out, "live_bytes");
	cr_assert(l && sscanf(l, "live_bytes %ld %ld", &small, &huge) == 2,
	    "%s", r.out);
	/* Its own 32 MiB, and the parent's 64 MiB it shares until written. */
	cr_assert_geq(huge, 96 << 20, "the child's: %ld", huge);
	cr_assert(strstr(r.out, "parent_pages=1 child_pages=1\n"), "%s", r.out);
	long child = 0, shown = -1;
	const char *c = strstr(r.out, "\nchild=");
	const char *p = strstr(r.out, "hugepreload stats: pid ");
	cr_assert(c && p && sscanf(c, "\nchild=%ld", &child) == 1 &&
	    sscanf(p, "hugepreload stats: pid %ld", &shown) == 1, "%s", r.out);
	cr_assert_eq(shown, child, "%s", r.out);
	hp_run_free(&r);
}

/* Short processes that never use the huge class have no page. */
Test(stats, no_page_without_the_huge_class) {
	hp_run_t r = hp_script("$HP -- sh -c 'grep -c hugepreload-stats "
	    "/proc/$$/maps'; echo rc=$?", NULL);
	cr_assert(strstr(r.out, "0\nrc=1\n"), "%s%s", r.out, r.err);
	hp_run_free(&r);
}

/* Stopped by SIGTERM (what systemctl stop sends) or SIGKILL, a process
 * leaves nothing behind: under the default policy the library creates,
 * opens for writing or removes no file at all (strace shows every file
 * call of the process), and /dev/shm is as it was. */
static void nothing_left(const char *sig) {
	char body[2048];
	snprintf(body, sizeof body, "command -v strace >/dev/null || "
	    "{ echo no-strace; exit 0; }; ls -A /dev/shm > $T/before; "
	    "start strace -f -qq -o $T/trace "
	    "-e trace=%%file,%%desc,memfd_create $HP -- ${B}sleeper; "
	    "until_ok $HP stat $pid >/dev/null 2>&1; kill -%s $pid; wait; "
	    "ls -A /dev/shm > $T/after; cmp -s $T/before $T/after && "
	    "echo shm=same; echo memfd=$(grep -c 'memfd_create(\"hugepreload' "
	    "$T/trace); grep -E 'O_CREAT|O_WRONLY|O_RDWR|O_TRUNC|^[0-9]+ "
	    "+(mkdir|unlink|rename|link|symlink|truncate|mknod|creat)' "
	    "$T/trace | grep -v '/dev/null' | sed 's/^/writes: /'; "
	    "echo done", sig);
	hp_run_t r = hp_script(body, NULL);
	if (strstr(r.out, "no-strace"))
		cr_skip_test("strace is not installed (scripts/setup-deps "
		    "installs it)");
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "shm=same\nmemfd=1\n"), "%s%s", r.out, r.err);
	cr_assert_null(strstr(r.out, "writes: "), "%s", r.out);
	cr_assert(strstr(r.out, "done\n"), "%s", r.out);
	hp_run_free(&r);
}

Test(stats, nothing_left_after_sigterm) {
	nothing_left("TERM");
}

Test(stats, nothing_left_after_sigkill) {
	nothing_left("KILL");
}

/* The kernel decides who reads the counters, as for a debugger: root and
 * the process's own user, not another unprivileged user. */
Test(stats, readable_by_its_user_and_root_only) {
	hp_run_t r = hp_script("U='setpriv --reuid=65534 --regid=65534 "
	    "--clear-groups'; V='setpriv --reuid=65533 --regid=65533 "
	    "--clear-groups'; $U test -x ${B}sleeper -a -r "
	    "${B}libhugepreload.so || { echo no-access; exit 0; }; "
	    "start $U $HP -- ${B}sleeper; "
	    "until_ok $HP stat $pid >/dev/null 2>&1; echo root=$?; "
	    "$U $HP stat $pid >/dev/null; echo own=$?; "
	    "$V $HP stat $pid >/dev/null 2>$T/err; echo other=$?; cat $T/err; "
	    "$V $HP stat --all 2>&1 >/dev/null | grep -c 'not looked at: "
	    "permission' | sed 's/^/all_says=/'; "
	    "kill $pid; wait", NULL);
	if (strstr(r.out, "no-access"))
		cr_skip_test("the build directory is not readable by nobody");
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "root=0\n"), "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "other=1\n") && strstr(r.out,
	    "cannot read process") && strstr(r.out, "Permission denied") &&
	    strstr(r.out, "(permission: its user and root can read it)"),
	    "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "all_says=1\n"), "stat --all: %s%s", r.out,
	    r.err);
	long scope = -1;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	if (f) {
		if (fscanf(f, "%ld", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	if (scope >= 1)
		cr_skip_test("kernel.yama.ptrace_scope is %ld: only root may "
		    "read another process's memory here (the README says "
		    "so)", scope);
	cr_assert(strstr(r.out, "own=0\n"), "%s%s", r.out, r.err);
	hp_run_free(&r);
}

Test(stats, consistent_with_smaps) {
	const char *argv[] = {hp_path("consist"), NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "live_counted"), hp_kv(&r, "live_expected"));
	double slack = 2048 * hp_kv(&r, "mappings");
	cr_assert_leq(abs((int)(hp_kv(&r, "counted_resident_kb") -
	    hp_kv(&r, "smaps_rss_kb"))), slack, "%s", r.out);
	cr_assert_leq(abs((int)(hp_kv(&r, "counted_huge_kb") -
	    hp_kv(&r, "smaps_huge_kb"))), slack, "%s", r.out);
	hp_run_free(&r);
}

/* The counters against the kernel (test/progs/truth.c): in each arena,
 * resident = in_use + stranded + free_resident + metadata exactly; the
 * huge class's resident bytes in its range, and those on huge pages, are
 * smaps's own within 2 MiB (one huge page in transition), and the small
 * class's those of jemalloc's own mappings within 16 KiB. */
static hp_run_t truth(const char *mode, const char *conf) {
	const char *env[] = {conf, NULL};
	const char *argv[] = {hp_path("truth"), mode, NULL};
	hp_run_t r = hp_run(argv, conf ? env : NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "data_intact"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "small_parts_add_up"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "huge0_parts_add_up"), 1, "%s", r.out);
	double mib2 = 2 << 20;
	cr_assert_leq(fabs(hp_kv(&r, "counted_range_resident") -
	    hp_kv(&r, "smaps_range_resident")), mib2, "%s", r.out);
	cr_assert_leq(fabs(hp_kv(&r, "huge0_resident_huge") -
	    hp_kv(&r, "smaps_range_huge")), mib2, "%s", r.out);
	/* The small class: jemalloc's own mappings, within a few 4 KiB pages
	 * (the program makes no allocator call between refresh and smaps). */
	cr_assert_eq(hp_kv(&r, "small_kernel"), 1, "%s", r.out);
	cr_assert_leq(fabs(hp_kv(&r, "small_resident") -
	    hp_kv(&r, "smaps_small_resident")), 4 * 4096, "%s", r.out);
	return r;
}

/* 100 MiB malloc'd, 10 MiB written: about 10 MiB resident, not 100. */
Test(truth, written_not_committed) {
	hp_run_t r = truth("written", NULL);
	cr_assert_geq(hp_kv(&r, "counted_range_resident"), 10 << 20, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "counted_range_resident"), 14 << 20, "%s",
	    r.out);
	cr_assert_geq(hp_kv(&r, "huge0_live"), 100 << 20);
	hp_run_free(&r);
}

/* The stranding demo: 128 huge pages with one 64 KiB piece each. */
Test(truth, stranding_demo) {
	hp_run_t r = truth("strand", "HUGEPRELOAD_CONF=large_threshold:16k");
	cr_assert_geq(hp_kv(&r, "huge0_stranded"), 0.9 * 128 * ((2 << 20) -
	    (64 << 10)), "%s", r.out);
	cr_assert_leq(hp_kv(&r, "huge0_in_use"), 128 * (128 << 10), "%s",
	    r.out);
	hp_run_free(&r);
}

Test(truth, threads_realloc_between_classes) {
	hp_run_t r = truth("threads", NULL);
	cr_assert_geq(hp_kv(&r, "counted_range_resident"), 96.0 * (3 << 20),
	    "%s", r.out);
	hp_run_free(&r);
}

Test(truth, w4_after_its_frees) {
	hp_run_t r = truth("w4", NULL);
	hp_run_free(&r);
}

Test(truth, w4r_after_its_frees) {
	hp_run_t r = truth("w4r", NULL);
	hp_run_free(&r);
}

/* The seed's demo: 512 MiB of huge-class pieces, all but one per 2 MiB
 * freed: about 512 MiB stranded, pages nearly empty. */
Test(stats, stranding_reported) {
	const char *env[] = {"HUGEPRELOAD_CONF=large_threshold:16k,"
	    "strand_limit:100%", NULL};
	const char *argv[] = {hp_path("strand"), "strand", "512", "64", "20",
	    "480", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "done"), 1, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "stranded_bytes"), 480.0 * (1 << 20));
	cr_assert_geq(hp_kv(&r, "hist_0_10"), 0.9 * hp_kv(&r, "kept"),
	    "nearly empty pages: %s", r.out);
	cr_assert_eq(hp_kv(&r, "pages_split"), 0);
	hp_run_free(&r);
}

/* strand_limit: with no call from the program, RSS falls to within
 * limit + live + 16 MiB within 15 s, and the counters show the splits. */
static void limit_case(const char *conf) {
	const char *env[] = {conf, NULL};
	const char *argv[] = {hp_path("strand"), "limit", "512", "64", "15",
	    NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "done"), 1, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "rss_kb") * 1024, hp_kv(&r,
	    "strand_limit_bytes") + hp_kv(&r, "live_bytes") + (16 << 20),
	    "%s", r.out);
	cr_assert_gt(hp_kv(&r, "pages_split"), 0);
	cr_assert_leq(hp_kv(&r, "stranded_bytes"),
	    hp_kv(&r, "strand_limit_bytes"), "%s", r.out);
	cr_assert_gt(hp_kv(&r, "rss_after_free_kb"), 400 * 1024);
	hp_run_free(&r);
}

Test(stats, strand_limit_bytes) {
	limit_case("HUGEPRELOAD_CONF=large_threshold:16k,strand_limit:64m");
}

Test(stats, strand_limit_default_percent) {
	limit_case("HUGEPRELOAD_CONF=large_threshold:16k");
}

/* A THP page is resident whole, its parts never handed out included: when
 * strand_limit splits it, those go back too, not only freed parts; and the
 * page itself is split (/proc/kpageflags: no 4 KiB page of it is still in
 * a THP), not only its mapping, which would leave the whole 2 MiB with the
 * kernel's deferred-split queue, out of RSS but not back in MemFree. */
Test(stats, split_gives_back_parts_never_used) {
	const char *env[] = {"HUGEPRELOAD_CONF=strand_limit:0", NULL};
	const char *argv[] = {hp_path("strand"), "tail", "1024", "10", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "thp_before_kb"), 2048, "a THP page: %s", r.out);
	cr_assert_eq(hp_kv(&r, "pages_split"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "object_intact"), 1);
	cr_assert_leq(hp_kv(&r, "resident_after_kb"), 1024 + 16, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "thp_after_kb"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* stats_file with %p: one file per process of a tree, each its own. */
Test(stats, stats_file_per_process) {
	hp_run_t r = hp_script("LD_PRELOAD=${B}libhugepreload.so "
	    "HUGEPRELOAD_CONF=stats_print:true,stats_file:$T/s.%p "
	    "sh -c 'for i in 1 2 3; do '${B}place_large' 8 > /dev/null & done; "
	    "wait'; n=0; for f in $T/s.*; do p=${f##*.}; "
	    "grep -q \"^hugepreload stats: pid $p\" $f && n=$((n + 1)); done; "
	    "echo own=$n; echo files=$(ls $T | grep -c '^s\\.')", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_geq(hp_kv(&r, "files"), 3, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "own"), hp_kv(&r, "files"), "%s", r.out);
	hp_run_free(&r);
}

/* Output injection (issue 30, defect 6): runs a real process under the
 * library (real) and fakepage MODE without it (fake), then body; every
 * string of want must be in what it prints, and the real process's
 * Prometheus series (real_series=) be there. */
static void injection(const char *mode, const char *body,
    const char *const *want, size_t n) {
	char script[8192];
	snprintf(script, sizeof script, "start $HP -- ${B}sleeper; real=$pid; "
	    "start ${B}fakepage %s; fake=$pid; "
	    "until_ok $HP stat $real >/dev/null 2>&1; %s; "
	    "echo real_series=$(grep -c \"pid=\\\"$real\\\"\" "
	    "$T/all.prometheus); kill $real $fake; wait", mode, body);
	hp_run_t r = hp_script(script, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	for (size_t i = 0; i < n; i++)
		cr_assert(strstr(r.out, want[i]), "no '%s' in:\n%s%s", want[i],
		    r.out, r.err);
	cr_assert_geq(hp_kv(&r, "real_series"), 10, "%s", r.out);
	hp_run_free(&r);
}

/* Output injection (issue 30, defect 6): a counters page the library did
 * not write (fakepage, run without it: any local user can map one), its
 * policy string terminal escapes (CSI, OSC, BEL), bytes that are not
 * UTF-8, a C1 control, DEL, quotes, backslashes, CR, tab and newlines
 * that spell a forged sample and a forged line. stat PID and stat --all,
 * in each format, print none of it raw: the text is UTF-8 without control
 * characters (cleancheck.py), the JSON parses and carries the string
 * (\u00XX, U+FFFD for each byte that is not UTF-8), the Prometheus text is
 * valid (promcheck.py, which also refuses control characters and bytes
 * that are not UTF-8); the policy is one line, its bytes as \xNN; a real
 * process beside it is still reported. */
Test(stats, output_injection_hostile_strings) {
	static const char *const want[] = {"one.text=0\n", "all.text=0\n",
	    "one.json=0\n", "all.json=0\n", "one.prometheus=0\n",
	    "all.prometheus=0\n", "one.text: clean ", "all.text: clean ",
	    "one.json: clean ", "all.json: clean ", "one.prometheus: ok ",
	    "all.prometheus: ok ", "policy_lines=1\n", "listed=2\n",
	    "json_real=1 json_fake=1\n",
	    /* The text form: escapes visible, a backslash doubled, UTF-8
	     * characters as they are, the newlines inside the one line. */
	    "\npolicy \\x1b[2J\\x1b[H\\x1b]0;owned\\x07 csi:\\x1b[31mred",
	    " notutf8:\\x80\\xbf\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80"
	    "\\xfe\\xff\\xe2\\x82 c1:\\xc2\\x9b31m del:\\x7f quote:\" "
	    "backslash:\\\\ slashx:\\\\x41 cr:\\x0d tab:\\x09 ok:\xc3\xa9\xe2\x82"
	    "\xac nl:\\x0a# TYPE hugepreload_forged gauge\\x0ahugepreload_forged"
	    "{pid=\"1\"} 1\\x0ahugepreload: forged line\\x0a\n",
	    /* The label: the text form, escaped for the exposition format. */
	    ",policy=\"\\\\x1b[2J\\\\x1b[H\\\\x1b]0;owned\\\\x07 csi:",
	    " quote:\\\" backslash:\\\\\\\\ slashx:\\\\\\\\x41 cr:\\\\x0d "};
	injection("strings",
	    "for f in text json prometheus; do o=--$f; [ $f = text ] && o=; "
	    "timeout 120 $HP stat $fake $o > $T/one.$f; echo one.$f=$?; "
	    "timeout 120 $HP stat --all $o > $T/all.$f; echo all.$f=$?; done; "
	    "for x in one all; do "
	    "echo \"$x.text: $(python3 ${B}cleancheck.py < $T/$x.text 2>&1)\"; "
	    "echo \"$x.json: $(python3 ${B}cleancheck.py --json < $T/$x.json "
	    "2>&1)\"; echo \"$x.prometheus: $(python3 ${B}promcheck.py "
	    "< $T/$x.prometheus 2>&1)\"; done; "
	    "echo policy_lines=$(grep -c '^policy ' $T/one.text); "
	    "grep '^policy ' $T/one.text; "
	    "grep '^hugepreload_info{pid=\"'$fake'\"' $T/one.prometheus; "
	    "echo listed=$(grep -cE \"^ *($real|$fake) \" $T/all.text); "
	    "python3 -c 'import json, sys; d = {x[\"pid\"]: x[\"policy\"] for x "
	    "in json.load(open(sys.argv[1]))}; p = d[int(sys.argv[2])]; "
	    "print(\"json_real=%d json_fake=%d\" % (int(sys.argv[3]) in d, "
	    "p.startswith(\"\\x1b[2J\\x1b[H\") and \"\\ufffd\" in p and "
	    "\"c1:\\u009b31m\" in p and \"quote:\\\" backslash:\\\\ \" in p and "
	    "\"ok:\\u00e9\\u20ac nl:\\n# TYPE\" in p))' $T/all.json $fake $real",
	    want, sizeof want / sizeof *want);
}

/* Output injection (issue 30, defect 6): a page of four arenas named
 * "small" would make every series of the pid four times, and Prometheus
 * refuse the whole textfile. stat PID refuses the page in one line and
 * prints nothing; stat --all says so in one line and leaves the pid out
 * of every format, the real process beside it reported, the textfile
 * valid (promcheck.py: no series twice). */
Test(stats, output_injection_duplicate_names) {
	static const char *const want[] = {"one.text=1 out=0 lines=1 said=1\n",
	    "one.json=1 out=0 lines=1 said=1\n",
	    "one.prometheus=1 out=0 lines=1 said=1\n", "all.text=0 said=1\n",
	    "all.json=0 said=1\n", "all.prometheus=0 said=1\n", "prom: ok ",
	    "json: clean ", "fake_series=0\n", "listed=1 0\n",
	    "json_real=1 json_fake=0\n"};
	injection("dups",
	    "for f in text json prometheus; do o=--$f; [ $f = text ] && o=; "
	    "timeout 120 $HP stat $fake $o > $T/one.$f 2> $T/one.$f.err; "
	    "echo one.$f=$? out=$(wc -c < $T/one.$f) lines=$(wc -l < "
	    "$T/one.$f.err) said=$(grep -c \"^hugepreload: process $fake: .*"
	    "two arenas are named 'small'\" $T/one.$f.err); "
	    "timeout 120 $HP stat --all $o > $T/all.$f 2> $T/all.$f.err; "
	    "echo all.$f=$? said=$(grep -c \"process $fake:\" $T/all.$f.err); "
	    "done; "
	    "echo \"prom: $(python3 ${B}promcheck.py < $T/all.prometheus 2>&1)\"; "
	    "echo \"json: $(python3 ${B}cleancheck.py --json < $T/all.json "
	    "2>&1)\"; "
	    "echo fake_series=$(grep -c \"pid=\\\"$fake\\\"\" $T/all.prometheus); "
	    "echo listed=$(grep -cE \"^ *$real \" $T/all.text) "
	    "$(grep -cE \"^ *$fake \" $T/all.text); "
	    "python3 -c 'import json, sys; p = [x[\"pid\"] for x in "
	    "json.load(open(sys.argv[1]))]; print(\"json_real=%d json_fake=%d\" "
	    "% (p.count(int(sys.argv[2])), p.count(int(sys.argv[3]))))' "
	    "$T/all.json $real $fake",
	    want, sizeof want / sizeof *want);
}
