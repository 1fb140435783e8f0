/* Fork children under a hugetlb cgroup limit: the parent allocates and
 * writes a block, forks N children that are all alive before any of them
 * writes (a pipe holds them), then each child writes the whole block
 * with its own byte and checks it, while the parent writes its copy too.
 * Every copy of a hugetlb page either side makes is charged to the
 * cgroup; one that cannot be had kills the child with SIGBUS.
 * usage: cgfork MIB CHILDREN [raw]
 * raw: the block is mmap(MAP_HUGETLB)ed directly (the control). Prints
 * hugetlb_kb_before_fork, pool_avail_before_fork, child_I=exit:N or child_I=signal:N, sigbus,
 * failed (children not exiting 0) and parent_bad. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "probe.h"

static long check(const unsigned char *b, size_t size, unsigned char c) {
	long bad = 0;
	for (size_t j = 0; j < size; j += 4096)
		bad += b[j] != c;
	return bad;
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	size_t size = (size_t)atol(argv[1]) << 20;
	int n = atoi(argv[2]);
	bool raw = argc > 3 && strcmp(argv[3], "raw") == 0;
	if (n < 1 || n > 64)
		return 2;
	unsigned char *b = raw ? mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0) : malloc(size);
	if (b == MAP_FAILED || b == NULL) {
		printf("alloc_failed=1\n");
		return 0;
	}
	memset(b, 0x11, size);
	long before = probe_hugetlb_kb();
	long pool = probe_meminfo("HugePages_Free:") -
	    probe_meminfo("HugePages_Rsvd:");
	int go[2];
	if (pipe(go) != 0)
		return 3;
	fflush(stdout);
	pid_t pid[64];
	for (int i = 0; i < n; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			return 3;
		if (pid[i] == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 0)    /* until the parent closes */
				_exit(4);
			long bad = check(b, size, 0x11);
			memset(b, 0x20 + i, size);
			bad += check(b, size, (unsigned char)(0x20 + i));
			_exit(bad != 0);
		}
	}
	close(go[0]);
	close(go[1]);                    /* every child is alive: go */
	memset(b, 0xee, size);
	int sigbus = 0, failed = 0;
	for (int i = 0; i < n; i++) {
		int st;
		waitpid(pid[i], &st, 0);
		if (WIFSIGNALED(st))
			printf("child_%d=signal:%d\n", i, WTERMSIG(st));
		else
			printf("child_%d=exit:%d\n", i, WEXITSTATUS(st));
		sigbus += WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS;
		failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	printf("hugetlb_kb_before_fork=%ld\npool_avail_before_fork=%ld\n"
	    "sigbus=%d\nfailed=%d\nparent_bad=%ld\n", before, pool, sigbus,
	    failed, check(b, size, 0xee));
	return 0;
}
