/*
 * jemalloc's options: what the library sets, and what becomes of the
 * user's own. The embedded jemalloc reads MALLOC_CONF (and the name of the
 * /etc/malloc.conf link) as Debian's does, so a user can tune it; it then
 * reads malloc_conf_2_conf_harder, which the library sets, so that the
 * settings below have the last word. Each of them that the user set to
 * something else is named on one line; every other option works as in
 * jemalloc (test_conf.c runs a program under each one that touches
 * extents, arenas or purging).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

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
static bool background_off;

/* What the library sets key to. */
static const char *value_of(size_t i, char *buf, size_t n,
    const hp_conf_t *c) {
	if (forced[i].value[0] != '\0')
		return forced[i].value;
	snprintf(buf, n, "%ld", c->decay_ms);
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
};

static void item(void *arg, const char *k, size_t klen, const char *v,
    size_t vlen) {
	struct scan *s = arg;
	for (size_t i = 0; i < NFORCED; i++)
		if (strlen(forced[i].key) == klen &&
		    memcmp(forced[i].key, k, klen) == 0) {
			s->v[i] = v;
			s->vlen[i] = vlen;
			s->vsrc[i] = s->source;
		}
	if (klen == 17 && memcmp(k, "background_thread", 17) == 0)
		background_off = vlen == 5 && memcmp(v, "false", 5) == 0;
}

const char *hp_jeconf(const hp_conf_t *c) {
	struct scan s = {.c = c};
	/* jemalloc's order: the link's name, then the environment (its
	 * secure_getenv: nothing for setuid programs). */
	char link[256];
	ssize_t n = hp_os_readlink("/etc/malloc.conf", link, sizeof link - 1);
	if (n > 0) {
		link[n] = '\0';
		s.source = "/etc/malloc.conf";
		hp_conf_each(link, item, NULL, &s);
	}
	s.source = "MALLOC_CONF";
	hp_conf_each(secure_getenv("MALLOC_CONF"), item, NULL, &s);

	size_t len = 0;
	for (size_t i = 0; i < NFORCED; i++) {
		char buf[32];
		const char *want = value_of(i, buf, sizeof buf, c);
		int w = snprintf(harder + len, sizeof harder - len, "%s%s:%s",
		    i ? "," : "", forced[i].key, want);
		if (w > 0 && (size_t)w < sizeof harder - len)
			len += (size_t)w;
		if (s.v[i] != NULL && (strlen(want) != s.vlen[i] ||
		    memcmp(want, s.v[i], s.vlen[i]) != 0))
			hp_log("%s %s:%.*s overridden by %s:%s (%s)", s.vsrc[i],
			    forced[i].key, (int)s.vlen[i], s.v[i], forced[i].key,
			    want, forced[i].why);
	}
	return harder;
}

bool hp_jeconf_background_off(void) {
	return background_off;
}
