/* Counts this process's threads after small allocations only, then after
 * one huge-class allocation: the library's decay thread must not exist
 * before the huge class is used. With "threads": then a second thread's
 * small allocations, and how many threads there are after it ended.
 * With "fork": a second thread that has not allocated forks, and the
 * child, single-threaded, counts its threads after small allocations. */
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int tasks(void) {
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void *small(void *arg) {
	(void)arg;
	for (int i = 0; i < 100000; i++) {
		char *volatile p = malloc((size_t)(i % 4000) + 1);
		*p = 1;              /* volatile and written: not optimised out */
		free(p);
	}
	return NULL;
}

static void *forker(void *arg) {
	(void)arg;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		small(NULL);
		printf("child_threads=%d\n", tasks());
		fflush(stdout);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return (void *)(intptr_t)(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv) {
	if (argc > 1) {
		small(NULL);
		pthread_t t;
		void *ok = (void *)1;
		bool fork_mode = strcmp(argv[1], "fork") == 0;
		pthread_create(&t, NULL, fork_mode ? forker : small, NULL);
		pthread_join(t, fork_mode ? &ok : NULL);
		printf("threads_after_second=%d\nok=%d\n", tasks(), ok != NULL);
		return 0;
	}
	for (int i = 0; i < 100000; i++)
		free(malloc((size_t)(i % 4000) + 1));
	printf("threads_small_only=%d\n", tasks());
	char *volatile p = malloc(8 << 20);    /* volatile: not optimised out */
	memset(p, 1, 8 << 20);
	printf("threads_after_huge=%d\n", tasks());
	free(p);
	return 0;
}
