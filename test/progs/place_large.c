/* One large allocation, written; where it landed; then freed and trimmed,
 * and what the hugetlb pools hold. With "fork", a child then does the
 * same, its keys prefixed child_ (the parent waits for it).
 * usage: place_large [MiB] [fork] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hpclass.h"
#include "probe.h"

static int place(size_t n, const char *k) {
	long free0 = probe_meminfo("HugePages_Free:");
	unsigned char *p = malloc(n);
	if (p == NULL)
		return 2;
	memset(p, 0x5a, n);
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	const probe_vma_t *m = probe_find(v, nv, p);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += p[i] != 0x5a;
	printf("%sclass=%d\n%ssize=%zu\n%shg=%d\n%snh=%d\n%sthp_bytes=%lld\n"
	    "%svma_anon_huge_kb=%ld\n%svma_hugetlb_kb=%ld\n%skernel_page_kb=%ld\n"
	    "%sdata_ok=%d\n%spool_free_before=%ld\n%spool_free_after=%ld\n",
	    k, hp_class_of(p), k, n, k, m && probe_has_flag(m, "hg"),
	    k, m && probe_has_flag(m, "nh"), k, probe_thp_bytes(p, n),
	    k, m ? m->anon_huge_kb : -1, k, m ? m->private_hugetlb_kb : -1,
	    k, m ? m->kernel_page_kb : -1, k, bad == 0, k, free0,
	    k, probe_meminfo("HugePages_Free:"));
	free(p);
	free(v);
	malloc_trim(0);
	printf("%spool_free_after_trim=%ld\n%sgib_free_after_trim=%ld\n",
	    k, probe_meminfo("HugePages_Free:"), k, probe_sysfs_long(
	    "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"));
	return 0;
}

int main(int argc, char **argv) {
	size_t n = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
	int rc = place(n, "");
	if (rc != 0 || argc < 3 || strcmp(argv[2], "fork") != 0)
		return rc;
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		rc = place(n, "child_");
		fflush(stdout);
		_exit(rc);
	}
	int st;
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st))
		return 3;
	return WEXITSTATUS(st);
}
