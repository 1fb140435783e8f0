/* The library's own snprintf and strtol (src/base/fmt.c) against
 * glibc's, on the conversions the library uses and their edges: each
 * result and each return value alike, whole and cut short. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/fmt.h"

/* The edges below include flags glibc ignores and formats cut short on
 * purpose. */
#pragma GCC diagnostic ignored "-Wformat"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#pragma GCC diagnostic ignored "-Wformat-overflow"

#define SAME(...) do { \
	char a[64], b[64]; \
	memset(a, 'x', sizeof a); \
	memset(b, 'x', sizeof b); \
	int ra = hp_fmt(a, sizeof a, __VA_ARGS__); \
	int rb = snprintf(b, sizeof b, __VA_ARGS__); \
	cr_assert_eq(ra, rb, "%s: %d against %d", #__VA_ARGS__, ra, rb); \
	cr_assert_str_eq(a, b, "%s", #__VA_ARGS__); \
	for (size_t n = 0; n < 12; n++) { \
		memset(a, 'x', sizeof a); \
		memset(b, 'x', sizeof b); \
		ra = hp_fmt(a, n, __VA_ARGS__); \
		rb = snprintf(b, n, __VA_ARGS__); \
		cr_assert_eq(ra, rb); \
		cr_assert_eq(memcmp(a, b, sizeof a), 0, "%s cut to %zu", \
		    #__VA_ARGS__, n); \
	} \
} while (0)

Test(fmt, integers) {
	SAME("%d|%i|%u", 0, -1, 0u);
	SAME("%d %d", INT_MIN, INT_MAX);
	SAME("%ld %ld", LONG_MIN, LONG_MAX);
	SAME("%lld %llu", LLONG_MIN, ULLONG_MAX);
	SAME("%zu %zd", SIZE_MAX, (ssize_t)-5);
	SAME("%lu %u", ULONG_MAX, UINT_MAX);
	SAME("%x %X %#x %#lx %#x", 0xbeefu, 0xbeefu, 0x1fu, 0xdeadbeefUL, 0u);
	SAME("%hhd %hhu %hd %hu", -3, 300, -40000, 70000);
	SAME("%jd %ju %td", INTMAX_MIN, UINTMAX_MAX, (ptrdiff_t)-9);
}

Test(fmt, width_and_precision) {
	SAME("[%5d][%-5d][%05d][%-05d]", 42, 42, -42, 7);
	SAME("[%*d][%*d][%.3d][%8.3d][%.0d][%.0d]", 6, -3, -6, 3, 7, 7, 0, 1);
	SAME("[%08.3d][%#08x][%1d]", 5, 0xab, 12345);
	SAME("[%s][%10s][%-10s][%.2s][%.*s][%.64s]", "abc", "abc", "abc",
	    "abc", 1, "xyz", "short");
	SAME("[%*s][%-*s]", -4, "a", 3, "b");
	SAME("[%c][%3c][%-3c]%%", 'q', 'r', 's');
	SAME("%p %p", (void *)0x7f00dead1000, (void *)NULL);
	SAME("hugepreload: %.64s[%d]: %s", "name", 123, "message");
}

/* A conversion outside the set ends the conversions: it and the rest
 * of the format are written as they stand, and no argument after it is
 * read (a %s given an int would crash). The formats are the library's
 * own, so this only guards against a slip. Fields too wide for an int's
 * sums are held below 2^20. */
Test(fmt, unknown_conversion_ends_the_conversions) {
	char buf[32];
	const char *f = "%d|%+d %s|%q";   /* not literals: gcc checks none */
	int n = hp_fmt(buf, sizeof buf, f, 7, 5, 6);
	cr_assert_str_eq(buf, "7|%+d %s|%q");
	cr_assert_eq(n, 11);
	f = "a%f%s";
	n = hp_fmt(buf, sizeof buf, f, 1.5, "x");
	cr_assert_str_eq(buf, "a%f%s");
	f = "x%l";
	n = hp_fmt(buf, sizeof buf, f);
	cr_assert_str_eq(buf, "x%l");
	n = hp_fmt(buf, sizeof buf, "%");
	cr_assert_eq(n, 1);
	cr_assert_str_eq(buf, "%");
	n = hp_fmt(buf, 8, "%*d|", INT_MIN, 1);
	cr_assert_eq(n, (1 << 20) + 1);
	cr_assert_str_eq(buf, "1      ");
	n = hp_fmt(buf, 8, "%99999999999d|", 2);
	cr_assert_eq(n, (1 << 20) + 1);
	cr_assert_str_eq(buf, "       ");
}

Test(fmt, parse_long_as_strtol) {
	static const char *const in[] = {
	    "0", "42", "-42", "+7", "  \t\n19x", "9223372036854775807",
	    "9223372036854775808", "-9223372036854775808",
	    "-9223372036854775809", "99999999999999999999999", "", "-", "x1",
	    " - 1", "007", "12 34", "\v\f\r5",
	};
	for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
		const char *e1;
		char *e2;
		long a = hp_parse_long(in[i], &e1);
		long b = strtol(in[i], &e2, 10);
		cr_assert_eq(a, b, "'%s': %ld against %ld", in[i], a, b);
		cr_assert_eq(e1, (const char *)e2, "'%s': end", in[i]);
		cr_assert_eq(hp_parse_long(in[i], NULL), b);
	}
}
