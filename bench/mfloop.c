/* A tight loop of malloc(size) + free: the fast path, for callgrind.
 * usage: mfloop [iterations] [size] [index|promoted]
 * With "index", another site of the program first builds a long-lived
 * index (64 MiB of size-byte nodes), waits past lifetime_ms and warms up,
 * so that under lifetime learning that site is promoted before the loop;
 * it prints to stderr whether the index's newest node is in the huge
 * class. With "promoted", the loop then allocates from that promoted
 * site itself: what a long-lived allocation costs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t node_size = 256;

/* One call site for every node (not a tail call, whose return address
 * would be each caller's). */
static long nodes_made;
static __attribute__((noinline)) void *index_node(void) {
	void *p = malloc(node_size);
	nodes_made++;
	return p;
}

static void build_index(size_t size) {
	long nodes_n = (64L << 20) / (long)node_size;
	void **nodes = calloc((size_t)nodes_n, sizeof *nodes);
	if (nodes == NULL)
		exit(1);
	for (long i = 0; i < nodes_n; i++)
		if ((nodes[i] = index_node()) == NULL)
			exit(1);
	nanosleep(&(struct timespec){0, 600 * 1000000L}, NULL);
	void *volatile sink;
	for (long i = 0; i < 1000000; i++) {     /* ages the samples */
		void *p = malloc(size);
		sink = p;
		free(p);
	}
	(void)sink;
	int (*class_of)(const void *) = (int (*)(const void *))dlsym(
	    RTLD_DEFAULT, "hugepreload_class");
	/* A promoted site is looked up once its slot's credit, at most a
	 * quarter of the sampling interval, runs out: 1 MiB more. */
	void *probe = NULL;
	for (int i = 0; i < 4096; i++)
		probe = index_node();
	fprintf(stderr, "index promoted: %s\n", class_of == NULL ? "n/a" :
	    class_of(probe) == 2 ? "yes" : "no");
	/* The index stays live for the whole run. */
}

/* The measured loop, on its own: callgrind --toggle-collect=loop. */
static __attribute__((noinline)) void loop(long n, size_t size,
    int promoted) {
	void *volatile sink;
	for (long i = 0; i < n; i++) {
		void *p = promoted ? index_node() : malloc(size);
		sink = p;
		free(p);
	}
	(void)sink;
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
	int promoted = argc > 3 && strcmp(argv[3], "promoted") == 0;
	if (promoted)
		node_size = size;
	if (argc > 3 && (strcmp(argv[3], "index") == 0 || promoted))
		build_index(size);
	loop(n, size, promoted);
	return 0;
}
