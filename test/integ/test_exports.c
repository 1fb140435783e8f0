/* The library exports the malloc family, jemalloc's API, C++'s operators,
 * the mmap family and the public API, nothing else. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

Test(exports, exactly_the_malloc_family_and_public_api) {
	const char *want[] = {
	    /* C++'s operator delete and new, jemalloc's twenty (api/cxx.c) */
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

/* src/base/os.c is the library's only door to the kernel: no other object of
 * the library, and nothing of its embedded jemalloc, calls a system call
 * by name (the build renames jemalloc's calls to os.c's). */
Test(exports, system_calls_only_in_os_c) {
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "cd %s && for o in obj/*/*.o; do "
	    "[ \"$o\" = obj/base/os.o ] && continue; nm -u \"$o\"; done; "
	    "nm -u %s 2>/dev/null", hp_path(""), hp_path("libjemalloc_hp.a"));
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	static const char *const calls[] = {"mmap", "mmap64", "munmap",
	    "madvise", "mprotect", "mremap", "mincore", "ioctl", "open",
	    "open64", "openat", "creat", "read", "pread", "write", "close",
	    "readlink", "fstat", "rename", "unlink", "memfd_create", "ftruncate",
	    "fcntl", "syscall", "sbrk", "fopen"};
	char line[256], bad[2048] = "";
	bool door = false;                 /* the objects were read: they call
	                                      os.c's hp_os_mmap */
	while (fgets(line, sizeof line, f)) {
		char sym[200];
		if (sscanf(line, " U %199s", sym) != 1)
			continue;
		door |= strcmp(sym, "hp_os_mmap") == 0;
		char *at = strchr(sym, '@');
		if (at)
			*at = '\0';
		for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
			if (strcmp(sym, calls[i]) == 0 && strlen(bad) < 1900) {
				strcat(bad, " ");
				strcat(bad, sym);
			}
	}
	pclose(f);
	cr_assert(door, "no object calls hp_os_mmap: were they read?");
	cr_assert_eq(bad[0], '\0', "system calls outside src/base/os.c:%s", bad);
}
