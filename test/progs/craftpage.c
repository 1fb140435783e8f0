/* A program not under the library that maps a counters page of its own,
 * as any local user could: a memfd named hugepreload-stats with a valid
 * header (magic, version, its pid) and ranges of one kind, then prints its
 * pid and waits to be killed, for "hugepreload stat" to meet.
 * usage: craftpage KIND, KIND one of
 *   unaligned  one range 0x1000-0x1800 (not whole pages)
 *   huge       128 ranges 0-0x7ffffffff000
 *   overlap    two ranges of a mapping of its own, overlapping
 *   unmapped   one range of whole pages where nothing is mapped
 *   count      small_nranges 1000 (a page holds 128)
 *   region     the huge class's range not on 2 MiB pages
 *   big [GIB]  one range over a 2 TiB (GIB GiB) PROT_NONE mapping of its own
 *   valid      one range over a 4 MiB mapping of its own: a page stat reads */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "base/types.h"

/* size bytes of address space of its own, PROT_NONE. */
static uint64_t own(size_t size) {
	void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("craftpage: mmap");
		_exit(1);
	}
	return (uint64_t)(uintptr_t)p;
}

int main(int argc, char **argv) {
	const char *kind = argc > 1 ? argv[1] : "";
	int fd = memfd_create(HP_STATS_NAME, MFD_CLOEXEC);
	hp_stats_t *st = MAP_FAILED;
	if (fd < 0 || ftruncate(fd, 4096) != 0 || (st = mmap(NULL, 4096,
	    PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		perror("craftpage");
		return 1;
	}
	close(fd);
	memset(st, 0, sizeof *st);
	st->magic = HP_STATS_MAGIC;
	st->version = HP_STATS_VERSION;
	st->narenas = 2;
	st->pid = getpid();
	st->seq = 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	st->updated_ns = (uint64_t)ts.tv_sec * 1000000000ull +
	    (uint64_t)ts.tv_nsec;
	strcpy(st->policy, "crafted");
	strcpy(st->name[0], "small");
	strcpy(st->name[1], "huge0");
	uint64_t (*r)[2] = st->small_ranges;
	if (strcmp(kind, "unaligned") == 0) {
		st->small_nranges = 1;
		r[0][0] = 0x1000;
		r[0][1] = 0x1800;
	} else if (strcmp(kind, "huge") == 0) {
		st->small_nranges = HP_STATS_RANGES;
		for (int i = 0; i < HP_STATS_RANGES; i++) {
			r[i][0] = 0;
			r[i][1] = 0x7ffffffff000ull;
		}
	} else if (strcmp(kind, "overlap") == 0) {
		uint64_t a = own(8 << 20);
		st->small_nranges = 2;
		r[0][0] = a;
		r[0][1] = a + (4 << 20);
		r[1][0] = a + (2 << 20);
		r[1][1] = a + (6 << 20);
	} else if (strcmp(kind, "unmapped") == 0) {
		uint64_t a = own(4 << 20);
		munmap((void *)(uintptr_t)a, 4 << 20);
		st->small_nranges = 1;
		r[0][0] = a;
		r[0][1] = a + (4 << 20);
	} else if (strcmp(kind, "count") == 0) {
		st->small_nranges = 1000;
	} else if (strcmp(kind, "region") == 0) {
		uint64_t a = own(8 << 20);
		st->region_base = a + 4096;
		st->region_size = 4 << 20;
	} else if (strcmp(kind, "big") == 0) {
		size_t size = (argc > 2 ? (size_t)atol(argv[2]) : 2048) << 30;
		st->small_nranges = 1;
		r[0][0] = own(size);
		r[0][1] = r[0][0] + size;
	} else if (strcmp(kind, "valid") == 0) {
		st->small_nranges = 1;
		r[0][0] = own(4 << 20);
		r[0][1] = r[0][0] + (4 << 20);
	} else {
		fprintf(stderr, "craftpage: unknown kind '%s'\n", kind);
		return 2;
	}
	printf("pid=%d\nchild=-1\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
