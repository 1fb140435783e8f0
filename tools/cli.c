/* The command's shared helpers (cli.h): the one-line complaint of a bad
 * command line, and where the library and the shared files are. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

int hp_cli_bad(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fputs("hugepreload: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(" (see hugepreload --help)\n", stderr);
	va_end(ap);
	return 2;
}

#ifndef HP_LIB_FROM_BIN                 /* the Makefile's, for make install */
#define HP_LIB_FROM_BIN "../lib/hugepreload"
#endif
#ifndef HP_BUILD_DIR                    /* the build tree it was built in */
#define HP_BUILD_DIR "build"
#endif
#ifndef HP_SRC_DIR                      /* the source tree it was built from */
#define HP_SRC_DIR "."
#endif

/* The library to preload, where it is installed (beside the command's
 * bin directory: PREFIX/bin and LIBDIR/hugepreload, so DESTDIR and
 * PREFIX keep working), beside the command, or in the build tree the
 * command was built in, in that order; *where says which. */
/* The directory of this command. */
static void exe_dir(char *exe, size_t n) {
	ssize_t len = readlink("/proc/self/exe", exe, n - 1);
	exe[len > 0 ? len : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
}

bool hp_cli_library(char *out, size_t n, const char **where) {
	char exe[PATH_MAX];
	exe_dir(exe, sizeof exe);
	const char *dirs[][2] = {
	    {exe, "/" HP_LIB_FROM_BIN}, {exe, ""}, {HP_BUILD_DIR, ""}};
	const char *names[] = {"installed", "beside the command",
	    "in the build tree"};
	for (int i = 0; i < 3; i++) {
		char dir[PATH_MAX + 64], real[PATH_MAX];
		snprintf(dir, sizeof dir, "%s%s", dirs[i][0], dirs[i][1]);
		/* Named by its directory's real path (no "bin/../lib"). */
		snprintf(out, n, "%s/libhugepreload.so", realpath(dir, real) ?
		    real : dir);
		*where = names[i];
		if (access(out, R_OK) == 0)
			return true;
	}
	snprintf(out, n, "%s%s/libhugepreload.so", exe, "/" HP_LIB_FROM_BIN);
	*where = "installed";
	return false;
}

bool hp_cli_share(const char *name, char *out, size_t n) {
	char exe[PATH_MAX];
	exe_dir(exe, sizeof exe);
	const char *dirs[][2] = {{exe, "/../share/hugepreload/"},
	    {HP_SRC_DIR, "/"}, {HP_SRC_DIR, "/systemd/"}};
	for (int i = 0; i < 3; i++) {
		snprintf(out, n, "%s%s%s", dirs[i][0], dirs[i][1], name);
		if (access(out, R_OK) == 0)
			return true;
	}
	return false;
}
