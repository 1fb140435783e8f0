/* Real programs give byte-identical output with and without the library. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

/* Runs sh -c SCRIPT both ways, at once; stdout must match byte for byte. */
static void same_output(const char *script) {
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	const char *env[] = {"HUGEPRELOAD_CONF=verbose:true", NULL};
	hp_proc_t pa = hp_start(argv, NULL, false, NULL);
	hp_proc_t pb = hp_start(argv, env, true, NULL);
	hp_run_t a = hp_wait(pa), b = hp_wait(pb);
	cr_assert_eq(a.code, 0, "without: %s", a.err);
	cr_assert_eq(b.code, 0, "with: %s", b.err);
	cr_assert_gt(a.out_len, 0);
	cr_assert(strstr(b.err, "]: policy"),
	    "the library did not load:\n%s", b.err);
	cr_assert_eq(a.out_len, b.out_len, "lengths %zu vs %zu", a.out_len,
	    b.out_len);
	cr_assert(memcmp(a.out, b.out, a.out_len) == 0, "outputs differ");
	hp_run_free(&a);
	hp_run_free(&b);
}

Test(real, python_large_dict_json) {
	char s[512];
	snprintf(s, sizeof s, "python3 %s", hp_path("bigdict.py"));
	same_output(s);
}

Test(real, sort_million_lines) {
	const char *gen = "awk 'BEGIN{srand(3); for (i = 0; i < 1000000; i++) "
	    "printf \"%d line %d\\n\", int(rand() * 1e9), i}' > /tmp/hp-sort.in";
	cr_assert_eq(system(gen), 0);
	same_output("sort /tmp/hp-sort.in");
	same_output("sort -n -k3 /tmp/hp-sort.in | md5sum");
	remove("/tmp/hp-sort.in");
}

Test(real, gcc_compiles_c_file) {
	char s[1024];
	snprintf(s, sizeof s, "d=$(mktemp -d) && gcc -O2 -g -c %s -o $d/a.o && "
	    "cat $d/a.o && rm -rf $d", hp_path("gcc-input.c"));
	same_output(s);
}

Test(real, git_init_add_commit) {
	same_output("d=$(mktemp -d) && cd $d && export GIT_AUTHOR_NAME=t "
	    "GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@e "
	    "GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' "
	    "GIT_COMMITTER_DATE='2026-01-01T00:00:00Z' HOME=$d && "
	    "git init -q -b main . && seq 1 200000 > a.txt && "
	    "for i in 1 2 3 4 5; do echo $i > f$i; done && git add . && "
	    "git commit -qm first && git rev-parse HEAD && git cat-file -p HEAD "
	    "&& git ls-files -s && cd / && rm -rf $d");
}

Test(real, cxx_vector_map_string) {
	same_output(hp_path("cxx"));
}

/* C++'s operator new and delete in every form (test/progs/cxxops.cpp):
 * the same output both ways, and with the library its operators serve
 * (src/api/cxx.c), the failure paths included (nothrow nullptr, bad_alloc,
 * the new_handler). */
Test(real, cxx_operators) {
	same_output(hp_path("cxxops"));
	const char *argv[] = {hp_path("cxxops"), NULL};
	hp_run_t r = hp_run(argv, NULL, true, NULL);
	cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
	const char *who = strstr(r.err, "operator new: ");
	cr_assert(who != NULL, "%s", r.err);
	char line[512];
	snprintf(line, sizeof line, "%.*s", (int)strcspn(who, "\n"), who);
	cr_assert(strstr(line, "/libhugepreload.so") != NULL,
	    "not the library's: %s", line);
	hp_run_free(&r);
}
