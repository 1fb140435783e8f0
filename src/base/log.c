/* One-line messages on stderr, "hugepreload: NAME[PID]: ...", so that
 * each line of a service tree says which process it is from. Formats into
 * a stack buffer and write(2)s it, so it is safe while the allocator
 * itself is starting up. A message is one line whatever it quotes (a
 * HUGEPRELOAD_CONF value, a path, the program's name): control
 * characters and bytes that are not UTF-8 are written as \xNN, a
 * backslash doubled (escape.h), so nothing can forge a second line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include "base/base.h"
#include "base/escape.h"

static void vlog(const char *fmt, va_list ap) {
	char msg[512], line[1024];
	/* glibc sets the name from argv[0] before any constructor runs. */
	int n = hp_fmt(msg, sizeof msg, "hugepreload: %.64s[%d]: ",
	    program_invocation_short_name, (int)getpid());
	int m = hp_vfmt(msg + n, sizeof msg - (size_t)n, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof msg - 1)
		n = (int)sizeof msg - 1;
	size_t len;
	hp_escape(HP_ESC_TEXT, msg, (size_t)n, line, sizeof line - 1, &len);
	line[len++] = '\n';
	for (const char *p = line; len > 0;) {
		ssize_t w = hp_os_write(STDERR_FILENO, p, len);
		if (w <= 0)
			break;
		p += w;
		len -= (size_t)w;
	}
}

void hp_log(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

void hp_warn_once(int *flag, const char *fmt, ...) {
	if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

/* strerrordesc_np: no locale, so no gettext and no allocation. */
const char *hp_strerror(int err) {
	const char *s = strerrordesc_np(err);
	return s != NULL ? s : "unknown error";
}

void hp_assert_fail(const char *expr, const char *file, int line,
    const char *func) {
	hp_log("assertion failed: %s (%s:%d, %s)", expr, file, line, func);
	abort();
}
