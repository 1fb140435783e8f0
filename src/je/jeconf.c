/*
 * jemalloc's options: what the library sets, and what becomes of the
 * user's own. The embedded jemalloc reads MALLOC_CONF (and the name of the
 * /etc/malloc.conf link) as Debian's does, so a user can tune it; it then
 * reads malloc_conf_2_conf_harder, which the library sets, so that the
 * settings below have the last word. Each of them that the user set to
 * something else is named on one line; every other option works as in
 * jemalloc (test/integ/test_malloc_conf.c runs programs under each one
 * that touches extents, arenas or purging).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "je/je.h"

/* The options the library decides, why, and the value it sets ("" for
 * one that depends on hp_conf). */
static const struct {
	const char *key, *value, *why;
} forced[] = {
	{"thp", "never", "the small class stays on 4 KiB pages"},
	{"hpa", "false", "jemalloc's huge-page allocator would put the small "
	    "class on huge pages"},
	{"zero_realloc", "free", "realloc(p, 0) frees p and returns NULL, as "
	    "in glibc"},
	{"dirty_decay_ms", "", "HUGEPRELOAD_CONF's decay_ms sets it, for both "
	    "classes"},
};
#define NFORCED (sizeof forced / sizeof forced[0])

static char harder[256];
static bool background_off, background_on;

/* What the library sets key to. */
static const char *value_of(size_t i, char *buf, size_t n,
    const hp_conf_t *c) {
	if (forced[i].value[0] != '\0')
		return forced[i].value;
	hp_fmt(buf, n, "%ld", c->decay_ms);
	return buf;
}

struct scan {
	const hp_conf_t *c;
	const char *source;
	/* The user's last value of each forced key, as jemalloc keeps the
	 * last one: a pointer into the source string, or NULL. */
	const char *v[NFORCED];
	size_t vlen[NFORCED];
	const char *vsrc[NFORCED];
	/* jemalloc stops reading a source at a malformed item. */
	bool stopped;
	/* The last valid narenas (0: default) and narenas_ratio (16.16). */
	unsigned narenas;
	const char *narenas_v, *narenas_src;
	size_t narenas_vlen;
	uint32_t ratio;
};

/* Without ctype.h: this runs before jemalloc, maybe before libc is set up. */
static bool is_blank(char c) {
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static bool is_digit(char c) {
	return c >= '0' && c <= '9';
}

/* The value of digit c (0-9, then a-z or A-Z from 10); 36 for no digit. */
static unsigned digit_of(char c) {
	if (is_digit(c))
		return (unsigned)(c - '0');
	if (c >= 'a' && c <= 'z')
		return (unsigned)(c - 'a') + 10;
	if (c >= 'A' && c <= 'Z')
		return (unsigned)(c - 'A') + 10;
	return 36;
}

/* A number as jemalloc 5.3 reads an unsigned option (malloc_strtoumax,
 * base 0, all of v): blanks, a sign, a 0x or 0 prefix, digits; "-1" is
 * the largest, and a step that wraps to a smaller number is its only
 * overflow. False where jemalloc says "Invalid conf value". */
static bool je_unsigned(const char *v, size_t vlen, uintmax_t *out) {
	const char *p = v, *e = v + vlen;
	while (p < e && is_blank(*p))
		p++;
	bool neg = p < e && *p == '-';
	if (p < e && (*p == '-' || *p == '+'))
		p++;
	unsigned base = 10;
	if (p < e && *p == '0') {
		if (p + 1 < e && p[1] >= '0' && p[1] <= '7') {
			base = 8;
			p++;
		} else if (p + 2 < e && (p[1] == 'x' || p[1] == 'X') &&
		    digit_of(p[2]) < 16) {
			base = 16;
			p += 2;
		} else {
			*out = 0;        /* a lone 0 ends the number */
			return p + 1 == e;
		}
	}
	const char *digits = p;
	uintmax_t n = 0;
	for (; p < e; p++) {
		unsigned d = digit_of(*p);
		uintmax_t before = n;
		if (d >= base || (n = n * base + d) < before)
			return false;
	}
	*out = neg ? (uintmax_t)0 - n : n;
	return p != digits;
}

/* narenas_ratio as jemalloc 5.3 reads it (fxp_parse): 16.16 fixed point,
 * digits and at most one point, an integer part below 65,536. */
static bool je_ratio(const char *v, size_t vlen, uint32_t *out) {
	const char *p = v, *e = v + vlen;
	uint32_t whole = 0;
	if (p == e || (*p != '.' && !is_digit(*p)))
		return false;
	for (; p < e && is_digit(*p); p++)
		if ((whole = whole * 10 + (uint32_t)(*p - '0')) >= 65536)
			return false;
	uint64_t frac = 0, div = 1;
	if (p < e && *p == '.') {
		if (++p == e || !is_digit(*p))
			return false;
		for (int i = 0; i < 14; i++) {   /* 14 digits, the rest ignored */
			frac *= 10;
			div *= 10;
			if (p < e && is_digit(*p))
				frac += (uint64_t)(*p++ - '0');
		}
		while (p < e && is_digit(*p))
			p++;
	}
	*out = (whole << 16) + (uint32_t)((frac << 16) / div);
	return p == e;
}

static void item(void *arg, const char *k, size_t klen, const char *v,
    size_t vlen) {
	struct scan *s = arg;
	for (size_t i = 0; i < klen; i++)
		if (digit_of(k[i]) == 36 && k[i] != '_')
			s->stopped = true;
	if (s->stopped)
		return;
	uintmax_t n;
	if (klen == 7 && memcmp(k, "narenas", 7) == 0 && (vlen == 7 &&
	    memcmp(v, "default", 7) == 0 ? (n = 0, true) :
	    je_unsigned(v, vlen, &n) && n >= 1)) {
		s->narenas = (unsigned)n;    /* jemalloc's cast */
		s->narenas_v = v;
		s->narenas_vlen = vlen;
		s->narenas_src = s->source;
	}
	if (klen == 13 && memcmp(k, "narenas_ratio", 13) == 0)
		je_ratio(v, vlen, &s->ratio);
	for (size_t i = 0; i < NFORCED; i++)
		if (strlen(forced[i].key) == klen &&
		    memcmp(forced[i].key, k, klen) == 0) {
			s->v[i] = v;
			s->vlen[i] = vlen;
			s->vsrc[i] = s->source;
		}
	/* As jemalloc reads it: true or false, anything else ignored. */
	if (klen == 17 && memcmp(k, "background_thread", 17) == 0) {
		bool off = vlen == 5 && memcmp(v, "false", 5) == 0;
		bool on = vlen == 4 && memcmp(v, "true", 4) == 0;
		if (on || off) {
			background_off = off;
			background_on = on;
		}
	}
}

/* An item without a colon (jemalloc reads an empty key, ":v", and goes
 * on). */
static void malformed(void *arg, const char *it, size_t len) {
	if (memchr(it, ':', len) == NULL)
		((struct scan *)arg)->stopped = true;
}

/*
 * Room for the library's arenas among jemalloc's arena indices
 * (HP_ARENA_INDICES): it makes them after jemalloc has started, so from
 * narenas:4093 on (and jemalloc's own clamp of larger values, -1 among
 * them, to 4094), or the default of 4 per CPU from 1,024 CPUs on, they
 * could not be made, and the huge class and lifetime learning were off.
 * jemalloc's oversize arena is counted even where oversize_threshold
 * turns it off. Appends narenas to the string jemalloc reads last, and
 * says so in one line. (percpu_arena raises narenas to the number of
 * CPUs again: beyond 4,092 CPUs this does not help.)
 */
static void leave_room(const struct scan *s, size_t *len) {
	const unsigned most = HP_ARENA_INDICES - 1 - HP_OWN_ARENAS;
	unsigned cpus = 0, want = s->narenas;
	if (want == 0) {
		/* jemalloc's default: cpus * ratio, in its 16.16 arithmetic,
		 * rounded to nearest; 1 on one CPU. */
		cpus = hp_os_cpus();
		uint32_t goal = (uint32_t)(((uint64_t)(uint32_t)(cpus << 16) *
		    s->ratio) >> 16);
		want = cpus < 2 ? 1 : (goal >> 16) + ((goal & 0xffff) >= 0x8000);
	}
	if (want <= most)
		return;
	int w = hp_fmt(harder + *len, sizeof harder - *len, ",narenas:%u",
	    most);
	if (w > 0 && (size_t)w < sizeof harder - *len)
		*len += (size_t)w;
	char was[64];
	if (s->narenas != 0) {
		/* The value as written, less the blanks jemalloc skips: what
		 * is left is a sign and digits. */
		const char *v = s->narenas_v;
		size_t n = s->narenas_vlen;
		for (; n > 0 && is_blank(*v); n--)
			v++;
		hp_fmt(was, sizeof was, "%s narenas:%.*s", s->narenas_src,
		    (int)(n < 24 ? n : 24), v);
	} else {
		hp_fmt(was, sizeof was, "jemalloc's default narenas (%u for "
		    "%u CPUs)", want, cpus);
	}
	hp_log("%s overridden by narenas:%u (of jemalloc's %u arena indices, "
	    "its oversize arena and the library's %u arenas need %u)", was,
	    most, HP_ARENA_INDICES, HP_OWN_ARENAS, 1 + HP_OWN_ARENAS);
}

const char *hp_jeconf(const hp_conf_t *c) {
	struct scan s = {.c = c, .ratio = 4u << 16};
	/* jemalloc's order: the link's name, then the environment (its
	 * secure_getenv: nothing for setuid programs). */
	char link[256];
	ssize_t n = hp_os_readlink("/etc/malloc.conf", link, sizeof link - 1);
	if (n > 0) {
		link[n] = '\0';
		s.source = "/etc/malloc.conf";
		hp_conf_each(link, item, malformed, &s);
	}
	s.source = "MALLOC_CONF";
	s.stopped = false;
	hp_conf_each(secure_getenv("MALLOC_CONF"), item, malformed, &s);

	size_t len = 0;
	for (size_t i = 0; i < NFORCED; i++) {
		char buf[32];
		const char *want = value_of(i, buf, sizeof buf, c);
		int w = hp_fmt(harder + len, sizeof harder - len, "%s%s:%s",
		    i ? "," : "", forced[i].key, want);
		if (w > 0 && (size_t)w < sizeof harder - len)
			len += (size_t)w;
		if (s.v[i] != NULL && (strlen(want) != s.vlen[i] ||
		    memcmp(want, s.v[i], s.vlen[i]) != 0))
			hp_log("%s %s:%.*s overridden by %s:%s (%s)", s.vsrc[i],
			    forced[i].key, (int)s.vlen[i], s.v[i], forced[i].key,
			    want, forced[i].why);
	}
	leave_room(&s, &len);
	return harder;
}

bool hp_jeconf_background_off(void) {
	return background_off;
}

bool hp_jeconf_background_on(void) {
	return background_on;
}
