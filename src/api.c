/* The public API of include/hugepreload.h. */
#include "hugepreload.h"
#include "internal.h"
#include "je.h"

HP_EXPORT const char *hugepreload_version(void) {
	return HUGEPRELOAD_VERSION;
}

HP_EXPORT int hugepreload_class(const void *p) {
	if (p == NULL || !hp_init())
		return HUGEPRELOAD_CLASS_NONE;
	if (hp_region_contains(p))
		return HUGEPRELOAD_CLASS_HUGE;
	unsigned ind;
	size_t sz = sizeof ind;
	if (hp_je_mallctl("arenas.lookup", &ind, &sz, &p, sizeof p) == 0)
		return HUGEPRELOAD_CLASS_SMALL;
	return HUGEPRELOAD_CLASS_NONE;
}

HP_EXPORT int hugepreload_policy(char *buf, size_t n) {
	hp_init();
	return hp_conf_describe(&hp_conf, buf, n);
}
