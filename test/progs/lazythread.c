/* Counts this process's threads after small allocations only, then after
 * one huge-class allocation: the library's decay thread must not exist
 * before the huge class is used. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tasks(void) {
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(void) {
	for (int i = 0; i < 100000; i++)
		free(malloc((size_t)(i % 4000) + 1));
	printf("threads_small_only=%d\n", tasks());
	char *volatile p = malloc(8 << 20);    /* volatile: not optimised out */
	memset(p, 1, 8 << 20);
	printf("threads_after_huge=%d\n", tasks());
	free(p);
	return 0;
}
