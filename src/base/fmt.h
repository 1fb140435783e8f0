/* fmt.c: snprintf and strtol of the library's own, off glibc's printf
 * and strto* code (see fmt.c for the conversions). */
#ifndef HP_FMT_H
#define HP_FMT_H

#include <stdarg.h>
#include <stddef.h>

#pragma GCC visibility push(hidden)

/* snprintf's contract: at most n bytes with the NUL, the length the
 * whole would have. */
__attribute__((format(printf, 3, 4)))
int hp_fmt(char *buf, size_t n, const char *fmt, ...);
__attribute__((format(printf, 3, 0)))
int hp_vfmt(char *buf, size_t n, const char *fmt, va_list ap);
/* strtol(s, end, 10): leading blanks, a sign, decimal digits, clamped
 * to LONG_MIN..LONG_MAX; *end (if end) past the digits, or s if none. */
long hp_parse_long(const char *s, const char **end);

#pragma GCC visibility pop

#endif
