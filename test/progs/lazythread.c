/* Counts this process's threads after small allocations only, then after
 * one huge-class allocation: the library's decay thread must not exist
 * before the huge class is used. With "threads": then a second thread's
 * small allocations, and how many threads there are after it ended.
 * With "fork": a second thread that has not allocated forks, and the
 * child, single-threaded, counts its threads after small allocations.
 * With "bg N MS": N-1 threads one after another beside the main thread,
 * each making small allocations, then jemalloc's background threads
 * (named jemalloc_bg_thd) counted, again every 10 ms until one is there
 * or MS have passed. With "hold": a huge-class allocation (the library's
 * threads start), then its pid printed (pid=, child=-1), then it waits to
 * be killed; "hold off" first turns jemalloc's background threads off
 * through mallctl, as a program linked with jemalloc may. */
#include <dirent.h>
#include <dlfcn.h>
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

/* This process's threads named jemalloc_bg_thd. */
static int background_threads(void) {
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f != NULL && fgets(comm, sizeof comm, f) != NULL)
			n += strncmp(comm, "jemalloc_bg_thd", 15) == 0;
		if (f != NULL)
			fclose(f);
	}
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
	if (argc >= 2 && strcmp(argv[1], "hold") == 0) {
		if (argc > 2 && strcmp(argv[2], "off") == 0) {
			int (*ctl)(const char *, void *, size_t *, void *, size_t) =
			    (int (*)(const char *, void *, size_t *, void *,
			    size_t))dlsym(RTLD_DEFAULT, "mallctl");
			bool off = false;
			if (ctl == NULL || ctl("background_thread", NULL, NULL, &off,
			    sizeof off) != 0)
				return 1;
		}
		char *volatile p = malloc(8 << 20);
		memset(p, 1, 8 << 20);
		printf("pid=%d\nchild=-1\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	if (argc == 4 && strcmp(argv[1], "bg") == 0) {
		int n = atoi(argv[2]), ms = atoi(argv[3]), waited = 0, bg;
		small(NULL);
		for (int i = 1; i < n; i++) {
			pthread_t t;
			pthread_create(&t, NULL, small, NULL);
			pthread_join(t, NULL);
		}
		while ((bg = background_threads()) == 0 && waited < ms) {
			usleep(10000);
			waited += 10;
		}
		printf("bg_threads=%d\nwaited_ms=%d\n", bg, waited);
		return 0;
	}
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
