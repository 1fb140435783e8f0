/* A counters page that the library did not write: what any local user can
 * put in front of "hugepreload stat". Run without the library, it maps a
 * memfd named hugepreload-stats with a valid header and one sane range (a
 * 2 MiB-aligned mapping of its own, written), then prints pid= and
 * child= and waits for a signal.
 * usage: fakepage strings|dups
 *   strings  a policy string of terminal escapes (CSI, OSC, BEL), bytes
 *            that are not UTF-8, a C1 control, DEL, quotes, backslashes,
 *            CR, tab and newlines that spell a forged sample; an arena
 *            name with an escape in it; two arenas
 *   dups     a plain policy, four arenas all named "small" */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "base/types.h"

/* 301 bytes: the page holds 320. */
static const char hostile[] =
    "\x1b[2J\x1b[H\x1b]0;owned\x07"               /* clear, home, title */
    " csi:\x1b[31mred\x1b[0m"
    " notutf8:\x80\xbf\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xfe\xff\xe2\x82"
    " c1:\xc2\x9b" "31m"
    " del:\x7f"
    " quote:\" backslash:\\ slashx:\\x41"
    " cr:\r tab:\t"
    " ok:\xc3\xa9\xe2\x82\xac"                     /* U+00E9, U+20AC */
    " nl:\n# TYPE hugepreload_forged gauge\n"
    "hugepreload_forged{pid=\"1\"} 1\nhugepreload: forged line\n";

int main(int argc, char **argv) {
	_Static_assert(sizeof hostile < sizeof ((hp_stats_t *)0)->policy,
	    "the policy fits");
	bool dups = argc > 1 && strcmp(argv[1], "dups") == 0;
	if (argc != 2 || (!dups && strcmp(argv[1], "strings") != 0)) {
		fprintf(stderr, "usage: fakepage strings|dups\n");
		return 2;
	}
	/* The range: 2 MiB aligned, mapped and written by this process. */
	char *m = mmap(NULL, 2 * HP_HUGE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	char *range = (char *)(((uintptr_t)m + HP_HUGE - 1) & ~(HP_HUGE - 1));
	memset(range, 1, HP_HUGE);
	int fd = memfd_create(HP_STATS_NAME, MFD_CLOEXEC);
	hp_stats_t *st = MAP_FAILED;
	if (fd >= 0 && ftruncate(fd, HP_PAGE) == 0)
		st = mmap(NULL, HP_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (st == MAP_FAILED) {
		perror("memfd");
		return 1;
	}
	close(fd);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	st->version = HP_STATS_VERSION;
	st->pid = getpid();
	st->seq = 0;
	st->updated_ns = (uint64_t)now.tv_sec * 1000000000ull +
	    (uint64_t)now.tv_nsec;
	st->small_nranges = 1;
	st->small_kernel = 1;
	st->small_ranges[0][0] = (uintptr_t)range;
	st->small_ranges[0][1] = (uintptr_t)range + HP_HUGE;
	/* The duplicates with a plain policy: the names alone at fault. */
	if (dups)
		strcpy(st->policy, "large_threshold:1048576,backing:auto");
	else
		memcpy(st->policy, hostile, sizeof hostile);
	if (dups) {
		st->narenas = 4;
		for (int a = 0; a < 4; a++)
			strcpy(st->name[a], "small");
	} else {
		st->narenas = 2;
		strcpy(st->name[0], "small");
		strcpy(st->name[1], "huge\x1b[7m\xff");
	}
	for (unsigned a = 0; a < st->narenas; a++)
		st->arena[a].live_bytes = 4096 * (a + 1);
	__atomic_store_n(&st->magic, HP_STATS_MAGIC, __ATOMIC_RELEASE);
	printf("pid=%d\nchild=-1\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
