/* A tight loop of malloc(size) + free: the fast path, for callgrind.
 * usage: mfloop [iterations] [size] [index|promoted|promoted_w|beside_w]
 * With "index", another site of the program first builds a long-lived
 * index (64 MiB of size-byte nodes), waits past lifetime_ms and warms up,
 * so that under lifetime learning that site is promoted before the loop;
 * it prints to stderr whether the index's newest node is in the huge
 * class. With "promoted", the loop then allocates from that promoted
 * site itself: what a long-lived allocation costs. With "promoted_w" and
 * "beside_w" the index is built through a malloc wrapper (xmalloc), which
 * the warm-up's short-lived objects also go through from another caller;
 * the loop then allocates from the index's site through the wrapper, or
 * from the short-lived caller through it. */
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

/* A program's wrapper (not a tail call: it checks what malloc returned),
 * the index's call of it, and a short-lived caller's. noipa: no clones,
 * no two folded into one. */
static __attribute__((noipa)) void *xmalloc(size_t n) {
	void *p = malloc(n);
	if (p == NULL)
		abort();
	return p;
}

static __attribute__((noipa)) void *index_node_w(void) {
	void *p = xmalloc(node_size);
	nodes_made++;
	return p;
}

static __attribute__((noipa)) void *churn_w(size_t n) {
	void *p = xmalloc(n);
	nodes_made--;
	return p;
}

static void build_index(size_t size, int wrapped) {
	long nodes_n = (64L << 20) / (long)node_size;
	void **nodes = calloc((size_t)nodes_n, sizeof *nodes);
	if (nodes == NULL)
		exit(1);
	for (long i = 0; i < nodes_n; i++)
		if ((nodes[i] = wrapped ? index_node_w() : index_node()) == NULL)
			exit(1);
	nanosleep(&(struct timespec){0, 600 * 1000000L}, NULL);
	void *volatile sink;
	for (long i = 0; i < 1000000; i++) {     /* ages the samples */
		void *p = wrapped ? churn_w(size) : malloc(size);
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
		probe = wrapped ? index_node_w() : index_node();
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

/* Through the wrapper: from the index's site, or from the short-lived
 * caller (--toggle-collect=loop_w). */
static __attribute__((noinline)) void loop_w(long n, size_t size,
    int at_site) {
	void *volatile sink;
	for (long i = 0; i < n; i++) {
		void *p = at_site ? index_node_w() : churn_w(size);
		sink = p;
		free(p);
	}
	(void)sink;
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
	const char *m = argc > 3 ? argv[3] : "";
	int mode = strcmp(m, "promoted") == 0 ? 1 : strcmp(m, "promoted_w") ==
	    0 ? 2 : strcmp(m, "beside_w") == 0 ? 3 : 0;
	if (mode == 1 || mode == 2)
		node_size = size;
	if (strcmp(m, "index") == 0 || mode != 0)
		build_index(size, mode >= 2);
	if (mode >= 2)
		loop_w(n, size, mode == 2);
	else
		loop(n, size, mode);
	return 0;
}
