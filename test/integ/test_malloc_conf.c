/* MALLOC_CONF: every jemalloc 5.3 option that touches extents, arenas or
 * purging, under the library. For each value, the aligned-block program
 * and the glibc contract tests pass, and an option the library overrides
 * is named on exactly one stderr line (no line for the others). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

/* Runs both programs with MALLOC_CONF=conf; overridden: whether the
 * library overrides that value. */
static void under(const char *conf, bool overridden) {
	char env0[300];
	snprintf(env0, sizeof env0, "MALLOC_CONF=%s", conf);
	const char *env[] = {env0, NULL};
	const char *prog[] = {hp_path("aligned"), NULL};
	hp_run_t r = hp_run(prog, env, true, NULL);
	cr_assert_eq(r.code, 0, "aligned under MALLOC_CONF=%s: exit %d\n%s",
	    conf, r.code, r.err);
	cr_assert_eq(hp_kv(&r, "ok"), 1);
	cr_assert_eq(hp_kv(&r, "bad"), 0, "MALLOC_CONF=%s", conf);
	cr_assert_eq(hp_err_lines(&r), overridden, "MALLOC_CONF=%s:\n%s", conf,
	    r.err);
	cr_assert_null(strstr(r.err, "<jemalloc>"), "%s", r.err);
	if (overridden) {
		char key[64];
		snprintf(key, sizeof key, "MALLOC_CONF %.*s", (int)strcspn(conf,
		    ","), conf);
		cr_assert(strstr(r.err, key) && strstr(r.err, "overridden"),
		    "no line names %s:\n%s", conf, r.err);
	}
	hp_run_free(&r);
	const char *contract[] = {hp_path("test_contract"), "--jobs", "1",
	    "--verbose=0", NULL};
	r = hp_run(contract, env, false, NULL);
	cr_assert_eq(r.code, 0, "the contract tests under MALLOC_CONF=%s: exit "
	    "%d\n%s%s", conf, r.code, r.out, r.err);
	hp_run_free(&r);
}

Test(malloc_conf, retain) {
	under("retain:false", false);
	under("retain:true", false);
}

Test(malloc_conf, dss) {
	under("dss:primary", false);
	under("dss:secondary", false);
	under("dss:disabled", false);
}

Test(malloc_conf, narenas) {
	under("narenas:1", false);
	under("narenas:64", false);
}

Test(malloc_conf, percpu_arena) {
	under("percpu_arena:percpu", false);
	under("percpu_arena:phycpu", false);
	under("percpu_arena:disabled", false);
}

Test(malloc_conf, thp) {
	under("thp:always", true);
	under("thp:default", true);
	under("thp:never", false);
}

Test(malloc_conf, metadata_thp) {
	under("metadata_thp:always", false);
	under("metadata_thp:auto", false);
	under("metadata_thp:disabled", false);
}

Test(malloc_conf, dirty_decay_ms) {
	under("dirty_decay_ms:0", true);
	under("dirty_decay_ms:-1", true);
	under("dirty_decay_ms:5000", false);
}

Test(malloc_conf, muzzy_decay_ms) {
	under("muzzy_decay_ms:0", false);
	under("muzzy_decay_ms:-1", false);
	under("muzzy_decay_ms:10000", false);
}

Test(malloc_conf, oversize_threshold) {
	under("oversize_threshold:0", false);
	under("oversize_threshold:16384", false);
	under("oversize_threshold:1073741824", false);
}

Test(malloc_conf, background_thread) {
	under("background_thread:true", false);
	under("background_thread:false", false);
	under("background_thread:true,max_background_threads:1", false);
}

Test(malloc_conf, lg_extent_max_active_fit) {
	under("lg_extent_max_active_fit:0", false);
	under("lg_extent_max_active_fit:63", false);
}

Test(malloc_conf, hpa) {
	under("hpa:true", true);
	under("hpa:false", false);
}

Test(malloc_conf, zero_realloc) {
	under("zero_realloc:alloc", true);
	under("zero_realloc:abort", true);
	under("zero_realloc:free", false);
}

Test(malloc_conf, tcache) {
	under("tcache:false", false);
	under("tcache_max:1024", false);
	under("tcache_max:8388608", false);
}

Test(malloc_conf, junk_zero_slab_sizes) {
	under("junk:true", false);
	under("zero:true", false);
	under("slab_sizes:1-4096:2", false);
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
