/* Unit tests of the HUGEPRELOAD_CONF parser (src/base/conf.c). */
#include <criterion/criterion.h>
#include <string.h>
#include "base/base.h"

typedef struct {
	int n;
	char last[256];
} msgs_t;

static void collect(void *ctx, const char *msg) {
	msgs_t *m = ctx;
	m->n++;
	strncpy(m->last, msg, sizeof m->last - 1);
}

static bool same(const hp_conf_t *a, const hp_conf_t *b) {
	return a->large_threshold == b->large_threshold &&
	    a->backing == b->backing && a->verbose == b->verbose &&
	    a->decay_ms == b->decay_ms && a->reserve == b->reserve &&
	    a->hugetlb_page == b->hugetlb_page && a->collapse == b->collapse &&
	    a->stats_print == b->stats_print &&
	    a->stats_format == b->stats_format &&
	    a->strand_limit == b->strand_limit && a->strand_pct == b->strand_pct &&
	    a->lifetime == b->lifetime &&
	    a->lifetime_sample == b->lifetime_sample &&
	    a->lifetime_sample_rate == b->lifetime_sample_rate &&
	    a->lifetime_ms == b->lifetime_ms &&
	    a->maintain_ms == b->maintain_ms &&
	    a->mmap_threshold == b->mmap_threshold &&
	    a->long_lived == b->long_lived &&
	    strcmp(a->lifetime_record, b->lifetime_record) == 0 &&
	    strcmp(a->lifetime_profile, b->lifetime_profile) == 0 &&
	    a->stats_live == b->stats_live &&
	    strcmp(a->stats_file, b->stats_file) == 0;
}

static hp_conf_t parse(const char *s, msgs_t *m) {
	hp_conf_t c;
	hp_conf_defaults(&c);
	memset(m, 0, sizeof *m);
	hp_conf_parse(&c, s, collect, m);
	return c;
}

/* Each item gets one "bad value ...; using the default" line and leaves
 * the whole policy at its defaults. */
static void each_gives_the_default(const char *const *bad, size_t n) {
	for (size_t i = 0; i < n; i++) {
		msgs_t m;
		hp_conf_t c = parse(bad[i], &m), d;
		hp_conf_defaults(&d);
		cr_assert_eq(m.n, 1, "%s", bad[i]);
		cr_assert(strstr(m.last, "bad value") && strstr(m.last,
		    "using the default"), "%s", m.last);
		cr_assert(same(&c, &d), "%s changed the policy", bad[i]);
	}
}

Test(conf, defaults) {
	msgs_t m;
	hp_conf_t c = parse(NULL, &m);
	cr_assert_eq(c.large_threshold, 1 << 20);
	cr_assert_eq(c.backing, HP_BACKING_AUTO);
	cr_assert_eq(c.hugetlb_page, (size_t)2 << 20);
	cr_assert_eq(c.collapse, false);
	cr_assert_eq(c.verbose, false);
	cr_assert_eq(c.decay_ms, 5000);
	cr_assert_eq(c.reserve, (size_t)1 << 40);
	c = parse("", &m);
	cr_assert_eq(m.n, 0);
}

Test(conf, sizes) {
	size_t v;
	cr_assert(hp_conf_parse_size("4096", 4, &v) && v == 4096);
	cr_assert(hp_conf_parse_size("2k", 2, &v) && v == 2048);
	cr_assert(hp_conf_parse_size("2K", 2, &v) && v == 2048);
	cr_assert(hp_conf_parse_size("3m", 2, &v) && v == 3u << 20);
	cr_assert(hp_conf_parse_size("1g", 2, &v) && v == 1u << 30);
	cr_assert(hp_conf_parse_size("1t", 2, &v) && v == (size_t)1 << 40);
	cr_assert_not(hp_conf_parse_size("", 0, &v));
	cr_assert_not(hp_conf_parse_size("k", 1, &v));
	cr_assert_not(hp_conf_parse_size("1x", 2, &v));
	cr_assert_not(hp_conf_parse_size("1kb", 3, &v));
	cr_assert_not(hp_conf_parse_size("-1", 2, &v));
	cr_assert_not(hp_conf_parse_size("18446744073709551616", 20, &v));
	cr_assert_not(hp_conf_parse_size("20000000000t", 12, &v));
	cr_assert(hp_conf_parse_size("123abc", 3, &v) && v == 123, "length-bounded");
}

Test(conf, every_key_good) {
	msgs_t m;
	hp_conf_t c = parse("large_threshold:256k,backing:none,verbose:true,"
	    "decay_ms:-1,reserve:4g", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.large_threshold, 256 << 10);
	cr_assert_eq(c.backing, HP_BACKING_NONE);
	cr_assert_eq(c.verbose, true);
	cr_assert_eq(c.decay_ms, -1);
	cr_assert_eq(c.reserve, (size_t)4 << 30);
	c = parse("decay_ms:3600000,backing:thp,verbose:false", &m);
	cr_assert_eq(m.n, 0);
	cr_assert_eq(c.decay_ms, 3600000);
	cr_assert_eq(c.backing, HP_BACKING_THP);
	c = parse("backing:hugetlb,hugetlb_size:1g,collapse:true", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.backing, HP_BACKING_HUGETLB);
	cr_assert_eq(c.hugetlb_page, (size_t)1 << 30);
	cr_assert(c.collapse);
	c = parse("backing:auto,hugetlb_size:2m,collapse:false", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.backing, HP_BACKING_AUTO);
	cr_assert_eq(c.hugetlb_page, (size_t)2 << 20);
	cr_assert_not(c.collapse);
}

Test(conf, bad_values_keep_defaults) {
	const char *bad[] = {"large_threshold:8k", "large_threshold:2t",
	    "large_threshold:x", "backing:hugetlbfs", "backing:", "verbose:1",
	    "verbose:TRUE", "decay_ms:-2", "decay_ms:5s", "decay_ms:99999999999",
	    "reserve:512m", "reserve:65t", "reserve:big", "backing:THP",
	    "backing:hugetlbfs", "hugetlb_size:4m", "hugetlb_size:1G",
	    "hugetlb_size:", "collapse:yes", "collapse:"};
	each_gives_the_default(bad, sizeof bad / sizeof *bad);
}

Test(conf, unknown_and_malformed) {
	msgs_t m;
	parse("nope:1", &m);
	cr_assert_eq(m.n, 1);
	cr_assert(strstr(m.last, "unknown key 'nope'"), "%s", m.last);
	parse("verbose", &m);
	cr_assert(strstr(m.last, "malformed 'verbose'"), "%s", m.last);
	parse(":x", &m);
	cr_assert_eq(m.n, 1);
	hp_conf_t c = parse(",,verbose:true,,", &m);
	cr_assert_eq(m.n, 0);
	cr_assert(c.verbose);
	c = parse("a:1,decay_ms:7,b,large_threshold:2m", &m);
	cr_assert_eq(m.n, 2);
	cr_assert_eq(c.decay_ms, 7);
	cr_assert_eq(c.large_threshold, 2 << 20);
}

Test(conf, stats_and_strand_keys) {
	msgs_t m;
	hp_conf_t c = parse("stats_print:true,stats_format:prometheus,"
	    "stats_file:/tmp/a:b.txt,stats_live:false,strand_limit:40%", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert(c.stats_print);
	cr_assert_eq(c.stats_format, HP_FMT_PROM);
	cr_assert_str_eq(c.stats_file, "/tmp/a:b.txt", "a ':' in the value");
	cr_assert_not(c.stats_live);
	cr_assert(c.strand_pct && c.strand_limit == 40);
	c = parse("strand_limit:64m,stats_format:json,stats_live:true", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert(!c.strand_pct && c.strand_limit == (size_t)64 << 20);
	cr_assert_eq(c.stats_format, HP_FMT_JSON);
	cr_assert(c.stats_live);
	c = parse("strand_limit:0%,strand_limit:100%", &m);
	cr_assert(c.strand_pct && c.strand_limit == 100);
	const char *bad[] = {"stats_print:1", "stats_format:xml",
	    "stats_format:", "stats_file:", "stats_live:", "stats_live:off",
	    "strand_limit:101%", "strand_limit:%", "strand_limit:-1",
	    "strand_limit:5q"};
	each_gives_the_default(bad, sizeof bad / sizeof *bad);
	char longpath[400];
	memset(longpath, 'a', sizeof longpath);
	memcpy(longpath, "stats_file:", 11);
	longpath[sizeof longpath - 1] = '\0';
	c = parse(longpath, &m);
	cr_assert_eq(m.n, 1, "a path too long");
	/* The key of old versions: one line, and nothing else changes. */
	hp_conf_t d;
	hp_conf_defaults(&d);
	c = parse("stats_dir:/run/hp", &m);
	cr_assert_eq(m.n, 1);
	cr_assert(strstr(m.last, "stats_dir") && strstr(m.last, "ignored"),
	    "%s", m.last);
	cr_assert(same(&c, &d));
}

Test(conf, lifetime_keys) {
	msgs_t m;
	hp_conf_t c = parse(NULL, &m);
	cr_assert_eq(c.lifetime, HP_LIFETIME_LEARN);
	cr_assert_eq(c.lifetime_sample, (size_t)512 << 10);
	cr_assert_eq(c.lifetime_sample_rate, 1000);
	cr_assert_eq(c.lifetime_ms, 250);
	cr_assert_str_eq(c.lifetime_record, "");
	c = parse("lifetime:learn,lifetime_sample:64k,lifetime_ms:250,"
	    "lifetime_record:/tmp/p.%p,lifetime_profile:/tmp/in.prof", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.lifetime, HP_LIFETIME_LEARN);
	cr_assert_eq(c.lifetime_sample, (size_t)64 << 10);
	cr_assert_eq(c.lifetime_ms, 250);
	cr_assert_str_eq(c.lifetime_record, "/tmp/p.%p");
	cr_assert_str_eq(c.lifetime_profile, "/tmp/in.prof");
	c = parse("lifetime:replay,lifetime_sample:4k,lifetime_ms:1", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.lifetime, HP_LIFETIME_REPLAY);
	cr_assert_eq(c.lifetime_sample, (size_t)4 << 10);
	c = parse("lifetime:off,lifetime_sample:1g,lifetime_ms:3600000", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.lifetime, HP_LIFETIME_OFF);
	c = parse("lifetime_sample_rate:0", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.lifetime_sample_rate, 0);
	c = parse("lifetime_sample_rate:1000000", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.lifetime_sample_rate, 1000000);
	const char *bad[] = {"lifetime:on", "lifetime:", "lifetime:LEARNING",
	    "lifetime_sample:1k", "lifetime_sample:2g", "lifetime_sample:x",
	    "lifetime_ms:0", "lifetime_ms:-5", "lifetime_ms:3600001",
	    "lifetime_ms:1s", "lifetime_record:", "lifetime_profile:",
	    "lifetime_sample_rate:-1", "lifetime_sample_rate:1000001",
	    "lifetime_sample_rate:1k", "lifetime_sample_rate:"};
	each_gives_the_default(bad, sizeof bad / sizeof *bad);
}

Test(conf, long_lived) {
	msgs_t m;
	hp_conf_t c = parse(NULL, &m);
	cr_assert_eq(c.long_lived, HP_LL_JEMALLOC);
	c = parse("long_lived:jemalloc", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.long_lived, HP_LL_JEMALLOC);
	c = parse("long_lived:mimalloc", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.long_lived, HP_LL_MIMALLOC);
	const char *bad[] = {"long_lived:tcmalloc", "long_lived:",
	    "long_lived:Mimalloc", "long_lived:1", "long_lived:jemalloc5"};
	each_gives_the_default(bad, sizeof bad / sizeof *bad);
}

Test(conf, maintain_ms) {
	msgs_t m;
	hp_conf_t c = parse(NULL, &m);
	cr_assert_eq(c.maintain_ms, 1000);
	c = parse("maintain_ms:10", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.maintain_ms, 10);
	c = parse("maintain_ms:3600000", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.maintain_ms, 3600000);
	const char *bad[] = {"maintain_ms:9", "maintain_ms:0", "maintain_ms:-1",
	    "maintain_ms:3600001", "maintain_ms:1s", "maintain_ms:"};
	each_gives_the_default(bad, sizeof bad / sizeof *bad);
}

Test(conf, mmap_threshold) {
	msgs_t m;
	hp_conf_t c = parse(NULL, &m);
	cr_assert_eq(c.mmap_threshold, 8 << 20);
	c = parse("mmap_threshold:off", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.mmap_threshold, SIZE_MAX);
	c = parse("mmap_threshold:64m", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.mmap_threshold, 64 << 20);
	c = parse("mmap_threshold:1t", &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert_eq(c.mmap_threshold, (size_t)1 << 40);
	const char *bad[] = {"mmap_threshold:1m", "mmap_threshold:0",
	    "mmap_threshold:2t", "mmap_threshold:on", "mmap_threshold:-2m",
	    "mmap_threshold:"};
	each_gives_the_default(bad, sizeof bad / sizeof *bad);
}

Test(conf, last_value_wins) {
	msgs_t m;
	hp_conf_t c = parse("decay_ms:1,decay_ms:2", &m);
	cr_assert_eq(c.decay_ms, 2);
}

Test(conf, describe_round_trips) {
	msgs_t m;
	hp_conf_t c = parse("large_threshold:3m,backing:hugetlb,decay_ms:9,"
	    "reserve:2g,hugetlb_size:1g,collapse:true,lifetime:replay,"
	    "lifetime_sample:8k,lifetime_ms:70,maintain_ms:20,"
	    "long_lived:jemalloc,mmap_threshold:off", &m), d;
	char buf[400];
	hp_conf_describe(&c, buf, sizeof buf);
	d = parse(buf, &m);
	cr_assert_eq(m.n, 0, "%s", m.last);
	cr_assert(same(&c, &d), "%s", buf);
}
