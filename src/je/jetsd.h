/*
 * This thread's jemalloc state as jemalloc's fast paths read it, for the
 * files built against its internal headers (jefast.c, jetc.c): as an
 * address relative to the thread pointer, the initial-exec offset the
 * loader stored for tsd_tls, so that every field, a cache bin's
 * included, is one %fs-relative operand. jemalloc's inline functions take
 * a pointer to it instead, which must first be made from the thread
 * pointer (three instructions on each path).
 */
#ifndef HP_JETSD_H
#define HP_JETSD_H

#include <hp_je_layout.h>

_Static_assert(sizeof(tsd_t) == HP_JE_TSD_SIZE, "jemalloc's thread state in "
    "these headers is not the embedded archive's");
/* What the fast paths take for granted of this configuration. */
#if defined(JEMALLOC_OPT_SIZE_CHECKS) || defined(JEMALLOC_UAF_DETECTION) || \
    defined(JEMALLOC_DEBUG)
#error "jemalloc's fast paths check more in this configuration"
#endif
#if !defined(JEMALLOC_TLS) || !defined(RTREE_LEAF_COMPACT)
#error "jemalloc's thread state or address map is not the one read here"
#endif

#define HP_JE_STR_(x) #x
#define HP_JE_STR(x) HP_JE_STR_(x)
/* Not volatile: the compiler loads the offset once per function. */
static inline __seg_fs tsd_t *hp_je_tsd(void) {
	uintptr_t off;
	__asm__("movq " HP_JE_STR(tsd_tls) "@gottpoff(%%rip), %0" : "=r"(off));
	return (__seg_fs tsd_t *)off;
}
/* Field n of thread state t. */
#define HP_TSD(t, n) ((t)->TSD_MANGLE(n))

/* The cache bin of a slab object p, and its class, from this thread's
 * cache of jemalloc's address map (emap_alloc_ctx_try_lookup_fast):
 * false when the leaf is not in that cache or p is not on a slab. */
static inline __attribute__((always_inline)) bool hp_je_slab_ind(
    __seg_fs tsd_t *t, const void *p, uintptr_t *ind) {
	uintptr_t key = (uintptr_t)p;
	size_t slot = rtree_cache_direct_map(key);
	if (unlikely(HP_TSD(t, rtree_ctx).cache[slot].leafkey !=
	    rtree_leafkey(key)))
		return false;
	rtree_leaf_elm_t *elm = &HP_TSD(t, rtree_ctx).cache[slot].leaf[
	    rtree_subkey(key, RTREE_HEIGHT - 1)];
	uintptr_t bits = (uintptr_t)atomic_load_p(&elm->le_bits,
	    ATOMIC_RELAXED);
	if (unlikely(!rtree_leaf_elm_bits_decode(bits).metadata.slab))
		return false;
	*ind = bits >> LG_VADDR;              /* the decoded szind */
	return true;
}

/* The rest of jemalloc's free fast path once p's class ind is known, on
 * a cache bin of either kind (the thread's own through %fs, jefast.c; an
 * explicit cache's through a pointer, jetc.c: hence a macro): its bytes
 * counted against the thread's event threshold (0 while the thread is
 * not nominal), and p pushed onto the bin (cache_bin_dalloc_easy: full
 * when the head is at the full mark). False, and nothing done, when
 * either cannot be. */
#define HP_JE_DALLOC(t, bin, p, ind) __extension__ ({ \
	uint64_t after_ = HP_TSD(t, thread_deallocated) + \
	    sz_index2size_lookup_impl(ind); \
	void **head_ = (bin)->stack_head; \
	bool ok_ = likely(after_ < \
	    HP_TSD(t, thread_deallocated_next_event_fast)) && \
	    likely((uint16_t)(uintptr_t)head_ != (bin)->low_bits_full); \
	if (ok_) { \
		head_[-1] = (p); \
		(bin)->stack_head = head_ - 1; \
		HP_TSD(t, thread_deallocated) = after_; \
	} \
	ok_; \
})

#endif
