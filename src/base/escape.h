/* Strings from outside (a counters page, a configuration value, a
 * program's name) made safe to print, for each format the library and the
 * hugepreload command print in (escape.c). Shared by both: the
 * command links escape.o. */
#ifndef HP_ESCAPE_H
#define HP_ESCAPE_H

#include <stddef.h>

#pragma GCC visibility push(hidden)

typedef enum {
	/* A terminal or a log line: printable ASCII and well-formed UTF-8
	 * characters as they are, a backslash doubled, every other byte
	 * (C0 controls, DEL, the C1 controls U+0080-U+009F, bytes that are
	 * not well-formed UTF-8) as \xNN. Never a line break. */
	HP_ESC_TEXT,
	/* A Prometheus label value, between its double quotes: the TEXT form,
	 * with backslash and double quote escaped as the exposition format
	 * says (so the value Prometheus stores is the TEXT form). */
	HP_ESC_PROM,
	/* A JSON string, between its double quotes (RFC 8259): backslash and
	 * double quote escaped, C0 controls, DEL and C1 controls as \u00XX,
	 * each byte that is not well-formed UTF-8 as \ufffd. */
	HP_ESC_JSON,
} hp_esc_t;

/* The len bytes at src escaped for how into dst, n > 0 bytes, always
 * NUL-terminated: as many whole characters as fit (never half an escape
 * or half a character). *wrote, if not NULL, gets the bytes written less
 * the NUL. Returns how many bytes of src were taken. */
size_t hp_escape(hp_esc_t how, const char *src, size_t len, char *dst,
    size_t n, size_t *wrote);

#pragma GCC visibility pop

#endif
