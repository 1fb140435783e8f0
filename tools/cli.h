/* The hugepreload command's parts: the wrapper and --help
 * (hugepreload.c), its shared helpers (cli.c), stat (stat.c, statpage.c), doctor (doctor.c), enable and disable
 * (unit.c). */
#ifndef HP_CLI_H
#define HP_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* One line "hugepreload: ..." naming what is wrong; returns 2, the exit
 * status of a bad command line. */
int hp_cli_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The library to preload: installed, beside the command, or in the build
 * tree, the first found; *where says which. */
bool hp_cli_library(char *out, size_t n, const char **where);
/* A file of PREFIX/share/hugepreload (the drop-in, the textfile units),
 * found as the library is: installed, else the source tree's. */
bool hp_cli_share(const char *name, char *out, size_t n);

int hp_cli_stat(int argc, char **argv);

/* statpage.c: one process's counters page, read as untrusted input. */
#include "base/stats_print.h"
/* One process being read: its deadline, and why it was skipped. */
typedef struct {
	long pid;
	double deadline;             /* CLOCK_MONOTONIC seconds */
	bool late;
	char why[200];
} hp_statjob_t;
/* stat --all in all: under the textfile unit's TimeoutSec (60 s), so that
 * many processes with pages slow to read cannot stop the textfile being
 * written; the processes left then are skipped, a line each. */
#define HP_STAT_ALL_SECONDS 45
extern double hp_stat_all_deadline;   /* 0: no bound over all processes */
/* Whether pid has the counters' page: 1, and its range; 0 not; -1 its
 * maps cannot be read (errno set). */
int hp_statpage_find(long pid, unsigned long *start, unsigned long *end);
double hp_stat_mono(void);            /* CLOCK_MONOTONIC, in seconds */
/* Whether the job is past its deadline (then its why says so). */
bool hp_stat_late(hp_statjob_t *j);
/* One process's counters: 1 read; 0 no counters; -1 cannot read (errno
 * set); -2 no such process; -3 skipped (its page is not what the library
 * writes, or reading it took too long), j's why says why. */
int hp_statpage_read(long pid, hp_stats_t *st, hp_stats_meta_t *m,
    hp_statjob_t *j);
int hp_cli_doctor(int argc, char **argv);
int hp_cli_enable(int argc, char **argv);
int hp_cli_disable(int argc, char **argv);

#endif
