/* The counters: at exit in three formats, live from outside through
 * "hugepreload stat", consistent with smaps, the stranding demo and
 * strand_limit, and the wrapper. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

/* Runs a shell script with HP (the command) and P (a helper dir) set. */
static hp_run_t script(const char *body, const char *conf) {
	char s[4096], env0[300];
	snprintf(s, sizeof s, "HP=%s; B=%s; %s", hp_path("hugepreload"),
	    hp_path(""), body);
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf ? conf : "");
	const char *env[] = {env0, NULL};
	const char *argv[] = {"/bin/sh", "-c", s, NULL};
	return hp_run(argv, env, false, NULL);
}

Test(stats, print_at_exit_text_json_prometheus) {
	const char *argv[] = {hp_path("place_large"), "8", NULL};
	const char *env_t[] = {"HUGEPRELOAD_CONF=stats_print:true", NULL};
	hp_run_t r = hp_run(argv, env_t, true, NULL);
	cr_assert_eq(r.code, 0);
	cr_assert(strstr(r.err, "hugepreload stats: pid") &&
	    strstr(r.err, "stranded_bytes") && strstr(r.err, "huge0"), "%s",
	    r.err);
	hp_run_free(&r);
	r = script("f=$(mktemp); HUGEPRELOAD_CONF=stats_print:true,"
	    "stats_format:json,stats_file:$f LD_PRELOAD=${B}libhugepreload.so "
	    "${B}place_large 8 >/dev/null && python3 -m json.tool $f >/dev/null "
	    "&& echo json=ok && grep -c huge_pages_by_live_tenth $f; rm -f $f",
	    NULL);
	cr_assert(strstr(r.out, "json=ok\n1\n"), "%s%s", r.out, r.err);
	hp_run_free(&r);
	r = script("HUGEPRELOAD_CONF=stats_print:true,stats_format:prometheus "
	    "LD_PRELOAD=${B}libhugepreload.so ${B}place_large 8 2>&1 >/dev/null "
	    "| python3 ${B}promcheck.py", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "ok "), "%s", r.out);
	hp_run_free(&r);
}

/* While the program runs: the file is 0600, stat reads it in all three
 * formats with no signal sent, and the file is gone after exit. */
Test(stats, live_from_outside) {
	hp_run_t r = script(
	    "$HP -- ${B}sleeper 3 > /tmp/hp-sl.$$ & sleep 1.5; "
	    "pid=$(sed -n 's/^pid=//p' /tmp/hp-sl.$$); "
	    "stat -c mode=%a /dev/shm/hugepreload.$pid; "
	    "$HP stat $pid | grep -E '^live_bytes' ; "
	    "$HP stat $pid --json | python3 -m json.tool >/dev/null && echo json=ok; "
	    "$HP stat $pid --prometheus | python3 ${B}promcheck.py; "
	    "wait; ls /dev/shm/hugepreload.$pid 2>/dev/null || echo gone; "
	    "rm -f /tmp/hp-sl.$$", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "mode=600\n"), "%s", r.out);
	long small, huge;
	const char *l = strstr(r.out, "live_bytes");
	cr_assert(l && sscanf(l, "live_bytes %ld %ld", &small, &huge) == 2,
	    "%s", r.out);
	cr_assert_geq(huge, 64 << 20, "the 64 MiB block: %ld", huge);
	cr_assert(strstr(r.out, "json=ok\n") && strstr(r.out, "ok ") &&
	    strstr(r.out, "gone\n"), "%s%s", r.out, r.err);
	hp_run_free(&r);
}

Test(stats, watch_until_exit) {
	hp_run_t r = script("$HP -- ${B}sleeper 2 > /tmp/hp-w.$$ & sleep 0.5; "
	    "pid=$(sed -n 's/^pid=//p' /tmp/hp-w.$$); $HP stat $pid --watch 0.5 "
	    "| grep -c '^hugepreload stats'; wait; rm -f /tmp/hp-w.$$", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_geq(atoi(r.out), 2, "frames: %s", r.out);
	hp_run_free(&r);
}

Test(stats, stats_dir_and_fork_child_file) {
	hp_run_t r = script("d=$(mktemp -d); HUGEPRELOAD_CONF=stats_dir:$d "
	    "$HP -- ${B}sleeper 3 fork > $d/out & sleep 1.5; "
	    "pid=$(sed -n 's/^pid=//p' $d/out); "
	    "child=$(sed -n 's/^child=//p' $d/out); "
	    "ls $d | grep -c hugepreload; "
	    "$HP stat $child --dir $d | grep -E '^live_bytes'; wait; "
	    "ls $d | grep -c hugepreload; rm -rf $d", NULL);
	cr_assert(strncmp(r.out, "2\n", 2) == 0, "parent and child files:\n%s%s",
	    r.out, r.err);
	long small, huge;
	const char *l = strstr(r.out, "live_bytes");
	cr_assert(l && sscanf(l, "live_bytes %ld %ld", &small, &huge) == 2,
	    "%s", r.out);
	cr_assert_geq(huge, 32 << 20, "the child's own 32 MiB: %ld", huge);
	cr_assert(strstr(r.out, "\n0\n"), "files left: %s", r.out);
	hp_run_free(&r);
}

/* Short processes that never use the huge class leave no file, even when
 * they end without exit handlers (as shells do). */
Test(stats, no_file_without_the_huge_class) {
	hp_run_t r = script("before=$(ls /dev/shm | grep -c hugepreload); "
	    "$HP -- sh -c 'ls /dev/shm/hugepreload.$$ 2>/dev/null | wc -l'; "
	    "after=$(ls /dev/shm | grep -c hugepreload); "
	    "echo left=$((after - before))", NULL);
	cr_assert(strstr(r.out, "0\nleft=0\n"), "%s%s", r.out, r.err);
	hp_run_free(&r);
}

Test(stats, dead_process_reported_and_gc) {
	hp_run_t r = script("$HP -- ${B}sleeper 30 > /tmp/hp-d.$$ & sleep 1; "
	    "pid=$(sed -n 's/^pid=//p' /tmp/hp-d.$$); kill -9 $pid; wait; "
	    "$HP stat $pid > /dev/null; echo rc=$?; $HP stat --gc; "
	    "ls /dev/shm/hugepreload.$pid 2>/dev/null || echo gone; "
	    "rm -f /tmp/hp-d.$$", NULL);
	cr_assert(strstr(r.out, "rc=3\n"), "%s%s", r.out, r.err);
	cr_assert(strstr(r.err, "is not running"), "%s", r.err);
	cr_assert(strstr(r.out, "removed /dev/shm/hugepreload."), "%s", r.out);
	cr_assert(strstr(r.out, "gone\n"), "%s", r.out);
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
 * strand_limit splits it, those go back too, not only freed parts. */
Test(stats, split_gives_back_parts_never_used) {
	const char *env[] = {"HUGEPRELOAD_CONF=strand_limit:0", NULL};
	const char *argv[] = {hp_path("strand"), "tail", "1024", "10", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "thp_before_kb"), 2048, "a THP page: %s", r.out);
	cr_assert_eq(hp_kv(&r, "pages_split"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "object_intact"), 1);
	cr_assert_leq(hp_kv(&r, "resident_after_kb"), 1024 + 16, "%s", r.out);
	hp_run_free(&r);
}

Test(wrapper, runs_cmd_with_policy_and_its_status) {
	hp_run_t r = script("LD_PRELOAD=${B}libdlalloc.so $HP --conf "
	    "large_threshold:2m --verbose -- sh -c 'echo \"$LD_PRELOAD\"; "
	    "echo \"$HUGEPRELOAD_CONF\"; exit 7'; echo rc=$?", NULL);
	cr_assert(strstr(r.out, "libhugepreload.so ") &&
	    strstr(r.out, "libdlalloc.so\n"), "LD_PRELOAD: %s", r.out);
	cr_assert(strstr(r.out, "large_threshold:2m,verbose:true\n"), "%s",
	    r.out);
	cr_assert(strstr(r.out, "rc=7\n"), "%s", r.out);
	cr_assert(strstr(r.err, "hugepreload: policy large_threshold:2097152"),
	    "%s", r.err);
	hp_run_free(&r);
	r = script("$HP -- /nonexistent/cmd; echo rc=$?", NULL);
	cr_assert(strstr(r.out, "rc=127\n"), "%s", r.out);
	hp_run_free(&r);
}

Test(wrapper, help_lists_every_key) {
	hp_run_t r = script("$HP --help", NULL);
	cr_assert_eq(r.code, 0);
	const char *keys[] = {"large_threshold", "backing", "hugetlb_size",
	    "collapse", "decay_ms", "reserve", "strand_limit", "stats_print",
	    "stats_format", "stats_file", "stats_dir", "verbose"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		char k[40];
		snprintf(k, sizeof k, "\n  %s ", keys[i]);
		cr_assert(strstr(r.out, k), "--help lacks %s", keys[i]);
	}
	hp_run_free(&r);
}
