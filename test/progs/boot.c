/* Allocates before main, from the earliest constructor, through dlsym
 * and dlerror (which allocate inside libc), and from new threads' TLS
 * set-up; everything must be served and freed correctly. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *early[64];
static int bad;

__attribute__((constructor(101))) static void first(void) {
	for (int i = 0; i < 64; i++) {
		early[i] = malloc((size_t)(i + 1) * 1000);
		memset(early[i], i, (size_t)(i + 1) * 1000);
	}
	if (dlsym(RTLD_NEXT, "hp_no_such_symbol") != NULL || dlerror() == NULL)
		bad++;
	char *s = strdup("early");
	bad += strcmp(s, "early") != 0;
	free(s);
}

static void *thread(void *arg) {
	char *p = malloc(100);
	free(p);
	return arg;
}

int main(void) {
	for (int i = 0; i < 64; i++) {
		if (early[i][(i + 1) * 1000 - 1] != i)
			bad++;
		free(early[i]);
	}
	pthread_t t[16];
	for (int i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, thread, NULL);
	for (int i = 0; i < 16; i++)
		pthread_join(t[i], NULL);
	printf("bad=%d\n", bad);
	return bad != 0;
}
