/* The Redis BGSAVE pattern: a child reads the memory it inherited while
 * the parent keeps writing it, with the hugetlb pool exactly used up.
 * The child must not die of SIGBUS and must see the data as of the fork.
 * usage: forkcow [malloc|raw] [MiB per block] [max blocks]
 * raw: the blocks are mmap(MAP_HUGETLB)ed directly, without the library's
 * care: the control that shows what happens otherwise. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "probe.h"

/* Pool pages nobody holds: free and not reserved by a mapping (a mapped
 * page stays "free" until first touched). */
static long pool_avail(void) {
	return probe_meminfo("HugePages_Free:") - probe_meminfo("HugePages_Rsvd:");
}

static long hugetlb_kb(void) {
	probe_vma_t *v;
	size_t n = probe_vmas(&v);
	long kb = 0;
	for (size_t i = 0; i < n; i++)
		kb += v[i].private_hugetlb_kb;
	free(v);
	return kb;
}

int main(int argc, char **argv) {
	int raw = argc > 1 && strcmp(argv[1], "raw") == 0;
	size_t size = (size_t)(argc > 2 ? atol(argv[2]) : 8) << 20;
	int max = argc > 3 ? atoi(argv[3]) : 64, n = 0;
	unsigned char *b[256];
	/* Use the pool up: blocks until no free page is left. */
	while (n < max && n < 256 && pool_avail() > 0) {
		b[n] = raw ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		    MAP_ANONYMOUS | MAP_HUGETLB, -1, 0) : malloc(size);
		if (b[n] == MAP_FAILED || b[n] == NULL)
			break;
		memset(b[n], n + 1, size);
		n++;
	}
	long held = hugetlb_kb(), avail_before = pool_avail();
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		usleep(300 * 1000);          /* the parent writes meanwhile */
		long bad = 0;
		for (int i = 0; i < n; i++)
			for (size_t j = 0; j < size; j += 4096)
				bad += b[i][j] != (unsigned char)(i + 1);
		_exit(bad != 0);
	}
	for (int i = 0; i < n; i++)
		memset(b[i], 0xee, size);
	int st;
	waitpid(pid, &st, 0);
	long parent_bad = 0;
	for (int i = 0; i < n; i++)
		parent_bad += b[i][size - 1] != 0xee;
	printf("blocks=%d\nhugetlb_kb_before_fork=%ld\npool_avail_before_fork=%ld\n"
	    "hugetlb_kb_after_fork=%ld\nchild_exit=%d\nchild_signal=%d\n"
	    "parent_bad=%ld\n", n, held, avail_before, hugetlb_kb(),
	    WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ?
	    WTERMSIG(st) : 0, parent_bad);
	return 0;
}
