/* hugepreload_class() when the library is loaded, else -1: the helper
 * programs also run without the library. */
#ifndef HP_HPCLASS_H
#define HP_HPCLASS_H
#include <dlfcn.h>
static inline int hp_class_of(const void *p) {
	int (*fn)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT,
	    "hugepreload_class");
	return fn ? fn(p) : -1;
}
#endif
