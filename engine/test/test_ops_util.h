/* Small helpers shared by the engine op/net tests: a seeded RNG (seed from
 * DLJOB_TEST_SEED or /dev/urandom, always printed so a failure can be
 * replayed) and error norms. */
#ifndef DLJOB_TESTS_ENGINE_TEST_OPS_UTIL_H
#define DLJOB_TESTS_ENGINE_TEST_OPS_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t test_rng_state;

static inline uint64_t test_seed(void)
{
	const char *s = getenv("DLJOB_TEST_SEED");
	uint64_t seed = 0;
	if (s && *s) {
		seed = strtoull(s, NULL, 0);
	} else {
		FILE *f = fopen("/dev/urandom", "rb");
		if (!f || fread(&seed, sizeof(seed), 1, f) != 1)
			seed = (uint64_t)time(NULL);
		if (f)
			fclose(f);
	}
	seed &= 0xffffffffu; /* short enough to paste back */
	printf("seed %llu (replay with DLJOB_TEST_SEED=%llu)\n", (unsigned long long)seed,
	       (unsigned long long)seed);
	test_rng_state = seed * 2654435761u + 0x9e3779b97f4a7c15ull;
	return seed;
}

/* splitmix64 -> uniform in [-1, 1). */
static inline double test_uniform(void)
{
	uint64_t z = (test_rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static inline void test_fill(float *a, size_t n, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		a[i] = (float)(lo + (test_uniform() + 1) * 0.5 * (hi - lo));
}

static inline double *test_to_f64(const float *a, size_t n)
{
	double *d = malloc(n * sizeof(double));
	if (!d) {
		fprintf(stderr, "out of memory\n");
		exit(99);
	}
	for (size_t i = 0; i < n; i++)
		d[i] = a[i];
	return d;
}

/* ||a - b|| / ||b|| (0 when both are zero). */
static inline double test_relerr(const float *a, const double *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += (a[i] - b[i]) * (a[i] - b[i]);
		den += b[i] * b[i];
	}
	if (den == 0)
		return num == 0 ? 0 : INFINITY;
	return sqrt(num / den);
}

/* dyin = dy masked by the ReLU of the tested backend's output y (all of dy
 * without relu): a reference backward then follows the decisions the
 * backend took, which may differ from the float64 output ry's where a
 * value lies within rounding of 0.  More than max_flips values on
 * different sides of the two masks is a wrong mask: said in one FAIL line
 * naming what and shape.  Returns 1 when the masks agree that far, else 0. */
static inline int test_mask_by(const float *y, const double *ry, const double *dy, double *dyin,
			       size_t n, int relu, double max_flips, const char *what, const char *shape)
{
	size_t flips = 0;
	for (size_t i = 0; i < n; i++) {
		dyin[i] = !relu || y[i] > 0 ? dy[i] : 0;
		flips += relu && (y[i] > 0) != (ry[i] > 0);
	}
	if (flips <= max_flips)
		return 1;
	printf("FAIL %-22s %-34s relu mask: %zu of %zu values on the other side of float64's\n", what,
	       shape, flips, n);
	return 0;
}

static inline void *test_alloc(size_t n)
{
	void *p = calloc(n ? n : 1, 1);
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(99);
	}
	return p;
}

#endif
