/* The hugepreload command's parts: the wrapper and --help
 * (hugepreload.c), stat (stat.c), doctor (doctor.c), enable and disable
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
int hp_cli_doctor(int argc, char **argv);
int hp_cli_enable(int argc, char **argv);
int hp_cli_disable(int argc, char **argv);

#endif
