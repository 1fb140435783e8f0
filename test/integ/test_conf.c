/* HUGEPRELOAD_CONF: every key with good and bad values, in real runs. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "harness.h"

/* The policy string: threshold, backing, then the rest at defaults. */
/* The lifetime keys' defaults, at the end of every policy line. */
#define MT ",maintain_ms:1000,long_lived:jemalloc,mmap_threshold:8388608"
#define LT ",lifetime:learn,lifetime_sample:524288,lifetime_sample_rate:1000" \
	",lifetime_ms:250" MT
#define POL(t, b, d) "large_threshold:" t ",backing:" b \
	",hugetlb_size:2m,collapse:false,decay_ms:" d ",reserve:1099511627776" \
	",strand_limit:25%" LT
#define DEFAULT_POLICY POL("1048576", "auto", "5000")

/* Runs policy BYTES under CONF; checks its output has POLICY and exactly
 * WARN lines from hugepreload on stderr. */
static hp_run_t run_conf(const char *conf, const char *bytes, int warn,
    const char *policy) {
	char env0[256];
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf);
	const char *env[] = {env0, NULL};
	const char *argv[] = {hp_path("policy"), bytes, NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "conf '%s': exit %d\n%s", conf, r.code, r.err);
	if (warn >= 0)           /* -1: depends on the machine's pool */
		cr_assert_eq(hp_err_lines(&r), warn, "conf '%s': stderr:\n%s",
		    conf, r.err);
	char want[300];
	snprintf(want, sizeof want, "policy=%s\n", policy);
	cr_assert(strstr(r.out, want), "conf '%s': want %s got\n%s", conf, want,
	    r.out);
	return r;
}

Test(conf, defaults) {
	hp_run_t r = run_conf("", "1048576", 0, DEFAULT_POLICY);
	cr_assert_eq(hp_kv(&r, "class"), 2);
	hp_run_free(&r);
}

Test(conf, large_threshold_good_values) {
	hp_run_t r = run_conf("large_threshold:128m", "67108864", 0,
	    POL("134217728", "auto", "5000"));
	cr_assert_eq(hp_kv(&r, "class"), 1, "64 MiB under a 128m threshold");
	cr_assert_eq(hp_kv(&r, "nh"), 1);
	hp_run_free(&r);
	r = run_conf("large_threshold:64K", "65536", 0,
	    POL("65536", "auto", "5000"));
	cr_assert_eq(hp_kv(&r, "class"), 2, "64 KiB at a 64K threshold");
	cr_assert_eq(hp_kv(&r, "hg"), 1);
	hp_run_free(&r);
	r = run_conf("large_threshold:1g", "1048576", 0,
	    POL("1073741824", "auto", "5000"));
	cr_assert_eq(hp_kv(&r, "class"), 1);
	hp_run_free(&r);
	r = run_conf("large_threshold:300000", "300000", 0,
	    POL("300000", "auto", "5000"));
	cr_assert_eq(hp_kv(&r, "class"), 2);
	hp_run_free(&r);
}

Test(conf, large_threshold_bad_values) {
	const char *bad[] = {"large_threshold:", "large_threshold:abc",
	    "large_threshold:12q", "large_threshold:1k", "large_threshold:2t",
	    "large_threshold:-5", "large_threshold:99999999999999999999",
	    "large_threshold:1mm"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		hp_run_t r = run_conf(bad[i], "1048576", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, "large_threshold") &&
		    strstr(r.err, "default 1m"), "%s", r.err);
		cr_assert_eq(hp_kv(&r, "class"), 2);
		hp_run_free(&r);
	}
}

Test(conf, backing_values) {
	hp_run_t r = run_conf("backing:none", "8388608", 0,
	    POL("1048576", "none", "5000"));
	cr_assert_eq(hp_kv(&r, "class"), 2);
	cr_assert_eq(hp_kv(&r, "nh"), 1);
	hp_run_free(&r);
	r = run_conf("backing:thp", "8388608", 0, POL("1048576", "thp", "5000"));
	cr_assert_eq(hp_kv(&r, "hg"), 1);
	hp_run_free(&r);
	r = run_conf("backing:huge", "8388608", 1, DEFAULT_POLICY);
	cr_assert(strstr(r.err, "'huge' for backing"), "%s", r.err);
	cr_assert_eq(hp_kv(&r, "hg"), 1);
	hp_run_free(&r);
}

Test(conf, verbose_values) {
	hp_run_t r = run_conf("verbose:true", "1", 1, DEFAULT_POLICY);
	cr_assert(strstr(r.err, "]: policy " DEFAULT_POLICY),
	    "%s", r.err);
	cr_assert(strstr(r.err, "huge class on thp, then 4k"), "%s", r.err);
	cr_assert(strstr(r.err, "small class on 4k"), "%s", r.err);
	hp_run_free(&r);
	r = run_conf("verbose:false", "1", 0, DEFAULT_POLICY);
	hp_run_free(&r);
	r = run_conf("verbose:yes", "1", 1, DEFAULT_POLICY);
	cr_assert(strstr(r.err, "'yes' for verbose"), "%s", r.err);
	hp_run_free(&r);
}

Test(conf, decay_ms_values) {
	hp_run_t r = run_conf("decay_ms:0", "1", 0,
	    POL("1048576", "auto", "0"));
	hp_run_free(&r);
	r = run_conf("decay_ms:-1", "1", 0,
	    POL("1048576", "auto", "-1"));
	hp_run_free(&r);
	r = run_conf("decay_ms:250", "1", 0,
	    POL("1048576", "auto", "250"));
	hp_run_free(&r);
	const char *bad[] = {"decay_ms:-2", "decay_ms:1k", "decay_ms:soon",
	    "decay_ms:3600001", "decay_ms:"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		r = run_conf(bad[i], "1", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, "decay_ms") && strstr(r.err, "default 5000"),
		    "%s", r.err);
		hp_run_free(&r);
	}
}

Test(conf, chain_keys) {
	const char *good[][2] = {
	    {"backing:auto", POL("1048576", "auto", "5000")},
	    {"backing:hugetlb", POL("1048576", "hugetlb", "5000")},
	    {"backing:thp", POL("1048576", "thp", "5000")},
	    {"backing:none", POL("1048576", "none", "5000")},
	    {"hugetlb_size:1g", "large_threshold:1048576,backing:auto,"
	     "hugetlb_size:1g,collapse:false,decay_ms:5000,reserve:1099511627776"
	     ",strand_limit:25%" LT},
	    {"hugetlb_size:2m", DEFAULT_POLICY},
	    {"collapse:true", "large_threshold:1048576,backing:auto,"
	     "hugetlb_size:2m,collapse:true,decay_ms:5000,reserve:1099511627776"
	     ",strand_limit:25%" LT},
	    {"collapse:false", DEFAULT_POLICY}};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		/* backing:hugetlb says so when the pool is empty. */
		hp_run_t r = run_conf(good[i][0], "1",
		    strcmp(good[i][0], "backing:hugetlb") ? 0 : -1, good[i][1]);
		hp_run_free(&r);
	}
	const char *bad[][2] = {{"backing:hugetlbfs", "default auto"},
	    {"backing:", "default auto"}, {"hugetlb_size:4m", "default 2m"},
	    {"hugetlb_size:1G", "default 2m"}, {"collapse:on", "default false"}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		hp_run_t r = run_conf(bad[i][0], "1", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, bad[i][1]), "%s: %s", bad[i][0], r.err);
		hp_run_free(&r);
	}
}

Test(conf, stats_keys_in_a_run) {
	hp_run_t r = run_conf("strand_limit:64m", "1", 0,
	    "large_threshold:1048576,backing:auto,hugetlb_size:2m,"
	    "collapse:false,decay_ms:5000,reserve:1099511627776,"
	    "strand_limit:67108864" LT);
	hp_run_free(&r);
	const char *bad[][2] = {{"strand_limit:120%", "default 25%"},
	    {"stats_format:yaml", "default text"},
	    {"stats_print:yes", "default false"},
	    {"stats_live:no", "default true"},
	    {"stats_dir:/dev/shm", "stats_dir in HUGEPRELOAD_CONF is gone"}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		r = run_conf(bad[i][0], "8388608", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, bad[i][1]), "%s: %s", bad[i][0], r.err);
		cr_assert_eq(hp_kv(&r, "stats_page"), 1, "%s", bad[i][0]);
		hp_run_free(&r);
	}
	/* The live counters' page comes with the huge class, unless
	 * stats_live:false. */
	r = run_conf("stats_live:true", "8388608", 0, DEFAULT_POLICY);
	cr_assert_eq(hp_kv(&r, "stats_page"), 1);
	hp_run_free(&r);
	r = run_conf("stats_live:false", "8388608", 0, DEFAULT_POLICY);
	cr_assert_eq(hp_kv(&r, "stats_page"), 0);
	hp_run_free(&r);
	r = run_conf("", "1", 0, DEFAULT_POLICY);
	cr_assert_eq(hp_kv(&r, "stats_page"), 0, "no huge class, no page");
	hp_run_free(&r);
}

Test(conf, lifetime_values) {
	const char *good[][2] = {
	    {"lifetime:learn", LT},
	    {"lifetime:replay,lifetime_sample:64k,lifetime_ms:200",
	     ",lifetime:replay,lifetime_sample:65536,lifetime_sample_rate:1000,"
	     "lifetime_ms:200" MT},
	    {"lifetime_sample_rate:0", ",lifetime:learn,lifetime_sample:524288,"
	     "lifetime_sample_rate:0,lifetime_ms:250" MT},
	    {"lifetime_sample_rate:1000000", ",lifetime:learn,"
	     "lifetime_sample:524288,lifetime_sample_rate:1000000,lifetime_ms:250"
	     MT},
	    {"lifetime:off,lifetime_record:/tmp/x.%p", ",lifetime:off,"
	     "lifetime_sample:524288,lifetime_sample_rate:1000,lifetime_ms:250" MT}};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		char want[300];
		snprintf(want, sizeof want, "large_threshold:1048576,backing:auto,"
		    "hugetlb_size:2m,collapse:false,decay_ms:5000,"
		    "reserve:1099511627776,strand_limit:25%%%s", good[i][1]);
		/* replay without a profile says it learns instead: one line. */
		hp_run_t r = run_conf(good[i][0], "1", i == 1 ? 1 : 0, want);
		hp_run_free(&r);
	}
	const char *bad[][2] = {{"lifetime:yes", "default learn"},
	    {"lifetime_sample:100", "default 512k"},
	    {"lifetime_sample:5g", "default 512k"},
	    {"lifetime_sample_rate:-1", "default 1000"},
	    {"lifetime_sample_rate:1000001", "default 1000"},
	    {"lifetime_sample_rate:fast", "default 1000"},
	    {"lifetime_ms:0", "default 250"}, {"lifetime_ms:soon", "default 250"},
	    {"lifetime_profile:", "default none"}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		hp_run_t r = run_conf(bad[i][0], "1", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, bad[i][1]), "%s: %s", bad[i][0], r.err);
		hp_run_free(&r);
	}
}

Test(conf, mmap_threshold_values) {
	const char *good[][2] = {{"mmap_threshold:2m", "2097152"},
	    {"mmap_threshold:off", "off"}, {"mmap_threshold:1t", "1099511627776"}};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		char want[300];
		snprintf(want, sizeof want, "large_threshold:1048576,backing:auto,"
		    "hugetlb_size:2m,collapse:false,decay_ms:5000,"
		    "reserve:1099511627776,strand_limit:25%%,lifetime:learn,"
		    "lifetime_sample:524288,lifetime_sample_rate:1000,"
		    "lifetime_ms:250,maintain_ms:1000,"
		    "long_lived:jemalloc,mmap_threshold:%s", good[i][1]);
		hp_run_t r = run_conf(good[i][0], "8388608", 0, want);
		cr_assert_eq(hp_kv(&r, "class"), 2);
		hp_run_free(&r);
	}
	const char *bad[] = {"mmap_threshold:1m", "mmap_threshold:2t",
	    "mmap_threshold:on", "mmap_threshold:"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		hp_run_t r = run_conf(bad[i], "8388608", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, "default 8m"), "%s: %s", bad[i], r.err);
		hp_run_free(&r);
	}
}

Test(conf, maintain_ms_values) {
	const char *good[][2] = {{"maintain_ms:10", "10"},
	    {"maintain_ms:3600000", "3600000"}, {"maintain_ms:250", "250"}};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		char want[300];
		snprintf(want, sizeof want, "large_threshold:1048576,backing:auto,"
		    "hugetlb_size:2m,collapse:false,decay_ms:5000,"
		    "reserve:1099511627776,strand_limit:25%%,lifetime:learn,"
		    "lifetime_sample:524288,lifetime_sample_rate:1000,"
		    "lifetime_ms:250,maintain_ms:%s,"
		    "long_lived:jemalloc,mmap_threshold:8388608", good[i][1]);
		hp_run_t r = run_conf(good[i][0], "8388608", 0, want);
		cr_assert_eq(hp_kv(&r, "class"), 2);
		hp_run_free(&r);
	}
	const char *bad[] = {"maintain_ms:9", "maintain_ms:0",
	    "maintain_ms:-1", "maintain_ms:3600001", "maintain_ms:1s",
	    "maintain_ms:"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		hp_run_t r = run_conf(bad[i], "8388608", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, "default 1000"), "%s: %s", bad[i], r.err);
		hp_run_free(&r);
	}
}

Test(conf, reserve_values) {
	hp_run_t r = run_conf("reserve:2g", "67108864", 0,
	    "large_threshold:1048576,backing:auto,hugetlb_size:2m,"
	    "collapse:false,decay_ms:5000,reserve:2147483648,strand_limit:25%" LT);
	cr_assert_eq(hp_kv(&r, "class"), 2);
	hp_run_free(&r);
	r = run_conf("reserve:64t", "67108864", 0,
	    "large_threshold:1048576,backing:auto,hugetlb_size:2m,"
	    "collapse:false,decay_ms:5000,reserve:70368744177664,"
	    "strand_limit:25%" LT);
	cr_assert_eq(hp_kv(&r, "class"), 2);
	hp_run_free(&r);
	const char *bad[] = {"reserve:100m", "reserve:65t", "reserve:lots"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		r = run_conf(bad[i], "67108864", 1, DEFAULT_POLICY);
		cr_assert(strstr(r.err, "reserve") && strstr(r.err, "default 1t"),
		    "%s", r.err);
		cr_assert_eq(hp_kv(&r, "class"), 2);
		hp_run_free(&r);
	}
}

/* The number after ",reserve:" in the line of s that starts with start. */
static double reserve_in(const char *s, const char *start) {
	const char *l = strstr(s, start);
	const char *p = l ? strstr(l, ",reserve:") : NULL;
	cr_assert(p && p < l + strcspn(l, "\n"), "no %s...reserve in:\n%s",
	    start, s);
	return strtod(p + 9, NULL);
}

/* Issue 30: under ulimit -v 2 GiB the 1 TiB reservation is halved until
 * the kernel grants it, and the policy says the one made, in the verbose
 * line (which also says what was asked), in hugepreload_policy and in
 * what "hugepreload stat" reads. /proc/PID/maps has it, PROT_NONE while
 * unused: with lifetime:off one mapping with the alignment slack (up to
 * 2 MiB) above it; under lifetime learning the sample zone (a 16th more,
 * MADV_NOHUGEPAGE) is a mapping of its own above it. All three said
 * reserve:1099511627776. */
Test(conf, reserve_under_an_address_space_limit) {
	const char *confs[] = {"verbose:true,backing:thp,lifetime:off",
	    "verbose:true,backing:thp"};
	for (size_t i = 0; i < 2; i++) {
		char cmd[512], env0[64];
		snprintf(cmd, sizeof cmd, "ulimit -v 2097152; LD_PRELOAD=%s exec "
		    "%s 1", hp_path("libhugepreload.so"), hp_path("policy"));
		snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", confs[i]);
		const char *env[] = {env0, NULL};
		const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
		hp_run_t r = hp_run(argv, env, false, NULL);
		cr_assert_eq(r.code, 0, "%s: exit %d\n%s", confs[i], r.code, r.err);
		double made = reserve_in(r.err, "hugepreload: policy[");
		double api = reserve_in(r.out, "policy=");
		double maps = hp_kv(&r, "none_max");
		char halved[96];
		snprintf(halved, sizeof halved, "; reserve:1099511627776 halved to "
		    "%.0f until granted\n", made);
		cr_log_info("%s: reserve %.0f, hugepreload_policy %.0f, largest "
		    "PROT_NONE mapping %.0f", confs[i], made, api, maps);
		cr_assert(made >= 1 << 30 && made < 1ull << 40, "%s", r.err);
		cr_assert_eq(api, made, "%s\n%s", r.out, r.err);
		cr_assert(strstr(r.err, halved), "%s", r.err);
		double zone = i == 0 ? 0 : made / 16;
		cr_assert(maps >= made && maps <= made + zone + (2 << 20),
		    "%s: made %.0f, mapped %.0f", confs[i], made, maps);
		hp_run_free(&r);
	}
	hp_run_t r = hp_script("ulimit -v 2097152; start $HP -- ${B}sleeper; "
	    "$HP stat $pid | grep '^policy '; kill $pid; wait",
	    "verbose:true,backing:thp");
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	double made = reserve_in(r.err, "hugepreload: sleeper[");
	cr_assert(made >= 1 << 30 && made < 1ull << 40, "%s", r.err);
	cr_assert_eq(reserve_in(r.out, "policy "), made, "stat: %s\nverbose: %s",
	    r.out, r.err);
	hp_run_free(&r);
}

Test(conf, unknown_and_malformed_items) {
	hp_run_t r = run_conf("colour:blue", "1", 1, DEFAULT_POLICY);
	cr_assert(strstr(r.err, "unknown key 'colour'"), "%s", r.err);
	hp_run_free(&r);
	r = run_conf("verbose", "1", 1, DEFAULT_POLICY);
	cr_assert(strstr(r.err, "malformed 'verbose'"), "%s", r.err);
	hp_run_free(&r);
	/* Good items around bad ones still apply; each bad one is one line. */
	r = run_conf("decay_ms:100,,x:1,large_threshold:2m,:3,", "1", 2,
	    POL("2097152", "auto", "100"));
	hp_run_free(&r);
}

/* A setuid program (AT_SECURE) ignores HUGEPRELOAD_CONF entirely. */
Test(conf, ignored_in_secure_execution) {
	char dir[] = "/tmp/hp-secure-XXXXXX", prog[64];
	cr_assert(mkdtemp(dir));
	chmod(dir, 0755);
	snprintf(prog, sizeof prog, "%s/policy", dir);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "cp %s %s && chown nobody %s && chmod 4755 %s",
	    hp_path("policy_linked"), prog, prog, prog);
	cr_assert_eq(system(cmd), 0);
	const char *env[] = {"HUGEPRELOAD_CONF=large_threshold:2m,verbose:true,x:1",
	    NULL};
	const char *argv[] = {prog, "1", NULL};
	hp_run_t r = hp_run(argv, env, false, NULL);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	system(cmd);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert(strstr(r.out, "policy=" DEFAULT_POLICY "\n"), "%s", r.out);
	cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
	hp_run_free(&r);
	/* The same binary without setuid does read it. */
	const char *argv2[] = {hp_path("policy_linked"), "1", NULL};
	r = hp_run(argv2, env, false, NULL);
	cr_assert(strstr(r.out, "large_threshold:2097152"), "%s", r.out);
	hp_run_free(&r);
}

/* Output injection (issue 30, defect 6): a HUGEPRELOAD_CONF value and a
 * key with terminal escapes, CR, DEL, a byte that is not UTF-8 and a
 * newline that would start a forged "hugepreload:" line, run by a program
 * whose name has a newline too: each warning is one line, its bytes as
 * \xNN (a backslash doubled), stderr nothing else. */
Test(conf, output_injection_one_line) {
	char dir[] = "/tmp/hp-inject-XXXXXX", prog[96];
	cr_assert(mkdtemp(dir));
	snprintf(prog, sizeof prog, "%s/pol\nhugepreload: x", dir);
	cr_assert_eq(symlink(hp_path("policy"), prog), 0);
	const char *env[] = {"HUGEPRELOAD_CONF=backing:\x1b[2J\nhugepreload: "
	    "policy[1]: forged\r,x\x7f\n\xff\\:1", NULL};
	const char *argv[] = {prog, "1", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	unlink(prog);
	rmdir(dir);
	cr_assert_eq(r.code, 0, "%s", r.err);
	int lines = 0;
	for (size_t i = 0; i < r.err_len; i++) {
		unsigned char c = (unsigned char)r.err[i];
		lines += c == '\n';
		cr_assert((c >= 0x20 && c < 0x7f) || c == '\n', "byte 0x%02x at "
		    "%zu of:\n%s", c, i, r.err);
	}
	cr_assert_eq(lines, 2, "%s", r.err);
	cr_assert_eq(hp_err_lines(&r), 2, "%s", r.err);
	cr_assert(strstr(r.err, "hugepreload: pol\\x0ahugepreload: x["), "%s",
	    r.err);
	cr_assert(strstr(r.err, "]: bad value '\\x1b[2J\\x0ahugepreload: "
	    "policy[1]: forged\\x0d' for backing in HUGEPRELOAD_CONF;"), "%s",
	    r.err);
	cr_assert(strstr(r.err, "]: unknown key 'x\\x7f\\x0a\\xff\\\\' in "
	    "HUGEPRELOAD_CONF; ignored\n"), "%s", r.err);
	hp_run_free(&r);
}
