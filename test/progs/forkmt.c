/* fork() while 4 threads allocate in both classes; every child must be
 * able to allocate, write and free in both classes and exit 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;

static void *churn(void *arg) {
	(void)arg;
	unsigned r = 1;
	while (!stop) {
		r = r * 1103515245 + 12345;
		size_t n = (r >> 8) % 64 == 0 ? (size_t)(1 + r % 4) << 20 : 1 + r % 4096;
		char *p = malloc(n);
		memset(p, 1, n);
		free(p);
	}
	return NULL;
}

static int child(void) {
	for (int i = 0; i < 100; i++) {
		size_t n = i % 10 == 0 ? (size_t)(8 + i) << 20 : (size_t)(16 + i * 7);
		char *p = malloc(n);
		if (p == NULL)
			return 2;
		memset(p, i, n);
		if (p[n - 1] != (char)i)
			return 3;
		free(p);
	}
	return 0;
}

int main(int argc, char **argv) {
	int forks = argc > 1 ? atoi(argv[1]) : 50, failed = 0;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, churn, NULL);
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(child());
		int st;
		waitpid(pid, &st, 0);
		failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("forks=%d\nfailed=%d\n", forks, failed);
	return failed != 0;
}
