/* The pages layer (src/pages/README): how 2 MiB pages are mapped, given
 * back and accounted 4 KiB part by part, within the hugetlb cgroup's room. */
#ifndef HP_PAGES_H
#define HP_PAGES_H

#include "base/base.h"

#pragma GCC visibility push(hidden)

/* hpage.c: one 2 MiB page's bitmap of 4 KiB parts (hp_hpage_t), shared
 * by the huge class's region and the long-lived class's pages. */
/* Marks [first, first+n)
 * subpages of *pg released; true when the page is empty and dirty, so it
 * should be given back. */
bool hp_hpage_release(hp_hpage_t *pg, unsigned first, unsigned n);
/* Marks them reused; sets bits in *zero for subpages that must be zeroed. */
void hp_hpage_reuse(hp_hpage_t *pg, unsigned first, unsigned n, uint64_t *zero);
/* Gives back the free 4 KiB parts of the page at hp that may still be
 * resident (MADV_DONTNEED) and marks them clean: those handed out since
 * it was last given back or, to split a THP page, every free part (it is
 * resident whole, parts never handed out included). With split, each run
 * is first
 * advised MADV_FREE: MADV_DONTNEED alone splits only the mapping of a THP
 * page, which then stays allocated whole on the kernel's deferred-split
 * queue until memory runs short (out of RSS and AnonHugePages, not back
 * in MemFree); MADV_FREE splits a large folio only partly in its range
 * (mm/madvise.c), so the parts go back at once. */
void hp_hpage_purge(uintptr_t hp, hp_hpage_t *pg, bool split);
/* An empty page went back to the kernel: it reads as zero now. */
void hp_hpage_zapped(hp_hpage_t *pg);
/* Debug builds (inside hp_assert only): the page's count of released
 * parts is its bitmap's, and every part held is dirty (handed out since
 * the page was last given back): a held part not marked dirty would be
 * taken back as zeroed without being zeroed, and its page never given
 * back. */
bool hp_hpage_valid(const hp_hpage_t *pg);
/* Bit i of a page's bitmap. */
static inline bool hp_hpage_bit(const uint64_t *m, unsigned i) {
	return (m[i / 64] >> (i % 64)) & 1;
}


/* cgroup.c: the hugetlb cgroup limits that bind this process. Pages of
 * size page it may still reserve and fault, the least over its cgroup and
 * their ancestors (LONG_MAX if none is limited); why, if not NULL, names
 * the limit that binds. */
long hp_cgroup_room(size_t page, char *why, size_t n);
/* Finds the cgroup directories again (maintenance pass). */
void hp_cgroup_refresh(void);
/* For tests: read these files instead of /proc/self's; true if a limited
 * level was found. */
bool hp_cgroup_use(const char *cgroup_file, const char *mountinfo_file);
void hp_cgroup_atfork_child(void);

/* backing.c: how 2 MiB pages are mapped and given back. */
typedef struct {
	char thp_enabled[16];    /* always | madvise | never | absent */
	char thp_defrag[16];
	long pool_total, pool_avail;   /* of the configured hugetlb size */
} hp_sys_t;
void hp_backing_probe(hp_sys_t *s);
void hp_backing_poll(void);
const char *hp_backing_describe(const hp_sys_t *s, char *buf, size_t n);
long hp_backing_pool_avail(size_t page);
/* The pool's available pages, as far as the hugetlb cgroup lets this
 * process have them. */
long hp_backing_room(size_t page);
/* Maps a prefix of the PROT_NONE run [addr, addr + len) with the best
 * backing available; returns its length (0 on failure) and its type. */
size_t hp_backing_map(uintptr_t addr, size_t len, hp_map_t *type);
bool hp_backing_map_gib(uintptr_t addr);
void hp_backing_collapse(uintptr_t addr, size_t len);
bool hp_backing_zap(uintptr_t addr, size_t len, hp_map_t type);
void *hp_backing_copy(uintptr_t addr, size_t len);
bool hp_backing_thp_usable(void);
/* The long-lived class's arenas: pool pages mapped at addr (a multiple of
 * unit, at most max; 0 for none), and the advice for the rest. */
size_t hp_backing_map_pool(uintptr_t addr, size_t max, size_t unit);
bool hp_backing_advise(uintptr_t addr, size_t len);

/* Fallbacks by cause, counted where they happen (backing.c, huge.c):
 * regions that wanted the pool and found it empty, that wanted THP with
 * THP off, and requests the huge class could not map at all. */
typedef struct {
	uint64_t pool_empty, thp_off, mmap_failed;
	uint64_t foreign;        /* hook calls with a range not ours: refused */
} hp_backing_fallbacks_t;
extern hp_backing_fallbacks_t hp_backing_fallbacks;

/* The hugetlb pages the huge class's region holds, by size (its
 * hp_region_t counters): the pool's chain says "dry" once it ran out
 * with some held, and the long-lived class leaves the pool as many
 * pages as these for a fork's copies. Set once by the region. */
void hp_backing_watch(const size_t *held_2m, const size_t *held_1g);

#pragma GCC visibility pop

#endif
