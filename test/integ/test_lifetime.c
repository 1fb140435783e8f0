/* Lifetime-aware placement: sites learned from sampled call stacks,
 * profiles recorded and replayed (src/lifetime/site.c, sample.c,
 * profile.c). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"

#define NODES "2000000"

/* A warm-up of 1 s instead of the index program's 2.5 s, for runs under
 * lifetime_ms:100 (LEARN: ten times the time a sample needs to turn
 * long-lived, as test_wrapper.c's runs learn) or that do not learn. The
 * 2.5 s waits out the default 250 ms, which learn_promotes_the_index_site_
 * only keeps. */
#define WARMUP "LT_WARMUP_S=1"
#define LEARN "lifetime:learn,lifetime_ms:100"

static hp_run_t run_conf_env(const char *conf, const char *extra,
    const char *const *argv) {
	char env0[600];
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf);
	const char *env[] = {env0, extra, NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
	return r;
}

static hp_run_t run_conf_any(const char *conf, const char *const *argv) {
	return run_conf_env(conf, NULL, argv);
}

static hp_run_t run_conf(const char *conf, const char *const *argv) {
	hp_run_t r = run_conf_any(conf, argv);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	return r;
}

/* The index program with extra in its environment (NULL: none). */
static hp_run_t index_run_env(const char *conf, const char *extra) {
	const char *argv[] = {hp_path("lifetime"), "index", NODES, NULL};
	hp_run_t r = run_conf_env(conf, extra, argv);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	return r;
}

static hp_run_t index_run(const char *conf) {
	return index_run_env(conf, NULL);
}

/* A counter of the text stats printed at exit ("lifetime_samples  12"). */
static double counter(const hp_run_t *r, const char *name) {
	const char *p = strstr(r->err, name);
	cr_assert(p != NULL, "no %s in:\n%s", name, r->err);
	return atof(p + strlen(name));
}

static void profile_path(char *buf, size_t n, const char *tag) {
	snprintf(buf, n, "/tmp/hp-lifetime-%s.%d.prof", tag, (int)getpid());
}

/* Index nodes after warm-up on huge pages, request buffers in the small
 * class (hp_assert_requests_small). */
static void placed_right(const hp_run_t *r) {
	cr_assert_geq(hp_kv(r, "late_nodes_huge_frac"), 0.9, "%s", r->out);
	cr_assert_geq(hp_kv(r, "late_nodes_hg_frac"), 0.9, "%s", r->out);
	hp_assert_requests_small(r);
}

/* Were anything learned under lifetime:off, lifetime_ms:100 and the 1 s
 * warm-up would have promoted the index site, as in the runs that learn. */
Test(lifetime, off_places_by_size_alone) {
	hp_run_t r = index_run_env("lifetime:off,lifetime_ms:100", WARMUP);
	cr_assert_eq(hp_kv(&r, "late_nodes_huge_frac"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "late_nodes_nh_frac"), 1, "%s", r.out);
	hp_run_free(&r);
}

Test(lifetime, learn_promotes_the_index_site_only) {
	hp_run_t r = index_run("lifetime:learn,stats_print:true");
	placed_right(&r);
	cr_assert_eq(hp_kv(&r, "first_node_huge_frac"), 0,
	    "the first node cannot be known long-lived yet");
	cr_assert_geq(counter(&r, "lifetime_sites "), 2);
	cr_assert_geq(counter(&r, "lifetime_samples "), 100);
	cr_assert_geq(counter(&r, "lifetime_promotions "), 1);
	cr_assert_eq(counter(&r, "lifetime_demotions "), 0);
	cr_assert_geq(counter(&r, "lifetime_placed_bytes "), 48.0 * 1000000,
	    "most of the 96 MB index placed by decision");
	cr_assert_eq(hp_err_lines(&r), 0, "%s", r.err);
	hp_run_free(&r);
}

/* A learning run of the index program that records its profile in prof;
 * conf becomes the policy that replays it. The replays check that the
 * index site was promoted (the first node, or every node, on huge pages),
 * so a profile that missed it fails them. Learned as LEARN says. */
static hp_run_t record_profile(const char *tag, char *prof, size_t pn,
    char *conf, size_t cn) {
	profile_path(prof, pn, tag);
	snprintf(conf, cn, LEARN ",lifetime_record:%s", prof);
	hp_run_t a = index_run_env(conf, WARMUP);
	snprintf(conf, cn, "lifetime:replay,lifetime_profile:%s", prof);
	return a;
}

Test(lifetime, replay_places_the_first_node_across_aslr) {
	char prof[128], conf[300];
	hp_run_t a = record_profile("replay", prof, sizeof prof, conf,
	    sizeof conf);
	hp_run_t b = index_run_env(conf, WARMUP);     /* replayed: no learning */
	cr_assert_neq(hp_kv(&a, "code_at"), hp_kv(&b, "code_at"),
	    "the program loaded at the same address twice: no ASLR?");
	cr_assert_eq(hp_kv(&b, "first_node_huge_frac"), 1, "%s", b.out);
	placed_right(&b);
	cr_assert_eq(hp_err_lines(&b), 0, "%s", b.err);
	unlink(prof);
	hp_run_free(&a);
	hp_run_free(&b);
}

/* Broken profiles: for each, one line that says what is wrong, and the
 * run learns (as LEARN learns). The runs do not depend on each other and
 * mostly wait out the index program's warm-up: they run at once, on THP
 * (backing:thp), so that together they cannot empty a hugetlb pool the
 * host keeps, whose line would be a second one. */
typedef struct {
	const char *mode, *text;
} broken_t;

static void broken_profiles(const broken_t *b, size_t n) {
	char prof[8][128], env0[8][300];
	hp_proc_t p[8];
	hp_run_t r[8];
	cr_assert_leq(n, 8);
	for (size_t i = 0; i < n; i++) {
		char tag[16];
		snprintf(tag, sizeof tag, "broken%zu", i);
		profile_path(prof[i], sizeof prof[i], tag);
		FILE *f = fopen(prof[i], "w");
		cr_assert(f != NULL);
		fputs(b[i].text, f);
		fclose(f);
		/* No catch-up (maintain_ms an hour): with the programs
		 * at once, each slower, it collapses ranges where the thread's
		 * cache put request buffers among the index nodes it learned
		 * (docs/lifetime.md), which placed_right does not allow;
		 * catch-up has tests of its own. */
		snprintf(env0[i], sizeof env0[i], "HUGEPRELOAD_CONF=lifetime:%s,"
		    "lifetime_ms:100,lifetime_profile:%s,backing:thp,"
		    "maintain_ms:3600000", b[i].mode, prof[i]);
		const char *env[] = {env0[i], WARMUP, NULL};
		const char *argv[] = {hp_path("lifetime"), "index", NODES, NULL};
		p[i] = hp_start(argv, env, true, NULL);
	}
	for (size_t i = 0; i < n; i++) {
		r[i] = hp_wait(p[i]);
		unlink(prof[i]);
	}
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(r[i].code, 0, "exit %d\n%s%s", r[i].code, r[i].out,
		    r[i].err);
		cr_assert_eq(hp_kv(&r[i], "data_ok"), 1);
		cr_assert_eq(hp_err_lines(&r[i]), 1, "%s", r[i].err);
		cr_assert(strstr(r[i].err, "lifetime_profile") && strstr(r[i].err,
		    "ignored"), "%s", r[i].err);
		placed_right(&r[i]);
		hp_run_free(&r[i]);
	}
}

#define HEAD "# hugepreload lifetime profile 1\n"
#define LINE "promote 5 0 5 5 0 0 0 0 0 0 /bin/prog+0x1234 /bin/prog+0x99\n"

Test(lifetime, malformed_profile_is_ignored) {
	static const broken_t b[] = {
	    {"learn", HEAD "promote five 0 5\nend 1\n"},
	    {"learn", "some other file\n" LINE "end 1\n"},
	    {"replay", HEAD "keep 5 0 5 5 0 0 0 0 0 0 /p+0x1\nend 1\n"},
	    {"learn", HEAD LINE "promote 5 0 5 5 0 0 0 0 0 0 /p\nend 2\n"},
	    {"learn", HEAD LINE "end 7\n"}};
	broken_profiles(b, sizeof b / sizeof *b);
}

Test(lifetime, truncated_profile_is_ignored) {
	static const broken_t b[] = {
	    {"learn", HEAD LINE},                                /* no end line */
	    {"replay", HEAD LINE "promote 5 0 5 5 0 0 0 0 0 0 /p+0x"},
	    {"learn", ""}};
	broken_profiles(b, sizeof b / sizeof *b);
}

Test(lifetime, profile_entries_apply_once_dlopened) {
	char prof[128], conf[300];
	profile_path(prof, sizeof prof, "dl");
	const char *argv[] = {hp_path("lifetime"), "dl", NODES,
	    hp_path("libltsite.so"), NULL};
	snprintf(conf, sizeof conf, LEARN ",lifetime_record:%s", prof);
	hp_run_t a = run_conf_env(conf, WARMUP, argv);
	cr_assert_eq(hp_kv(&a, "data_ok"), 1);
	FILE *f = fopen(prof, "r");
	cr_assert(f != NULL);
	char line[4096];
	bool lib_promoted = false;
	while (fgets(line, sizeof line, f))
		lib_promoted |= strncmp(line, "promote", 7) == 0 &&
		    strstr(line, "libltsite.so+0x") != NULL;
	fclose(f);
	cr_assert(lib_promoted, "no promoted site in the library");
	snprintf(conf, sizeof conf, "lifetime:replay,lifetime_profile:%s", prof);
	hp_run_t b = run_conf_env(conf, WARMUP, argv);
	cr_assert_eq(hp_kv(&b, "data_ok"), 1);
	placed_right(&b);
	unlink(prof);
	hp_run_free(&a);
	hp_run_free(&b);
}

Test(lifetime, a_site_turning_churny_is_demoted) {
	const char *argv[] = {hp_path("lifetime"), "flip", "1000000", NULL};
	/* 1 s: the last phase (kept nodes again) must not be re-promoted
	 * before the program reports where they are. */
	hp_run_t r = run_conf("lifetime:learn,lifetime_ms:1000,stats_print:true",
	    argv);
	cr_assert_geq(counter(&r, "lifetime_promotions "), 1);
	cr_assert_geq(counter(&r, "lifetime_demotions "), 1);
	cr_assert_geq(hp_kv(&r, "late_nodes_nh_frac"), 0.9, "%s", r.out);
	hp_run_free(&r);
}

Test(lifetime, threads_and_fork_while_learning) {
	const char *conf = "lifetime:learn,lifetime_sample:4k,"
	    "lifetime_sample_rate:0,stats_print:true";
	const char *t[] = {hp_path("threads"), "200000", NULL};
	hp_run_t r = run_conf_any(conf, t);
	cr_assert_eq(hp_kv(&r, "bad"), 0);
	cr_assert_geq(counter(&r, "lifetime_samples "), 1000, "no sampling");
	hp_run_free(&r);
	const char *f[] = {hp_path("forkmt"), "50", NULL};
	r = run_conf_any(conf, f);
	cr_assert_eq(hp_kv(&r, "failed"), 0);
	cr_assert_geq(counter(&r, "lifetime_samples "), 1000, "no sampling");
	hp_run_free(&r);
}

/* A thread's first allocation only starts its count: sampled, it would
 * unwind every new thread (and give each libunwind's 256 KiB cache). With
 * one sample per GiB, 200 threads that allocate once are not sampled. */
Test(lifetime, new_threads_are_not_sampled_at_once) {
	const char *argv[] = {hp_path("lifetime"), "spawn", "200", NULL};
	hp_run_t r = run_conf("lifetime:learn,lifetime_sample:1g,"
	    "stats_print:true", argv);
	cr_assert_eq(counter(&r, "lifetime_samples "), 0, "%s", r.err);
	hp_run_free(&r);
}

/* A thread allocating inside its own dl_iterate_phdr callback holds the
 * loader's lock; a sampler holding sample_lock waits for that lock while
 * it unwinds. The allocation only tries sample_lock, so both go on. With
 * a blocking lock this hung on every try (timeout's 124). */
Test(lifetime, allocating_in_dl_iterate_phdr_callbacks_while_sampling) {
	char cmd[512];
	snprintf(cmd, sizeof cmd, "exec timeout 60 %s 20000 2000000 2",
	    hp_path("dliter"));
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	hp_run_t r = run_conf_any("lifetime_sample:4k,lifetime_sample_rate:0,"
	    "stats_print:true", argv);
	cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
	cr_assert_eq(hp_kv(&r, "done"), 1);
	cr_assert_geq(counter(&r, "lifetime_samples "), 10000, "%s", r.err);
	hp_run_free(&r);
}

/* build/reallocs 20000 under ulimit -v KB. */
static hp_run_t reallocs_within(long kb, const char *conf) {
	char cmd[512];
	snprintf(cmd, sizeof cmd, "ulimit -v %ld; exec %s 20000", kb,
	    hp_path("reallocs"));
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	return run_conf_any(conf, argv);
}

/* Sampling holds no memory per thread: 32 threads that each sample some
 * 30 times (2 MiB of 256 B objects, one sample per 64 KiB) add little to
 * what lifetime:off holds. With libunwind's unw_backtrace each kept a
 * 256 KiB frame cache, 8 MiB in all. */
Test(lifetime, sampling_threads_hold_no_frame_cache) {
	const char *argv[] = {hp_path("lifetime"), "samplers", "32", NULL};
	const char *env0[] = {"HUGEPRELOAD_CONF=lifetime:off", NULL};
	const char *env1[] = {"HUGEPRELOAD_CONF=lifetime:learn,"
	    "lifetime_sample:64k,lifetime_sample_rate:0,lifetime_ms:3600000,"
	    "stats_print:true", NULL};
	hp_proc_t p0 = hp_start(argv, env0, true, NULL);  /* both at once */
	hp_proc_t p1 = hp_start(argv, env1, true, NULL);
	hp_run_t off = hp_wait(p0), on = hp_wait(p1);
	cr_assert_eq(off.code, 0, "exit %d\n%s%s", off.code, off.out, off.err);
	cr_assert_eq(on.code, 0, "exit %d\n%s%s", on.code, on.out, on.err);
	cr_assert_eq(hp_kv(&off, "data_ok"), 1);
	cr_assert_eq(hp_kv(&on, "data_ok"), 1);
	double samples = counter(&on, "lifetime_samples ");
	long extra = (long)(hp_kv(&on, "rss_kb") - hp_kv(&off, "rss_kb"));
	cr_log_info("samples=%.0f rss_off_kb=%.0f rss_learn_kb=%.0f extra_kb=%ld",
	    samples, hp_kv(&off, "rss_kb"), hp_kv(&on, "rss_kb"), extra);
	cr_assert_geq(samples, 32 * 16, "%s", on.err);
	cr_assert_lt(extra, 3 * 1024, "learn holds %ld kB more than off", extra);
	hp_run_free(&off);
	hp_run_free(&on);
}

/* The sample zone's address space is halved until granted (valgrind, a
 * tight ulimit -v): 15.3 GiB in all still leaves room to learn. */
Test(lifetime, sample_zone_fits_a_small_address_space) {
	hp_run_t r = reallocs_within(16000000, "lifetime:learn,"
	    "lifetime_sample:4k,lifetime_sample_rate:0,stats_print:true");
	cr_assert_eq(hp_kv(&r, "bad"), 0);
	cr_assert_geq(counter(&r, "lifetime_samples "), 1000, "%s", r.err);
	cr_assert_null(strstr(r.err, "hugepreload: "), "%s", r.err);
	hp_run_free(&r);
}

/* realloc of sampled objects keeps their bytes; calloc zeroes, also in
 * the sample zone; with nearly every allocation sampled. */
Test(lifetime, realloc_and_calloc_while_sampling) {
	const char *argv[] = {hp_path("reallocs"), "200000", NULL};
	hp_run_t r = run_conf_any("lifetime:learn,lifetime_sample:4k,"
	    "lifetime_sample_rate:0,stats_print:true", argv);
	cr_assert_eq(hp_kv(&r, "bad"), 0);
	cr_assert_geq(counter(&r, "lifetime_samples "), 10000);
	hp_run_free(&r);
}

/* lifetime index 100000 with a 1.5 s warm-up of request traffic (one
 * thread allocating hundreds of MB a second) under conf; its wall time
 * in *secs. */
static hp_run_t paced_run(const char *conf, double *secs) {
	char env0[300];
	snprintf(env0, sizeof env0, "HUGEPRELOAD_CONF=%s", conf);
	const char *env[] = {env0, "LT_WARMUP_S=1.5", NULL};
	const char *argv[] = {hp_path("lifetime"), "index", "100000", NULL};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	hp_run_t r = hp_run(argv, env, true, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert_eq(r.code, 0, "exit %d\n%s%s", r.code, r.out, r.err);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1);
	return r;
}

/* lifetime_sample_rate: each thread takes at most ten seconds' worth of
 * samples at once and rate a second after that. Two threads may allocate
 * (the program's and the maintenance thread), so at most 2 (10 rate +
 * rate secs) in a run of secs seconds, whatever the host's speed. Without
 * the limit, the same run takes more than that, or the bound says
 * nothing. */
Test(lifetime, sample_rate_paces_each_thread) {
	double secs, free_secs;
	hp_run_t r = paced_run("lifetime_sample:4k,lifetime_sample_rate:100,"
	    "stats_print:true", &secs);
	double paced = counter(&r, "lifetime_samples ");
	double bound = 2 * (10 * 100 + 100 * secs);
	cr_assert_leq(paced, bound, "%.0f samples in %.2f s:\n%s", paced,
	    secs, r.err);
	cr_assert_geq(paced, 1000, "the first ten seconds' worth, at least:\n%s",
	    r.err);
	hp_run_free(&r);
	r = paced_run("lifetime_sample:4k,lifetime_sample_rate:0,"
	    "stats_print:true", &free_secs);
	double unpaced = counter(&r, "lifetime_samples ");
	cr_log_info("paced: %.0f samples in %.2f s; unpaced: %.0f in %.2f s",
	    paced, secs, unpaced, free_secs);
	cr_assert_gt(unpaced, 2 * (10 * 100 + 100 * free_secs), "%s", r.err);
	hp_run_free(&r);
}

/* No address space for the huge class (ulimit -v): one line, and the
 * program runs on with lifetime:learn asked for. */
Test(lifetime, learn_without_the_huge_class_runs_on) {
	hp_run_t r = reallocs_within(700000, "lifetime:learn");
	cr_assert_eq(hp_kv(&r, "bad"), 0);
	cr_assert_eq(hp_err_lines(&r), 1, "%s", r.err);
	cr_assert(strstr(r.err, "could not reserve") &&
	    strstr(r.err, "(Cannot allocate memory)"), "with the error's text: "
	    "%s", r.err);
	hp_run_free(&r);
}

/* Objects of a promoted site go back to the huge class when freed, by
 * their own thread or another: after 100,000 of them are freed, the next
 * 100,000 allocations of the same size from a churny site, on each thread
 * that freed, are all small-class objects in nh mappings. (Freed into the
 * thread's cache of the small class, they were handed out again: 630 of
 * 100,000 per thread.) The site is promoted by a profile, so that the
 * decision cannot change while the threads run. */
Test(lifetime, promoted_objects_go_back_where_they_came_from) {
	char prof[128], conf[300];
	hp_run_t a = record_profile("handback", prof, sizeof prof, conf,
	    sizeof conf);
	hp_run_free(&a);
	const char *argv[] = {hp_path("lifetime"), "handback", "4", NULL};
	hp_run_t r = run_conf(conf, argv);
	unlink(prof);
	cr_assert_eq(hp_kv(&r, "nodes_huge_frac_min"), 1, "the site's objects "
	    "come from the huge class: %s", r.out);
	cr_assert_eq(hp_kv(&r, "requests_not_small"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "requests_not_nh"), 0, "%s", r.out);
	/* jemalloc's per-thread byte counts see every node (the net count,
	 * the array of them too), those served by the thread's cache on the
	 * fast path (src/je/jetc.c) included: about a hundredth of them
	 * otherwise, the cache's refills and flushes. */
	cr_assert_geq(hp_kv(&r, "thread_net_nodes"), 1, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "thread_deallocated_nodes"), 1, "%s", r.out);
	/* Nor twice: the nodes' array is the rest of the net count. */
	cr_assert_leq(hp_kv(&r, "thread_net_nodes"), 1.5, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "thread_deallocated_nodes"), 1.1, "%s", r.out);
	/* A fork child served from the cache alone starts the threads. */
	cr_assert_geq(hp_kv(&r, "fork_child_threads"), 2, "%s", r.out);
	/* The main thread's one cache of the huge arena: the program's
	 * flush and destroy of it refused. */
	cr_assert_eq(hp_kv(&r, "caches_refused"), 2, "%s", r.out);
	hp_run_free(&r);
}

/* Catch-up (src/lifetime/catchup.c): what a site put in the small class
 * before it was promoted (lifetime_ms of its allocation) is on huge pages
 * once the maintenance thread has passed (/proc/kpageflags: the objects'
 * pages are THP pages, in hg mappings), counted; and when they are freed,
 * jemalloc's purges split those pages, so a kept object's page is a THP
 * page no more, in an nh mapping again: MADV_DONTNEED alone would have
 * left each whole 2 MiB allocated. */
Test(lifetime, what_was_learned_on_small_pages_catches_up) {
	const char *argv[] = {hp_path("lifetime"), "catchup", "768", NULL};
	hp_run_t r = run_conf("lifetime_ms:200,maintain_ms:100,decay_ms:0",
	    argv);
	double small = hp_kv(&r, "objects_small");
	cr_assert_geq(small, 16384, "lifetime_ms of the site in the small "
	    "class, at least 32 MiB:\n%s", r.out);
	/* Only a 2 MiB range wholly in anonymous mappings can be one huge
	 * page: where the kernel does not place jemalloc's growing mappings
	 * on 2 MiB boundaries (Linux 6.18 here), a gap or another mapping
	 * sits in the range where two meet (6 of some 20 ranges). */
	double whole = hp_kv(&r, "objects_small_whole");
	cr_assert_geq(whole, 0.5 * small, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "objects_small_whole_in_thp"), 0.8 * whole,
	    "%s", r.out);
	/* Counted: a range for each 1,024 objects of 2 KiB on huge pages,
	 * and an object kept in each. */
	double caught = hp_kv(&r, "caught_up");
	cr_assert_geq(caught, 8, "%s", r.out);
	cr_assert_geq(caught, (long)hp_kv(&r, "objects_small_whole_in_thp") /
	    1024, "%s", r.out);
	cr_assert_geq(hp_kv(&r, "kept"), caught, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "kept_small_in_thp"), 0, "%s", r.out);
	/* A collapsed range is a mapping flagged hg in smaps, not a huge
	 * page inside the small class's nh mappings; split again, it is nh. */
	cr_assert_eq(hp_kv(&r, "objects_small_thp_in_nh"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "kept_small_in_nh"), hp_kv(&r, "kept_small"),
	    "%s", r.out);
	hp_run_free(&r);
}

/* The holes its learning left: once the program frees some of what a site
 * put in the small class before it was promoted (caught up onto huge
 * pages), the site's new objects fill those slots first
 * (src/je/jefill.c), on the same huge pages, instead of growing the huge
 * class beside them; the contents of both are intact. */
Test(lifetime, promoted_site_fills_the_holes_its_learning_left) {
	/* lifetime_ms:400: with both cores busy, 200 left 7,160 and 8,683
	 * objects freed, 400 15,864 and 18,411. */
	const char *argv[] = {hp_path("lifetime"), "holes", "1024", NULL};
	hp_run_t r = run_conf("lifetime_ms:400,maintain_ms:100,decay_ms:0",
	    argv);
	cr_assert_eq(hp_kv(&r, "data_ok"), 1, "%s", r.out);
	/* The site was promoted, and the refill was its decision's (were it
	 * not, jemalloc's own fills would take the holes too). */
	cr_assert_eq(hp_kv(&r, "promoted"), 1, "%s", r.out);
	double freed = hp_kv(&r, "freed");
	/* All but the sampled ones (one in 256 of 2 KiB objects). */
	cr_assert_geq(hp_kv(&r, "refill_placed"), 0.98 * freed, "%s", r.out);
	cr_assert_geq(freed, 2048, "half the caught-up objects, 4 MiB:\n%s",
	    r.out);
	/* Not those the thread's own cache kept, nor those in ranges that
	 * jemalloc's purges (decay_ms:0) split again, where the huge arena
	 * fills the cache: 95.1% to 99.6% went into the holes in 11 runs,
	 * none without jefill.c. The sampled ones (every 512 KiB) go to the
	 * small class's 4 KiB pages. */
	cr_assert_geq(hp_kv(&r, "refill_small_thp"), 0.8 * freed, "%s", r.out);
	cr_assert_leq(hp_kv(&r, "refill_small_other"), freed / 100, "%s",
	    r.out);
	hp_run_free(&r);
}

/* Learning, sampling and noting where objects go, but no site lives
 * lifetime_ms (an hour) by the end: nothing is promoted, nothing
 * collapsed. */
Test(lifetime, nothing_catches_up_without_a_promotion) {
	const char *argv[] = {hp_path("lifetime"), "catchup", "256", NULL};
	hp_run_t r = run_conf("lifetime:learn,lifetime_ms:3600000,"
	    "maintain_ms:100", argv);
	cr_assert_gt(hp_kv(&r, "objects_small"), 100000, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "caught_up"), 0, "%s", r.out);
	cr_assert_eq(hp_kv(&r, "objects_small_in_thp"), 0, "%s", r.out);
	hp_run_free(&r);
}

/* exit() from a signal handler while threads allocate (build/exitsig: the
 * handler interrupts the main thread's allocations), with lifetime_record
 * and stats_print. exit's destructors took the sampler's and jemalloc's
 * locks, which the interrupted allocation of the same thread could hold:
 * on 5bb5b39, 10 of 20 runs hung with lifetime_sample:4k, 5 of 20 with
 * the default, 2 of 20 with neither key (stats), and a killed run left a
 * partial p.PID.PID.tmp. Each run must end (a generous timeout kills a
 * hung one: 137), leave a whole record (its last line "end N") and no
 * temporary file, and say at most one line for each destructor. */
#define EXIT_RUNS 40

/* The library's lines that say exit came from a signal handler. */
static int exit_lines(const hp_run_t *r) {
	int n = 0;
	for (const char *p = r->err; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		n += strncmp(p, "hugepreload: ", 13) == 0 && memmem(p, len,
		    "(exit from a signal handler?)", 29) != NULL;
	}
	return n;
}
Test(lifetime, exit_from_signal_handler_does_not_hang) {
	char dir[] = "/tmp/hp-exitsig.XXXXXX", cmd[1600];
	cr_assert(mkdtemp(dir) != NULL);
	/* exitsig alone under the library (a wrapper under it would leave a
	 * record), waited for with a 60 s watchdog: a run still there then
	 * has hung, and its threads' stacks go to stderr (gdb, where the host
	 * has it) before it is killed: exit 137. The shell's wait returns as
	 * the run ends (no polling: a run took 0.15 s, the poll's 0.1 s steps
	 * and its processes added about a third), and the watchdog, ended
	 * then, takes its sleep with it. */
	snprintf(cmd, sizeof cmd, "env LD_PRELOAD=%s HUGEPRELOAD_CONF="
	    "lifetime_sample:4k,lifetime_sample_rate:0,stats_print:true,"
	    "lifetime_record:%s/p.%%p "
	    "%s 3 & p=$!; "
	    "( trap 'kill $s 2>/dev/null; exit 0' TERM; sleep 60 & s=$!; "
	    "wait $s; command -v gdb >/dev/null && gdb -p $p -batch -ex "
	    "'thread apply all bt' 2>&1 | grep -E '^(Thread|#)' >&2; "
	    "kill -9 $p ) & w=$!; "
	    "wait $p; st=$?; kill $w 2>/dev/null; wait $w; exit $st",
	    hp_path("libhugepreload.so"), dir, hp_path("exitsig"));
	int hung = 0, tmps = 0, partial = 0, runs = 0, lines = 0;
	for (; runs < EXIT_RUNS && hung == 0 && tmps == 0 && partial == 0;
	    runs++) {
		const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
		hp_run_t r = hp_run(argv, NULL, false, NULL);
		hung += r.code == 137;
		if (r.code == 137)
			cr_log_error("run %d hung at exit; its threads:\n%s",
			    runs + 1, r.err);
		cr_assert(r.code == 0 || r.code == 137, "exit %d: %s", r.code,
		    r.err);
		lines += exit_lines(&r);
		cr_assert_leq(exit_lines(&r), 2, "one line a destructor: %s",
		    r.err);
		hp_run_free(&r);
		char ls[700];
		snprintf(ls, sizeof ls, "cd %s && for f in *; do "
		    "case $f in *.tmp) echo tmp;; *) tail -n 1 $f | grep -q "
		    "'^end [0-9]*$' || echo partial;; esac; rm -f $f; done",
		    dir);  /* no record at all: "*", partial */
		const char *sh[] = {"/bin/sh", "-c", ls, NULL};
		hp_run_t c = hp_run(sh, NULL, false, NULL);
		tmps += strstr(c.out, "tmp") != NULL;
		partial += strstr(c.out, "partial") != NULL;
		hp_run_free(&c);
	}
	rmdir(dir);
	cr_log_info("%d runs, %d hung, %d left a .tmp, %d no whole record, "
	    "%d lines", runs, hung, tmps, partial, lines);
	cr_assert_eq(hung, 0, "run %d of %d hung at exit", runs, EXIT_RUNS);
	cr_assert_eq(tmps, 0, "run %d left a temporary file", runs);
	cr_assert_eq(partial, 0, "run %d left no whole record (partial or none)", runs);
}

/* Catch-up leaves the program room between two collapses: each holds the
 * program's mappings while it copies 2 MiB (about 5.5 ms on the
 * development VM), and a run of them back to back held Redis's faults and
 * its reads of the ranges for up to 115 ms (docs/lifetime.md). The
 * maintenance thread rests as long as a collapse took before the next
 * (src/lifetime/catchup.c): in strace's timestamps, the next MADV_COLLAPSE
 * of a pass starts at least that long after one ends. Pairs across two
 * passes (500 ms apart here) are left out, and so are collapses shorter
 * than 200 us, whose rest the traced calls between them would hide. */
Test(lifetime, catch_up_rests_between_collapses) {
	char trace[64];
	snprintf(trace, sizeof trace, "/tmp/hp-collapse.%d", (int)getpid());
	const char *env[] = {"HUGEPRELOAD_CONF=lifetime_ms:200,maintain_ms:500",
	    NULL};
	const char *argv[] = {"strace", "-f", "--seccomp-bpf", "-qq", "-ttt",
	    "-T", "-e", "trace=madvise", "-o", trace, hp_path("lifetime"),
	    "catchup", "768", NULL};
	hp_run_t r = hp_run(argv, env, true, NULL);
	if (r.code == 127 || strstr(r.err, "No such file")) {
		hp_run_free(&r);
		unlink(trace);
		cr_skip_test("strace is not installed (scripts/setup-deps "
		    "installs it)");
	}
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	double caught = hp_kv(&r, "caught_up");
	hp_run_free(&r);
	FILE *f = fopen(trace, "r");
	unlink(trace);
	cr_assert_not_null(f);
	/* A collapse's start and end, by thread; an unfinished call's start
	 * is kept until its resumed line. */
	enum { MAX = 4096 };
	static double start[MAX], end[MAX];
	static int tid[MAX];
	int n = 0, open_tid = 0;
	double open_start = 0;
	char line[512];
	while (fgets(line, sizeof line, f) && n < MAX) {
		int pid;
		double ts, dur;
		const char *d = strrchr(line, '<');
		if (sscanf(line, "%d %lf", &pid, &ts) != 2)
			continue;
		if (strstr(line, "MADV_COLLAPSE <unfinished")) {
			open_tid = pid, open_start = ts;
			continue;
		}
		bool resumed = strstr(line, "<... madvise resumed>") &&
		    pid == open_tid;
		if ((!strstr(line, "MADV_COLLAPSE") && !resumed) || d == NULL ||
		    sscanf(d, "<%lf>", &dur) != 1)
			continue;
		tid[n] = pid;
		start[n] = resumed ? open_start : ts;
		end[n] = start[n] + dur;
		n++;
		if (resumed)
			open_tid = 0;
	}
	fclose(f);
	cr_assert_geq(caught, 8, "ranges caught up");
	cr_assert_geq(n, caught, "%d collapses traced, %.0f counted", n, caught);
	int pairs = 0;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (tid[j] == tid[i]) {
				double took = end[i] - start[i];
				double gap = start[j] - end[i];
				if (took > 200e-6 && gap < 0.25) {
					cr_assert_geq(gap, (took < 0.05 ? took : 0.05) -
					    20e-6, "collapse %d took %.6f s and the "
					    "next began %.6f s after it", i, took, gap);
					pairs++;
				}
				break;
			}
	cr_assert_geq(pairs, 5, "%d pairs of collapses in a pass", pairs);
}
