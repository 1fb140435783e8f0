/* Allocates in both classes, then sleeps: a running program for
 * "hugepreload stat" to read. With "fork", a child does the same.
 * usage: sleeper SECONDS [fork] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
	int secs = argc > 1 ? atoi(argv[1]) : 3;
	char *volatile big = malloc(64 << 20), *volatile small = malloc(100);
	memset(big, 1, 64 << 20);
	memset(small, 1, 100);
	pid_t child = -1;
	if (argc > 2 && strcmp(argv[2], "fork") == 0 && (child = fork()) == 0) {
		char *volatile c = malloc(32 << 20);
		memset(c, 2, 32 << 20);
		sleep((unsigned)secs);
		exit(0);                 /* exit handlers remove its file */
	}
	printf("pid=%d\nchild=%d\n", (int)getpid(), (int)child);
	fflush(stdout);
	sleep((unsigned)secs);
	if (child > 0)
		waitpid(child, NULL, 0);
	return 0;
}
