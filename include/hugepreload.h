/*
 * hugepreload: the API for programs that opt in. Programs need nothing of
 * it to run under the library; link with -lhugepreload (or look the
 * symbols up with dlsym) to ask where memory was placed.
 */
#ifndef HUGEPRELOAD_H
#define HUGEPRELOAD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HUGEPRELOAD_VERSION "0.1.0"

/* Where an allocation lives. */
enum hugepreload_class {
	HUGEPRELOAD_CLASS_NONE = 0,   /* NULL */
	HUGEPRELOAD_CLASS_SMALL = 1,  /* jemalloc arenas on 4 KiB pages */
	HUGEPRELOAD_CLASS_HUGE = 2,   /* 2 MiB-aligned huge-page regions */
};

/* The library's version, HUGEPRELOAD_VERSION when headers and library agree. */
const char *hugepreload_version(void);

/* The class that owns p. p must be NULL or a live pointer from this
 * process's malloc family; anything else gets a meaningless answer. */
int hugepreload_class(const void *p);

/* Writes the effective policy as "key:value,..." (the syntax of
 * HUGEPRELOAD_CONF) to buf; returns the length it needed, like snprintf. */
int hugepreload_policy(char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
