/* Allocates in both classes, prints its pid, then waits to be killed: a
 * running program for "hugepreload stat" to read. With "fork", a child
 * that allocates 32 MiB of its own waits too (its pid as child=).
 * usage: sleeper [fork] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	char *volatile big = malloc(64 << 20), *volatile small = malloc(100);
	memset(big, 1, 64 << 20);
	memset(small, 1, 100);
	pid_t child = -1;
	fflush(stdout);
	if (argc > 1 && strcmp(argv[1], "fork") == 0 && (child = fork()) == 0) {
		char *volatile c = malloc(32 << 20);
		memset(c, 2, 32 << 20);
		for (;;)
			pause();
	}
	printf("pid=%d\nchild=%d\n", (int)getpid(), (int)child);
	fflush(stdout);
	for (;;)
		pause();
}
