/*
 * HUGEPRELOAD_CONF="key:value,key:value": parsed like jemalloc's
 * MALLOC_CONF. Every problem is reported once through rep() and the
 * default is kept; nothing here allocates or can fail the host program.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>
#include "base/base.h"

/* The policy in force and the fast path's threshold (base.h). */
hp_conf_t hp_conf;
size_t hp_threshold;

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
#define HP_LRATE_MAX          1000000L
#define HP_MAINT_DEFAULT      1000
#define HP_MAINT_MIN          10
#define HP_MAINT_MAX          (3600L * 1000)
#define HP_MMAP_DEFAULT       (8 * MIB)    /* README: leaves allocators'
                                              2-4 MiB chunks alone */
#define HP_MMAP_MIN           (2 * MIB)
#define HP_MMAP_MAX           TIB

static const char *const lifetime_names[] = {"off", "learn", "replay", NULL};
static const char *const long_lived_names[] = {"jemalloc", "mimalloc", NULL};

/* A path of the policy (lifetime_record, stats_file) with "%p" made the
 * process id: one file per process of a service tree. */
void hp_conf_path(const char *path, char *out, size_t n) {
	size_t o = 0;
	for (const char *c = path; *c && o + 1 < n; c++) {
		if (c[0] == '%' && c[1] == 'p') {
			int w = hp_fmt(out + o, n - o, "%d", (int)getpid());
			o = w > 0 && (size_t)w < n - o ? o + (size_t)w : n - 1;
			c++;
		} else {
			out[o++] = *c;
		}
	}
	out[o] = '\0';
}

/* "<digits>[k|m|g|t]", case-insensitive suffix, no overflow. */
bool hp_conf_parse_size(const char *s, size_t len, size_t *out) {
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
	if (!hp_conf_parse_size(s + neg, len - neg, &v) || len - neg == 0)
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
	hp_vfmt(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (rep != NULL)
		rep(ctx, msg);
}

/* A size in [min, max] into *out; false (and *out untouched) if not. */
static bool size_in(const char *v, size_t vlen, size_t min, size_t max,
    size_t *out) {
	size_t n;
	if (!hp_conf_parse_size(v, vlen, &n) || n < min || n > max)
		return false;
	*out = n;
	return true;
}

/*
 * The keys: one table drives the parser, the defaults (each default is
 * parsed from its text here), "hugepreload --help", hugepreload(7) and
 * docs/reference.md (tools/gendoc.c), so none of them can drift.
 */
typedef enum {
	K_SIZE,          /* size_t, bytes with k/m/g/t, in [min, max] */
	K_SIZE_OFF,      /* the same, or "off" (SIZE_MAX) */
	K_LONG,          /* long, in [min, max] */
	K_BOOL,          /* true|false */
	K_WORD,          /* int: the index of the value in words */
	K_PAGE,          /* size_t: 2m (HP_HUGE) or 1g (HP_GIB) */
	K_STRAND,        /* strand_limit and strand_pct: bytes or 0%..100% */
	K_PATH,          /* char[256], "" when unset */
} kind_t;

#define O(name, kind, member, min, max, words, values, dflt, shown, help) \
	{name, kind, offsetof(hp_conf_t, member), min, max, words, values, \
	 dflt, shown, help}
const hp_option_t hp_options[] = {
    O("large_threshold", K_SIZE, large_threshold, HP_THRESHOLD_MIN,
      HP_THRESHOLD_MAX, NULL, "bytes (k/m/g/t), 16k..1t", "1m", "1m",
      "requests of at least this size go to the huge class"),
    O("backing", K_WORD, backing, 0, 0, backing_names,
      "auto|hugetlb|thp|none", "auto", "auto", "where the backing chain "
      "hugetlb pool -> THP -> 4 KiB starts; hugetlb warns when the pool is "
      "empty; none keeps the huge class on 4 KiB pages"),
    O("hugetlb_size", K_PAGE, hugetlb_page, 0, 0, NULL, "2m|1g", "2m", "2m",
      "which hugetlbfs pool"),
    O("collapse", K_BOOL, collapse, 0, 0, NULL, "true|false", "false",
      "false", "MADV_COLLAPSE new THP pages when first used"),
    O("decay_ms", K_LONG, decay_ms, -1, HP_DECAY_MAX, NULL,
      "-1 (never), 0..3600000", "5000", "5000", "how long free memory "
      "stays before it goes back to the kernel (both classes)"),
    O("reserve", K_SIZE, reserve, HP_RESERVE_MIN, HP_RESERVE_MAX, NULL,
      "bytes, 1g..64t", "1t", "1t",
      "address space reserved for the huge class"),
    O("strand_limit", K_STRAND, strand_limit, 0, 100, NULL,
      "bytes (k/m/g/t), or 0%..100%", "25%", "25%", "stranded bytes "
      "allowed (free, resident, in huge pages with live data) before the "
      "emptiest huge pages are split; a share of the huge class's resident "
      "bytes"),
    O("lifetime", K_WORD, lifetime, 0, 0, lifetime_names, "off|learn|replay",
      "learn", "learn", "learn which allocation sites are long-lived from "
      "sampled call stacks and send their allocations to the huge class "
      "whatever their size; replay takes the decisions of lifetime_profile "
      "only"),
    O("lifetime_sample", K_SIZE, lifetime_sample, HP_LSAMPLE_MIN,
      HP_LSAMPLE_MAX, NULL, "bytes, 4k..1g", "512k", "512k", "one "
      "allocation is sampled (unwound) per this many bytes, on average"),
    O("lifetime_sample_rate", K_LONG, lifetime_sample_rate, 0,
      HP_LRATE_MAX, NULL, "0 (no limit), 1..1000000", "1000", "1000", "at "
      "most this many samples a second in each thread, after a first "
      "burst of ten seconds' worth: a thread that allocates faster has "
      "its interval stretched (doubled while it has no sample left, halved "
      "again when it slows), so that unwinding stays a small share of its "
      "time"),
    O("lifetime_ms", K_LONG, lifetime_ms, 1, HP_LMS_MAX, NULL, "1..3600000",
      "250", "250", "a sampled object that lives this long is long-lived"),
    O("lifetime_record", K_PATH, lifetime_record, 0, 0, NULL, "a path", "",
      "none", "where the site table is written at exit (text, editable); "
      "%p becomes the process id"),
    O("lifetime_profile", K_PATH, lifetime_profile, 0, 0, NULL, "a path",
      "", "none", "a site table loaded at start-up, so placement is right "
      "from the first allocation"),
    O("long_lived", K_WORD, long_lived, 0, 0, long_lived_names,
      "jemalloc|mimalloc", "jemalloc", "jemalloc", "what serves the small "
      "objects of long-lived sites, on huge pages: the huge class's "
      "jemalloc arena, or mimalloc heaps in arenas of their own (Debian's "
      "libmimalloc, loaded at the first promotion)"),
    O("maintain_ms", K_LONG, maintain_ms, HP_MAINT_MIN, HP_MAINT_MAX, NULL,
      "10..3600000", "1000", "1000", "how often the maintenance thread "
      "refreshes the live counters, drives the huge class's decay and "
      "enforces strand_limit; its tenth pass starts jemalloc's background "
      "threads"),
    O("mmap_threshold", K_SIZE_OFF, mmap_threshold, HP_MMAP_MIN,
      HP_MMAP_MAX, NULL, "bytes, 2m..1t, or off", "8m", "8m", "the "
      "program's own anonymous mappings of at least this size are advised "
      "MADV_HUGEPAGE (private ones also placed 2 MiB-aligned); they stay "
      "ordinary mappings"),
    O("stats_print", K_BOOL, stats_print, 0, 0, NULL, "true|false", "false",
      "false", "print the counters at exit"),
    O("stats_format", K_WORD, stats_format, 0, 0, format_names,
      "text|json|prometheus", "text", "text",
      "format of the counters printed at exit"),
    O("stats_file", K_PATH, stats_file, 0, 0, NULL, "a path", "", "stderr",
      "where the counters go at exit; %p becomes the process id"),
    O("stats_live", K_BOOL, stats_live, 0, 0, NULL, "true|false", "true",
      "true", "keep the counters where \"hugepreload stat PID\" reads them "
      "(a page of the process's memory)"),
    O("verbose", K_BOOL, verbose, 0, 0, NULL, "true|false", "false", "false",
      "one start-up line with the policy and the backing available"),
    {NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL}};

HP_STATIC_ASSERT(sizeof ((hp_conf_t *)0)->stats_file ==
    sizeof ((hp_conf_t *)0)->lifetime_record &&
    sizeof ((hp_conf_t *)0)->stats_file ==
    sizeof ((hp_conf_t *)0)->lifetime_profile, "one size for every path");

/* The value v of option o into c; false (and c untouched) if it is not
 * one of the option's values. */
static bool set_value(hp_conf_t *c, const hp_option_t *o, const char *v,
    size_t vlen) {
	char *f = (char *)c + o->offset;
	size_t n;
	long l;
	int w;
	switch ((kind_t)o->kind) {
	case K_SIZE_OFF:
		if (is(v, vlen, "off")) {
			*(size_t *)f = SIZE_MAX;
			return true;
		}
		/* fall through */
	case K_SIZE:
		return size_in(v, vlen, (size_t)o->min, (size_t)o->max,
		    (size_t *)f);
	case K_LONG:
		if (!parse_long(v, vlen, &l) || l < o->min || l > o->max)
			return false;
		*(long *)f = l;
		return true;
	case K_BOOL:
		return boolean(v, vlen, (bool *)f);
	case K_WORD:
		if ((w = word(v, vlen, o->words)) < 0)
			return false;
		*(int *)f = w;
		return true;
	case K_PAGE:
		if (!is(v, vlen, "2m") && !is(v, vlen, "1g"))
			return false;
		*(size_t *)f = v[0] == '2' ? HP_HUGE : HP_GIB;
		return true;
	case K_STRAND:
		if (vlen > 1 && v[vlen - 1] == '%' &&
		    hp_conf_parse_size(v, vlen - 1, &n) && n <= 100 &&
		    v[vlen - 2] >= '0' && v[vlen - 2] <= '9') {
			c->strand_pct = true;
		} else if (hp_conf_parse_size(v, vlen, &n)) {
			c->strand_pct = false;
		} else {
			return false;
		}
		c->strand_limit = n;
		return true;
	case K_PATH:
		return vlen == 0 ? (*f = '\0', true) :
		    path(v, vlen, f, sizeof c->stats_file);
	}
	return false;
}

static void set(hp_conf_t *c, const char *k, size_t klen, const char *v,
    size_t vlen, hp_conf_report_t rep, void *ctx) {
	for (const hp_option_t *o = hp_options; o->name != NULL; o++) {
		if (!is(k, klen, o->name))
			continue;
		/* An empty path is not a value: "key:" is a mistake. */
		if ((o->kind == K_PATH && vlen == 0) || !set_value(c, o, v, vlen))
			report(rep, ctx, "bad value '%.*s' for %s in "
			    "HUGEPRELOAD_CONF; using the default %s (%s)",
			    (int)vlen, v, o->name, o->shown, o->values);
		return;
	}
	if (is(k, klen, "stats_dir"))
		report(rep, ctx, "stats_dir in HUGEPRELOAD_CONF is gone: live "
		    "counters are in the process's memory (stats_live:false turns "
		    "them off); ignored");
	else
		report(rep, ctx, "unknown key '%.*s' in HUGEPRELOAD_CONF; "
		    "ignored", (int)klen, k);
}

/* Every key at its default, parsed from the table's text. */
void hp_conf_defaults(hp_conf_t *c) {
	memset(c, 0, sizeof *c);
	for (const hp_option_t *o = hp_options; o->name != NULL; o++) {
		bool ok = set_value(c, o, o->dflt, strlen(o->dflt));
		hp_assert(ok);
		(void)ok;
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
		hp_fmt(mmap_t, sizeof mmap_t, "%zu", c->mmap_threshold);
	return hp_fmt(buf, n, "large_threshold:%zu,backing:%s,hugetlb_size:%s,"
	    "collapse:%s,decay_ms:%ld,reserve:%zu,strand_limit:%zu%s,"
	    "lifetime:%s,lifetime_sample:%zu,lifetime_sample_rate:%ld,"
	    "lifetime_ms:%ld,maintain_ms:%ld,"
	    "long_lived:%s,mmap_threshold:%s",
	    c->large_threshold, backing_names[c->backing],
	    c->hugetlb_page == HP_GIB ? "1g" : "2m", c->collapse ? "true" :
	    "false", c->decay_ms, c->reserve, c->strand_limit,
	    c->strand_pct ? "%" : "", lifetime_names[c->lifetime],
	    c->lifetime_sample, c->lifetime_sample_rate, c->lifetime_ms,
	    c->maintain_ms,
	    long_lived_names[c->long_lived], mmap_t);
}
