/* Integration tests: run programs with and without the library and read
 * what they report; set kernel knobs and put them back. */
#ifndef HP_HARNESS_H
#define HP_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
	int code;          /* exit status, or 128 + signal */
	char *out, *err;   /* NUL-terminated */
	size_t out_len, err_len;
} hp_run_t;

/* Path of build/NAME (the build folder holds the library and helpers). */
const char *hp_path(const char *name);
/* Runs argv (argv[0] a path) with env entries "K=V" added; with preload,
 * LD_PRELOAD is the library. Input from stdin_path if not NULL. */
hp_run_t hp_run(const char *const *argv, const char *const *env, bool preload,
    const char *stdin_path);
/* hp_run in two halves, for runs that do not depend on each other: the
 * program started (its output kept as hp_run keeps it), then waited for. */
typedef struct {
	int pid, out, err;
} hp_proc_t;
hp_proc_t hp_start(const char *const *argv, const char *const *env,
    bool preload, const char *stdin_path);
hp_run_t hp_wait(hp_proc_t p);
void hp_run_free(hp_run_t *r);
/* The value of "key=value" in r->out; fails the test if absent. */
double hp_kv(const hp_run_t *r, const char *key);
/* Runs a shell script with HP (the command), B (the build directory), T
 * (a temporary directory, removed after) and two helpers: until_ok CMD
 * retries CMD every 0.1 s for up to 60 s; start CMD runs CMD in the
 * background with its output in $T/out and sets pid and child from its
 * pid= and child= lines. conf is HUGEPRELOAD_CONF ("" if NULL). */
hp_run_t hp_script(const char *body, const char *conf);
/* Lines of r->err that start with "hugepreload: ". */
int hp_err_lines(const hp_run_t *r);
/* build/lifetime's request buffers (its churny site), as its where()
 * lines report them: all in the small class, none on a huge page but in
 * a range catch-up collapsed (a mapping flagged hg), and at most a fifth
 * there. Catch-up collapses the 2 MiB ranges where a promoted site's
 * objects went while it was learned; a request buffer freed there meanwhile
 * leaves a slot that later ones fill (jemalloc fills its oldest slabs
 * first) until a purge splits the range (docs/lifetime.md). */
void hp_assert_requests_small(const hp_run_t *r);

/* A sysfs or procfs knob, saved before it is set and put back after. */
typedef struct {
	char path[160];
	char old[64];
	bool saved;
} hp_knob_t;
/* Sets a knob, having saved its value; false if the host has no such knob
 * or would not take the value (nothing is saved then). */
bool hp_knob_set(hp_knob_t *k, const char *path, const char *value);
/* The same, and the test is skipped, saying why, when it cannot be set. */
void hp_knob_require(hp_knob_t *k, const char *path, const char *value);
void hp_knob_restore(hp_knob_t *k);
/* The current value of a knob ("[madvise]" read as "madvise"); "" if
 * unreadable. */
void hp_knob_read(const char *path, char *out, size_t n);
/* Skips the test, saying why, on a host without 1 GiB pages. */
void hp_require_gib_pages(void);

#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define THP_DEFRAG  "/sys/kernel/mm/transparent_hugepage/defrag"
#define THP_SHMEM   "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

#endif
