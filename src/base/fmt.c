/*
 * The library's own snprintf, for what every process runs: start-up (the
 * policy line, jemalloc's options, the counters' names) and the one-line
 * messages. glibc's printf family sits in 64 KiB of its code that nothing
 * else of a small program touches; through the kernel's fault-around,
 * one call of it, of strtol and of the string streams vsnprintf writes
 * through maps 216 kB of libc into the process (measured with
 * /proc/PID/pagemap on a program that mallocs once: 1,336 kB of libc
 * resident under the library, 1,120 kB under jemalloc, which formats
 * with its own code too). jemalloc's own formatter (malloc_snprintf) is
 * not called instead: base sits below the embedded jemalloc (src/layers),
 * and the command and the unit tests link base without it.
 *
 * Conversions: d i u x X c s p %, with the flags - 0 #, a width and a
 * precision (digits or *), and the lengths hh h l ll z j t. Anything else
 * ends the conversions: it and the rest of the format are copied as
 * written. The formats are the library's own, gcc checks them against
 * their arguments, and test/unit/test_fmt.c checks this file against
 * glibc.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include "base/base.h"
#include "base/fmt.h"

typedef struct {
	char *buf;
	size_t n, len;           /* room (with the NUL), bytes produced */
} out_t;

static void put(out_t *o, char c) {
	if (o->len + 1 < o->n)
		o->buf[o->len] = c;
	o->len++;
}

static void pad(out_t *o, char c, int count) {
	for (; count > 0; count--)
		put(o, c);
}

/* digits of v in base (16: lower or upper), most significant first, at
 * the end of tmp; returns their count. */
static int digits(uintmax_t v, unsigned base, bool upper, char *end) {
	const char *set = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	int k = 0;
	do {
		*--end = set[v % base];
		v /= base;
		k++;
	} while (v != 0);
	return k;
}

typedef struct {
	bool left, zero, alt;
	int width, prec;         /* prec < 0: none */
} spec_t;

static void put_int(out_t *o, const spec_t *s, uintmax_t mag, bool neg,
    unsigned base, bool upper) {
	char tmp[24];
	int k = s->prec == 0 && mag == 0 ? 0 :
	    digits(mag, base, upper, tmp + sizeof tmp);
	int zeros = s->prec > k ? s->prec - k : 0;
	const char *prefix = neg ? "-" : s->alt && base == 16 && mag != 0 ?
	    (upper ? "0X" : "0x") : "";
	int plen = (int)strlen(prefix), total = plen + zeros + k;
	if (s->zero && !s->left && s->prec < 0 && s->width > total) {
		zeros += s->width - total;
		total = s->width;
	}
	if (!s->left)
		pad(o, ' ', s->width - total);
	for (int i = 0; i < plen; i++)
		put(o, prefix[i]);
	pad(o, '0', zeros);
	for (int i = 0; i < k; i++)
		put(o, tmp[sizeof tmp - (size_t)k + (size_t)i]);
	if (s->left)
		pad(o, ' ', s->width - total);
}

static void put_str(out_t *o, const spec_t *s, const char *str) {
	if (str == NULL)
		str = "(null)";
	size_t k = s->prec >= 0 ? strnlen(str, (size_t)s->prec) : strlen(str);
	int w = s->width > (int)k ? s->width - (int)k : 0;
	if (!s->left)
		pad(o, ' ', w);
	for (size_t i = 0; i < k; i++)
		put(o, str[i]);
	if (s->left)
		pad(o, ' ', w);
}

/* Widths and precisions are held below this (no format of the
 * library's comes near), so that no sum of them overflows an int. */
#define FIELD_MAX (1 << 20)

/* An int argument (width, precision) read as printf reads it: its
 * magnitude, held below FIELD_MAX, and whether it was negative. */
static int star(va_list *ap, bool *neg) {
	int v = va_arg(*ap, int);
	*neg = v < 0;
	return v < 0 ? (v < -FIELD_MAX ? FIELD_MAX : -v) :
	    (v > FIELD_MAX ? FIELD_MAX : v);
}

/* A field's digits, held below FIELD_MAX. */
static int field(const char **f) {
	int v = 0;
	for (; **f >= '0' && **f <= '9'; (*f)++)
		if (v < FIELD_MAX)
			v = v * 10 + (**f - '0');
	return v > FIELD_MAX ? FIELD_MAX : v;
}

int hp_vfmt(char *buf, size_t n, const char *fmt, va_list ap0) {
	out_t o = {buf, n, 0};
	va_list ap;
	va_copy(ap, ap0);
	for (const char *f = fmt; *f != '\0'; f++) {
		if (*f != '%') {
			put(&o, *f);
			continue;
		}
		const char *start = f++;
		spec_t s = {false, false, false, 0, -1};
		for (;; f++) {
			if (*f == '-')
				s.left = true;
			else if (*f == '0')
				s.zero = true;
			else if (*f == '#')
				s.alt = true;
			else
				break;
		}
		bool neg;
		if (*f == '*') {
			s.width = star(&ap, &neg);
			s.left |= neg;
			f++;
		} else {
			s.width = field(&f);
		}
		if (*f == '.') {
			f++;
			if (*f == '*') {
				s.prec = star(&ap, &neg);
				if (neg)
					s.prec = -1;
				f++;
			} else {
				s.prec = field(&f);
			}
		}
		/* Lengths: 'H' hh, 'h', 'l', 'L' ll, 'z', 'j', 't'. */
		char len = 0;
		if ((*f == 'h' || *f == 'l') && f[1] == *f) {
			len = *f == 'h' ? 'H' : 'L';
			f += 2;
		} else if (*f == 'h' || *f == 'l' || *f == 'z' || *f == 'j' ||
		    *f == 't') {
			len = *f++;
		}
		uintmax_t u;
		intmax_t v;
		switch (*f) {
		case 'd': case 'i':
			switch (len) {
			case 'l': v = va_arg(ap, long); break;
			case 'L': v = va_arg(ap, long long); break;
			case 'z': case 't': v = va_arg(ap, ptrdiff_t); break;
			case 'j': v = va_arg(ap, intmax_t); break;
			case 'H': v = (signed char)va_arg(ap, int); break;
			case 'h': v = (short)va_arg(ap, int); break;
			default: v = va_arg(ap, int); break;
			}
			put_int(&o, &s, v < 0 ? -(uintmax_t)v : (uintmax_t)v, v < 0,
			    10, false);
			break;
		case 'u': case 'x': case 'X':
			switch (len) {
			case 'l': u = va_arg(ap, unsigned long); break;
			case 'L': u = va_arg(ap, unsigned long long); break;
			case 'z': case 't': u = va_arg(ap, size_t); break;
			case 'j': u = va_arg(ap, uintmax_t); break;
			case 'H': u = (unsigned char)va_arg(ap, unsigned); break;
			case 'h': u = (unsigned short)va_arg(ap, unsigned); break;
			default: u = va_arg(ap, unsigned); break;
			}
			put_int(&o, &s, u, false, *f == 'u' ? 10 : 16, *f == 'X');
			break;
		case 'p': {
			void *p = va_arg(ap, void *);
			spec_t hex = s;
			hex.alt = true;
			if (p == NULL)
				put_str(&o, &(spec_t){s.left, false, false, s.width,
				    -1}, "(nil)");
			else
				put_int(&o, &hex, (uintptr_t)p, false, 16, false);
			break;
		}
		case 'c':
			if (!s.left)
				pad(&o, ' ', s.width - 1);
			put(&o, (char)va_arg(ap, int));
			if (s.left)
				pad(&o, ' ', s.width - 1);
			break;
		case 's':
			put_str(&o, &s, va_arg(ap, const char *));
			break;
		case '%':
			put(&o, '%');
			break;
		default:
			/* Not a conversion of this set (log.c, which asserts,
			 * is above this file): the rest of the format is
			 * copied as written, and no argument read, as the
			 * arguments after this one would be the wrong ones. */
			for (const char *c = start; *c != '\0'; c++)
				put(&o, *c);
			goto done;
		}
	}
done:
	va_end(ap);
	if (n != 0)
		buf[o.len < n ? o.len : n - 1] = '\0';
	return o.len > INT32_MAX ? -1 : (int)o.len;
}

int hp_fmt(char *buf, size_t n, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int r = hp_vfmt(buf, n, fmt, ap);
	va_end(ap);
	return r;
}

long hp_parse_long(const char *s, const char **end) {
	const char *p = s;
	while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		p++;
	bool neg = *p == '-';
	if (*p == '-' || *p == '+')
		p++;
	if (*p < '0' || *p > '9') {
		if (end != NULL)
			*end = s;
		return 0;
	}
	unsigned long v = 0, limit = (unsigned long)LONG_MAX + neg;
	bool clamped = false;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (clamped || v > (limit - d) / 10)
			clamped = true;                 /* strtol's clamp */
		else
			v = v * 10 + d;
	}
	if (end != NULL)
		*end = p;
	if (clamped)
		return neg ? LONG_MIN : LONG_MAX;
	return neg ? (long)(0 - v) : (long)v;
}
