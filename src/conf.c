/*
 * HUGEPRELOAD_CONF="key:value,key:value": parsed like jemalloc's
 * MALLOC_CONF. Every problem is reported once through rep() and the
 * default is kept; nothing here allocates or can fail the host program.
 */
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>
#include "internal.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define TIB ((size_t)1 << 40)

#define HP_THRESHOLD_DEFAULT  (1 * MIB)
#define HP_THRESHOLD_MIN      (16 * KIB)   /* jemalloc's smallest large class */
#define HP_THRESHOLD_MAX      TIB
#define HP_DECAY_DEFAULT      5000
#define HP_DECAY_MAX          (3600L * 1000)
#define HP_RESERVE_DEFAULT    TIB
#define HP_RESERVE_MIN        GIB
#define HP_RESERVE_MAX        (64 * TIB)
#define HP_STRAND_DEFAULT_PCT 25
#define HP_LSAMPLE_DEFAULT    (512 * KIB)
#define HP_LSAMPLE_MIN        (4 * KIB)
#define HP_LSAMPLE_MAX        GIB
#define HP_LMS_DEFAULT        250
#define HP_LMS_MAX            (3600L * 1000)
#define HP_MAINT_DEFAULT      1000
#define HP_MAINT_MIN          10
#define HP_MAINT_MAX          (3600L * 1000)
#define HP_MMAP_DEFAULT       (8 * MIB)    /* README: leaves allocators'
                                              2-4 MiB chunks alone */
#define HP_MMAP_MIN           (2 * MIB)
#define HP_MMAP_MAX           TIB

static const char *const lifetime_names[] = {"off", "learn", "replay", NULL};

void hp_conf_defaults(hp_conf_t *c) {
	c->large_threshold = HP_THRESHOLD_DEFAULT;
	c->backing = HP_BACKING_AUTO;
	c->hugetlb_page = HP_HUGE;
	c->collapse = false;
	c->verbose = false;
	c->decay_ms = HP_DECAY_DEFAULT;
	c->reserve = HP_RESERVE_DEFAULT;
	c->stats_print = false;
	c->stats_format = HP_FMT_TEXT;
	c->stats_file[0] = '\0';
	c->stats_live = true;
	c->strand_limit = HP_STRAND_DEFAULT_PCT;
	c->strand_pct = true;
	c->lifetime = HP_LIFETIME_LEARN;
	c->lifetime_sample = HP_LSAMPLE_DEFAULT;
	c->lifetime_ms = HP_LMS_DEFAULT;
	c->maintain_ms = HP_MAINT_DEFAULT;
	c->mmap_threshold = HP_MMAP_DEFAULT;
	c->lifetime_record[0] = '\0';
	c->lifetime_profile[0] = '\0';
}

/* A path of the policy (lifetime_record, stats_file) with "%p" made the
 * process id: one file per process of a service tree. */
void hp_conf_path(const char *path, char *out, size_t n) {
	size_t o = 0;
	for (const char *c = path; *c && o + 1 < n; c++) {
		if (c[0] == '%' && c[1] == 'p') {
			int w = snprintf(out + o, n - o, "%d", (int)getpid());
			o = w > 0 && (size_t)w < n - o ? o + (size_t)w : n - 1;
			c++;
		} else {
			out[o++] = *c;
		}
	}
	out[o] = '\0';
}

/* "<digits>[k|m|g|t]", case-insensitive suffix, no overflow. */
bool hp_parse_size(const char *s, size_t len, size_t *out) {
	size_t v = 0, i = 0;
	if (len == 0)
		return false;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > (SIZE_MAX - 9) / 10)
			return false;
		v = v * 10 + (size_t)(s[i] - '0');
	}
	if (i == 0)
		return false;
	if (i < len) {
		size_t mult;
		switch (s[i] | 0x20) {
		case 'k': mult = KIB; break;
		case 'm': mult = MIB; break;
		case 'g': mult = GIB; break;
		case 't': mult = TIB; break;
		default: return false;
		}
		if (i + 1 != len || v > SIZE_MAX / mult)
			return false;
		v *= mult;
	}
	*out = v;
	return true;
}

static bool parse_long(const char *s, size_t len, long *out) {
	bool neg = len > 0 && s[0] == '-';
	size_t v;
	if (!hp_parse_size(s + neg, len - neg, &v) || len - neg == 0)
		return false;
	for (size_t i = neg; i < len; i++)      /* no suffixes on numbers */
		if (s[i] < '0' || s[i] > '9')
			return false;
	if (v > (size_t)LONG_MAX)
		return false;
	*out = neg ? -(long)v : (long)v;
	return true;
}

static bool is(const char *s, size_t len, const char *word) {
	return strlen(word) == len && memcmp(s, word, len) == 0;
}

static const char *const backing_names[] = {"auto", "hugetlb", "thp", "none",
    NULL};
static const char *const format_names[] = {"text", "json", "prometheus", NULL};

/* A path of fewer than n bytes, without ',' (the item separator). */
static bool path(const char *v, size_t vlen, char *out, size_t n) {
	if (vlen == 0 || vlen >= n || memchr(v, '\0', vlen))
		return false;
	memcpy(out, v, vlen);
	out[vlen] = '\0';
	return true;
}

/* The index of v in names, or -1. */
static int word(const char *v, size_t vlen, const char *const *names) {
	for (int i = 0; names[i] != NULL; i++)
		if (is(v, vlen, names[i]))
			return i;
	return -1;
}

static bool boolean(const char *v, size_t vlen, bool *out) {
	static const char *const names[] = {"false", "true", NULL};
	int b = word(v, vlen, names);
	if (b >= 0)
		*out = b == 1;
	return b >= 0;
}

static void report(hp_conf_report_t rep, void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(hp_conf_report_t rep, void *ctx, const char *fmt, ...) {
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (rep != NULL)
		rep(ctx, msg);
}

#define BAD(dflt) report(rep, ctx, \
    "bad value '%.*s' for %.*s in HUGEPRELOAD_CONF; using the default %s", \
    (int)vlen, v, (int)klen, k, dflt)

/* A size in [min, max] into *out; false (and *out untouched) if not. */
static bool size_in(const char *v, size_t vlen, size_t min, size_t max,
    size_t *out) {
	size_t n;
	if (!hp_parse_size(v, vlen, &n) || n < min || n > max)
		return false;
	*out = n;
	return true;
}

static void set(hp_conf_t *c, const char *k, size_t klen, const char *v,
    size_t vlen, hp_conf_report_t rep, void *ctx) {
	if (is(k, klen, "large_threshold")) {
		if (!size_in(v, vlen, HP_THRESHOLD_MIN, HP_THRESHOLD_MAX,
		    &c->large_threshold))
			BAD("1m (range 16k..1t)");
	} else if (is(k, klen, "backing")) {
		int b = word(v, vlen, backing_names);
		if (b >= 0)
			c->backing = (hp_backing_t)b;
		else
			BAD("auto (auto|hugetlb|thp|none)");
	} else if (is(k, klen, "hugetlb_size")) {
		if (is(v, vlen, "2m"))
			c->hugetlb_page = HP_HUGE;
		else if (is(v, vlen, "1g"))
			c->hugetlb_page = HP_GIB;
		else
			BAD("2m (2m|1g)");
	} else if (is(k, klen, "collapse")) {
		if (!boolean(v, vlen, &c->collapse))
			BAD("false (true|false)");
	} else if (is(k, klen, "verbose")) {
		if (!boolean(v, vlen, &c->verbose))
			BAD("false (true|false)");
	} else if (is(k, klen, "decay_ms")) {
		long n;
		if (parse_long(v, vlen, &n) && n >= -1 && n <= HP_DECAY_MAX)
			c->decay_ms = n;
		else
			BAD("5000 (-1 never, 0..3600000)");
	} else if (is(k, klen, "stats_print")) {
		if (!boolean(v, vlen, &c->stats_print))
			BAD("false (true|false)");
	} else if (is(k, klen, "stats_format")) {
		int f = word(v, vlen, format_names);
		if (f >= 0)
			c->stats_format = f;
		else
			BAD("text (text|json|prometheus)");
	} else if (is(k, klen, "stats_file")) {
		if (!path(v, vlen, c->stats_file, sizeof c->stats_file))
			BAD("stderr (a path)");
	} else if (is(k, klen, "stats_live")) {
		if (!boolean(v, vlen, &c->stats_live))
			BAD("true (true|false)");
	} else if (is(k, klen, "stats_dir")) {
		report(rep, ctx, "stats_dir in HUGEPRELOAD_CONF is gone: live "
		    "counters are in the process's memory (stats_live:false turns "
		    "them off); ignored");
	} else if (is(k, klen, "strand_limit")) {
		size_t n;
		if (vlen > 1 && v[vlen - 1] == '%' &&
		    hp_parse_size(v, vlen - 1, &n) && n <= 100 &&
		    v[vlen - 2] >= '0' && v[vlen - 2] <= '9') {
			c->strand_limit = n;
			c->strand_pct = true;
		} else if (hp_parse_size(v, vlen, &n)) {
			c->strand_limit = n;
			c->strand_pct = false;
		} else {
			BAD("25% (bytes with k/m/g/t, or 0%..100% of the huge "
			    "class's resident bytes)");
		}
	} else if (is(k, klen, "lifetime")) {
		int m = word(v, vlen, lifetime_names);
		if (m >= 0)
			c->lifetime = m;
		else
			BAD("learn (off|learn|replay)");
	} else if (is(k, klen, "lifetime_sample")) {
		if (!size_in(v, vlen, HP_LSAMPLE_MIN, HP_LSAMPLE_MAX,
		    &c->lifetime_sample))
			BAD("512k (range 4k..1g)");
	} else if (is(k, klen, "lifetime_ms")) {
		long n;
		if (parse_long(v, vlen, &n) && n >= 1 && n <= HP_LMS_MAX)
			c->lifetime_ms = n;
		else
			BAD("250 (1..3600000)");
	} else if (is(k, klen, "maintain_ms")) {
		long n;
		if (parse_long(v, vlen, &n) && n >= HP_MAINT_MIN &&
		    n <= HP_MAINT_MAX)
			c->maintain_ms = n;
		else
			BAD("1000 (10..3600000)");
	} else if (is(k, klen, "mmap_threshold")) {
		if (is(v, vlen, "off"))
			c->mmap_threshold = SIZE_MAX;
		else if (!size_in(v, vlen, HP_MMAP_MIN, HP_MMAP_MAX,
		    &c->mmap_threshold))
			BAD("8m (range 2m..1t, or off)");
	} else if (is(k, klen, "lifetime_record")) {
		if (!path(v, vlen, c->lifetime_record, sizeof c->lifetime_record))
			BAD("none (a path)");
	} else if (is(k, klen, "lifetime_profile")) {
		if (!path(v, vlen, c->lifetime_profile,
		    sizeof c->lifetime_profile))
			BAD("none (a path)");
	} else if (is(k, klen, "reserve")) {
		if (!size_in(v, vlen, HP_RESERVE_MIN, HP_RESERVE_MAX, &c->reserve))
			BAD("1t (range 1g..64t)");
	} else {
		report(rep, ctx, "unknown key '%.*s' in HUGEPRELOAD_CONF; "
		    "ignored", (int)klen, k);
	}
}

/* Calls item() for each "key:value" of s, in order; malformed items
 * (no colon, or an empty key) go to bad(). Empty items are skipped. */
void hp_conf_each(const char *s, hp_conf_item_t item, void (*bad)(void *ctx,
    const char *it, size_t len), void *ctx) {
	if (s == NULL)
		return;
	while (*s != '\0') {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		const char *colon = memchr(s, ':', len);
		if (len == 0) {
			/* empty item ("a:b,,c:d" or a trailing comma): skip */
		} else if (colon == NULL || colon == s) {
			if (bad != NULL)
				bad(ctx, s, len);
		} else {
			item(ctx, s, (size_t)(colon - s), colon + 1,
			    len - (size_t)(colon - s) - 1);
		}
		s += len;
		if (*s == ',')
			s++;
	}
}

struct parse {
	hp_conf_t *c;
	hp_conf_report_t rep;
	void *ctx;
};

static void parse_item(void *arg, const char *k, size_t klen, const char *v,
    size_t vlen) {
	struct parse *p = arg;
	set(p->c, k, klen, v, vlen, p->rep, p->ctx);
}

static void parse_bad(void *arg, const char *it, size_t len) {
	struct parse *p = arg;
	report(p->rep, p->ctx, "malformed '%.*s' in HUGEPRELOAD_CONF (want "
	    "key:value); ignored", (int)len, it);
}

void hp_conf_parse(hp_conf_t *c, const char *s, hp_conf_report_t rep,
    void *ctx) {
	struct parse p = {c, rep, ctx};
	hp_conf_each(s, parse_item, parse_bad, &p);
}

int hp_conf_describe(const hp_conf_t *c, char *buf, size_t n) {
	char mmap_t[24] = "off";
	if (c->mmap_threshold != SIZE_MAX)
		snprintf(mmap_t, sizeof mmap_t, "%zu", c->mmap_threshold);
	return snprintf(buf, n, "large_threshold:%zu,backing:%s,hugetlb_size:%s,"
	    "collapse:%s,decay_ms:%ld,reserve:%zu,strand_limit:%zu%s,"
	    "lifetime:%s,lifetime_sample:%zu,lifetime_ms:%ld,maintain_ms:%ld,"
	    "mmap_threshold:%s",
	    c->large_threshold, backing_names[c->backing],
	    c->hugetlb_page == HP_GIB ? "1g" : "2m", c->collapse ? "true" :
	    "false", c->decay_ms, c->reserve, c->strand_limit,
	    c->strand_pct ? "%" : "", lifetime_names[c->lifetime],
	    c->lifetime_sample, c->lifetime_ms, c->maintain_ms, mmap_t);
}

/* Every key, for "hugepreload --help". */
const char *const hp_conf_help[][4] = {
    {"large_threshold", "bytes (k/m/g/t), 16k..1t", "1m",
     "requests of at least this size go to the huge class"},
    {"backing", "auto|hugetlb|thp|none", "auto", "where the backing chain "
     "hugetlb pool -> THP -> 4 KiB starts; hugetlb warns when the pool is "
     "empty; none keeps the huge class on 4 KiB pages"},
    {"hugetlb_size", "2m|1g", "2m", "which hugetlbfs pool"},
    {"collapse", "true|false", "false",
     "MADV_COLLAPSE new THP pages when first used"},
    {"decay_ms", "-1 (never), 0..3600000", "5000",
     "how long free memory stays before it goes back to the kernel "
     "(both classes)"},
    {"reserve", "bytes, 1g..64t", "1t",
     "address space reserved for the huge class"},
    {"strand_limit", "bytes, or 0%..100%", "25%", "stranded bytes allowed "
     "(free, resident, in huge pages with live data) before the emptiest "
     "huge pages are split; a share of the huge class's resident bytes"},
    {"lifetime", "off|learn|replay", "learn", "learn which allocation sites "
     "are long-lived from sampled call stacks and send their allocations to "
     "the huge class whatever their size; replay takes the decisions of "
     "lifetime_profile only"},
    {"lifetime_sample", "bytes, 4k..1g", "512k",
     "one allocation is sampled (unwound) per this many bytes, on average"},
    {"lifetime_ms", "1..3600000", "250",
     "a sampled object that lives this long is long-lived"},
    {"lifetime_record", "a path", "none",
     "where the site table is written at exit (text, editable); %p "
     "becomes the process id"},
    {"lifetime_profile", "a path", "none",
     "a site table loaded at start-up, so placement is right from the "
     "first allocation"},
    {"maintain_ms", "10..3600000", "1000", "how often the maintenance "
     "thread refreshes the live counters, drives the huge class's decay "
     "and enforces strand_limit"},
    {"mmap_threshold", "bytes, 2m..1t, or off", "8m", "the program's own "
     "anonymous private mappings of at least this size are placed 2 MiB-"
     "aligned and advised MADV_HUGEPAGE; they stay ordinary mappings"},
    {"stats_print", "true|false", "false", "print the counters at exit"},
    {"stats_format", "text|json|prometheus", "text",
     "format of the counters printed at exit"},
    {"stats_file", "a path", "stderr", "where the counters go at exit; %p "
     "becomes the process id"},
    {"stats_live", "true|false", "true", "keep the counters where "
     "\"hugepreload stat PID\" reads them (a page of the process's memory)"},
    {"verbose", "true|false", "false",
     "one start-up line with the policy and the backing available"},
    {NULL, NULL, NULL, NULL}};
