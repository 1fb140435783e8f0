/*
 * Start-up: read the policy, start jemalloc with the small class's
 * options, reserve the huge class's address space and create its arena.
 * Runs once, on the first allocation or from the constructor, whichever
 * comes first; allocations made meanwhile by the same thread (jemalloc's
 * own start, pthread_create, dlsym) are served by jemalloc directly.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include "core/core.h"
#include "je/je.h"
#include "base/lock.h"

static int init_state;                 /* 0 not started, 1 running, 2 done */
static HP_TLS bool in_init;

static void report(void *ctx, const char *msg) {
	(void)ctx;
	hp_log("%s", msg);
}

static void atfork_prepare(void) {
	hp_region_prefork();
	hp_edata_prefork();
	hp_jemap_prefork();
	hp_mmap_prefork();
	hp_llpages_prefork();
	hp_catchup_prefork();
	hp_collapse_prefork();
}

static void atfork_parent(void) {
	hp_collapse_postfork_parent();
	hp_catchup_postfork_parent();
	hp_llpages_postfork_parent();
	hp_mmap_postfork_parent();
	hp_jemap_postfork_parent();
	hp_edata_postfork_parent();
	hp_region_postfork_parent();
}

/* The first child handler: the count of locks held (lock.h) starts
 * again, as every lock is made anew here and in the handlers after. */
static void atfork_child(void) {
	hp_locks_forked();
	hp_jefork_child();
	hp_collapse_postfork_child();
	hp_catchup_postfork_child();
	hp_llpages_postfork_child();
	hp_mmap_postfork_child();
	hp_jemap_postfork_child();
	hp_edata_postfork_child();
	hp_region_postfork_child();
	hp_cgroup_atfork_child();
	hp_huge_atfork_child();
	hp_stats_atfork_child();
	hp_maint_atfork_child();
}

static void start(void) {
	hp_os_probe_cpu();
	hp_conf_defaults(&hp_conf);
	if (getauxval(AT_SECURE) == 0)
		hp_conf_parse(&hp_conf, getenv("HUGEPRELOAD_CONF"), report, NULL);
	hp_je_malloc_conf_2_conf_harder = hp_jeconf(&hp_conf);
	/* Before jemalloc starts, so that its fork handlers run inside ours:
	 * see huge/region_fork.c and je/edata.c. (glibc keeps the first 48
	 * handlers without malloc.) */
	hp_assert(!hp_je_atfork_registered());        /* je/jefork.c */
	if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0)
		hp_log("could not register the fork handlers; a fork child may "
		    "hang in its first allocation");

	hp_sys_t sys;
	hp_backing_probe(&sys);
	uintptr_t zone, ll;
	size_t zone_size, ll_size;
	bool lifetime = hp_conf.lifetime != HP_LIFETIME_OFF;
	size_t asked = hp_conf.reserve;
	bool huge = hp_region_init(hp_conf.reserve, lifetime, lifetime &&
	    hp_conf.long_lived == HP_LL_MIMALLOC ? HP_LL_SHARE : 0, &ll,
	    &ll_size, &zone, &zone_size) && hp_huge_init(&hp_conf);
	int why = errno;
	if (huge) {
		/* The policy (the verbose line, the counters' page,
		 * hugepreload_policy) says the reservation made: under
		 * ulimit -v, say, less than asked. */
		hp_conf.reserve = hp_region.granted;
		if (hp_ll_init(&hp_conf, ll, ll_size))
			hp_huge_promoted_elsewhere();
		hp_sample_init(&hp_conf, zone, zone_size);
	}
	char chain[160];
	hp_backing_describe(&sys, chain, sizeof chain);
	/* One line: the policy when verbose, else only what went wrong. */
	bool no_huge = hp_conf.backing != HP_BACKING_NONE &&
	    strncmp(chain, "hugetlb", 7) != 0 && !hp_backing_thp_usable();
	if (hp_conf.verbose) {
		char policy[sizeof ((hp_stats_t *)0)->policy];
		hp_conf_describe(&hp_conf, policy, sizeof policy);
		char lowered[80] = "";
		if (hp_conf.reserve != asked)
			hp_fmt(lowered, sizeof lowered, "; reserve:%zu halved to %zu "
			    "until granted", asked, hp_conf.reserve);
		hp_log("policy %s; huge class on %s (THP enabled=%s defrag=%s); "
		    "small class on 4k (MADV_NOHUGEPAGE)%s", policy, huge ? chain :
		    "4k (no address space reserved)", sys.thp_enabled,
		    sys.thp_defrag, lowered);
	} else if (!huge) {
		hp_log("could not reserve address space for the huge class (%s); "
		    "all memory stays on 4 KiB pages", hp_strerror(why));
	} else if (no_huge) {
		hp_log("transparent huge pages are '%s' and no hugetlb pool is "
		    "reserved; the huge class falls back to 4 KiB pages",
		    sys.thp_enabled);
	}
	size_t threshold = huge ? hp_conf.large_threshold : SIZE_MAX;
	hp_slot_init(threshold, huge && hp_conf.lifetime != HP_LIFETIME_OFF ?
	    hp_conf.lifetime_sample : 0);
	hp_stats_init();
	/* The layers below call up only through these hooks. */
	hp_huge_on_threads = hp_maint_start;
	hp_mmap_on_change = hp_stats_mmap_changed;
	hp_je_fork_hooks(hp_huge_prefork, hp_huge_postfork_parent);
	/* Last but the program's mappings: route.c's slot path takes a
	 * non-zero threshold as start-up done for the allocation paths. */
	__atomic_store_n(&hp_threshold, threshold, __ATOMIC_RELEASE);
	/* The program's own mappings: advised unless backing:none (after the
	 * counters' header, which their first advice publishes). */
	__atomic_store_n(&hp_mmap_threshold, hp_conf.backing ==
	    HP_BACKING_NONE ? SIZE_MAX : hp_conf.mmap_threshold,
	    __ATOMIC_RELEASE);
}

/* True once start-up is done; false inside start-up on its own thread. */
bool hp_init(void) {
	if (hp_likely(__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2))
		return true;
	if (in_init)
		return false;
	int expect = 0;
	if (__atomic_compare_exchange_n(&init_state, &expect, 1, false,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		in_init = true;
		int saved = errno;       /* the program sees none of start-up */
		start();
		errno = saved;
		in_init = false;
		__atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
		return true;
	}
	while (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		sched_yield();
	return true;
}

/* Priority 101: before jemalloc's own constructor in this library, so
 * jemalloc never starts without the options above. */
__attribute__((constructor(101))) static void hp_ctor(void) {
	hp_init();
}
