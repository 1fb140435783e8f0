/* Deploying and operating it: the command's arguments, make install, the
 * systemd drop-in and enable/disable, doctor, the fleet view (stat --all),
 * messages of a service tree, and the generated reference. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"

Test(wrapper, runs_cmd_with_policy_and_its_status) {
	hp_run_t r = hp_script("LD_PRELOAD=${B}libdlalloc.so $HP --conf "
	    "large_threshold:2m --verbose -- sh -c 'echo \"$LD_PRELOAD\"; "
	    "echo \"$HUGEPRELOAD_CONF\"; exit 7'; echo rc=$?", NULL);
	cr_assert(strstr(r.out, "libhugepreload.so ") &&
	    strstr(r.out, "libdlalloc.so\n"), "LD_PRELOAD: %s", r.out);
	cr_assert(strstr(r.out, "large_threshold:2m,verbose:true\n"), "%s",
	    r.out);
	cr_assert(strstr(r.out, "rc=7\n"), "%s", r.out);
	cr_assert(strstr(r.err, "]: policy large_threshold:2097152"),
	    "%s", r.err);
	hp_run_free(&r);
	r = hp_script("$HP -- /nonexistent/cmd; echo rc=$?", NULL);
	cr_assert(strstr(r.out, "rc=127\n"), "%s", r.out);
	hp_run_free(&r);
}

/* Bad command lines: one line naming the argument, status 2. */
Test(cli, bad_arguments_named_in_one_line) {
	const char *cases[][2] = {
	    {"$HP stat 1 --bogus", "'--bogus'"},
	    {"$HP stat 1 --watch abc", "not 'abc'"},
	    {"$HP stat 1 --watch", "--watch needs a number of seconds"},
	    {"$HP stat", "stat needs a process id"},
	    {"$HP stat 12x", "not '12x'"},
	    {"$HP stat --all 12", "--all takes no process id"},
	    {"$HP stat 1 -o", "-o needs a file name"},
	    {"$HP --bogus -- true", "'--bogus'"},
	    {"$HP --", "no command after --"},
	    {"$HP", "no command to run"},
	    {"$HP doctor --yaml", "'--yaml' to doctor"},
	    {"$HP enable", "enable needs a unit"},
	    {"$HP enable a b", "not also 'b'"},
	    {"$HP enable backup.timer", "'backup.timer' is not a service"},
	    {"$HP enable 'a/b'", "'a/b' is not a unit name"},
	    {"$HP enable a --conf", "--conf needs key:value items"},
	    {"$HP disable --root rel a", "--root needs an absolute directory"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char body[256];
		snprintf(body, sizeof body, "%s; echo rc=$?", cases[i][0]);
		hp_run_t r = hp_script(body, NULL);
		cr_assert(strstr(r.out, "rc=2\n"), "%s: %s%s", cases[i][0], r.out,
		    r.err);
		cr_assert(strstr(r.err, cases[i][1]), "%s: %s", cases[i][0], r.err);
		cr_assert(strncmp(r.err, "hugepreload: ", 13) == 0 &&
		    strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
		    "%s: one line: %s", cases[i][0], r.err);
		hp_run_free(&r);
	}
}

Test(wrapper, version_names_the_library) {
	hp_run_t r = hp_script("$HP --version", NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert(strstr(r.out, "hugepreload 0.1.0\n"), "%s", r.out);
	cr_assert(strstr(r.out, "/libhugepreload.so (beside the command)\n"),
	    "%s", r.out);
	hp_run_free(&r);
}

/* make install into a DESTDIR, with PREFIX=/usr: the files where they
 * belong (the library as libhugepreload.so.1, its soname, and the link
 * LD_PRELOAD names), the installed command preloads the installed library
 * and says so, pkg-config finds it, man renders both pages without a
 * warning, the drop-in names the installed library and the textfile unit
 * the installed command; make uninstall leaves DESTDIR empty. */
Test(deploy, install_and_uninstall_leave_nothing) {
	hp_run_t r = hp_script("R=$B; while [ ! -f $R/Makefile ]; do "
	    "R=$(dirname $R); done; D=$T/d; mkdir $D; "
	    "M=$(gcc -print-multiarch); "
	    "make -s -C $R install DESTDIR=$D PREFIX=/usr >/dev/null && "
	    "(cd $D && find . -type f -o -type l | sort) && "
	    "readlink $D/usr/lib/$M/hugepreload/libhugepreload.so && "
	    "readelf -d $D/usr/lib/$M/hugepreload/libhugepreload.so.1 | "
	    "grep SONAME && "
	    "$D/usr/bin/hugepreload --verbose -- sh -c 'echo \"$LD_PRELOAD\"' "
	    "2>$T/err && grep -c 'library .*(installed)' $T/err && "
	    "PKG_CONFIG_PATH=$D/usr/lib/$M/pkgconfig "
	    "pkg-config --cflags --libs hugepreload && "
	    "for p in man1/hugepreload.1 man7/hugepreload.7; do "
	    "man -l $D/usr/share/man/$p > $T/man 2> $T/manerr; "
	    "echo \"$p lines=$(wc -l < $T/man) warnings=$(wc -c < $T/manerr)\"; "
	    "done; "
	    "grep '^Environment=LD_PRELOAD=' $D/usr/share/hugepreload/hugepreload.conf; "
	    "grep '^ExecStart=' $D/usr/share/hugepreload/hugepreload-textfile.service; "
	    "make -s -C $R uninstall DESTDIR=$D PREFIX=/usr && "
	    "echo left=$(ls -A $D | wc -l)", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	const char *want[] = {"./usr/bin/hugepreload\n",
	    "./usr/include/hugepreload.h\n",
	    "/hugepreload/libhugepreload.so\n", "/hugepreload/libhugepreload.so.1\n",
	    "\nlibhugepreload.so.1\n", "[libhugepreload.so.1]",
	    "/pkgconfig/hugepreload.pc\n",
	    "./usr/share/man/man1/hugepreload.1\n",
	    "./usr/share/man/man7/hugepreload.7\n",
	    "./usr/share/hugepreload/hugepreload.conf\n",
	    "./usr/share/hugepreload/hugepreload-textfile.service\n",
	    "./usr/share/hugepreload/hugepreload-textfile.timer\n",
	    "/d/usr/lib/x86_64-linux-gnu/hugepreload/libhugepreload.so\n",
	    "-L/usr/lib/", "/hugepreload -Wl,-rpath,/usr/lib/",
	    "-lhugepreload", "man1/hugepreload.1 lines=", "man7/hugepreload.7 lines=",
	    "Environment=LD_PRELOAD=/usr/lib/x86_64-linux-gnu/hugepreload/"
	    "libhugepreload.so\n", "ExecStart=/usr/bin/hugepreload stat --all "
	    "--prometheus -o ", "left=0\n"};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		cr_assert(strstr(r.out, want[i]), "no %s in:\n%s", want[i], r.out);
	const char *w = r.out;
	int pages = 0;
	while ((w = strstr(w, " warnings=")) != NULL) {
		cr_assert(strncmp(w, " warnings=0\n", 12) == 0, "man warned: %s",
		    r.out);
		w++;
		pages++;
	}
	cr_assert_eq(pages, 2, "%s", r.out);
	hp_run_free(&r);
}

Test(cli, help_lists_every_key) {
	hp_run_t r = hp_script("$HP --help", NULL);
	cr_assert_eq(r.code, 0);
	const char *keys[] = {"large_threshold", "backing", "hugetlb_size",
	    "collapse", "decay_ms", "reserve", "strand_limit", "stats_print",
	    "stats_format", "stats_file", "stats_live", "verbose", "lifetime",
	    "lifetime_sample", "lifetime_ms", "lifetime_record",
	    "lifetime_profile", "maintain_ms", "mmap_threshold"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		char k[40];
		snprintf(k, sizeof k, "\n  %s ", keys[i]);
		cr_assert(strstr(r.out, k), "--help lacks %s", keys[i]);
	}
	hp_run_free(&r);
}

/* The repository's root, from the build directory. */
#define ROOT "R=$B; while [ ! -f $R/Makefile ]; do R=$(dirname $R); done; "

/* docs/reference.md is what tools/gendoc prints from the option and
 * counter tables: a key or counter added without it fails here. Every
 * key of --help and every metric the library prints is in it. */
Test(deploy, reference_is_generated) {
	hp_run_t r = hp_script(ROOT "$R/build/gendoc md > $T/ref && "
	    "diff $T/ref $R/docs/reference.md && echo same; "
	    "$HP --help | sed -n 's/^  \\([a-z_]*\\) .*(default.*/\\1/p' > $T/keys; "
	    "echo keys=$(wc -l < $T/keys); n=0; for k in $(cat $T/keys); do "
	    "grep -q \"^| \\`$k\\` |\" $R/docs/reference.md || "
	    "{ echo missing key $k; n=$((n + 1)); }; done; "
	    "LD_PRELOAD=${B}libhugepreload.so HUGEPRELOAD_CONF=stats_print:true,"
	    "stats_format:prometheus ${B}place_large 8 2>&1 >/dev/null | "
	    "sed -n 's/^# HELP \\([a-z_]*\\) .*/\\1/p' > $T/metrics; "
	    "echo metrics=$(wc -l < $T/metrics); for m in $(cat $T/metrics); do "
	    "grep -q \"^| \\`$m\\` |\" $R/docs/reference.md || "
	    "{ echo missing metric $m; n=$((n + 1)); }; done; echo missing=$n",
	    NULL);
	cr_assert(strstr(r.out, "same\n"), "docs/reference.md is not "
	    "tools/gendoc's output (make reference): %s%s", r.out, r.err);
	cr_assert_geq(hp_kv(&r, "keys"), 19, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "metrics"), 40, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "missing"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* The README is the front door: at most 12 KB, the fresh-machine
 * commands first, and its short key table has every key --help lists. */
Test(deploy, readme_front_door) {
	hp_run_t r = hp_script(ROOT "echo bytes=$(wc -c < $R/README.md); "
	    "grep -n -m1 'make demo' $R/README.md | cut -d: -f1 | "
	    "sed 's/^/demo_line=/'; grep -n -m1 'make test' $R/README.md | "
	    "cut -d: -f1 | sed 's/^/test_line=/'; n=0; for k in $($HP --help | "
	    "sed -n 's/^  \\([a-z_]*\\) .*(default.*/\\1/p'); do "
	    "grep -q \"^| \\`$k\\` |\" $R/README.md || "
	    "{ echo missing key $k; n=$((n + 1)); }; done; echo missing=$n",
	    NULL);
	cr_assert_leq(hp_kv(&r, "bytes"), 12288, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "demo_line"), 30, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "test_line"), 30, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "missing"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* A sample unit with the drop-in "hugepreload enable" writes under a
 * root: systemd-analyze verify reads it (a key spoiled in a copy is
 * reported with the drop-in's path) and finds nothing wrong; disable
 * takes it away and leaves no directory. */
Test(deploy, dropin_verified_and_round_trips) {
	hp_run_t r = hp_script("command -v systemd-analyze >/dev/null || "
	    "{ echo no-systemd; exit 0; }; U=$T/etc/systemd/system; mkdir -p $U; "
	    "printf '[Unit]\\nDescription=sample\\n[Service]\\n"
	    "ExecStart=/bin/sleep 1\\n' > $U/sample.service; "
	    "$HP enable sample --root $T --conf lifetime:off,stats_print:true,"
	    "stats_file:/var/log/hp.%p; "
	    "echo rc=$?; F=$U/sample.service.d/hugepreload.conf; "
	    "grep '^Environment=' $F; "
	    "SYSTEMD_UNIT_PATH=$U: systemd-analyze verify $U/sample.service "
	    "> $T/v 2>&1; echo verify=$?; echo verify_lines=$(wc -l < $T/v); "
	    "cat $T/v; cp $F $T/good; sed 's/^Environment=HUGEPRELOAD_CONF/"
	    "Envirnment=HUGEPRELOAD_CONF/' $T/good > $F; "
	    "SYSTEMD_UNIT_PATH=$U: systemd-analyze verify $U/sample.service "
	    "2>&1 | grep -c 'hugepreload.conf:.*Envirnment' | "
	    "sed 's/^/spoiled_seen=/'; cp $T/good $F; "
	    "$HP disable sample.service --root $T; echo rc=$?; "
	    "ls $U; echo dir=$(ls -d $U/sample.service.d 2>/dev/null | wc -l); "
	    "$HP disable sample --root $T; echo again=$?", NULL);
	if (strstr(r.out, "no-systemd"))
		cr_skip_test("no systemd-analyze (scripts/setup-deps test "
		    "installs systemd)");
	cr_assert(strstr(r.out, "rc=0\n"), "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "Environment=LD_PRELOAD=/"), "%s", r.out);
	cr_assert(strstr(r.out, "/libhugepreload.so\n"), "%s", r.out);
	/* systemd expands %-specifiers: "%%p" reaches the program as "%p". */
	cr_assert(strstr(r.out, "Environment=HUGEPRELOAD_CONF=lifetime:off,"
	    "stats_print:true,stats_file:/var/log/hp.%%p\n"), "%s", r.out);
	cr_assert_eq(hp_kv(&r, "verify"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "verify_lines"), 0, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "spoiled_seen"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "dir"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "again"), 1, "%s", r.out);
	cr_assert(strstr(r.err, "sample.service is not enabled"), "%s", r.err);
	/* --root, or no systemd running here: it says it did not reload. */
	cr_assert(strstr(r.out, "no daemon-reload"), "%s", r.out);
	hp_run_free(&r);
}

/* The repository's drop-in names the package's library path and sets
 * no policy (install writes its own PREFIX's path in; see above). */
Test(deploy, dropin_example_names_the_package_paths) {
	hp_run_t r = hp_script(ROOT "grep -c '^Environment=LD_PRELOAD=/usr/lib/"
	    "x86_64-linux-gnu/hugepreload/libhugepreload.so$' $R/hugepreload.conf;"
	    " grep -c '^Environment=HUGEPRELOAD_CONF=$' $R/hugepreload.conf", NULL);
	cr_assert(strstr(r.out, "1\n1\n"), "%s", r.out);
	hp_run_free(&r);
}

/* ---- doctor ------------------------------------------------------------ */

static hp_knob_t thp, shmem, pool;
static void restore(void) {
	hp_knob_restore(&thp);
	hp_knob_restore(&shmem);
	hp_knob_restore(&pool);
}

#define POOL2M "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"

static hp_run_t doctor(const char *conf, const char *args) {
	char body[512];
	snprintf(body, sizeof body, "$HP doctor %s; echo rc=$?", args);
	return hp_script(body, conf);
}

/* This machine as it is: every fact as sysfs and /proc say. */
Test(doctor, facts_of_this_machine, .fini = restore) {
	hp_run_t r = hp_script("$HP doctor --json > $T/j; echo rc=$?; python3 -c '"
	    "import json, sys, os\n"
	    "j = json.load(open(sys.argv[1]))\n"
	    "def knob(p):\n"
	    "    s = open(p).read().strip()\n"
	    "    return s.split(\"[\")[1].split(\"]\")[0] if \"[\" in s else s\n"
	    "t = \"/sys/kernel/mm/transparent_hugepage/\"\n"
	    "ok = j[\"thp\"][\"enabled\"] == knob(t + \"enabled\") and "
	    "j[\"thp\"][\"defrag\"] == knob(t + \"defrag\") and "
	    "j[\"thp\"][\"shmem_enabled\"] == knob(t + \"shmem_enabled\")\n"
	    "print(\"thp_ok=%d\" % ok)\n"
	    "h = \"/sys/kernel/mm/hugepages/\"\n"
	    "sizes = sorted(int(d[10:-2]) for d in os.listdir(h))\n"
	    "print(\"pools_ok=%d\" % ([p[\"page_kb\"] for p in j[\"pools\"]] == sizes))\n"
	    "p = [p for p in j[\"pools\"] if p[\"page_kb\"] == 2048][0]\n"
	    "d = h + \"hugepages-2048kB/\"\n"
	    "print(\"pool2m_ok=%d\" % (p[\"total\"] == int(open(d + \"nr_hugepages\").read())"
	    " and p[\"free\"] == int(open(d + \"free_hugepages\").read())"
	    " and p[\"reserved\"] == int(open(d + \"resv_hugepages\").read())"
	    " and p[\"surplus\"] == int(open(d + \"surplus_hugepages\").read())))\n"
	    "print(\"nodes=%d\" % len(p[\"nodes\"]))\n"
	    "print(\"gib_ok=%d\" % (j[\"gib_pages\"] == (1048576 in sizes)))\n"
	    "cg = [l.strip()[3:] for l in open(\"/proc/self/cgroup\") if l.startswith(\"0::\")]\n"
	    "print(\"cgroup_ok=%d\" % (j[\"cgroup\"][\"path\"] == cg[0]))\n"
	    "v = tuple(int(x) for x in os.uname().release.split(\".\")[:2])\n"
	    "print(\"collapse=%d\" % (j[\"madv_collapse\"] is (v >= (6, 1))))\n"
	    "print(\"policy=%d\" % (\"huge class on\" in (j[\"policy\"] or \"\")))\n"
	    "print(\"warnings=%d\" % len(j[\"warnings\"]))' $T/j", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "thp_ok"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "pools_ok"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "pool2m_ok"), 1, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "nodes"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "gib_ok"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "cgroup_ok"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "collapse"), 1, "MADV_COLLAPSE exactly on Linux "
	    "6.1 and later: %s", r.out);
	cr_assert_eq(hp_kv(&r, "policy"), 1, "%s", r.out);
	/* Exit status: 1 with warnings, 0 without. */
	cr_assert_eq(hp_kv(&r, "rc"), hp_kv(&r, "warnings") > 0, "%s", r.out);
	hp_run_free(&r);
}

/* Nothing in the way (THP madvise, shmem advise, no bad key): status 0. */
Test(doctor, nothing_in_the_way, .fini = restore) {
	hp_knob_require(&thp, THP_ENABLED, "madvise");
	hp_knob_require(&shmem, THP_SHMEM, "advise");
	hp_knob_require(&pool, POOL2M, "0");
	hp_run_t r = doctor(NULL, "");
	cr_assert(strstr(r.out, "nothing in the way\nrc=0\n"), "%s%s", r.out,
	    r.err);
	cr_assert(strstr(r.out, "THP: enabled=madvise"), "%s", r.out);
	cr_assert(strstr(r.out, "huge class on thp"), "%s", r.out);
	hp_run_free(&r);
}

/* THP never: the warning and its fix; the library's own answer: 4 KiB. */
Test(doctor, thp_never, .fini = restore) {
	hp_knob_require(&thp, THP_ENABLED, "never");
	hp_knob_require(&pool, POOL2M, "0");
	hp_run_t r = doctor(NULL, "");
	cr_assert(strstr(r.out, "THP: enabled=never"), "%s", r.out);
	cr_assert(strstr(r.out, "warning: THP is off (enabled=never)"), "%s",
	    r.out);
	cr_assert(strstr(r.out, "fix: echo madvise > /sys/kernel/mm/"
	    "transparent_hugepage/enabled"), "%s", r.out);
	cr_assert(strstr(r.out, "rc=1\n"), "%s", r.out);
	hp_run_free(&r);
}

/* A 2 MiB pool of 64 pages: counted, and the library would start there;
 * backing:hugetlb with the pool empty is warned about. */
Test(doctor, pool_of_64_pages, .fini = restore) {
	hp_knob_require(&pool, POOL2M, "64");
	char n[32];
	hp_knob_read(POOL2M, n, sizeof n);
	if (atoi(n) != 64)
		cr_skip_test("the kernel gave %s of 64 pages", n);
	hp_run_t r = doctor(NULL, "");
	cr_assert(strstr(r.out, "   2048 kB: total 64, free 64, reserved 0, "
	    "surplus 0"), "%s", r.out);
	cr_assert(strstr(r.out, "huge class on hugetlb 2m (pool 64 free of 64)"),
	    "%s", r.out);
	hp_run_free(&r);
	r = doctor(NULL, "--json");
	cr_assert(strstr(r.out, "{\"page_kb\": 2048, \"total\": 64, \"free\": "
	    "64,"), "%s", r.out);
	hp_run_free(&r);
	hp_knob_require(&pool, POOL2M, "0");
	r = doctor("backing:hugetlb", "");
	cr_assert(strstr(r.out, "warning: backing:hugetlb, but the 2048 kB pool "
	    "is empty"), "%s", r.out);
	cr_assert(strstr(r.out, "fix: echo N > /sys/kernel/mm/hugepages/"
	    "hugepages-2048kB/nr_hugepages"), "%s", r.out);
	cr_assert(strstr(r.out, "rc=1\n"), "%s", r.out);
	hp_run_free(&r);
}

/* A bad HUGEPRELOAD_CONF: the library's own line as a warning, the policy
 * it would take (the default for that key) beside it. */
Test(doctor, bad_conf, .fini = restore) {
	hp_run_t r = doctor("large_threshold:3,lifetime:maybe,nokey:1", "");
	cr_assert(strstr(r.out, "HUGEPRELOAD_CONF: large_threshold:3,"
	    "lifetime:maybe,nokey:1\n"), "%s", r.out);
	cr_assert(strstr(r.out, "warning: bad value '3' for large_threshold"),
	    "%s", r.out);
	cr_assert(strstr(r.out, "warning: bad value 'maybe' for lifetime"),
	    "%s", r.out);
	cr_assert(strstr(r.out, "warning: unknown key 'nokey'"), "%s", r.out);
	cr_assert(strstr(r.out, "large_threshold:1048576,"), "%s", r.out);
	cr_assert(strstr(r.out, "lifetime:learn,"), "%s", r.out);
	cr_assert(strstr(r.out, "rc=1\n"), "%s", r.out);
	hp_run_free(&r);
}

/* ---- the fleet view ------------------------------------------------------ */

/* Three programs under the library: stat --all --prometheus -o F writes
 * one exposition that passes the format check, with one series set per
 * pid; once one has exited, it is no longer listed. Text and JSON list
 * the same pids. */
Test(fleet, stat_all_prometheus, .fini = restore) {
	hp_run_t r = hp_script(
	    "for k in 1 2 3; do $HP -- ${B}sleeper > $T/out$k & done; "
	    "for k in 1 2 3; do until_ok grep -q '^child=' $T/out$k; "
	    "eval p$k=$(sed -n 's/^pid=//p' $T/out$k); done; "
	    "trap 'kill $p1 $p2 $p3 2>/dev/null; rm -rf $T' EXIT; "
	    "mine() { for p in $p1 $p2 $p3; do $HP stat $p > /dev/null 2>&1 || "
	    "return 1; done; }; until_ok mine; "
	    "$HP stat --all --prometheus -o $T/f.prom; echo rc=$?; "
	    "python3 ${B}promcheck.py < $T/f.prom; "
	    "for p in $p1 $p2 $p3; do echo \"info_$p=$(grep -c "
	    "\"^hugepreload_info{pid=\\\"$p\\\"\" $T/f.prom)\"; "
	    "echo \"live_$p=$(grep -c \"^hugepreload_live_bytes{pid=\\\"$p\\\",\" "
	    "$T/f.prom)\"; done; echo helps=$(grep -c '^# HELP hugepreload_info ' "
	    "$T/f.prom); ls $T | grep -c '\\.tmp' | sed 's/^/tmp=/'; "
	    "$HP stat --all | awk -v a=$p1 -v b=$p2 -v c=$p3 "
	    "'$1 == a || $1 == b || $1 == c { n++ } END { print \"text=\" n }'; "
	    "$HP stat --all --json | python3 -c 'import json, sys; "
	    "print(\"json=%d\" % len([x for x in json.load(sys.stdin) "
	    "if x[\"pid\"] in (int(sys.argv[1]), int(sys.argv[2]), "
	    "int(sys.argv[3]))]))' $p1 $p2 $p3; "
	    "kill $p2; wait $p2; $HP stat --all --prometheus -o $T/f.prom; "
	    "echo \"after_$p2=$(grep -c \"pid=\\\"$p2\\\"\" $T/f.prom)\"; "
	    "echo \"after_$p1=$(grep -c \"^hugepreload_info{pid=\\\"$p1\\\"\" "
	    "$T/f.prom)\"; echo pids=$p1,$p2,$p3", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "rc=0\n") && strstr(r.out, "ok "), "%s%s",
	    r.out, r.err);
	long p[3];
	const char *l = strstr(r.out, "pids=");
	cr_assert(l && sscanf(l, "pids=%ld,%ld,%ld", &p[0], &p[1], &p[2]) == 3,
	    "%s", r.out);
	for (int i = 0; i < 3; i++) {
		char k[48];
		snprintf(k, sizeof k, "info_%ld", p[i]);
		cr_assert_eq(hp_kv(&r, k), 1, "%s: %s", k, r.out);
		snprintf(k, sizeof k, "live_%ld", p[i]);
		cr_assert_geq(hp_kv(&r, k), 2, "%s: %s", k, r.out);
	}
	cr_assert_eq(hp_kv(&r, "helps"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "tmp"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "text"), 3, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "json"), 3, "%s", r.out);
	char k[48];
	snprintf(k, sizeof k, "after_%ld", p[1]);
	cr_assert_eq(hp_kv(&r, k), 0, "the exited one: %s", r.out);
	snprintf(k, sizeof k, "after_%ld", p[0]);
	cr_assert_eq(hp_kv(&r, k), 1, "%s", r.out);
	hp_run_free(&r);
}

/* ---- a service tree's messages ------------------------------------------ */

/* sh -c starting three children under --verbose: one policy line per
 * process, each with its own pid and its program's name. */
Test(messages, one_line_per_process_with_pid_and_name) {
	hp_run_t r = hp_script("$HP --verbose -- sh -c 'for i in 1 2 3; do "
	    "'${B}place_large' 8 > /dev/null & done; wait' 2> $T/err; "
	    "cat $T/err >&2; grep ']: policy ' $T/err | "
	    "sed 's/^hugepreload: \\([a-z_]*\\)\\[\\([0-9]*\\)\\]: policy .*/"
	    "\\1 \\2/' | sort | uniq > $T/who; cat $T/who; "
	    "echo lines=$(grep -c ']: policy ' $T/err); "
	    "echo sh=$(grep -c '^sh ' $T/who); "
	    "echo children=$(grep -c '^place_large ' $T/who); "
	    "echo pids=$(cut -d' ' -f2 $T/who | sort -u | wc -l)", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "lines"), 4, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "sh"), 1, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "children"), 3, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "pids"), 4, "%s%s", r.out, r.err);
	hp_run_free(&r);
}

/* stats_file without %p, shared by a tree: the counters of every process
 * that prints them are in it (added, not replaced), three children at
 * once or two one after the other, and one line, once, says it is shared.
 * A later run (its own process group: setsid) replaces it; the file is
 * dated a minute back first, as an earlier run's is, since a run starting
 * within two clock ticks of another's last write counts as the same run
 * (file times are coarse). */
Test(messages, shared_stats_file_said_once) {
	hp_run_t r = hp_script("run() { f=$1; shift; "
	    "LD_PRELOAD=${B}libhugepreload.so "
	    "HUGEPRELOAD_CONF=stats_print:true,stats_file:$T/$f \"$@\"; }; "
	    "run s sh -c 'for k in 1 2 3; do '${B}place_large' 8 > /dev/null & "
	    "done; wait' 2> $T/err; cat $T/err >&2; "
	    "echo blocks=$(grep -c '^hugepreload stats: pid' $T/s); "
	    "echo said=$(grep -c 'is shared by several processes' $T/err); "
	    "run q sh -c ''${B}place_large' 8 > /dev/null; "
	    "'${B}place_large' 8 > /dev/null' 2> $T/err; cat $T/err >&2; "
	    "echo seq_blocks=$(grep -c '^hugepreload stats: pid' $T/q); "
	    "echo seq_said=$(grep -c 'is shared by several processes' $T/err); "
	    "touch -d '1 minute ago' $T/s; "
	    "run s setsid ${B}place_large 8 > /dev/null 2> $T/err2; "
	    "echo next_run=$(grep -c '^hugepreload stats: pid' $T/s); "
	    "echo next_said=$(grep -c shared $T/err2)", NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "blocks"), 3, "its three children: %s%s", r.out,
	    r.err);
	cr_assert_eq(hp_kv(&r, "said"), 1, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "seq_blocks"), 2, "one after the other: %s%s",
	    r.out, r.err);
	cr_assert_eq(hp_kv(&r, "seq_said"), 1, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "next_run"), 1, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "next_said"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* Plain make and make install build and install only: no recipe of
 * theirs runs setup-deps, apt or dpkg (a dry run of every command). */
Test(deploy, plain_make_installs_no_package) {
	hp_run_t r = hp_script(ROOT "make -s -n -B -C $R all install "
	    "DESTDIR=$T/d > $T/cmds 2>&1; echo rc=$?; "
	    "echo commands=$(wc -l < $T/cmds); "
	    "echo installers=$(grep -c -E '^(scripts/setup-deps|apt-get|apt|"
	    "dpkg)( |$)' $T/cmds)", NULL);
	cr_assert_eq(hp_kv(&r, "rc"), 0, "%s%s", r.out, r.err);
	cr_assert_geq(hp_kv(&r, "commands"), 20, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "installers"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* A process in a PID namespace (a container) writes its own pid in its
 * counters' page; stat finds it by the host's pid and labels it so. (It
 * is its namespace's init, which ignores SIGTERM: SIGKILL ends it.) */
Test(fleet, process_in_a_pid_namespace) {
	hp_run_t r = hp_script("unshare --pid --fork true 2>/dev/null || "
	    "{ echo no-unshare; exit 0; }; "
	    "unshare --pid --fork $HP -- ${B}sleeper > $T/out & u=$!; "
	    "until_ok grep -q '^child=' $T/out; "
	    "h=$(pgrep -P $u); trap 'kill -9 $h 2>/dev/null; rm -rf $T' EXIT; "
	    "echo own=$(sed -n 's/^pid=//p' $T/out); echo host=$h; "
	    "until_ok $HP stat $h > /dev/null 2>&1; $HP stat $h --prometheus | "
	    "grep -c \"^hugepreload_info{pid=\\\"$h\\\"\" | sed 's/^/labelled=/'; "
	    "$HP stat --all | awk -v h=$h '$1 == h { n++ } END { print \"all=\" n }'",
	    NULL);
	if (strstr(r.out, "no-unshare"))
		cr_skip_test("no PID namespaces here (unshare --pid failed)");
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	cr_assert_neq(hp_kv(&r, "own"), hp_kv(&r, "host"), "%s", r.out);
	cr_assert_eq(hp_kv(&r, "labelled"), 1, "%s%s", r.out, r.err);
	cr_assert_eq(hp_kv(&r, "all"), 1, "%s%s", r.out, r.err);
	hp_run_free(&r);
}
