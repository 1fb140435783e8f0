/* glibc's extension API on a heap of both classes: 100 x 1 MiB and
 * 1,000,000 x 100 B allocated; mallinfo2 and mallinfo, malloc_stats (to
 * stderr) and malloc_info (to stdout, between "info:" lines); mallopt's
 * answers to a table of parameters; then all freed and trimmed.
 * prints: requested, mi2_*, mi_*, errno_kept, info_bad, mallopt_N,
 * after_inuse */
#include <errno.h>
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   /* mallinfo */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
	enum { BIG = 100, SMALL = 1000000 };
	static char *big[BIG], *small[SMALL];
	size_t requested = 0;
	printf("start\n");                  /* stdout's buffer, made now */
	fflush(stdout);
	for (int i = 0; i < BIG; i++) {
		big[i] = malloc(1 << 20);
		big[i][0] = 1;
		requested += 1 << 20;
	}
	for (int i = 0; i < SMALL; i++) {
		small[i] = malloc(100);
		small[i][0] = 1;
		requested += 100;
	}
	errno = 1234;
	struct mallinfo2 m2 = mallinfo2();
	struct mallinfo m = mallinfo();
	int kept = errno == 1234;
	malloc_stats();
	kept &= errno == 1234;
	printf("requested=%zu\nmi2_arena=%zu\nmi2_ordblks=%zu\nmi2_hblks=%zu\n"
	    "mi2_hblkhd=%zu\nmi2_uordblks=%zu\nmi2_fordblks=%zu\n"
	    "mi2_keepcost=%zu\nmi_arena=%d\nmi_hblks=%d\nmi_hblkhd=%d\n"
	    "mi_uordblks=%d\nmi_fordblks=%d\n", requested, m2.arena, m2.ordblks,
	    m2.hblks, m2.hblkhd, m2.uordblks, m2.fordblks, m2.keepcost, m.arena,
	    m.hblks, m.hblkhd, m.uordblks, m.fordblks);
	printf("info:\n");
	fflush(stdout);
	int rc = malloc_info(0, stdout);
	fflush(stdout);
	printf("info:\ninfo_rc=%d\nerrno_kept=%d\n", rc, kept);
	errno = 0;
	rc = malloc_info(1, stdout);
	printf("info_bad=%d,%d\n", rc, errno);
	static const int params[][2] = {{M_MXFAST, 64}, {M_MXFAST, 161},
	    {M_MXFAST, -1}, {M_TRIM_THRESHOLD, 1 << 20}, {M_TOP_PAD, 0},
	    {M_MMAP_THRESHOLD, 1 << 20}, {M_MMAP_THRESHOLD, 64 << 20},
	    {M_MMAP_THRESHOLD, -1}, {M_MMAP_MAX, 0}, {M_CHECK_ACTION, 3},
	    {M_PERTURB, 0}, {M_ARENA_TEST, 8}, {M_ARENA_MAX, 2}, {12345, 1}};
	for (size_t i = 0; i < sizeof params / sizeof *params; i++)
		printf("mallopt_%zu=%d\n", i, mallopt(params[i][0], params[i][1]));
	for (int i = 0; i < BIG; i++)
		free(big[i]);
	for (int i = 0; i < SMALL; i++)
		free(small[i]);
	malloc_trim(0);
	m2 = mallinfo2();
	printf("after_inuse=%zu\n", m2.uordblks + m2.hblkhd);
	return 0;
}
