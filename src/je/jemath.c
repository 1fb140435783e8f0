/*
 * exp, log and round for the embedded jemalloc, so that the library does
 * not load libm: a C program that does not use libm would map all of it
 * (docs/design.md has its size) for the sake of these three calls.
 * jemalloc's heap profiler is their only user: it computes its
 * unbiasing table (exp, round) when it boots, whether or not profiling
 * is on, and draws sampling intervals with log when it is.
 * scripts/embed-jemalloc renames jemalloc's references to these.
 *
 * The x87 unit computes in 64-bit precision, so each result is within
 * one unit in the last place of libm's (test/unit/test_jemath.c checks).
 * errno is not set: jemalloc does not look.
 */
#include <math.h>
#include <stdint.h>
#include "je/je.h"

/* 2^t for finite t: 2^frac by f2xm1 (|frac| <= 1/2), scaled by 2^int. */
static long double exp2_x87(long double t) {
	long double i, f, r;
	__asm__("frndint" : "=t"(i) : "0"(t));
	f = t - i;
	__asm__("f2xm1" : "=t"(r) : "0"(f));
	r += 1.0L;
	__asm__("fscale" : "=t"(r) : "0"(r), "u"(i));
	return r;
}

double hp_je_exp(double x) {
	if (isnan(x) || x == INFINITY)
		return x;
	if (x < -746.0)              /* below the least subnormal */
		return 0.0;
	if (x > 710.0)               /* above DBL_MAX */
		return INFINITY;
	long double log2e;
	__asm__("fldl2e" : "=t"(log2e));
	return (double)exp2_x87((long double)x * log2e);
}

double hp_je_log(double x) {
	if (isnan(x) || x < 0.0)
		return NAN;
	if (x == 0.0)
		return -INFINITY;
	if (x == INFINITY)
		return x;
	long double ln2, r;
	__asm__("fldln2" : "=t"(ln2));
	/* fyl2x: st(1) * log2(st(0)), popping st(0). */
	__asm__("fyl2x" : "=t"(r) : "0"((long double)x), "u"(ln2) : "st(1)");
	return (double)r;
}

/* Halfway cases away from zero, as C's round. */
double hp_je_round(double x) {
	if (!(fabs(x) < 0x1p52))     /* NaN, infinities, and integers */
		return x;
	double t = (double)(int64_t)x;   /* toward zero, exact here */
	if (fabs(x - t) >= 0.5)
		t += x < 0 ? -1.0 : 1.0;
	return copysign(t, x);       /* -0.4 gives -0.0 */
}
