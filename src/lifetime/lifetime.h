/* The lifetime layer (src/lifetime/README): which call sites are
 * long-lived, learned from samples or read from a profile. It decides;
 * core/route.c places. */
#ifndef HP_LIFETIME_H
#define HP_LIFETIME_H

#include "longlived/longlived.h"

#pragma GCC visibility push(hidden)

/* slot.c: the fast path's per-thread credits, one per slot (the low byte
 * of the return address). malloc and calloc take the slow path
 * (core/route.c) when theirs runs out. */
#define hp_slots (hp_thread.slots)      /* HP_SLOTS, base.h's block */
void hp_slot_init(size_t threshold, size_t pace);
void hp_slot_pin(uintptr_t key, bool on);
/* Per slot, one wrapper whose key is a return address in it (site.c):
 * that address, and its stride / 8 in the top 16 bits; 0 for none. Its
 * calls skip their first lookup (hp_key_placed). */
#define HP_WRAP_RET (((uint64_t)1 << 48) - 1)
extern uint64_t hp_slot_wrapper[HP_SLOTS];
/* The wrapper word of ret's slot, and whether it is ret's own (its low 48
 * bits: ret, never 0); then its stride is (w >> 48) * 8. */
static inline uint64_t hp_slot_wrapper_of(uintptr_t ret) {
	return __atomic_load_n(&hp_slot_wrapper[(uint8_t)ret], __ATOMIC_ACQUIRE);
}
static inline bool hp_wraps(uint64_t w, uintptr_t ret) {
	return ((w ^ ret) << 16) == 0;
}
void hp_slot_wrap(uintptr_t ret, int32_t stride, bool on);
uint64_t hp_slot_refill(unsigned slot, size_t size, bool *pinned);
void hp_slot_undo(unsigned slot, size_t size);
/* The pinned slot's path (core/route.c): a slot pinned and not credited
 * by this thread, whose credit then goes back to 0. */
bool hp_slot_pinned(unsigned slot);
void hp_slot_settle(unsigned slot);
/* The fast path's step, in the exported entry points themselves (entry.c,
 * cxx.c), so that the return address is their caller's. */
#if defined(__x86_64__)
/* Subtracts size from the caller's slot credit in place; jumps to slow
 * when it runs out (a borrow, or exactly zero). */
#define SLOT_TAKE(size, slow) asm goto( \
	"movq hp_thread@gottpoff(%%rip), %%rdx\n\t" \
	"subq %[sz], %%fs:(%%rdx,%[slot],8)\n\t" \
	"jbe %l[" #slow "]" \
	: : [sz] "r"(size), [slot] "r"((uintptr_t)(uint8_t) \
	    (uintptr_t)__builtin_return_address(0)) \
	: "rdx", "cc", "memory" : slow)
#else
#define SLOT_TAKE(size, slow) do { \
	uint64_t *c_ = &hp_slots[(uint8_t)(uintptr_t) \
	    __builtin_return_address(0)]; \
	if (hp_unlikely(*c_ <= (size))) { *c_ -= (size); goto slow; } \
	*c_ -= (size); \
} while (0)
#endif


/* site.c: allocation sites, keys and lifetime decisions. A key's state:
 * its allocations go to the small class, or to huge pages, or it is a
 * wrapper's, and its callers' keys decide. */
enum { HP_KEY_SMALL = 0, HP_KEY_PLACED = 1, HP_KEY_WRAPPER = 2 };
extern hp_site_t *hp_sites;           /* HP_SITES, from hp_site_init */
/* The key table, read without the lock: a slot's key is set once (0: a
 * free slot); beside it, in one word that is stored whole, its state
 * (HP_KEY_*, the low byte) and a wrapper's stride (the high 32 bits:
 * from where its return address is kept to where its caller's is). */
typedef struct {
	uintptr_t key;               /* hp_key_of or hp_key_mix's */
	uint64_t how;
} hp_key_t;
extern hp_key_t *hp_keys;             /* HP_KEYS */
#define HP_KEY_STATE(how)  ((uint8_t)(how))
#define HP_KEY_STRIDE(how) ((int32_t)((how) >> 32))
#define HP_KEY_HOW(state, stride) \
	((uint64_t)(uint8_t)(state) | (uint64_t)(uint32_t)(stride) << 32)
/* Under the site lock, but for the caught_up counters (catchup.c). */
extern hp_lifetime_counts_t hp_site_counts;
/* A zeroed mapping of 4 KiB pages (MADV_NOHUGEPAGE), or NULL. */
void *hp_site_map(size_t size);
bool hp_site_init(void);
void hp_site_lock(void);
void hp_site_unlock(void);
/* Debug builds: stops unless this thread holds the site lock (for what
 * says "Lock held" or "site lock held"). */
#ifdef HP_DEBUG
void hp_site_assert_locked(void);
#else
#define hp_site_assert_locked() ((void)0)
#endif
/* At exit: the site lock if hp_lock_at_exit takes it (lock.h). */
bool hp_site_lock_at_exit(void);
void hp_site_atfork_child(void);
/* The site of these frames, added if new: its index, or -1 (table full).
 * stride: hp_unwind_frames's, or NULL. Lock held. */
int hp_site_get(const uintptr_t *frames, unsigned n, const int32_t *stride);
/* A sampled object ended short-lived, or turned long-lived. Lock held. */
void hp_site_outcome(int idx, bool long_lived, uint64_t life_ns);
/* A long-lived sampled object was freed after life_ns. Lock held. */
void hp_site_freed_long(int idx, uint64_t life_ns);
/* Sets a site's decision from a profile: 1 promote, -1 small (churny),
 * 0 undecided. Lock held. */
void hp_site_decide(int idx, int decision);
/* Whether a site's allocations go to huge pages now. Lock held. */
bool hp_site_placed(int idx);
/* A key is a hash, whose top bits are its slot in the table: of the
 * malloc call's return address, or, behind a wrapper's key, of that key
 * and the next frame, the return address in the wrapper's caller. The
 * multiplier is odd: no return address has the key 0. */
#define HP_KEY_MUL 0x9e3779b97f4a7c15ull
static inline uintptr_t hp_key_of(uintptr_t ret) {
	return ret * HP_KEY_MUL;
}
static inline uintptr_t hp_key_mix(uintptr_t key, uintptr_t next) {
	return (key ^ next) * HP_KEY_MUL;
}
static inline size_t hp_key_slot(uintptr_t key) {
	return (size_t)(key >> (64 - HP_KEY_BITS));
}
/* The key's slot, probing on from slot i where another key sits; HP_KEYS
 * if it is not in the table. No lock. */
size_t hp_key_probe(uintptr_t key, size_t i);
/* Whether an allocation whose malloc call returns to ret goes to huge
 * pages; ra is where that return address is kept (the stack pointer at
 * malloc's entry). Behind a wrapper's key, the caller's return address is
 * read from the stack at the wrapper's stride, and its key decides. No
 * lock (hp_key_t). */
static inline bool hp_key_placed(uintptr_t ret, const char *ra) {
	/* The slot's byte offset in the table, straight from the key's top
	 * bits: no multiply by the entry's size. */
	HP_STATIC_ASSERT(sizeof(hp_key_t) == 16, "a slot is 16 bytes");
	const char *base = (const char *)hp_keys;
	uintptr_t key = hp_key_of(ret);
	/* The wrapper of this slot: its first level without a lookup. Marked
	 * likely so that the compiler lays these 4 instructions in line: a
	 * call through the wrapper then takes no jump back, and a direct call
	 * takes the branch instead of falling through, for the same count. */
	uint64_t w = hp_slot_wrapper_of(ret);
	if (hp_likely(hp_wraps(w, ret))) {
		ra += (w >> 48) * 8;
		key = hp_key_mix(key, *(const uintptr_t *)ra);
	}
	/* A bound on the levels, not a count of them: wrappers' keys end
	 * HP_SITE_DEPTH - 1 levels down (site.c). */
#pragma GCC unroll 4
	for (unsigned n = 0; n < HP_SITE_DEPTH; n++) {
		size_t off = (size_t)(key >> (64 - HP_KEY_BITS - 4)) & ~(size_t)15;
		const hp_key_t *e = (const hp_key_t *)(base + off);
		if (hp_unlikely(__atomic_load_n(&e->key, __ATOMIC_ACQUIRE) != key)) {
			size_t i = hp_key_probe(key, off / 16);
			if (i == HP_KEYS)
				return false;
			e = &hp_keys[i];
		}
		uint64_t h = __atomic_load_n(&e->how, __ATOMIC_ACQUIRE);
		if (HP_KEY_STATE(h) != HP_KEY_WRAPPER)
			return HP_KEY_STATE(h) == HP_KEY_PLACED;
		ra += HP_KEY_STRIDE(h);
		key = hp_key_mix(key, *(const uintptr_t *)ra);
	}
	return false;
}

/* A pinned slot's call, without the lookup: each thread notes the return
 * addresses whose own keys it found placed (not a wrapper's, whose
 * callers decide), under hp_key_gen as it was before it looked; every
 * change of a key's state adds 1 to it. Notes of the current generation
 * say the key is still placed, so its slot is still pinned, and this
 * thread holds no credit there (hp_slot_refill credits an unpinned slot
 * only). One note per way, the return address's low bits its way. */
#define hp_ra (hp_thread.ra)             /* HP_RA_WAYS of them */
#define hp_ra_gen (hp_thread.ra_gen)     /* the notes' generation */
extern uint64_t hp_key_gen;
static inline uint64_t hp_key_gen_now(void) {
	return __atomic_load_n(&hp_key_gen, __ATOMIC_ACQUIRE);
}
/* While the thread is busy (hp_sample_busy), the generation's top bit is
 * set: that is the flag (hp_sample_busy_set), and hp_ra_hit fails then
 * without a test of its own. */
#define HP_RA_BUSY ((uint64_t)1 << 63)
static inline bool hp_ra_hit(uintptr_t ret) {
	return hp_ra[ret % HP_RA_WAYS] == ret && hp_key_gen_now() == hp_ra_gen;
}
/* hp_key_placed(ret) said true: noted if ret's own key is placed. */
void hp_ra_note(uintptr_t ret);

/* sample.c: sampling, the sample zone, sampled objects' lifetimes. */
extern uintptr_t hp_zone_base;          /* sampled objects live here */
extern size_t hp_zone_size;
bool hp_sample_init(const hp_conf_t *c, uintptr_t zone, size_t zone_size);
/* The allocation that ran out its slot's credit, ret being the return
 * address of the call: used bytes (hp_slot_refill's) go to this thread's
 * sampling count; when it runs out, the allocation is sampled into the
 * zone and returned; NULL otherwise (the caller places it). */
void *hp_sample_take(size_t size, uintptr_t ret, bool zero, uint64_t used);
/* size bytes of a pinned slot, which hp_sample_take would count: counted
 * and true, unless they make a sample due (false, nothing counted). */
void hp_sample_unskip(size_t size);
static inline bool hp_sample_skip(size_t size) {
	/* Without sampling, the budget stays at INT64_MAX (hp_sample_take).
	 * Taken in place, and given back out of line when it runs out: one
	 * subtraction from memory and its branch on the promoted path. In
	 * unsigned arithmetic, so that any size wraps instead of overflowing:
	 * a size over INT64_MAX either runs the budget out or is given back
	 * where the huge class takes it (route.c's placed_huge, placed_ll). */
	if (hp_likely((int64_t)(hp_thread.budget_bits -= size) >= 0))
		return true;
	hp_sample_unskip(size);
	return false;
}
/* This thread is inside the sampler, or placing a promoted object: its
 * nested allocations are neither sampled nor placed. One bit, the top bit
 * of the notes' generation (HP_RA_BUSY), so that hp_ra_hit fails while it
 * is set without a test of its own, and a signal handler's allocation
 * sees one state, whenever it comes. A handler never finds it set and
 * sets it (its allocations, busy, are neither sampled nor placed), and
 * clears what it set before it returns; one that notes a site between
 * the load and the store of a set or clear here has its note's
 * generation overwritten by the older one, which only makes the notes
 * stale. */
#define hp_sample_busy ((hp_ra_gen & HP_RA_BUSY) != 0)
static inline void hp_sample_busy_set(bool on) {
	/* Compiler barriers: what the busy section does stays inside it. */
	if (on) {
		hp_ra_gen |= HP_RA_BUSY;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	} else {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		hp_ra_gen &= ~HP_RA_BUSY;
	}
}
void hp_sample_free(void *p);
static inline bool hp_zone_contains(const void *p) {
	return (uintptr_t)p - hp_zone_base < hp_zone_size;
}


/* unwind.c: call stacks through libunwind, which then opens no descriptor
 * of its own. */
bool hp_unwind_init(const char **why);
/* The frames of the caller of malloc, from the one returning to ret: at
 * most HP_SITE_DEPTH, at least 1 (ret alone); stride[i] (HP_SITE_DEPTH -
 * 1 of them), from where frame i's return address is kept to where frame
 * i + 1's is, 0 where not known. */
unsigned hp_unwind_frames(uintptr_t ret, uintptr_t *out, int32_t *stride);

/* profile.c: the site table written at exit and loaded at start-up. */
bool hp_profile_load(const char *path);
void hp_profile_resolve(void);       /* newly loaded modules */
bool hp_profile_write(const char *path);


/* catchup.c: what a site filled in the small class while it was learned,
 * collapsed onto huge pages once it is promoted. probe: where this
 * thread's next small object of size goes (0 above HP_CATCHUP_MAX_SIZE,
 * jemalloc's largest slab size); queue: a 2 MiB range a promoted site's
 * sample noted (site lock held); run: the maintenance thread's pass. */
#define HP_CATCHUP_MAX_SIZE ((size_t)14336)
uintptr_t hp_catchup_probe(size_t size);
void hp_catchup_queue(uintptr_t addr);
void hp_catchup_run(void);
void hp_catchup_prefork(void);
void hp_catchup_postfork_parent(void);
void hp_catchup_postfork_child(void);

#pragma GCC visibility pop

#endif
