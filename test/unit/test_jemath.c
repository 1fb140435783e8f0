/* src/je/jemath.c against libm: exp, log and round for the embedded
 * jemalloc, which must not need libm. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

double hp_je_exp(double);
double hp_je_log(double);
double hp_je_round(double);

/* Distance in units in the last place (doubles of the same sign). */
static uint64_t ulps(double a, double b) {
	int64_t x, y;
	memcpy(&x, &a, sizeof x);
	memcpy(&y, &b, sizeof y);
	if (x < 0)
		x = INT64_MIN - x;
	if (y < 0)
		y = INT64_MIN - y;
	return x > y ? (uint64_t)(x - y) : (uint64_t)(y - x);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(double lo, double hi) {
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return lo + (hi - lo) * (double)(rng >> 11) / 0x1p53;
}

Test(jemath, exp_within_one_ulp_of_libm) {
	uint64_t worst = 0;
	for (int i = 0; i < 200000; i++) {
		double x = uniform(-745.0, 709.7);
		uint64_t d = ulps(hp_je_exp(x), exp(x));
		cr_assert(d <= 1, "exp(%a) = %a, libm %a", x, hp_je_exp(x), exp(x));
		if (d > worst)
			worst = d;
	}
	/* jemalloc's own use: 1 - exp(-size / 2^19) for its size classes. */
	for (double sz = 8; sz < 0x1p62; sz *= 1.25)
		cr_assert(ulps(hp_je_exp(-sz / 0x1p19), exp(-sz / 0x1p19)) <= 1);
	cr_assert_eq(hp_je_exp(0.0), 1.0);
	cr_assert_eq(hp_je_exp(1.0), exp(1.0));
	cr_assert_eq(hp_je_exp(-INFINITY), 0.0);
	cr_assert_eq(hp_je_exp(INFINITY), INFINITY);
	cr_assert_eq(hp_je_exp(1000.0), INFINITY);
	cr_assert_eq(hp_je_exp(-1000.0), 0.0);
	cr_assert(isnan(hp_je_exp(NAN)));
	cr_log_info("exp: worst %lu ulp over 200,000 values", (unsigned long)worst);
}

Test(jemath, log_within_one_ulp_of_libm) {
	for (int i = 0; i < 200000; i++) {
		double x = ldexp(uniform(0.5, 1.0), (int)uniform(-1070, 1024));
		cr_assert(ulps(hp_je_log(x), log(x)) <= 1, "log(%a) = %a, libm %a",
		    x, hp_je_log(x), log(x));
	}
	cr_assert_eq(hp_je_log(1.0), 0.0);
	cr_assert_eq(hp_je_log(0.0), -INFINITY);
	cr_assert_eq(hp_je_log(INFINITY), INFINITY);
	cr_assert(isnan(hp_je_log(-1.0)));
	cr_assert(isnan(hp_je_log(NAN)));
}

Test(jemath, round_is_libm_round) {
	static const double v[] = {0.0, -0.0, 0.4, 0.5, 0.6, 1.5, 2.5, -0.4,
	    -0.5, -1.5, -2.5, 0x1p52 - 0.5, -(0x1p52 - 0.5), 0x1p52, 0x1p53 + 2,
	    0.49999999999999994, -0.49999999999999994, 1e300, -1e300,
	    INFINITY, -INFINITY};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		double r = hp_je_round(v[i]);
		cr_assert(r == round(v[i]) && signbit(r) == signbit(round(v[i])),
		    "round(%a) = %a, libm %a", v[i], r, round(v[i]));
	}
	for (int i = 0; i < 200000; i++) {
		double x = uniform(-1e7, 1e7);
		if (i & 1)
			x = floor(x) + 0.5;          /* halfway cases */
		cr_assert_eq(hp_je_round(x), round(x), "round(%a)", x);
	}
	cr_assert(isnan(hp_je_round(NAN)));
}
