/*
 * C++'s replaceable operator new and delete, exported as jemalloc's and
 * tcmalloc's are: the same twenty Itanium-mangled names as Debian's
 * libjemalloc.so.2 (plain, array, nothrow, sized and aligned forms).
 * Without them a C++ program reaches the library through libstdc++'s
 * operators, which call malloc and free: a frame and a PLT hop on new,
 * two jumps and two PLT hops on delete, and every new in the program
 * keyed by the one return address inside libstdc++'s operator new.
 *
 * Defined here in C, so the library needs no C++ runtime: ldd shows the
 * same libraries, and a C program under it is as before.
 * - new takes the malloc fast path itself (SLOT_TAKE, with the caller's
 *   return address) and checks for NULL; aligned new goes where
 *   aligned_alloc goes.
 * - On failure (and for an alignment that is not a power of two) the call
 *   is handed to the C++ runtime's own operator of the same name, found in
 *   the loaded libstdc++ (or libc++): it tries malloc again (ours), runs
 *   the new_handler loop and throws std::bad_alloc, or returns NULL for the
 *   nothrow forms. So the semantics are the runtime's own, exactly, and
 *   nothing of the C++ ABI (exceptions, typeinfo) is needed here. A program
 *   with no C++ runtime loaded cannot call these; should it, the throwing
 *   forms abort with a message and the nothrow forms return NULL.
 * - delete is free(). The sized forms operator delete(void *, size_t) and
 *   delete[](void *, size_t) (C++14's sized deallocation, which g++ emits
 *   from -std=c++14 on) hand the size to a copy of jemalloc's sdallocx
 *   fast path (je/jefast.c; up to 4 KiB, not page-aligned), which skips
 *   free's lookup of the size class in jemalloc's radix tree
 *   (docs/design.md has scripts/bench-cxx's counts). Objects of the
 *   owned range (the huge class, sampled objects) go back as free sends
 *   them. The aligned sized forms are free(): aligned new is rare, and
 *   sdallocx would need the alignment in its flags, off its fast path.
 * HP_CXX_OPERATORS: 2 (the default) as above; 1, the sized forms are
 * free() too; 0, none (the operators are libstdc++'s); 3, sdallocx for
 * every sized delete of the small class (for scripts/bench-cxx only:
 * slower where sdallocx leaves its fast path, see del_sized()).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "core/core.h"
#include "je/je.h"

#ifndef HP_CXX_OPERATORS
#define HP_CXX_OPERATORS 2
#endif

#if HP_CXX_OPERATORS

/* The C++ runtime's operator NAME: libstdc++'s or libc++'s, whichever is
 * loaded (also when a library dlopened RTLD_LOCAL brought it), else the
 * next definition after this library's. Off the fast path: on failure
 * only. */
static void *runtime_op(const char *name) {
	static const char *const libs[] = {"libstdc++.so.6", "libc++.so.1"};
	for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
		void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h != NULL) {
			void *f = dlsym(h, name);
			dlclose(h);          /* it stays loaded: NOLOAD */
			if (f != NULL)
				return f;
		}
	}
	return dlsym(RTLD_NEXT, name);
}

static __attribute__((noreturn, cold)) void no_runtime(const char *name) {
	static const char msg[] =
	    "hugepreload: operator new failed and no C++ runtime to throw\n";
	(void)name;
	ssize_t r = hp_os_write(2, msg, sizeof msg - 1);
	(void)r;
	abort();
}

typedef void *(*op_t)(size_t);
typedef void *(*op_nt_t)(size_t, const void *);
typedef void *(*op_al_t)(size_t, size_t);
typedef void *(*op_al_nt_t)(size_t, size_t, const void *);

/* jemalloc's experimental_infallible_new (MALLOC_CONF), as its own
 * operators honour it: a failed new of any form goes to jemalloc's
 * safety-check abort, which calls the hook a program set through
 * mallctl("experimental.hooks.safety_check_abort") or else aborts; a hook
 * that returns leaves the operator to return NULL. Asked of the option at
 * each failure only. */
void je_safety_check_fail(const char *format, ...);
static bool infallible(void) {
	bool on = false;
	size_t sz = sizeof on;
	if (hp_je_mallctl("opt.experimental_infallible_new", &on, &sz, NULL,
	    0) != 0 || !on)
		return false;
	/* The hook is handed jemalloc's own words, which a hook may compare
	 * (jemalloc's test of the option does). */
	je_safety_check_fail("<jemalloc>: Allocation failed and "
	    "opt.experimental_infallible_new is true. Aborting.\n");
	return true;
}

/* The failure paths, one per signature: the runtime's own operator. */
static __attribute__((noinline, cold)) void *fail(const char *name,
    size_t size) {
	if (infallible())
		return NULL;
	op_t op = (op_t)runtime_op(name);
	if (op == NULL)
		no_runtime(name);
	return op(size);
}
static __attribute__((noinline, cold)) void *fail_nt(const char *name,
    size_t size, const void *nt) {
	if (infallible())
		return NULL;
	op_nt_t op = (op_nt_t)runtime_op(name);
	return op != NULL ? op(size, nt) : NULL;
}
static __attribute__((noinline, cold)) void *fail_al(const char *name,
    size_t size, size_t align) {
	if (infallible())
		return NULL;
	op_al_t op = (op_al_t)runtime_op(name);
	if (op == NULL)
		no_runtime(name);
	return op(size, align);
}
static __attribute__((noinline, cold)) void *fail_al_nt(const char *name,
    size_t size, size_t align, const void *nt) {
	if (infallible())
		return NULL;
	op_al_nt_t op = (op_al_nt_t)runtime_op(name);
	return op != NULL ? op(size, align, nt) : NULL;
}

/* malloc's fast path (entry.c), NULL on failure; inlined into each
 * operator, so the slot is its caller's. */
#define NEW_BODY(size, on_fail) do { \
	void *p_; \
	SLOT_TAKE(size, slow_); \
	p_ = hp_je_op_malloc(size); \
	if (hp_likely(p_ != NULL)) \
		return p_; \
	on_fail; \
slow_: \
	p_ = hp_route_slot(size, HP_CALLER_RA(), false); \
	if (hp_likely(p_ != NULL)) \
		return p_; \
	on_fail; \
} while (0)

/* aligned_alloc's route (entry.c's aligned()); align a power of two. */
static void *aligned_new(size_t size, size_t align) {
	if (size < hp_threshold)
		return align <= HP_MALLOC_ALIGN ? hp_je_malloc(size) :
		    hp_je_memalign(align, size);
	return hp_route_alloc(size, align, false);
}
#define POW2(a) ((a) != 0 && ((a) & ((a) - 1)) == 0)

HP_EXPORT void *_Znwm(size_t size) {
	NEW_BODY(size, return fail("_Znwm", size));
}
HP_EXPORT void *_Znam(size_t size) {
	NEW_BODY(size, return fail("_Znam", size));
}
HP_EXPORT void *_ZnwmRKSt9nothrow_t(size_t size, const void *nt) {
	NEW_BODY(size, return fail_nt("_ZnwmRKSt9nothrow_t", size, nt));
}
HP_EXPORT void *_ZnamRKSt9nothrow_t(size_t size, const void *nt) {
	NEW_BODY(size, return fail_nt("_ZnamRKSt9nothrow_t", size, nt));
}

HP_EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t align) {
	void *p = POW2(align) ? aligned_new(size, align) : NULL;
	return p != NULL ? p : fail_al("_ZnwmSt11align_val_t", size, align);
}
HP_EXPORT void *_ZnamSt11align_val_t(size_t size, size_t align) {
	void *p = POW2(align) ? aligned_new(size, align) : NULL;
	return p != NULL ? p : fail_al("_ZnamSt11align_val_t", size, align);
}
HP_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align,
    const void *nt) {
	void *p = POW2(align) ? aligned_new(size, align) : NULL;
	return p != NULL ? p : fail_al_nt("_ZnwmSt11align_val_tRKSt9nothrow_t",
	    size, align, nt);
}
HP_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t align,
    const void *nt) {
	void *p = POW2(align) ? aligned_new(size, align) : NULL;
	return p != NULL ? p : fail_al_nt("_ZnamSt11align_val_tRKSt9nothrow_t",
	    size, align, nt);
}

/* free(), inlined: no PLT hop back into the library. */
static inline __attribute__((always_inline)) void del(void *p) {
	if (hp_unlikely(hp_maybe_owned(p)))
		hp_route_free_owned(p);
	else
		hp_je_op_free(p);
}

/* The sized forms: size is the one new was given (C++ requires it).
 * jemalloc 5.3's sdallocx takes its fast path only for a size of at most
 * 4 KiB (its size-class lookup table) at an address that is not
 * page-aligned (a page-aligned object may be a profiling sample, whose
 * size class is not its request's); anything else it sends to its slow
 * path, slower than free()'s fast path, which serves every object of a
 * slab (up to 14 KiB), page-aligned or not. hp_je_op_sized_free
 * (je/jefast.c) sends those to free()'s instead; so does NULL
 * (page-aligned), which sdallocx must not see. */
static inline __attribute__((always_inline)) void del_sized(void *p,
    size_t size) {
#if HP_CXX_OPERATORS == 3               /* unguarded: for scripts/bench-cxx */
	if (hp_unlikely(hp_maybe_owned(p)))
		hp_route_free_owned(p);
	else if (hp_likely(p != NULL))
		hp_je_sdallocx(p, size, 0);
#elif HP_CXX_OPERATORS == 2
	/* A wrong size is the program's bug (deleting through a base class
	 * without a virtual destructor, say): sdallocx would file the object
	 * under the wrong size class. Checked in debug builds, as jemalloc
	 * does in its own. */
	hp_assert(p == NULL || hp_maybe_owned(p) ||
	    hp_je_nallocx(size, 0) == hp_je_malloc_usable_size(p));
	if (hp_unlikely(hp_maybe_owned(p)))
		hp_route_free_owned(p);
	else
		hp_je_op_sized_free(p, size);
#else
	(void)size;
	del(p);
#endif
}

HP_EXPORT void _ZdlPv(void *p) { del(p); }
HP_EXPORT void _ZdaPv(void *p) { del(p); }
HP_EXPORT void _ZdlPvm(void *p, size_t size) { del_sized(p, size); }
HP_EXPORT void _ZdaPvm(void *p, size_t size) { del_sized(p, size); }
HP_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) {
	(void)nt;
	del(p);
}
HP_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) {
	(void)nt;
	del(p);
}
HP_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t align) {
	(void)align;
	del(p);
}
HP_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t align) {
	(void)align;
	del(p);
}
HP_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t align) {
	(void)size, (void)align;
	del(p);
}
HP_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t align) {
	(void)size, (void)align;
	del(p);
}
HP_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align,
    const void *nt) {
	(void)align, (void)nt;
	del(p);
}
HP_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align,
    const void *nt) {
	(void)align, (void)nt;
	del(p);
}

#endif /* HP_CXX_OPERATORS */
