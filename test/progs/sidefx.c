/* What a program can see of its own process, before and after heavy use of
 * the allocator: its descriptors, signal dispositions and mask, the
 * environment, errno, its threads. Run with and without the library (also
 * with stdin, stdout and stderr closed); the test compares the two. The
 * work: churn of small objects (sampled many times), a long-lived index,
 * the huge class, realloc across classes, aligned and zeroed allocations,
 * malloc_trim. Each allocator call that succeeds must leave errno as the
 * program set it. Writes key=value lines to OUTFILE at the end, after the
 * descriptor checks (opening it takes a descriptor).
 * usage: sidefx OUTFILE */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SENTINEL 4242             /* no errno value has this number */
static long errno_changed;

#define CALL(expr) ({ errno = SENTINEL; __typeof__(expr) r_ = (expr); \
	if (errno != SENTINEL) { errno_changed++; } r_; })
#define FREE(p) do { errno = SENTINEL; free(p); \
	if (errno != SENTINEL) { errno_changed++; } } while (0)

/* The descriptors open now, as /proc/self/fd lists them, without the one
 * used to list them. */
static void fds(char *out, size_t n) {
	size_t len = 0;
	out[0] = '\0';
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL) {
		snprintf(out, n, "unreadable");
		return;
	}
	int self = dirfd(d);
	struct dirent *e;
	int list[256], m = 0;
	while ((e = readdir(d)) != NULL && m < 256)
		if (e->d_name[0] != '.' && atoi(e->d_name) != self)
			list[m++] = atoi(e->d_name);
	closedir(d);
	for (int i = 1; i < m; i++)            /* sort: readdir's order varies */
		for (int j = i; j > 0 && list[j - 1] > list[j]; j--) {
			int t = list[j];
			list[j] = list[j - 1];
			list[j - 1] = t;
		}
	for (int i = 0; i < m; i++)
		len += (size_t)snprintf(out + len, n - len, "%s%d", i ? "," : "",
		    list[i]);
}

/* Every disposition the program can read (glibc keeps 32 and 33 for
 * itself), and the signal mask, as one string. */
static void signals(char *out, size_t n) {
	uint64_t dfl = 0, ign = 0, other = 0, blocked = 0;
	sigset_t mask;
	sigprocmask(SIG_BLOCK, NULL, &mask);
	for (int s = 1; s < 65; s++) {
		struct sigaction sa;
		if (s == 32 || s == 33 || sigaction(s, NULL, &sa) != 0)
			continue;
		uint64_t bit = (uint64_t)1 << (s - 1);
		if (sa.sa_handler == SIG_DFL)
			dfl |= bit;
		else if (sa.sa_handler == SIG_IGN)
			ign |= bit;
		else
			other |= bit;
		if (sigismember(&mask, s))
			blocked |= bit;
	}
	snprintf(out, n, "dfl:%llx,ign:%llx,other:%llx,blocked:%llx",
	    (unsigned long long)dfl, (unsigned long long)ign,
	    (unsigned long long)other, (unsigned long long)blocked);
}

static unsigned long env_hash(void) {
	unsigned long h = 5381;
	for (char **e = environ; *e; e++)
		for (const char *c = *e; *c; c++)
			h = h * 33 + (unsigned char)*c;
	return h;
}

static int threads(void) {
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void wait_ms(long ms) {
	struct timespec t = {ms / 1000, ms % 1000 * 1000000};
	nanosleep(&t, NULL);
}

__attribute__((noinline)) static void *index_node(void) {
	return malloc(48);
}

int main(int argc, char **argv) {
	int errno_at_main = errno;
	if (argc < 2)
		return 2;
	char fds_before[1024], sig_before[160];
	fds(fds_before, sizeof fds_before);
	signals(sig_before, sizeof sig_before);
	unsigned long env_before = env_hash();

	/* Churn: 300,000 objects of 16 B to 4 KiB, 1,000 live at a time. */
	void *ring[1000] = {0};
	for (long i = 0; i < 300000; i++) {
		size_t size = 16 + (size_t)(i * 7919 % 4080);
		FREE(ring[i % 1000]);
		ring[i % 1000] = CALL(malloc(size));
		memset(ring[i % 1000], 1, size);
	}
	int threads_small = threads();   /* no huge-class use so far */

	/* A long-lived index, churn around it while it ages. */
	enum { NODES = 200000 };
	void **index = CALL(calloc(NODES, sizeof *index));
	for (long i = 0; i < NODES; i++)
		index[i] = CALL(index_node());
	wait_ms(600);
	for (long i = 0; i < 100000; i++) {
		FREE(ring[i % 1000]);
		ring[i % 1000] = CALL(malloc(64));
	}

	/* The huge class and across classes. */
	char *big = CALL(malloc(64 << 20));
	memset(big, 2, 64 << 20);
	char *z = CALL(calloc(8, 1 << 20));
	char *r = CALL(malloc(100));
	r = CALL(realloc(r, 16 << 20));
	r = CALL(realloc(r, 200));
	void *al = NULL;
	int pm = CALL(posix_memalign(&al, 2 << 20, 8 << 20));
	void *aa = CALL(aligned_alloc(4096, 3 << 20));
	size_t usable = CALL(malloc_usable_size(big));
	FREE(big);
	FREE(z);
	FREE(r);
	FREE(al);
	FREE(aa);
	CALL(malloc_trim(0));
	for (long i = 0; i < NODES; i++)
		FREE(index[i]);
	FREE(index);
	for (int i = 0; i < 1000; i++)
		FREE(ring[i]);
	CALL(malloc_trim(0));

	char fds_after[1024], sig_after[160];
	int badf[3];
	for (int fd = 0; fd < 3; fd++)
		badf[fd] = fcntl(fd, F_GETFD) == -1 && errno == EBADF;
	fds(fds_after, sizeof fds_after);
	signals(sig_after, sizeof sig_after);
	int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0)
		return 3;
	dprintf(out, "errno_at_main=%d\nfds_before=%s\nfds_after=%s\n"
	    "sig_before=%s\nsig_after=%s\nenv_same=%d\nerrno_changed=%ld\n"
	    "threads_small=%d\nbadf0=%d\nbadf1=%d\nbadf2=%d\nmemalign=%d\n"
	    "usable_ok=%d\n", errno_at_main, fds_before, fds_after, sig_before,
	    sig_after, env_hash() == env_before, errno_changed, threads_small,
	    badf[0], badf[1], badf[2], pm, usable >= (64u << 20));
	close(out);
	return 0;
}
