/* A library loaded with dlopen() that allocates: in its constructor, in
 * its functions, and for its dynamic TLS (allocated by ld.so with malloc). */
#include <stdlib.h>
#include <string.h>

static char *from_ctor;
static __thread char tls_block[256 * 1024];

__attribute__((constructor)) static void init(void) {
	from_ctor = malloc(100);
	strcpy(from_ctor, "ctor");
}

char *dl_make(size_t n, int c) {
	char *p = malloc(n);
	memset(p, c, n);
	tls_block[n % sizeof tls_block] = (char)c;
	return p;
}

int dl_check(void) {
	return strcmp(from_ctor, "ctor") == 0;
}

void dl_release(char *p) {
	free(p);
}
