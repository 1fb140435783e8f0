/* The public API of include/hugepreload.h. */
#include "hugepreload.h"
#include "core/core.h"

HP_EXPORT const char *hugepreload_version(void) {
	return HUGEPRELOAD_VERSION;
}

HP_EXPORT int hugepreload_class(const void *p) {
	if (p == NULL || !hp_init())
		return HUGEPRELOAD_CLASS_NONE;
	return hp_region_contains(p) || hp_ll_contains(p) ?
	    HUGEPRELOAD_CLASS_HUGE :
	    HUGEPRELOAD_CLASS_SMALL;
}

HP_EXPORT int hugepreload_policy(char *buf, size_t n) {
	hp_init();
	return hp_conf_describe(&hp_conf, buf, n);
}
