/*
 * The thread block (base.h's hp_thread_t): every thread's state on the
 * allocation paths in one thread-local object. Its fields are the files'
 * named in its type; this file only holds it. Named by SLOT_TAKE's asm
 * (lifetime.h), which link-time optimisation does not see: "used" keeps
 * it under its name.
 */
#include <stddef.h>
#include "base/base.h"

HP_STATIC_ASSERT(offsetof(hp_thread_t, slots) == 0,
    "SLOT_TAKE indexes the credits from the block's start");

const char hp_no_cache[HP_NO_CACHE_SIZE] __attribute__((aligned(64)));

/* The loader relocates a thread-local object's initial image before it
 * copies it into the first thread's block, and copies the relocated one
 * into every later thread's. */
__attribute__((used)) HP_TLS hp_thread_t hp_thread = {
	.huge_cache = HP_NO_CACHE,
};
