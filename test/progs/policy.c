/* Prints the effective policy and the class of one allocation.
 * usage: policy [bytes] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpclass.h"
#include "probe.h"
#include "base/types.h"

int main(int argc, char **argv) {
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
	int (*pol)(char *, size_t) = (int (*)(char *, size_t))dlsym(RTLD_DEFAULT,
	    "hugepreload_policy");
	char buf[512] = "none";
	if (pol)
		pol(buf, sizeof buf);
	char *p = malloc(n);
	memset(p, 1, n);
	probe_vma_t *v;
	size_t nv = probe_vmas(&v);
	const probe_vma_t *m = probe_find(v, nv, p);
	/* The largest mapping without access: the huge class's reservation
	 * while nothing of it is used (PROT_NONE: no rd, wr or ex). */
	size_t none_max = 0;
	for (size_t i = 0; i < nv; i++)
		if (!probe_has_flag(&v[i], "rd") && !probe_has_flag(&v[i], "wr") &&
		    !probe_has_flag(&v[i], "ex") && v[i].end - v[i].start > none_max)
			none_max = v[i].end - v[i].start;
	hp_stats_t st;
	printf("policy=%s\nclass=%d\nhg=%d\nnh=%d\nstats_page=%d\n"
	    "none_max=%zu\n", buf, hp_class_of(p), m && probe_has_flag(m, "hg"),
	    m && probe_has_flag(m, "nh"), probe_stats(&st), none_max);
	free(p);
	free(v);
	return 0;
}
