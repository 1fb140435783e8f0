/*
 * jemalloc's public API as linked into this library. The Makefile copies
 * Debian's libjemalloc_pic.a with its public symbols renamed NAME ->
 * hp_je_NAME, so the embedded jemalloc exports nothing and is called
 * directly, without a PLT hop.
 */
#ifndef HP_JE_H
#define HP_JE_H

#include <stddef.h>
#include <jemalloc/jemalloc.h>   /* extent_hooks_t, MALLOCX_* */

#define HP_JE_API __attribute__((visibility("hidden")))

HP_JE_API void *hp_je_malloc(size_t);
HP_JE_API void *hp_je_calloc(size_t, size_t);
HP_JE_API void *hp_je_realloc(void *, size_t);
HP_JE_API void hp_je_free(void *);
HP_JE_API void *hp_je_memalign(size_t, size_t);
HP_JE_API int hp_je_posix_memalign(void **, size_t, size_t);
HP_JE_API size_t hp_je_malloc_usable_size(const void *);
HP_JE_API void *hp_je_mallocx(size_t, int);
HP_JE_API void *hp_je_rallocx(void *, size_t, int);
HP_JE_API size_t hp_je_sallocx(const void *, int);
HP_JE_API void hp_je_dallocx(void *, int);
HP_JE_API void hp_je_sdallocx(void *, size_t, int);
HP_JE_API size_t hp_je_xallocx(void *, size_t, size_t, int);
HP_JE_API size_t hp_je_nallocx(size_t, int);
HP_JE_API int hp_je_mallctlnametomib(const char *, size_t *, size_t *);
HP_JE_API int hp_je_mallctlbymib(const size_t *, size_t, void *, size_t *,
    void *, size_t);
HP_JE_API int hp_je_mallctl(const char *, void *, size_t *, void *, size_t);
HP_JE_API void hp_je_malloc_stats_print(void (*)(void *, const char *),
    void *, const char *);
/* Its calls of exp, log and round, served by src/jemath.c (no libm). */
HP_JE_API double hp_je_exp(double);
HP_JE_API double hp_je_log(double);
HP_JE_API double hp_je_round(double);
/* Read by jemalloc at start-up after MALLOC_CONF, so it has the last word. */
extern HP_JE_API const char *hp_je_malloc_conf_2_conf_harder;

#endif
