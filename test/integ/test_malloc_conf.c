/* MALLOC_CONF: every jemalloc 5.3 option that touches extents, arenas or
 * purging, under the library. For each value, the aligned-block program
 * and the glibc contract tests pass, and an option the library overrides
 * is named on exactly one stderr line (no line for the others). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

/* Both programs with MALLOC_CONF=conf, started; overridden: whether the
 * library overrides that value. The runs of a test's values do not depend
 * on each other: under() starts them, settle() waits for all and checks
 * each. On THP (backing:thp), so that together they cannot empty a hugetlb
 * pool the host keeps, which would say so in a line of its own. */
typedef struct {
	char env0[300];
	bool overridden;
	hp_proc_t prog, contract;
} under_t;
static under_t runs[4];
static size_t nruns;

static void under(const char *conf, bool overridden) {
	cr_assert_lt(nruns, sizeof runs / sizeof *runs);
	under_t *u = &runs[nruns++];
	snprintf(u->env0, sizeof u->env0, "MALLOC_CONF=%s", conf);
	u->overridden = overridden;
	const char *env[] = {u->env0, "HUGEPRELOAD_CONF=backing:thp", NULL};
	const char *prog[] = {hp_path("aligned"), NULL};
	u->prog = hp_start(prog, env, true, NULL);
	const char *contract[] = {hp_path("test_contract"), "--jobs", "1",
	    "--verbose=0", NULL};
	u->contract = hp_start(contract, env, false, NULL);
}

static void settle(void) {
	hp_run_t r[sizeof runs / sizeof *runs][2];
	for (size_t i = 0; i < nruns; i++) {
		r[i][0] = hp_wait(runs[i].prog);
		r[i][1] = hp_wait(runs[i].contract);
	}
	for (size_t i = 0; i < nruns; i++) {
		const char *conf = runs[i].env0 + strlen("MALLOC_CONF=");
		bool overridden = runs[i].overridden;
		hp_run_t *p = &r[i][0], *c = &r[i][1];
		cr_assert_eq(p->code, 0, "aligned under MALLOC_CONF=%s: exit "
		    "%d\n%s", conf, p->code, p->err);
		cr_assert_eq(hp_kv(p, "ok"), 1);
		cr_assert_eq(hp_kv(p, "bad"), 0, "MALLOC_CONF=%s", conf);
		cr_assert_eq(hp_err_lines(p), overridden, "MALLOC_CONF=%s:\n%s",
		    conf, p->err);
		cr_assert_null(strstr(p->err, "<jemalloc>"), "%s", p->err);
		if (overridden) {
			char key[64];
			snprintf(key, sizeof key, "MALLOC_CONF %.*s",
			    (int)strcspn(conf, ","), conf);
			cr_assert(strstr(p->err, key) && strstr(p->err,
			    "overridden"), "no line names %s:\n%s", conf, p->err);
		}
		cr_assert_eq(c->code, 0, "the contract tests under MALLOC_CONF=%s: "
		    "exit %d\n%s%s", conf, c->code, c->out, c->err);
		hp_run_free(p);
		hp_run_free(c);
	}
	nruns = 0;
}

Test(malloc_conf, retain) {
	under("retain:false", false);
	under("retain:true", false);
	settle();
}

Test(malloc_conf, dss) {
	under("dss:primary", false);
	under("dss:secondary", false);
	under("dss:disabled", false);
	settle();
}

Test(malloc_conf, narenas) {
	under("narenas:1", false);
	under("narenas:64", false);
	settle();
}

/* The bytes of place_large's block (keys prefixed k) on huge pages, as
 * smaps shows its mapping. */
static double huge_bytes(const hp_run_t *r, const char *k) {
	char a[64], b[64];
	snprintf(a, sizeof a, "%svma_anon_huge_kb", k);
	snprintf(b, sizeof b, "%svma_hugetlb_kb", k);
	return (hp_kv(r, a) + hp_kv(r, b)) * 1024;
}

/* Issue 30, defect 7: narenas values that leave no room below jemalloc's
 * 4,095 arena indices for the library's two arenas (its automatic arenas
 * and its oversize arena take the lowest): 4093 and up, and -1, which
 * jemalloc clamps to 4094; and a default of more than 4092 (4 per CPU
 * from 1,024 CPUs on; here a narenas_ratio for this host's CPUs). The
 * huge class stays on huge pages in the process and in a fork child, one
 * line says what was lowered, the child says nothing. (It was "could not
 * create an arena" at every huge-class allocation, in the child too, the
 * huge class on 4 KiB pages and lifetime learning off.) */
Test(malloc_conf, narenas_past_the_arena_indices) {
	/* On THP: a hugetlb pool that other tests empty would say so too. */
	const char *argv[] = {hp_path("place_large"), "64", "fork", NULL};
	const char *thp[] = {"HUGEPRELOAD_CONF=backing:thp", NULL};
	hp_run_t r = hp_run(argv, thp, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	if (huge_bytes(&r, "") < 32 << 20)
		cr_skip_test("no THP here now, even without MALLOC_CONF: %.0f "
		    "bytes", huge_bytes(&r, ""));
	hp_run_free(&r);
	cpu_set_t set;
	int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ?
	    CPU_COUNT(&set) : 1;
	char ratio[64];
	snprintf(ratio, sizeof ratio, "narenas_ratio:%d", 8192 / cpus + 1);
	const char *values[][2] = {{"narenas:4093", "MALLOC_CONF narenas:4093"},
	    {"narenas:4094", "MALLOC_CONF narenas:4094"},
	    {"narenas:5000", "MALLOC_CONF narenas:5000"},
	    {"narenas:-1", "MALLOC_CONF narenas:-1"},
	    {ratio, "jemalloc's default narenas ("}};
	/* jemalloc's default is 1 arena on 1 CPU, whatever the ratio. */
	size_t n = sizeof values / sizeof values[0] - (cpus < 2);
	for (size_t i = 0; i < n; i++) {
		char env0[64];
		snprintf(env0, sizeof env0, "MALLOC_CONF=%s", values[i][0]);
		const char *env[] = {env0, thp[0], NULL};
		r = hp_run(argv, env, true, NULL);
		cr_assert_eq(r.code, 0, "%s: exit %d\n%s", env0, r.code, r.err);
		cr_assert_eq(hp_kv(&r, "data_ok") + hp_kv(&r, "child_data_ok"), 2);
		cr_assert_eq(hp_kv(&r, "class"), 2, "%s\n%s", env0, r.err);
		cr_assert_eq(hp_kv(&r, "child_class"), 2, "%s\n%s", env0, r.err);
		cr_assert_geq(huge_bytes(&r, ""), 32 << 20, "%s\n%s", env0, r.out);
		cr_assert_geq(huge_bytes(&r, "child_"), 32 << 20, "%s\n%s", env0,
		    r.out);
		cr_assert_eq(hp_err_lines(&r), 1, "%s:\n%s", env0, r.err);
		cr_assert(strstr(r.err, values[i][1]) && strstr(r.err,
		    " overridden by narenas:4092 ("), "%s:\n%s", env0, r.err);
		cr_assert_null(strstr(r.err, "<jemalloc>"), "%s", r.err);
		hp_run_free(&r);
	}
}

Test(malloc_conf, percpu_arena) {
	under("percpu_arena:percpu", false);
	under("percpu_arena:phycpu", false);
	under("percpu_arena:disabled", false);
	settle();
}

Test(malloc_conf, thp) {
	under("thp:always", true);
	under("thp:default", true);
	under("thp:never", false);
	settle();
}

Test(malloc_conf, metadata_thp) {
	under("metadata_thp:always", false);
	under("metadata_thp:auto", false);
	under("metadata_thp:disabled", false);
	settle();
}

Test(malloc_conf, dirty_decay_ms) {
	under("dirty_decay_ms:0", true);
	under("dirty_decay_ms:-1", true);
	under("dirty_decay_ms:5000", false);
	settle();
}

Test(malloc_conf, muzzy_decay_ms) {
	under("muzzy_decay_ms:0", false);
	under("muzzy_decay_ms:-1", false);
	under("muzzy_decay_ms:10000", false);
	settle();
}

Test(malloc_conf, oversize_threshold) {
	under("oversize_threshold:0", false);
	under("oversize_threshold:16384", false);
	under("oversize_threshold:1073741824", false);
	settle();
}

Test(malloc_conf, background_thread) {
	under("background_thread:true", false);
	under("background_thread:false", false);
	under("background_thread:true,max_background_threads:1", false);
	settle();
}

Test(malloc_conf, lg_extent_max_active_fit) {
	under("lg_extent_max_active_fit:0", false);
	under("lg_extent_max_active_fit:63", false);
	settle();
}

Test(malloc_conf, hpa) {
	under("hpa:true", true);
	under("hpa:false", false);
	settle();
}

Test(malloc_conf, zero_realloc) {
	under("zero_realloc:alloc", true);
	under("zero_realloc:abort", true);
	under("zero_realloc:free", false);
	settle();
}

Test(malloc_conf, tcache) {
	under("tcache:false", false);
	under("tcache_max:1024", false);
	under("tcache_max:8388608", false);
	settle();
}

Test(malloc_conf, junk_zero_slab_sizes) {
	under("junk:true", false);
	under("zero:true", false);
	under("slab_sizes:1-4096:2", false);
	settle();
}

/* Several at once: one line per overridden option, the rest apply. */
Test(malloc_conf, several_options) {
	char env0[] = "MALLOC_CONF=thp:always,retain:false,hpa:true,narenas:2";
	const char *env[] = {env0, NULL};
	const char *prog[] = {hp_path("aligned"), NULL};
	hp_run_t r = hp_run(prog, env, true, NULL);
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert_eq(hp_kv(&r, "bad"), 0);
	cr_assert_eq(hp_err_lines(&r), 2, "%s", r.err);
	cr_assert(strstr(r.err, "MALLOC_CONF thp:always overridden") &&
	    strstr(r.err, "MALLOC_CONF hpa:true overridden"), "%s", r.err);
	hp_run_free(&r);
}
