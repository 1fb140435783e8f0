/* The library exports the malloc family, jemalloc's API, C++'s operators,
 * the mmap family and the public API, nothing else. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

Test(exports, exactly_the_malloc_family_and_public_api) {
	const char *want[] = {
	    /* C++'s operator delete and new, jemalloc's twenty (src/cxx.c) */
	    "_ZdaPv", "_ZdaPvRKSt9nothrow_t", "_ZdaPvSt11align_val_t",
	    "_ZdaPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvm",
	    "_ZdaPvmSt11align_val_t", "_ZdlPv", "_ZdlPvRKSt9nothrow_t",
	    "_ZdlPvSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
	    "_ZdlPvm", "_ZdlPvmSt11align_val_t", "_Znam", "_ZnamRKSt9nothrow_t",
	    "_ZnamSt11align_val_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
	    "_Znwm", "_ZnwmRKSt9nothrow_t", "_ZnwmSt11align_val_t",
	    "_ZnwmSt11align_val_tRKSt9nothrow_t",
	    "aligned_alloc", "calloc", "dallocx", "free",
	    "hugepreload_class", "hugepreload_policy", "hugepreload_version",
	    "madvise", "mallctl", "mallctlbymib", "mallctlnametomib", "mallinfo",
	    "mallinfo2", "malloc", "malloc_info", "malloc_stats",
	    "malloc_stats_print", "malloc_trim", "malloc_usable_size",
	    "mallocx", "mallopt", "memalign", "mmap", "mmap64", "mprotect",
	    "mremap", "munmap", "nallocx",
	    "posix_memalign", "pvalloc", "rallocx", "realloc", "reallocarray",
	    "sallocx", "sdallocx", "valloc", "xallocx"};
	char cmd[600];
	snprintf(cmd, sizeof cmd, "nm -D --defined-only %s | awk '{print $3}' "
	    "| LC_ALL=C sort", hp_path("libhugepreload.so"));
	FILE *f = popen(cmd, "r");
	char line[256];
	size_t n = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		cr_assert_lt(n, sizeof want / sizeof *want, "extra export %s", line);
		cr_assert_str_eq(line, want[n], "export %zu", n);
		n++;
	}
	cr_assert_eq(pclose(f), 0);
	cr_assert_eq(n, sizeof want / sizeof *want, "only %zu exports", n);
}
