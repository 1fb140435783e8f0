/* The lifetime layer (src/lifetime/README): which call sites are
 * long-lived, learned from samples or read from a profile. It decides;
 * core/route.c places. */
#ifndef HP_LIFETIME_H
#define HP_LIFETIME_H

#include "longlived/longlived.h"

#pragma GCC visibility push(hidden)

/* site.c: allocation sites, keys and lifetime decisions. */
extern hp_site_t *hp_sites;           /* HP_SITES, from hp_site_init */
extern uintptr_t *hp_key_tab;         /* HP_KEYS */
extern uint8_t *hp_key_on;            /* HP_KEYS */
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
 * Lock held. */
int hp_site_get(const uintptr_t *frames, unsigned n);
/* A sampled object ended short-lived, or turned long-lived. Lock held. */
void hp_site_outcome(int idx, bool long_lived, uint64_t life_ns);
/* A long-lived sampled object was freed after life_ns. Lock held. */
void hp_site_freed_long(int idx, uint64_t life_ns);
/* Sets a site's decision from a profile: 1 promote, -1 small (churny),
 * 0 undecided. Lock held. */
void hp_site_decide(int idx, int decision);
static inline size_t hp_key_hash(uintptr_t key) {
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 51) & (HP_KEYS - 1);
}
/* Whether allocations from this return address go to huge pages. No lock:
 * slots are filled once and never emptied. */
static inline bool hp_key_promoted(uintptr_t key) {
	for (size_t i = hp_key_hash(key);; i = (i + 1) & (HP_KEYS - 1)) {
		uintptr_t k = __atomic_load_n(&hp_key_tab[i], __ATOMIC_ACQUIRE);
		if (k == key)
			return __atomic_load_n(&hp_key_on[i], __ATOMIC_ACQUIRE);
		if (k == 0)
			return false;
	}
}


/* sample.c: sampling, the sample zone, sampled objects' lifetimes. */
extern uintptr_t hp_zone_base;          /* sampled objects live here */
extern size_t hp_zone_size;
bool hp_sample_init(const hp_conf_t *c, uintptr_t zone, size_t zone_size);
/* The allocation that ran out its slot's credit, ret being the return
 * address of the call: used bytes (hp_slot_refill's) go to this thread's
 * sampling count; when it runs out, the allocation is sampled into the
 * zone and returned; NULL otherwise (the caller places it). */
void *hp_sample_take(size_t size, uintptr_t ret, bool zero, uint64_t used);
/* This thread is inside the sampler, or placing a promoted object: its
 * nested allocations are neither sampled nor placed. */
extern HP_TLS bool hp_sample_busy;
void hp_sample_free(void *p);
static inline bool hp_zone_contains(const void *p) {
	return (uintptr_t)p - hp_zone_base < hp_zone_size;
}


/* slot.c: the fast path's per-thread credits, one per slot (the low byte
 * of the return address). malloc and calloc take the slow path
 * (core/route.c) when theirs runs out. */
#define HP_SLOTS 256
extern HP_TLS uint64_t hp_slots[HP_SLOTS];
void hp_slot_init(size_t threshold, size_t pace);
void hp_slot_pin(uintptr_t key, bool on);
uint64_t hp_slot_refill(unsigned slot, size_t size, bool *pinned);
void hp_slot_undo(unsigned slot, size_t size);
/* The fast path's step, in the exported entry points themselves (entry.c,
 * cxx.c), so that the return address is their caller's. */
#if defined(__x86_64__)
/* Subtracts size from the caller's slot credit in place; jumps to slow
 * when it runs out (a borrow, or exactly zero). */
#define SLOT_TAKE(size, slow) asm goto( \
	"movq hp_slots@gottpoff(%%rip), %%rdx\n\t" \
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


/* unwind.c: call stacks through libunwind, which then opens no descriptor
 * of its own. */
bool hp_unwind_init(const char **why);
/* The frames of the caller of malloc, from the one returning to ret: at
 * most HP_SITE_DEPTH, at least 1 (ret alone). */
unsigned hp_unwind_frames(uintptr_t ret, uintptr_t *out);

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
