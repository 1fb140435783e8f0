/* A library whose one call site allocates index nodes: its profile entry
 * can only apply once it is dlopen()ed. */
#include <stdlib.h>
#include <string.h>

/* Not a tail call: the malloc call's return address is in this library. */
__attribute__((visibility("default"), noinline)) void *lt_node(void) {
	void *p = malloc(48);
	if (p != NULL)
		memset(p, 7, 48);
	return p;
}
