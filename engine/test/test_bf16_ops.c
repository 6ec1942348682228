/* The bf16 mixed-precision ops of the oneDNN backend (cpu_conv_bf16,
 * cpu_bn_train_bf16) against the float64 reference on fresh random inputs.
 * bf16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%), so a sum
 * of many rounded products lands within about 1e-2; a wrong conversion
 * (bytes of the wrong half, f32 read as bf16, a missing reorder) is off by
 * O(1).  Every result must also differ from f32's (relerr > 1e-5): bf16
 * must really be in effect. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_ops.h"
#include "engine/ref/ref_ops.h"
#include "engine/test/test_ops_util.h"

#define TOL 1e-2
/* With a ReLU after BN, an output within bf16 rounding of zero can land on
 * the other side of it, and each such flip passes or blocks a whole dy
 * element: against the float64 mask the gradients' error is about the
 * square root of the flip fraction, and a channel of a few hundred values
 * with several flips lost 0.129 in one run of CI.  So the reference backward
 * takes the ReLU mask of bf16's own output y (the decision bf16 made; y
 * itself is checked against float64 above) and the gradients are held to
 * TOL; the two masks may differ in at most MAX_FLIPS of the values. */
#define MAX_FLIPS 0.02
#define MIN_DIFF 1e-5

static int failures;
static char err[512];

static void report_tol(const char *what, const char *shape, const char *out, const float *a,
		       const double *b, size_t n, double tol)
{
	double e = test_relerr(a, b, n);
	int ok = e < tol && e > MIN_DIFF;
	printf("%-4s %-22s %-34s %-8s relerr %.3g (want %g..%g)\n", ok ? "ok" : "FAIL", what,
	       shape, out, e, MIN_DIFF, tol);
	failures += !ok;
}

static void report(const char *what, const char *shape, const char *out, const float *a,
		   const double *b, size_t n)
{
	report_tol(what, shape, out, a, b, n, TOL);
}

static void op_failed(const char *what)
{
	printf("FAIL %-22s %s\n", what, err);
	failures++;
}

static void test_conv(int n, int ci, int h, int w, int co, int k, int s, int p)
{
	int ho = ref_out_side(h, k, s, p), wo = ref_out_side(w, k, s, p);
	size_t nx = (size_t)n * ci * h * w, nw = (size_t)co * ci * k * k, ny = (size_t)n * co * ho * wo;
	float *x = test_alloc(nx * 4), *wt = test_alloc(nw * 4), *dy = test_alloc(ny * 4);
	float *y = test_alloc(ny * 4), *dx = test_alloc(nx * 4), *dw = test_alloc(nw * 4);
	double *ry = test_alloc(ny * 8), *rdx = test_alloc(nx * 8), *rdw = test_alloc(nw * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d %dx%dx%d->%d k%d s%d p%d", n, ci, h, w, co, k, s, p);
	test_fill(x, nx, -1, 1);
	test_fill(wt, nw, -1, 1);
	test_fill(dy, ny, -1, 1);
	double *x64 = test_to_f64(x, nx), *w64 = test_to_f64(wt, nw), *dy64 = test_to_f64(dy, ny);
	ref_conv_forward(x64, w64, ry, n, ci, h, w, co, k, s, p);
	ref_conv_backward_data(dy64, w64, rdx, n, ci, h, w, co, k, s, p);
	ref_conv_backward_weights(x64, dy64, rdw, n, ci, h, w, co, k, s, p);
	if (cpu_conv_bf16(0, x, wt, NULL, y, n, ci, h, w, co, k, s, p, err, sizeof err) < 0)
		op_failed("bf16 conv fwd");
	else
		report("bf16 conv fwd", shape, "y", y, ry, ny);
	if (cpu_conv_bf16(1, NULL, wt, dy, dx, n, ci, h, w, co, k, s, p, err, sizeof err) < 0)
		op_failed("bf16 conv bwd-data");
	else
		report("bf16 conv bwd-data", shape, "dx", dx, rdx, nx);
	if (cpu_conv_bf16(2, x, NULL, dy, dw, n, ci, h, w, co, k, s, p, err, sizeof err) < 0)
		op_failed("bf16 conv bwd-weights");
	else
		report("bf16 conv bwd-weights", shape, "dw", dw, rdw, nw);
	free(x), free(wt), free(dy), free(y), free(dx), free(dw), free(ry), free(rdx), free(rdw);
	free(x64), free(w64), free(dy64);
}

static void test_bn(int n, int c, int h, int w, int relu)
{
	size_t nx = (size_t)n * c * h * w;
	const float eps = 1e-5f;
	float *x = test_alloc(nx * 4), *dy = test_alloc(nx * 4), *y = test_alloc(nx * 4);
	float *dx = test_alloc(nx * 4), *g = test_alloc(c * 4), *bt = test_alloc(c * 4);
	float *mean = test_alloc(c * 4), *var = test_alloc(c * 4), *dg = test_alloc(c * 4);
	float *db = test_alloc(c * 4);
	double *ry = test_alloc(nx * 8), *rdx = test_alloc(nx * 8), *rmean = test_alloc(c * 8);
	double *rvar = test_alloc(c * 8), *rdg = test_alloc(c * 8), *rdb = test_alloc(c * 8);
	double *dyin = test_alloc(nx * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d c%d %dx%d%s", n, c, h, w, relu ? " +relu" : "");
	test_fill(x, nx, -0.5, 2);
	test_fill(dy, nx, -1, 1);
	test_fill(g, c, 0.5, 1.5);
	test_fill(bt, c, -0.5, 0.5);
	double *x64 = test_to_f64(x, nx), *dy64 = test_to_f64(dy, nx), *g64 = test_to_f64(g, c);
	double *b64 = test_to_f64(bt, c);
	ref_bn_forward_train(x64, g64, b64, ry, rmean, rvar, n, c, h * w, eps);
	if (relu)
		ref_relu_forward(ry, ry, nx);
	if (cpu_bn_train_bf16(x, g, bt, dy, y, mean, var, dx, dg, db, n, c, h, w, relu, eps, err,
			      sizeof err) < 0) {
		op_failed("bf16 bn train");
	} else {
		report("bf16 bn train fwd", shape, "y", y, ry, nx);
		report("bf16 bn train fwd", shape, "mean", mean, rmean, c);
		report("bf16 bn train fwd", shape, "var", var, rvar, c);
		failures += !test_mask_by(y, ry, dy64, dyin, nx, relu, MAX_FLIPS * nx, "bf16 bn train fwd", shape);
		ref_bn_backward(x64, dyin, g64, rmean, rvar, rdx, rdg, rdb, n, c, h * w, eps);
		report("bf16 bn bwd", shape, "dx", dx, rdx, nx);
		report("bf16 bn bwd", shape, "dgamma", dg, rdg, c);
		report("bf16 bn bwd", shape, "dbeta", db, rdb, c);
	}
	free(x), free(dy), free(y), free(dx), free(g), free(bt), free(mean), free(var), free(dg);
	free(db), free(ry), free(rdx), free(rmean), free(rvar), free(rdg), free(rdb);
	free(x64), free(dy64), free(g64), free(b64), free(dyin);
}

int main(void)
{
	test_seed();
	/* n, ci, h, w, co, k, stride, pad: the shapes test_ops.c checks in f32. */
	test_conv(3, 3, 20, 20, 16, 7, 2, 3); /* resnet stem */
	test_conv(3, 16, 9, 7, 24, 3, 2, 1);
	test_conv(1, 24, 7, 9, 16, 1, 1, 0);
	test_conv(3, 64, 8, 8, 64, 3, 1, 1);
	test_conv(1, 16, 9, 9, 64, 1, 2, 0); /* downsample shortcut */
	test_conv(3, 24, 11, 10, 24, 3, 2, 0);
	for (int relu = 0; relu < 2; relu++) {
		test_bn(3, 16, 7, 9, relu);
		test_bn(4, 64, 8, 8, relu);
	}
	if (failures)
		printf("%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
