/* Formats of the counters, shared by the library and the hugepreload
 * command (which links stats_print.o and conf.o). */
#ifndef HP_STATS_PRINT_H
#define HP_STATS_PRINT_H

#include <stdarg.h>
#include "base/types.h"

#pragma GCC visibility push(hidden)

typedef void (*hp_out_t)(void *ctx, const char *s, size_t n);
/* printf to an hp_out_t, a line of up to 511 bytes. */
void hp_outf(hp_out_t out, void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
typedef struct {
	bool alive;       /* the process is still running */
	double age_s;     /* seconds since the last refresh */
	/* The kernel's figures, read by "hugepreload stat" and printed beside
	 * the arenas': the huge class's range from /proc/PID/smaps (Rss and
	 * hugetlb; AnonHugePages and hugetlb), and jemalloc's own mappings
	 * from /proc/PID/pagemap (their vmas may be merged with others). */
	bool smaps;
	uint64_t smaps_resident, smaps_huge;
	uint64_t smaps_small_resident;  /* present pages of jemalloc's mappings */
	uint64_t smaps_mmap_resident, smaps_mmap_huge; /* the program's own
	                                   advised anonymous areas (smaps) */
	uint64_t smaps_ll_resident, smaps_ll_huge; /* the long-lived class's
	                                   range (smaps) */
	/* Where each wrapper shown (hp_lifetime_counts_t's wrapper[]) is:
	 * module+0xoffset, as in a lifetime profile; empty: its address. */
	char wrapper_at[HP_WRAPPERS_SHOWN][192];
} hp_stats_meta_t;

/* Fills m->wrapper_at from /proc/PID/maps: each of st's wrappers as its
 * module's path and offset; "?" where no module holds it. */
void hp_stats_wrapper_names(const hp_stats_t *st, int64_t pid,
    hp_stats_meta_t *m);
void hp_stats_format(const hp_stats_t *st, const hp_stats_meta_t *m,
    hp_format_t f, hp_out_t out, void *ctx);
bool hp_stats_copy(const volatile hp_stats_t *shared, hp_stats_t *out);
/* The arenas of st, narenas of them, named by their slot (the writer). */
void hp_stats_name_arenas(hp_stats_t *st);
/* Every arena of a copied page named, no name twice (the reader); if
 * not, why (n bytes). */
bool hp_stats_names_ok(const hp_stats_t *st, char *why, size_t n);

#pragma GCC visibility pop

#endif
