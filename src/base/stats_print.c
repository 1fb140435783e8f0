/*
 * The counters as text, JSON or Prometheus exposition format. Used by the
 * library at exit and by "hugepreload stat"; writes through a callback and
 * never allocates.
 */
#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "base/base.h"
#include "base/escape.h"
#include "base/stats_print.h"

typedef struct {
	const char *name;       /* JSON key; Prometheus hugepreload_<name> */
	size_t off;
	bool counter;           /* monotonic: Prometheus _total, TYPE counter */
	const char *help;
} field_t;

#define F(n, m, c, h) {n, offsetof(hp_arena_stats_t, m), c, h}
static const field_t fields[] = {
    F("live_bytes", live_bytes, false, "Bytes allocated and not freed."),
    F("allocations", nmalloc, true, "Allocations made."),
    F("frees", ndalloc, true, "Allocations freed."),
    F("mapped_bytes", mapped_bytes, false, "Bytes of address space backed "
      "by memory."),
    F("resident_bytes", resident_bytes, false, "Bytes resident in memory: "
      "in_use + stranded + free_resident + metadata (huge class: as the "
      "kernel holds them; small class: as jemalloc counts them)."),
    F("in_use_bytes", in_use_bytes, false, "Resident bytes jemalloc holds: "
      "live objects and its free space among them."),
    F("free_resident_bytes", free_resident_bytes, false, "Resident free "
      "bytes on huge pages with nothing in use, not yet given back."),
    F("resident_huge_bytes", resident_huge_bytes, false, "Resident bytes on "
      "huge pages (THP mapped whole, or hugetlbfs), as the kernel maps "
      "them."),
    F("hugetlb_2m_bytes", hugetlb_2m_bytes, false, "Mapped bytes on 2 MiB "
      "hugetlbfs pages."),
    F("hugetlb_1g_bytes", hugetlb_1g_bytes, false, "Mapped bytes on 1 GiB "
      "hugetlbfs pages."),
    F("thp_bytes", thp_bytes, false, "Mapped bytes advised MADV_HUGEPAGE."),
    F("small_page_bytes", small_page_bytes, false, "Mapped bytes on 4 KiB "
      "pages."),
    F("huge_pages_full", pages_full, false, "Huge pages with no free part."),
    F("huge_pages_partial", pages_partial, false, "Huge pages holding live "
      "and free parts."),
    F("huge_pages_empty_resident", pages_empty_resident, false, "Huge pages "
      "with no live part, still resident."),
    F("huge_pages_released", pages_released, true, "Huge pages given back "
      "to the kernel whole."),
    F("huge_pages_split", pages_split, true, "Huge pages split to give back "
      "their free parts (strand_limit)."),
    F("stranded_bytes", stranded_bytes, false, "Free bytes kept resident "
      "by huge pages that still hold bytes in use."),
    F("fallbacks_pool_empty", fallback_pool_empty, true, "Regions that "
      "wanted hugetlbfs pages and found the pool empty."),
    F("fallbacks_thp_off", fallback_thp_off, true, "Regions that wanted "
      "THP with THP off."),
    F("fallbacks_mmap_failed", fallback_mmap_failed, true, "Huge-class "
      "requests that could not be mapped and went to 4 KiB pages."),
    F("purges_refused", purges_refused, true, "Partial purges of a huge page "
      "not done, so as not to split it."),
    F("hooks_refused", hooks_refused, true, "Extent hook calls refused: "
      "their range was not the library's own."),
    F("metadata_bytes", metadata_bytes, false, "The allocator's own records "
      "for the arena, resident, on 4 KiB pages: jemalloc's base (radix "
      "tree, bins; extent descriptors are counted apart); for the "
      "long-lived class, its table of block sizes (mimalloc's records are "
      "in its pages)."),
};
#define NFIELDS (sizeof fields / sizeof *fields)

/* Process-wide groups, offsets in hp_stats_t. Lifetime learning
 * (lifetime:learn|replay): */
#define L(name, member, counter, help) \
	{name, offsetof(hp_stats_t, lifetime.member), counter, help}
static const field_t lfields[] = {
    L("sites", sites, true, "Allocation sites seen (sampled, or from a "
      "profile)."),
    L("sites_promoted", sites_promoted, false, "Sites whose allocations go "
      "to the huge class now."),
    L("samples", samples, true, "Allocations sampled (call stack unwound)."),
    L("promotions", promotions, true, "Sites promoted to the huge class."),
    L("demotions", demotions, true, "Sites demoted back to the small class."),
    L("placed", placed, true, "Allocations placed on huge pages by a "
      "site's decision."),
    L("placed_bytes", placed_bytes, true, "Bytes placed on huge pages by a "
      "site's decision."),
    L("sites_dropped", sites_dropped, true, "Samples not kept: the site "
      "table, or the table of live samples, was full."),
    L("wrappers", wrappers, false, "Keys of malloc wrappers (a call that "
      "many callers reach, with lifetimes of both kinds) whose callers are "
      "told apart: each caller's key is decided alone."),
    L("wrapped_sites", wrapped_sites, false, "Sites behind those wrappers."),
    L("caught_up", caught_up, true, "2 MiB ranges of the small class that a "
      "site filled while it was learned, collapsed onto huge pages once it "
      "was promoted (MADV_COLLAPSE)."),
    L("caught_up_failed", caught_up_failed, true, "Such ranges the kernel "
      "did not collapse."),
    L("caught_up_skipped", caught_up_skipped, true, "Such ranges passed "
      "over: more than 8 pages of them not resident, not jemalloc's data, "
      "or jemalloc not retaining its address space."),
    L("caught_up_dropped", caught_up_dropped, true, "Such ranges not "
      "queued: the queue (3072 ranges) was full."),
};

/* jemalloc's extent descriptors (edata.c): */
#define D(name, member, counter, help) \
	{name, offsetof(hp_stats_t, descriptors.member), counter, help}
static const field_t dfields[] = {
    D("live", live, false, "jemalloc extent descriptors in use."),
    D("resident_bytes", resident_bytes, false, "Resident bytes of the pages "
      "holding extent descriptors."),
    D("released_bytes", released_bytes, true, "Bytes of descriptor pages "
      "given back to the kernel."),
    D("fallbacks", fallbacks, true, "Descriptors taken from jemalloc's own "
      "cache, which keeps them resident."),
};

/* The maintenance thread (core/maint.c), as of its pass before the last: */
#define M(name, member, counter, help) \
	{name, offsetof(hp_stats_t, maintenance.member), counter, help}
static const field_t mfields[] = {
    M("passes", passes, true, "Passes of the maintenance thread (decay, "
      "descriptor trim, refresh, strand_limit)."),
    M("region_lock_ns", region_lock_ns, true, "Nanoseconds the passes held "
      "the huge class's page lock, which its allocations can wait on."),
    M("region_lock_max_ns", region_lock_max_ns, false, "Nanoseconds the "
      "longest pass held it."),
    M("interval_ms", interval_ms, false, "Time between passes "
      "(maintain_ms)."),
};

/* The program's own mappings (mmap.c): */
#define P(name, member, counter, help) \
	{name, offsetof(hp_stats_t, mmap.member), counter, help}
static const field_t pfields[] = {
    P("mappings", mappings, true, "The program's anonymous mappings placed "
      "2 MiB-aligned and advised MADV_HUGEPAGE (mmap_threshold)."),
    P("advised_bytes", advised_bytes, true, "Their bytes."),
    P("reservations", reservations, true, "Of them, PROT_NONE reservations "
      "(memory committed in them later keeps the advice)."),
    P("fixed_advised", fixed_advised, true, "MAP_FIXED mappings made inside "
      "those reservations, advised again."),
    P("unaligned", unaligned, true, "Mappings made as asked, unaligned: no "
      "address space for the alignment."),
    P("shared", shared, true, "The program's anonymous MAP_SHARED mappings "
      "(shared memory) advised MADV_HUGEPAGE; the kernel places them, on "
      "huge pages where shmem_enabled allows."),
    P("shared_bytes", shared_bytes, true, "Their bytes."),
};

typedef struct {
	const char *prefix;          /* text and Prometheus names; JSON key */
	const field_t *f;
	size_t n;
} group_t;
static const group_t groups[] = {
    {"lifetime", lfields, sizeof lfields / sizeof *lfields},
    {"descriptors", dfields, sizeof dfields / sizeof *dfields},
    {"maintenance", mfields, sizeof mfields / sizeof *mfields},
    {"mmap", pfields, sizeof pfields / sizeof *pfields},
};
#define NGROUPS (sizeof groups / sizeof *groups)

static uint64_t lget(const hp_stats_t *st, const field_t *f) {
	uint64_t v;
	memcpy(&v, (const char *)st + f->off, sizeof v);
	return v;
}

static uint64_t get(const hp_arena_stats_t *a, const field_t *f) {
	uint64_t v;
	memcpy(&v, (const char *)a + f->off, sizeof v);
	return v;
}

typedef struct {
	hp_out_t out;
	void *ctx;
} sink_t;

static void vput(hp_out_t out, void *ctx, const char *fmt, va_list ap) {
	char buf[512];
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	if (n > 0)
		out(ctx, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void hp_outf(hp_out_t out, void *ctx, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vput(out, ctx, fmt, ap);
	va_end(ap);
}

static void put(sink_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(sink_t *s, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vput(s->out, s->ctx, fmt, ap);
	va_end(ap);
}

/* A string of the page (the policy), escaped for the format (escape.h):
 * the page is any process's, and its bytes must not reach a terminal, a
 * JSON document or a label as they are. */
static void escaped(sink_t *s, hp_esc_t how, const char *str) {
	size_t len = strlen(str);
	while (len > 0) {
		char buf[256];
		size_t n, took = hp_escape(how, str, len, buf, sizeof buf, &n);
		if (took == 0)           /* cannot be: a character's escape */
			break;           /* is at most 10 bytes */
		s->out(s->ctx, buf, n);
		str += took;
		len -= took;
	}
}

/* The huge class's resident bytes in its own range (less its metadata,
 * which is on jemalloc's pages). */
/* Where wrapper w is: its module and offset, or its address. */
static void wrapper_at(sink_t *s, hp_esc_t how, const hp_stats_t *st,
    const hp_stats_meta_t *m, unsigned w) {
	if (m->wrapper_at[w][0] != '\0')
		escaped(s, how, m->wrapper_at[w]);
	else
		put(s, "%#" PRIxPTR, st->lifetime.wrapper[w].addr);
}

/* One line of /proc/PID/maps: its range, offset and path (or ""). */
static bool maps_line(const char *l, const char *end, uintptr_t *lo,
    uintptr_t *hi, uint64_t *off, const char **path, size_t *plen) {
	char *e;
	*lo = (uintptr_t)strtoull(l, &e, 16);
	if (e >= end || *e != '-')
		return false;
	*hi = (uintptr_t)strtoull(e + 1, &e, 16);
	/* perms, then the offset */
	while (e < end && *e == ' ')
		e++;
	while (e < end && *e != ' ')
		e++;
	*off = strtoull(e, &e, 16);
	/* dev, inode, then the path after spaces */
	for (int field = 0; field < 2; field++) {
		while (e < end && *e == ' ')
			e++;
		while (e < end && *e != ' ')
			e++;
	}
	while (e < end && *e == ' ')
		e++;
	*path = e;
	*plen = (size_t)(end - e);
	return true;
}

void hp_stats_wrapper_names(const hp_stats_t *st, int64_t pid,
    hp_stats_meta_t *m) {
	memset(m->wrapper_at, 0, sizeof m->wrapper_at);
	bool any = false;
	for (unsigned w = 0; w < HP_WRAPPERS_SHOWN; w++)
		any |= st->lifetime.wrapper[w].addr != 0;
	if (!any)
		return;
	const size_t cap = (size_t)4 << 20;
	char path[64];
	snprintf(path, sizeof path, "/proc/%" PRId64 "/maps", pid);
	char *buf = hp_os_mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (buf == MAP_FAILED)
		return;
	ssize_t n = hp_os_read_file(path, buf, cap);
	for (unsigned w = 0; n > 0 && w < HP_WRAPPERS_SHOWN; w++) {
		uintptr_t a = st->lifetime.wrapper[w].addr, lo, hi;
		uint64_t off;
		const char *p, *mod = NULL;
		size_t plen, mlen = 0;
		if (a == 0)
			continue;
		/* The module holding a; then its mapping at offset 0, whose
		 * start is the module's base, as dl_iterate_phdr's load bias
		 * is where its first segment starts at 0. */
		for (int pass = 0; pass < 2; pass++)
			for (const char *l = buf; l < buf + n;) {
				const char *e = memchr(l, '\n', (size_t)(buf + n - l));
				e = e ? e : buf + n;
				if (maps_line(l, e, &lo, &hi, &off, &p, &plen) &&
				    plen > 0 && *p == '/') {
					if (pass == 0 && a >= lo && a < hi) {
						mod = p, mlen = plen;
						break;
					}
					if (pass == 1 && off == 0 && plen == mlen &&
					    memcmp(p, mod, plen) == 0) {
						snprintf(m->wrapper_at[w],
						    sizeof m->wrapper_at[w], "%.*s+%#lx",
						    (int)plen, p, (unsigned long)(a - lo));
						break;
					}
				}
				l = e + 1;
			}
		if (mod == NULL)
			snprintf(m->wrapper_at[w], sizeof m->wrapper_at[w], "?+%#lx",
			    (unsigned long)a);
	}
	hp_os_munmap(buf, cap);
}

static uint64_t region_resident(const hp_stats_t *st) {
	if (st->narenas < 2)
		return 0;
	const hp_arena_stats_t *h = &st->arena[1];
	return h->resident_bytes - h->metadata_bytes;
}

static void text(sink_t *s, const hp_stats_t *st, const hp_stats_meta_t *m) {
	put(s, "hugepreload stats: pid %" PRId64 "%s, refreshed %.1f s %s\n",
	    st->pid, m->alive ? "" : " (not running)", m->age_s,
	    m->alive ? "ago" : "before it ended");
	put(s, "policy ");
	escaped(s, HP_ESC_TEXT, st->policy);
	put(s, "\n");
	put(s, "%-28s", "");
	for (uint32_t a = 0; a < st->narenas; a++)
		put(s, "%16s", st->name[a]);
	put(s, "\n");
	for (size_t i = 0; i < NFIELDS; i++) {
		put(s, "%-28s", fields[i].name);
		for (uint32_t a = 0; a < st->narenas; a++)
			put(s, "%16" PRIu64, get(&st->arena[a], &fields[i]));
		put(s, "\n");
	}
	for (int b = 0; b < HP_HIST_BUCKETS; b++) {
		put(s, "huge_pages_live_%3d-%3d%%     ", b * 10, b * 10 + 10);
		for (uint32_t a = 0; a < st->narenas; a++)
			put(s, "%16" PRIu64, st->arena[a].live_hist[b]);
		put(s, "\n");
	}
	put(s, "strand_limit_bytes %" PRIu64 "\n", st->strand_limit_bytes);
	if (m->smaps) {
		put(s, "smaps of the huge class's range: resident %" PRIu64
		    ", on huge pages %" PRIu64 " (counted: %" PRIu64 ", %" PRIu64
		    ")\n", m->smaps_resident, m->smaps_huge, region_resident(st),
		    st->narenas > 1 ? st->arena[1].resident_huge_bytes : 0);
		put(s, "pagemap of jemalloc's %" PRIu32 " mappings: resident %"
		    PRIu64 " (counted for the small class%s: %" PRIu64 ")\n",
		    st->small_nranges, m->smaps_small_resident, st->small_kernel ?
		    "" : ", by jemalloc", st->arena[0].resident_bytes);
		put(s, "smaps of the program's own advised mappings: resident %"
		    PRIu64 ", on huge pages %" PRIu64 "\n", m->smaps_mmap_resident,
		    m->smaps_mmap_huge);
		if (st->narenas > 2)
			put(s, "smaps of the long-lived class's range: resident %"
			    PRIu64 ", on huge pages %" PRIu64 " (counted: %" PRIu64
			    ", %" PRIu64 ")\n", m->smaps_ll_resident, m->smaps_ll_huge,
			    st->arena[2].resident_bytes,
			    st->arena[2].resident_huge_bytes);
	}
	for (size_t g = 0; g < NGROUPS; g++)
		for (size_t i = 0; i < groups[g].n; i++) {
			char name[64];
			snprintf(name, sizeof name, "%s_%s", groups[g].prefix,
			    groups[g].f[i].name);
			put(s, "%-28s%16" PRIu64 "\n", name, lget(st, &groups[g].f[i]));
		}
	for (unsigned w = 0; w < HP_WRAPPERS_SHOWN; w++)
		if (st->lifetime.wrapper[w].addr != 0) {
			put(s, "lifetime_wrapper            %16" PRIu32 " sites, "
			    "level %" PRIu32 ", at ", st->lifetime.wrapper[w].sites,
			    st->lifetime.wrapper[w].level);
			wrapper_at(s, HP_ESC_TEXT, st, m, w);
			put(s, "\n");
		}
}

static void json(sink_t *s, const hp_stats_t *st, const hp_stats_meta_t *m) {
	put(s, "{\"pid\": %" PRId64 ", \"alive\": %s, \"refreshed_unix_ns\": %"
	    PRIu64 ", \"strand_limit_bytes\": %" PRIu64 ", \"policy\": \"",
	    st->pid, m->alive ? "true" : "false", st->updated_ns,
	    st->strand_limit_bytes);
	escaped(s, HP_ESC_JSON, st->policy);
	put(s, "\", \"arenas\": {");
	for (uint32_t a = 0; a < st->narenas; a++) {
		put(s, "%s\"%s\": {", a ? ", " : "", st->name[a]);
		for (size_t i = 0; i < NFIELDS; i++)
			put(s, "\"%s\": %" PRIu64 ", ", fields[i].name,
			    get(&st->arena[a], &fields[i]));
		put(s, "\"huge_pages_by_live_tenth\": [");
		for (int b = 0; b < HP_HIST_BUCKETS; b++)
			put(s, "%s%" PRIu64, b ? ", " : "", st->arena[a].live_hist[b]);
		put(s, "]}");
	}
	put(s, "}");
	if (m->smaps)
		put(s, ", \"kernel\": {\"huge_range_resident_bytes\": %" PRIu64
		    ", \"huge_range_huge_bytes\": %" PRIu64
		    ", \"huge_counted_resident_bytes\": %" PRIu64
		    ", \"small_mappings\": %" PRIu32 ", "
		    "\"small_resident_bytes\": %" PRIu64 ", "
		    "\"mmap_resident_bytes\": %" PRIu64 ", "
		    "\"mmap_huge_bytes\": %" PRIu64 ", "
		    "\"long_lived_range_resident_bytes\": %" PRIu64 ", "
		    "\"long_lived_range_huge_bytes\": %" PRIu64 "}",
		    m->smaps_resident, m->smaps_huge, region_resident(st),
		    st->small_nranges, m->smaps_small_resident,
		    m->smaps_mmap_resident, m->smaps_mmap_huge,
		    m->smaps_ll_resident, m->smaps_ll_huge);
	for (size_t g = 0; g < NGROUPS; g++) {
		put(s, ", \"%s\": {", groups[g].prefix);
		for (size_t i = 0; i < groups[g].n; i++)
			put(s, "%s\"%s\": %" PRIu64, i ? ", " : "",
			    groups[g].f[i].name, lget(st, &groups[g].f[i]));
		if (groups[g].f == lfields) {
			put(s, ", \"wrapper\": [");
			for (unsigned w = 0, n = 0; w < HP_WRAPPERS_SHOWN; w++)
				if (st->lifetime.wrapper[w].addr != 0) {
					put(s, "%s{\"sites\": %" PRIu32 ", \"level\": %"
					    PRIu32 ", \"at\": \"", n++ ? ", " : "",
					    st->lifetime.wrapper[w].sites,
					    st->lifetime.wrapper[w].level);
					wrapper_at(s, HP_ESC_JSON, st, m, w);
					put(s, "\"}");
				}
			put(s, "]");
		}
		put(s, "}");
	}
	put(s, "}\n");
}

static void prom(sink_t *s, const hp_stats_t *st, const hp_stats_meta_t *m) {
	put(s, "# HELP hugepreload_info The process and its policy.\n"
	    "# TYPE hugepreload_info gauge\nhugepreload_info{pid=\"%" PRId64
	    "\",policy=\"", st->pid);
	escaped(s, HP_ESC_PROM, st->policy);
	put(s, "\"} 1\n");
	put(s, "# HELP hugepreload_refresh_timestamp_seconds When the counters "
	    "were last refreshed.\n# TYPE hugepreload_refresh_timestamp_seconds "
	    "gauge\nhugepreload_refresh_timestamp_seconds{pid=\"%" PRId64 "\"} "
	    "%.3f\n", st->pid, (double)st->updated_ns / 1e9);
	put(s, "# HELP hugepreload_strand_limit_bytes Stranded bytes allowed "
	    "before huge pages are split.\n# TYPE hugepreload_strand_limit_bytes "
	    "gauge\nhugepreload_strand_limit_bytes{pid=\"%" PRId64 "\"} %" PRIu64
	    "\n", st->pid, st->strand_limit_bytes);
	for (size_t i = 0; i < NFIELDS; i++) {
		const char *suffix = fields[i].counter ? "_total" : "";
		put(s, "# HELP hugepreload_%s%s %s\n# TYPE hugepreload_%s%s %s\n",
		    fields[i].name, suffix, fields[i].help, fields[i].name, suffix,
		    fields[i].counter ? "counter" : "gauge");
		for (uint32_t a = 0; a < st->narenas; a++)
			put(s, "hugepreload_%s%s{pid=\"%" PRId64 "\",arena=\"%s\"} %"
			    PRIu64 "\n", fields[i].name, suffix, st->pid, st->name[a],
			    get(&st->arena[a], &fields[i]));
	}
	put(s, "# HELP hugepreload_huge_pages_by_live_fraction Huge pages with "
	    "live data, by the share of it.\n# TYPE "
	    "hugepreload_huge_pages_by_live_fraction gauge\n");
	for (uint32_t a = 0; a < st->narenas; a++)
		for (int b = 0; b < HP_HIST_BUCKETS; b++)
			put(s, "hugepreload_huge_pages_by_live_fraction{pid=\"%" PRId64
			    "\",arena=\"%s\",live=\"%.1f-%.1f\"} %" PRIu64 "\n", st->pid,
			    st->name[a], b / 10.0, (b + 1) / 10.0,
			    st->arena[a].live_hist[b]);
	if (m->smaps && st->narenas > 1) {
		put(s, "# HELP hugepreload_kernel_resident_bytes The kernel's "
		    "resident bytes of the arena's mappings: the huge class's range "
		    "(/proc/PID/smaps); for the small class, jemalloc's own "
		    "mappings (/proc/PID/pagemap).\n# TYPE hugepreload_kernel_resident_bytes gauge\n");
		put(s, "hugepreload_kernel_resident_bytes{pid=\"%" PRId64 "\","
		    "arena=\"%s\"} %" PRIu64 "\n", st->pid, st->name[0],
		    m->smaps_small_resident);
		put(s, "hugepreload_kernel_resident_bytes{pid=\"%" PRId64 "\","
		    "arena=\"%s\"} %" PRIu64 "\n", st->pid, st->name[1],
		    m->smaps_resident);
		if (st->narenas > 2)
			put(s, "hugepreload_kernel_resident_bytes{pid=\"%" PRId64
			    "\",arena=\"%s\"} %" PRIu64 "\n", st->pid, st->name[2],
			    m->smaps_ll_resident);
		put(s, "# HELP hugepreload_kernel_huge_bytes The kernel's bytes on "
		    "huge pages in the huge class's and the long-lived class's ranges (/proc/PID/smaps).\n# TYPE "
		    "hugepreload_kernel_huge_bytes gauge\nhugepreload_kernel_huge_bytes"
		    "{pid=\"%" PRId64 "\",arena=\"%s\"} %" PRIu64 "\n", st->pid,
		    st->name[1], m->smaps_huge);
		if (st->narenas > 2)
			put(s, "hugepreload_kernel_huge_bytes{pid=\"%" PRId64 "\","
			    "arena=\"%s\"} %" PRIu64 "\n", st->pid, st->name[2],
			    m->smaps_ll_huge);
		put(s, "# HELP hugepreload_kernel_mmap_resident_bytes The kernel's "
		    "resident bytes of the program's own advised anonymous "
		    "mappings (/proc/PID/smaps).\n# TYPE "
		    "hugepreload_kernel_mmap_resident_bytes gauge\n"
		    "hugepreload_kernel_mmap_resident_bytes{pid=\"%" PRId64 "\"} %"
		    PRIu64 "\n# HELP hugepreload_kernel_mmap_huge_bytes Of them, on "
		    "huge pages.\n# TYPE hugepreload_kernel_mmap_huge_bytes gauge\n"
		    "hugepreload_kernel_mmap_huge_bytes{pid=\"%" PRId64 "\"} %"
		    PRIu64 "\n", st->pid, m->smaps_mmap_resident, st->pid,
		    m->smaps_mmap_huge);
	}
	for (size_t g = 0; g < NGROUPS; g++)
		for (size_t i = 0; i < groups[g].n; i++) {
			const field_t *f = &groups[g].f[i];
			const char *p = groups[g].prefix;
			const char *suffix = f->counter ? "_total" : "";
			put(s, "# HELP hugepreload_%s_%s%s %s\n# TYPE "
			    "hugepreload_%s_%s%s %s\nhugepreload_%s_%s%s{pid=\"%"
			    PRId64 "\"} %" PRIu64 "\n", p, f->name, suffix, f->help, p,
			    f->name, suffix, f->counter ? "counter" : "gauge", p,
			    f->name, suffix, st->pid, lget(st, f));
		}
	put(s, "# HELP hugepreload_lifetime_wrapper_sites Sites behind a malloc "
	    "wrapper whose callers are told apart (the first %d wrappers).\n"
	    "# TYPE hugepreload_lifetime_wrapper_sites gauge\n",
	    HP_WRAPPERS_SHOWN);
	for (unsigned w = 0; w < HP_WRAPPERS_SHOWN; w++)
		if (st->lifetime.wrapper[w].addr != 0) {
			put(s, "hugepreload_lifetime_wrapper_sites{pid=\"%" PRId64
			    "\",level=\"%" PRIu32 "\",at=\"", st->pid,
			    st->lifetime.wrapper[w].level);
			wrapper_at(s, HP_ESC_PROM, st, m, w);
			put(s, "\"} %" PRIu32 "\n", st->lifetime.wrapper[w].sites);
		}
}

void hp_stats_format(const hp_stats_t *st, const hp_stats_meta_t *m,
    hp_format_t f, hp_out_t out, void *ctx) {
	sink_t s = {out, ctx};
	if (f == HP_FMT_JSON)
		json(&s, st, m);
	else if (f == HP_FMT_PROM)
		prom(&s, st, m);
	else
		text(&s, st, m);
}

/* A consistent copy of a stats page that its process may be writing. */
bool hp_stats_copy(const volatile hp_stats_t *shared, hp_stats_t *out) {
	for (int tries = 0; tries < 1000; tries++) {
		if (tries > 0)
			sched_yield();       /* the writer may be preempted */
		uint64_t s1 = __atomic_load_n(&shared->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		memcpy(out, (const void *)shared, sizeof *out);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&shared->seq, __ATOMIC_RELAXED) != s1)
			continue;
		/* The file is not to be trusted: bound every string, and keep
		 * arena names to [a-z0-9_] (they become keys and labels). */
		out->policy[sizeof out->policy - 1] = '\0';
		for (unsigned a = 0; a < HP_STATS_ARENAS; a++) {
			out->name[a][sizeof out->name[a] - 1] = '\0';
			for (char *c = out->name[a]; *c; c++)
				if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' &&
				    *c <= '9') || *c == '_'))
					*c = '_';
		}
		return out->magic == HP_STATS_MAGIC &&
		    out->version == HP_STATS_VERSION &&
		    out->narenas <= HP_STATS_ARENAS;
	}
	return false;
}

/* The arenas' names by their slot in the page: the small class, the huge
 * class, the long-lived class. The library names its arenas from here
 * (core/stats.c) and nowhere else, so no two slots of a page it writes
 * share a name. */
static const char *const arena_names[] = {"small", "huge0", "long_lived"};
#define NNAMES (sizeof arena_names / sizeof *arena_names)
_Static_assert(NNAMES <= HP_STATS_ARENAS, "a name for each slot of the page");

void hp_stats_name_arenas(hp_stats_t *st) {
	memset(st->name, 0, sizeof st->name);
	for (unsigned a = 0; a < st->narenas && a < NNAMES; a++)
		hp_fmt(st->name[a], sizeof st->name[a], "%s", arena_names[a]);
}

/* Whether every arena of a copied page has a name, none twice (as
 * hp_stats_copy left them). A page the library did not write may have
 * two alike: as JSON keys and Prometheus labels they would make one
 * series twice, which makes Prometheus refuse the whole textfile. If
 * not, why in why. */
bool hp_stats_names_ok(const hp_stats_t *st, char *why, size_t n) {
	for (unsigned a = 0; a < st->narenas && a < HP_STATS_ARENAS; a++) {
		if (st->name[a][0] == '\0') {
			hp_fmt(why, n, "arena %u has no name", a);
			return false;
		}
		for (unsigned b = 0; b < a; b++)
			if (strcmp(st->name[a], st->name[b]) == 0) {
				hp_fmt(why, n, "two arenas are named '%s'", st->name[a]);
				return false;
			}
	}
	return true;
}
