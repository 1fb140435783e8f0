/*
 * One place for escaping what the library and the hugepreload command
 * print of strings they do not control: the policy string of a counters
 * page (any process can map one), a HUGEPRELOAD_CONF value, a path, a
 * program's name. A terminal must get no control sequence from them, a
 * log line no second line, a Prometheus textfile nothing that makes the
 * whole file invalid, a JSON document nothing that stops it parsing.
 * The rules of each format are in escape.h. Pure computation: no
 * allocation, no locale, safe anywhere the library logs from.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "base/escape.h"

/* The length of the well-formed UTF-8 character of more than one byte at
 * s (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF),
 * its code point in *cp; 0 if there is none there. */
static size_t utf8_char(const unsigned char *s, size_t len, uint32_t *cp) {
	unsigned char b = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;    /* the second byte's range */
	if (b >= 0xc2 && b <= 0xdf) {
		n = 2;
	} else if (b >= 0xe0 && b <= 0xef) {
		n = 3;
		lo = b == 0xe0 ? 0xa0 : 0x80;
		hi = b == 0xed ? 0x9f : 0xbf;
	} else if (b >= 0xf0 && b <= 0xf4) {
		n = 4;
		lo = b == 0xf0 ? 0x90 : 0x80;
		hi = b == 0xf4 ? 0x8f : 0xbf;
	} else {
		return 0;
	}
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	uint32_t c = b & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	*cp = c;
	return n;
}

static const char hex[] = "0123456789abcdef";

/* "\xNN" for byte b, its backslash doubled for a Prometheus label. */
static size_t byte_escape(unsigned char b, bool prom, char *p) {
	size_t k = 0;
	p[k++] = '\\';
	if (prom)
		p[k++] = '\\';
	p[k++] = 'x';
	p[k++] = hex[b >> 4];
	p[k++] = hex[b & 15];
	return k;
}

static size_t json_u(uint32_t c, char *p) {
	p[0] = '\\';
	p[1] = 'u';
	for (int i = 0; i < 4; i++)
		p[2 + i] = hex[(c >> (12 - 4 * i)) & 15];
	return 6;
}

/* The escaped form of the character at s (*taken bytes of it) into p (at
 * most 16 bytes); returns its length. */
static size_t one(hp_esc_t how, const unsigned char *s, size_t len,
    char *p, size_t *taken) {
	bool prom = how == HP_ESC_PROM, json = how == HP_ESC_JSON;
	unsigned char b = s[0];
	size_t k = 0;
	*taken = 1;
	if (b >= 0x20 && b < 0x7f) {       /* printable ASCII */
		if (b == '\\') {
			/* Doubled in every form; in a label, the two again. */
			memcpy(p, "\\\\\\\\", 4);
			return prom ? 4 : 2;
		}
		if (b == '"' && (prom || json))
			p[k++] = '\\';
		p[k++] = (char)b;
		return k;
	}
	uint32_t cp = b;                   /* a C0 control or DEL */
	size_t n = b < 0x80 ? 1 : utf8_char(s, len, &cp);
	if (n > 1 && cp >= 0xa0) {         /* a character: as it is */
		memcpy(p, s, n);
		*taken = n;
		return n;
	}
	/* A control character (C0, DEL, or C1's two bytes), or a byte that
	 * is not UTF-8 (n == 0: the next byte is looked at on its own). */
	*taken = n ? n : 1;
	if (json)
		return json_u(n ? cp : 0xfffd, p);
	for (size_t i = 0; i < *taken; i++)
		k += byte_escape(s[i], prom, p + k);
	return k;
}

size_t hp_escape(hp_esc_t how, const char *src, size_t len, char *dst,
    size_t n, size_t *wrote) {
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, o = 0;
	while (i < len) {
		char piece[16];
		size_t taken, k = one(how, s + i, len - i, piece, &taken);
		if (o + k >= n)
			break;
		memcpy(dst + o, piece, k);
		o += k;
		i += taken;
	}
	if (n > 0)
		dst[o] = '\0';
	if (wrote != NULL)
		*wrote = o;
	return i;
}
