/*
 * hugepreload: run a program under the library; the other commands are in
 * stat.c, doctor.c and unit.c (see usage() below).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "base/base.h"
#include "hugepreload.h"

static void usage(FILE *f) {
	fprintf(f,
	    "usage: hugepreload [--conf K:V,...] [--verbose] -- CMD [ARGS...]\n"
	    "       hugepreload stat PID [--json|--prometheus] [--watch SECONDS]"
	    " [-o FILE]\n"
	    "       hugepreload stat --all [--json|--prometheus] [-o FILE]\n"
	    "       hugepreload doctor [--json]\n"
	    "       hugepreload enable UNIT [--conf K:V,...] [--root DIR]\n"
	    "       hugepreload disable UNIT [--root DIR]\n"
	    "       hugepreload --version | --help\n\n"
	    "The first form runs CMD with libhugepreload.so preloaded (before any\n"
	    "LD_PRELOAD already set) and HUGEPRELOAD_CONF set, and exits with\n"
	    "CMD's status. --conf items are added after any HUGEPRELOAD_CONF in\n"
	    "the environment (later items win); --verbose adds verbose:true\n"
	    "and says which library it preloads: the installed one, the one\n"
	    "beside this command, or the build tree's, the first found.\n\n"
	    "stat reads a running program's counters from its memory (a page\n"
	    "the library keeps, through /proc/PID/mem) without signalling or\n"
	    "pausing it; as with a debugger, its user and root may read it.\n"
	    "--watch prints them again every SECONDS until it exits; --all\n"
	    "lists every process under the library (--prometheus: one\n"
	    "exposition, for node_exporter's textfile collector); -o writes\n"
	    "FILE whole, by rename.\n\n"
	    "doctor says what this host gives huge pages (THP, hugetlbfs pools,\n"
	    "1 GiB pages, MADV_COLLAPSE, cgroup limits), the policy\n"
	    "HUGEPRELOAD_CONF gives and the backing it would get, and a command\n"
	    "for each thing in the way; exit 0 nothing in the way, 1 warnings.\n\n"
	    "enable writes the systemd drop-in\n"
	    "/etc/systemd/system/UNIT.service.d/hugepreload.conf (LD_PRELOAD and\n"
	    "HUGEPRELOAD_CONF for the unit); disable removes it. Both reload\n"
	    "systemd when it is running; --root DIR works under DIR, as\n"
	    "systemctl's.\n\n"
	    "Bad command lines exit 2.\n\n"
	    "HUGEPRELOAD_CONF keys (key:value, comma-separated):\n");
	for (const hp_option_t *o = hp_options; o->name != NULL; o++)
		fprintf(f, "  %-16s %s (default %s)\n  %-16s   %s\n", o->name,
		    o->values, o->shown, "", o->help);
}

static int run(int argc, char **argv) {
	const char *conf = NULL;
	int verbose = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--conf") == 0 && i + 1 < argc)
			conf = argv[++i];
		else if (strcmp(argv[i], "--verbose") == 0)
			verbose = 1;
		else if (strcmp(argv[i], "--conf") == 0)
			return hp_cli_bad("--conf needs key:value items");
		else
			return hp_cli_bad("unknown option or command '%s'", argv[i]);
	}
	if (i + 1 >= argc)
		return hp_cli_bad(i < argc ? "no command after --" :
		    "no command to run (hugepreload -- CMD [ARGS...])");
	char lib[PATH_MAX + 64], preload[3 * PATH_MAX], hc[8192];
	const char *where;
	if (!hp_cli_library(lib, sizeof lib, &where)) {
		fprintf(stderr, "hugepreload: no libhugepreload.so installed, "
		    "beside the command or in %s (%s: %s)\n", HP_BUILD_DIR, lib,
		    strerror(errno));
		return 127;
	}
	if (verbose)
		fprintf(stderr, "hugepreload: library %s (%s)\n", lib, where);
	const char *old = getenv("LD_PRELOAD");
	snprintf(preload, sizeof preload, "%s%s%s", lib, old && *old ? " " : "",
	    old ? old : "");
	setenv("LD_PRELOAD", preload, 1);
	const char *env = getenv("HUGEPRELOAD_CONF");
	snprintf(hc, sizeof hc, "%s%s%s%s%s", env ? env : "",
	    env && *env && conf ? "," : "", conf ? conf : "",
	    verbose && ((env && *env) || conf) ? "," : "",
	    verbose ? "verbose:true" : "");
	if (hc[0] != '\0')
		setenv("HUGEPRELOAD_CONF", hc, 1);
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "hugepreload: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}

int main(int argc, char **argv) {
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		char lib[PATH_MAX + 64];
		const char *where;
		bool found = hp_cli_library(lib, sizeof lib, &where);
		printf("hugepreload %s\nlibrary: %s (%s)\n", HUGEPRELOAD_VERSION,
		    found ? lib : "not found", found ? where : "looked for it "
		    "installed, beside the command and in the build tree");
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "stat") == 0)
		return hp_cli_stat(argc, argv);
	if (argc > 1 && strcmp(argv[1], "doctor") == 0)
		return hp_cli_doctor(argc, argv);
	if (argc > 1 && strcmp(argv[1], "enable") == 0)
		return hp_cli_enable(argc, argv);
	if (argc > 1 && strcmp(argv[1], "disable") == 0)
		return hp_cli_disable(argc, argv);
	return run(argc, argv);
}
