/*
 * hugepreload doctor [--json]: what this host gives huge pages, in the
 * manner of libhugetlbfs's "hugeadm --explain". THP's settings and
 * khugepaged's, the hugetlbfs pools per page size and NUMA node, whether
 * 1 GiB pages and MADV_COLLAPSE exist, the memory and hugetlb limits of
 * the calling cgroup, and the policy HUGEPRELOAD_CONF gives with the
 * backing it would really get: the library itself is asked (a short
 * /bin/true under it with verbose:true), so the answer is its own. Each
 * thing in the way gets a warning and the command that fixes it.
 * Exit 0: nothing in the way; 1: warnings; 2: a bad command line.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define THP "/sys/kernel/mm/transparent_hugepage/"
#define POOLS "/sys/kernel/mm/hugepages/"
#define NODES "/sys/devices/system/node/"
#define MAX_WARN 32
#define MAX_POOLS 8
#define MAX_NODES 16

typedef struct {
	char what[256], fix[256];
} warn_t;

typedef struct {
	long node, total, free, surplus;
} node_pool_t;

typedef struct {
	long kb;                        /* page size */
	long total, free, reserved, surplus, overcommit;
	node_pool_t nodes[MAX_NODES];
	int nnodes;
} pool_t;

typedef struct {
	char enabled[32], defrag[32], shmem[32], kh_defrag[8];
	long pmd_size;
	pool_t pools[MAX_POOLS];
	int npools;
	bool gib, pdpe1gb;
	int collapse;                   /* 1 works, 0 not in this kernel, -1 ? */
	char cgroup[512];
	char mem_max[32], mem_high[32], mem_current[32];
	char hugetlb_max[MAX_POOLS][32], hugetlb_current[MAX_POOLS][32];
	char conf[1024];                /* HUGEPRELOAD_CONF as given */
	char policy[1024];              /* the library's verbose line */
	char conf_msgs[8][320];
	int nconf_msgs;
	bool asked;                     /* the library answered */
	warn_t warn[MAX_WARN];
	int nwarn;
} doctor_t;

static void warn(doctor_t *d, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warn(doctor_t *d, const char *fix, const char *fmt, ...) {
	if (d->nwarn == MAX_WARN)
		return;
	warn_t *w = &d->warn[d->nwarn++];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->what, sizeof w->what, fmt, ap);
	va_end(ap);
	snprintf(w->fix, sizeof w->fix, "%s", fix ? fix : "");
}

/* A sysfs or /proc file's first line; "" if absent. "always [madvise]
 * never" is read as "madvise". */
static void knob(const char *path, char *out, size_t n) {
	char line[256] = "";
	FILE *f = fopen(path, "re");
	if (f == NULL || fgets(line, sizeof line, f) == NULL)
		line[0] = '\0';
	if (f)
		fclose(f);
	line[strcspn(line, "\n")] = '\0';
	char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
	if (a && b) {
		*b = '\0';
		snprintf(out, n, "%s", a + 1);
	} else {
		snprintf(out, n, "%s", line);
	}
}

static long num(const char *path) {
	char v[32];
	knob(path, v, sizeof v);
	return v[0] ? strtol(v, NULL, 10) : -1;
}

static void read_pools(doctor_t *d) {
	DIR *dir = opendir(POOLS);
	struct dirent *e;
	while (dir && (e = readdir(dir)) != NULL && d->npools < MAX_POOLS) {
		long kb;
		if (sscanf(e->d_name, "hugepages-%ldkB", &kb) != 1)
			continue;
		pool_t *p = &d->pools[d->npools++];
		memset(p, 0, sizeof *p);
		p->kb = kb;
		char path[1024];
#define POOL(field, file) (snprintf(path, sizeof path, POOLS "%s/" file, \
	e->d_name), p->field = num(path))
		POOL(total, "nr_hugepages");
		POOL(free, "free_hugepages");
		POOL(reserved, "resv_hugepages");
		POOL(surplus, "surplus_hugepages");
		POOL(overcommit, "nr_overcommit_hugepages");
#undef POOL
		DIR *nd = opendir(NODES);
		struct dirent *ne;
		while (nd && (ne = readdir(nd)) != NULL && p->nnodes < MAX_NODES) {
			long node;
			char end;
			if (sscanf(ne->d_name, "node%ld%c", &node, &end) != 1)
				continue;
			node_pool_t *np = &p->nodes[p->nnodes];
			np->node = node;
			snprintf(path, sizeof path, NODES "%s/hugepages/%s/"
			    "nr_hugepages", ne->d_name, e->d_name);
			if ((np->total = num(path)) < 0)
				continue;
			snprintf(path, sizeof path, NODES "%s/hugepages/%s/"
			    "free_hugepages", ne->d_name, e->d_name);
			np->free = num(path);
			snprintf(path, sizeof path, NODES "%s/hugepages/%s/"
			    "surplus_hugepages", ne->d_name, e->d_name);
			np->surplus = num(path);
			p->nnodes++;
		}
		if (nd)
			closedir(nd);
	}
	if (dir)
		closedir(dir);
	for (int i = 1; i < d->npools; i++)        /* by page size */
		for (int j = i; j > 0 && d->pools[j - 1].kb > d->pools[j].kb; j--) {
			pool_t t = d->pools[j];
			d->pools[j] = d->pools[j - 1];
			d->pools[j - 1] = t;
		}
}

static const pool_t *pool(const doctor_t *d, long kb) {
	for (int i = 0; i < d->npools; i++)
		if (d->pools[i].kb == kb)
			return &d->pools[i];
	return NULL;
}

/* Whether this kernel knows MADV_COLLAPSE (Linux 6.1): asked on a page
 * of this process, EINVAL if it does not. */
static int probe_collapse(void) {
	size_t len = 4 << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	char *a = (char *)(((unsigned long)p + (2 << 20) - 1) &
	    ~((2UL << 20) - 1));
	a[0] = 1;
	int r = madvise(a, 2 << 20, MADV_COLLAPSE);
	int err = errno;
	munmap(p, len);
	return r == 0 ? 1 : err == EINVAL ? 0 : 1;
}

static void read_cgroup(doctor_t *d) {
	char line[600] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "0::", 3) == 0)
			break;
	if (f)
		fclose(f);
	line[strcspn(line, "\n")] = '\0';
	snprintf(d->cgroup, sizeof d->cgroup, "%.500s", strncmp(line, "0::", 3) ==
	    0 ? line + 3 : "");
	char path[1024];
#define CG(out, file) (snprintf(path, sizeof path, "/sys/fs/cgroup%s/" file, \
	d->cgroup), knob(path, out, sizeof out))
	CG(d->mem_max, "memory.max");
	CG(d->mem_high, "memory.high");
	CG(d->mem_current, "memory.current");
#undef CG
	for (int i = 0; i < d->npools; i++) {
		long kb = d->pools[i].kb;
		char size[32];
		if (kb >= 1 << 20)
			snprintf(size, sizeof size, "%ldGB", kb >> 20);
		else if (kb >= 1 << 10)
			snprintf(size, sizeof size, "%ldMB", kb >> 10);
		else
			snprintf(size, sizeof size, "%ldKB", kb);
		snprintf(path, sizeof path, "/sys/fs/cgroup%s/hugetlb.%s.max",
		    d->cgroup, size);
		knob(path, d->hugetlb_max[i], sizeof d->hugetlb_max[i]);
		snprintf(path, sizeof path, "/sys/fs/cgroup%s/hugetlb.%s.current",
		    d->cgroup, size);
		knob(path, d->hugetlb_current[i], sizeof d->hugetlb_current[i]);
	}
}

/* The library's own answer: /bin/true under it with the caller's
 * HUGEPRELOAD_CONF and verbose:true; its lines on stderr. */
static void ask_library(doctor_t *d) {
	char lib[PATH_MAX + 64];
	const char *where;
	if (!hp_cli_library(lib, sizeof lib, &where)) {
		warn(d, "make install, or make in the source tree", "no "
		    "libhugepreload.so found (looked for it installed, beside the "
		    "command and in the build tree): the policy is not checked");
		return;
	}
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return;
	pid_t c = fork();
	if (c == 0) {
		char conf[1200];
		snprintf(conf, sizeof conf, "HUGEPRELOAD_CONF=%s%sverbose:true",
		    d->conf, d->conf[0] ? "," : "");
		char preload[PATH_MAX + 80];
		snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
		char *env[] = {preload, conf, NULL};
		dup2(fds[1], STDERR_FILENO);
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		execle("/bin/true", "true", (char *)NULL, env);
		_exit(127);
	}
	close(fds[1]);
	FILE *f = c > 0 ? fdopen(fds[0], "r") : NULL;
	char line[1200];
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		/* "hugepreload: true[PID]: MESSAGE" */
		char *msg = strstr(line, "]: ");
		msg = msg ? msg + 3 : line;
		if (strncmp(msg, "policy ", 7) == 0) {
			snprintf(d->policy, sizeof d->policy, "%s", msg + 7);
			d->asked = true;
		} else if (d->nconf_msgs < 8) {
			snprintf(d->conf_msgs[d->nconf_msgs++],
			    sizeof d->conf_msgs[0], "%.300s", msg);
		}
	}
	if (f)
		fclose(f);
	else
		close(fds[0]);
	if (c > 0)
		waitpid(c, NULL, 0);
	if (!d->asked)
		warn(d, NULL, "the library (%s) did not say its policy", lib);
}

/* The conf's value of key, or "" (the last item wins, as in the parser). */
static void conf_value(const char *conf, const char *key, char *out,
    size_t n) {
	out[0] = '\0';
	size_t klen = strlen(key);
	for (const char *s = conf; s && *s; ) {
		size_t len = strcspn(s, ",");
		if (len > klen && strncmp(s, key, klen) == 0 && s[klen] == ':')
			snprintf(out, n, "%.*s", (int)(len - klen - 1), s + klen + 1);
		s += len + (s[len] == ',');
	}
}

static void diagnose(doctor_t *d) {
	if (strcmp(d->enabled, "never") == 0)
		warn(d, "echo madvise > " THP "enabled", "THP is off (enabled="
		    "never): without a hugetlbfs pool the huge class and the "
		    "program's own mappings stay on 4 KiB pages");
	if (strcmp(d->defrag, "never") == 0)
		warn(d, "echo madvise > " THP "defrag", "THP defrag=never: a "
		    "fault takes a huge page only when one is free at once; "
		    "advised memory falls back to 4 KiB when memory is "
		    "fragmented");
	if (strcmp(d->shmem, "never") == 0 || strcmp(d->shmem, "deny") == 0)
		warn(d, "echo advise > " THP "shmem_enabled", "shmem_enabled=%s: "
		    "the program's anonymous shared mappings (Python's "
		    "mmap.mmap(-1, n)) stay on 4 KiB pages", d->shmem);
	/* The policy as the library took it (a bad or repeated item
	 * resolved its way), else as given. */
	const char *policy = d->asked ? d->policy : d->conf;
	char backing[32], size[16], collapse[16];
	conf_value(policy, "backing", backing, sizeof backing);
	conf_value(policy, "hugetlb_size", size, sizeof size);
	conf_value(policy, "collapse", collapse, sizeof collapse);
	long kb = strcmp(size, "1g") == 0 ? 1 << 20 : 2048;
	const pool_t *p = pool(d, kb);
	if (kb == 1 << 20 && p == NULL)
		warn(d, "leave hugetlb_size at 2m", "hugetlb_size:1g, but this "
		    "host has no 1 GiB pages (%s)", d->pdpe1gb ? "the kernel does "
		    "not offer them" : "the CPU lacks pdpe1gb");
	char fix[160];
	snprintf(fix, sizeof fix, "echo N > " POOLS "hugepages-%ldkB/"
	    "nr_hugepages (N pages of %ld kB)", kb, kb);
	if (strcmp(backing, "hugetlb") == 0 && p && p->total <= 0)
		warn(d, fix, "backing:hugetlb, but the %ld kB pool is empty: the "
		    "huge class falls back to THP", kb);
	else if (p && p->total > 0 && p->free == 0)
		warn(d, fix, "the %ld kB pool is reserved (%ld pages) but none is "
		    "free: new huge-class memory falls back to THP", kb,
		    p->total);
	if (strcmp(collapse, "true") == 0 && d->collapse == 0)
		warn(d, "leave collapse at false", "collapse:true, but this "
		    "kernel has no MADV_COLLAPSE (Linux 6.1 and later)");
	for (int i = 0; i < d->npools; i++)
		if (d->pools[i].total > 0 && strcmp(d->hugetlb_max[i], "0") == 0)
			warn(d, "echo max > /sys/fs/cgroup<cgroup>/hugetlb.<size>.max",
			    "this cgroup (%s) may use no page of the %ld kB pool "
			    "(hugetlb max 0)", d->cgroup, d->pools[i].kb);
	for (int i = 0; i < d->nconf_msgs; i++)
		warn(d, "fix HUGEPRELOAD_CONF (hugepreload --help lists the "
		    "keys)", "%s", d->conf_msgs[i]);
}

static void json_str(const char *s) {
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* A limit file's value: "max" or a number; "" (absent) is null. */
static void json_limit(const char *v) {
	if (v[0] == '\0')
		printf("null");
	else if (strcmp(v, "max") == 0)
		printf("\"max\"");
	else
		printf("%s", v);
}

static void print_json(const doctor_t *d) {
	printf("{\"thp\": {\"enabled\": ");
	json_str(d->enabled);
	printf(", \"defrag\": ");
	json_str(d->defrag);
	printf(", \"shmem_enabled\": ");
	json_str(d->shmem);
	printf(", \"khugepaged_defrag\": %s, \"pmd_size\": %ld},\n",
	    strcmp(d->kh_defrag, "1") == 0 ? "true" : "false", d->pmd_size);
	printf(" \"pools\": [");
	for (int i = 0; i < d->npools; i++) {
		const pool_t *p = &d->pools[i];
		printf("%s{\"page_kb\": %ld, \"total\": %ld, \"free\": %ld, "
		    "\"reserved\": %ld, \"surplus\": %ld, \"overcommit\": %ld, "
		    "\"cgroup_max\": ", i ? ", " : "", p->kb, p->total, p->free,
		    p->reserved, p->surplus, p->overcommit);
		json_limit(d->hugetlb_max[i]);
		printf(", \"cgroup_current\": ");
		json_limit(d->hugetlb_current[i]);
		printf(", \"nodes\": [");
		for (int j = 0; j < p->nnodes; j++)
			printf("%s{\"node\": %ld, \"total\": %ld, \"free\": %ld, "
			    "\"surplus\": %ld}", j ? ", " : "", p->nodes[j].node,
			    p->nodes[j].total, p->nodes[j].free, p->nodes[j].surplus);
		printf("]}");
	}
	printf("],\n \"gib_pages\": %s, \"cpu_pdpe1gb\": %s, "
	    "\"madv_collapse\": %s,\n", d->gib ? "true" : "false",
	    d->pdpe1gb ? "true" : "false", d->collapse == 1 ? "true" :
	    d->collapse == 0 ? "false" : "null");
	printf(" \"cgroup\": {\"path\": ");
	json_str(d->cgroup);
	printf(", \"memory_max\": ");
	json_limit(d->mem_max);
	printf(", \"memory_high\": ");
	json_limit(d->mem_high);
	printf(", \"memory_current\": ");
	json_limit(d->mem_current);
	printf("},\n \"hugepreload_conf\": ");
	json_str(d->conf);
	printf(", \"policy\": ");
	if (d->asked)
		json_str(d->policy);
	else
		printf("null");
	printf(",\n \"warnings\": [");
	for (int i = 0; i < d->nwarn; i++) {
		printf("%s{\"what\": ", i ? ",\n  " : "\n  ");
		json_str(d->warn[i].what);
		printf(", \"fix\": ");
		json_str(d->warn[i].fix);
		printf("}");
	}
	printf("]}\n");
}

static const char *or_absent(const char *v) {
	return v[0] ? v : "(absent)";
}

static void print_text(const doctor_t *d) {
	printf("THP: enabled=%s defrag=%s shmem_enabled=%s khugepaged "
	    "defrag=%s, PMD size %ld kB\n", or_absent(d->enabled),
	    or_absent(d->defrag), or_absent(d->shmem), or_absent(d->kh_defrag),
	    d->pmd_size / 1024);
	printf("hugetlbfs pools:%s\n", d->npools ? "" : " none (no "
	    POOLS ")");
	for (int i = 0; i < d->npools; i++) {
		const pool_t *p = &d->pools[i];
		printf("  %7ld kB: total %ld, free %ld, reserved %ld, surplus %ld, "
		    "overcommit %ld; cgroup max %s, used %s\n", p->kb, p->total,
		    p->free, p->reserved, p->surplus, p->overcommit,
		    or_absent(d->hugetlb_max[i]), or_absent(d->hugetlb_current[i]));
		for (int j = 0; j < p->nnodes; j++)
			printf("             node %ld: total %ld, free %ld, surplus "
			    "%ld\n", p->nodes[j].node, p->nodes[j].total,
			    p->nodes[j].free, p->nodes[j].surplus);
	}
	printf("1 GiB pages: %s (CPU pdpe1gb: %s)\n", d->gib ? "yes" : "no",
	    d->pdpe1gb ? "yes" : "no");
	printf("MADV_COLLAPSE: %s\n", d->collapse == 1 ? "yes" :
	    d->collapse == 0 ? "no (Linux 6.1 and later)" : "unknown");
	printf("cgroup %s: memory.max %s, memory.high %s, memory.current %s\n",
	    d->cgroup[0] ? d->cgroup : "(unknown)", or_absent(d->mem_max),
	    or_absent(d->mem_high), or_absent(d->mem_current));
	printf("HUGEPRELOAD_CONF: %s\n", d->conf[0] ? d->conf : "(unset: the "
	    "defaults)");
	if (d->asked)
		printf("policy and backing, as the library takes them:\n  %s\n",
		    d->policy);
	for (int i = 0; i < d->nwarn; i++) {
		printf("warning: %s\n", d->warn[i].what);
		if (d->warn[i].fix[0])
			printf("  fix: %s\n", d->warn[i].fix);
	}
	if (d->nwarn == 0)
		printf("nothing in the way\n");
}

int hp_cli_doctor(int argc, char **argv) {
	bool json = false;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else
			return hp_cli_bad("unknown option '%s' to doctor", argv[i]);
	}
	static doctor_t d;
	knob(THP "enabled", d.enabled, sizeof d.enabled);
	knob(THP "defrag", d.defrag, sizeof d.defrag);
	knob(THP "shmem_enabled", d.shmem, sizeof d.shmem);
	knob(THP "khugepaged/defrag", d.kh_defrag, sizeof d.kh_defrag);
	d.pmd_size = num(THP "hpage_pmd_size");
	read_pools(&d);
	d.gib = pool(&d, 1 << 20) != NULL;
	char line[4096];
	FILE *f = fopen("/proc/cpuinfo", "re");
	while (f && !d.pdpe1gb && fgets(line, sizeof line, f))
		d.pdpe1gb = strncmp(line, "flags", 5) == 0 &&
		    strstr(line, " pdpe1gb") != NULL;
	if (f)
		fclose(f);
	d.collapse = probe_collapse();
	read_cgroup(&d);
	const char *conf = getenv("HUGEPRELOAD_CONF");
	snprintf(d.conf, sizeof d.conf, "%s", conf ? conf : "");
	if (d.enabled[0] == '\0')
		warn(&d, NULL, "no THP in this kernel (" THP "enabled is "
		    "absent): only a hugetlbfs pool gives huge pages");
	ask_library(&d);
	diagnose(&d);
	if (json)
		print_json(&d);
	else
		print_text(&d);
	return d.nwarn ? 1 : 0;
}
