/* dlopen()s a library that allocates; blocks cross the boundary both
 * ways and threads touch its dynamic TLS. usage: dlopen LIB */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static char *(*make)(size_t, int);
static void (*release)(char *);

static void *thread(void *arg) {
	(void)arg;
	long bad = 0;
	for (int i = 0; i < 2000; i++) {
		size_t n = i % 100 == 0 ? (size_t)3 << 20 : (size_t)(1 + i);
		char *p = make(n, i & 0x7f);
		bad += p[n - 1] != (i & 0x7f);
		if (i & 1)
			free(p);               /* freed outside the library */
		else
			release(p);
	}
	return (void *)bad;
}

int main(int argc, char **argv) {
	void *h = dlopen(argc > 1 ? argv[1] : "./libdlalloc.so", RTLD_NOW);
	if (h == NULL) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	make = (char *(*)(size_t, int))dlsym(h, "dl_make");
	release = (void (*)(char *))dlsym(h, "dl_release");
	int (*check)(void) = (int (*)(void))dlsym(h, "dl_check");
	pthread_t t[4];
	long bad = !check();
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, thread, NULL);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (long)r;
	}
	char *p = make(1000, 5);            /* outlives the library */
	dlclose(h);
	bad += p[999] != 5;
	free(p);
	printf("bad=%ld\n", bad);
	return bad != 0;
}
