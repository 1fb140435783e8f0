/* One-line messages on stderr, "hugepreload: NAME[PID]: ...", so that
 * each line of a service tree says which process it is from. Formats into
 * a stack buffer and write(2)s it, so it is safe while the allocator
 * itself is starting up. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include "internal.h"

static void vlog(const char *fmt, va_list ap) {
	char line[512];
	/* glibc sets the name from argv[0] before any constructor runs. */
	int n = snprintf(line, sizeof line, "hugepreload: %.64s[%d]: ",
	    program_invocation_short_name, (int)getpid());
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	for (const char *p = line; n > 0;) {
		ssize_t w = hp_os_write(STDERR_FILENO, p, (size_t)n);
		if (w <= 0)
			break;
		p += w;
		n -= (int)w;
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
