/* Every oneDNN op (engine/cpu/cpu_ops.h), forward and backward, against the
 * float64 reference ops on fresh random inputs of awkward shapes. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "engine/backend.h"
#include "engine/cpu/cpu_ops.h"
#include "engine/cpu/cpu_wino.h"
#include "engine/ref/ref_ops.h"
#include "engine/test/test_ops_util.h"

#define TOL 1e-5
#define MASK_FLIPS 1e-5
/* Winograd in f32: its transforms scale rounding up by their coefficients
 * (up to 8 in F(4x4,3x3), 32 in F(6x6,3x3)); measured up to ~5e-6 with
 * F(4x4) and ~1e-5 with F(6x6) (512 input channels) on these shapes. */
#define WINO_TOL 2e-5

static int failures;
static char err[512];

static void report(const char *what, const char *shape, const char *out, const float *a,
		   const double *b, size_t n)
{
	double e = test_relerr(a, b, n);
	int ok = e < TOL;
	printf("%-4s %-18s %-34s %-8s relerr %.3g\n", ok ? "ok" : "FAIL", what, shape, out, e);
	if (!ok)
		failures++;
}

static void op_failed(const char *what)
{
	printf("FAIL %-18s %s\n", what, err);
	failures++;
}

static const char *const algo_name[] = { "auto", "direct", "winograd" };

/* tol: the relative error allowed (TOL, or WINO_TOL where Winograd ran). */
static void report_tol(const char *what, const char *shape, const char *out, const float *a,
		       const double *b, size_t n, double tol)
{
	double e = test_relerr(a, b, n);
	int ok = e < tol;
	printf("%-4s %-18s %-34s %-8s relerr %.3g (limit %.0e)\n", ok ? "ok" : "FAIL", what, shape,
	       out, e, tol);
	if (!ok)
		failures++;
}

/* The kernel a convolution ran (cpu_conv's winograd field). */
static const char *const impl_name[] = { "direct", "winograd", "cpu_wino", "winograd+cpu_wino dw",
					 "direct+gathered dw" };

/* One convolution with algorithm algo (enum dl_conv_algo): want_wino is
 * the kernels that must run (0 direct, 1 oneDNN's Winograd, 2 cpu_wino's,
 * 3 oneDNN's Winograd with cpu_wino's weight gradient, 4 direct with the
 * weight gradient over the gathered input) or -1 for any, so a shape meant
 * to test one kernel cannot quietly pass on another. */
static void test_conv_algo(int algo, int want_wino, int n, int ci, int h, int w, int co, int k,
			   int s, int p)
{
	int ho = ref_out_side(h, k, s, p), wo = ref_out_side(w, k, s, p);
	size_t nx = (size_t)n * ci * h * w, nw = (size_t)co * ci * k * k, ny = (size_t)n * co * ho * wo;
	float *x = test_alloc(nx * 4), *wt = test_alloc(nw * 4), *dy = test_alloc(ny * 4);
	float *y = test_alloc(ny * 4), *dx = test_alloc(nx * 4), *dw = test_alloc(nw * 4);
	double *ry = test_alloc(ny * 8), *rdx = test_alloc(nx * 8), *rdw = test_alloc(nw * 8);
	char shape[96];
	int wino = 0;
	snprintf(shape, sizeof shape, "n%d %dx%dx%d->%d k%d s%d p%d %s", n, ci, h, w, co, k, s, p,
		 algo_name[algo]);
	test_fill(x, nx, -1, 1);
	test_fill(wt, nw, -1, 1);
	test_fill(dy, ny, -1, 1);
	double *x64 = test_to_f64(x, nx), *w64 = test_to_f64(wt, nw), *dy64 = test_to_f64(dy, ny);
	ref_conv_forward(x64, w64, ry, n, ci, h, w, co, k, s, p);
	ref_conv_backward_data(dy64, w64, rdx, n, ci, h, w, co, k, s, p);
	ref_conv_backward_weights(x64, dy64, rdw, n, ci, h, w, co, k, s, p);
	if (cpu_conv_algo(0, algo, x, wt, NULL, y, n, ci, h, w, co, k, s, p, &wino, err,
			  sizeof err) < 0) {
		op_failed("conv fwd");
		goto out;
	}
	if (want_wino >= 0 && wino != want_wino) {
		printf("FAIL %-18s %-34s ran %s, expected %s\n", "conv algorithm", shape,
		       impl_name[wino], impl_name[want_wino]);
		failures++;
	}
	/* 4: direct sums, in another order */
	if (wino == 4)
		wino = 0;
	double tol = wino ? WINO_TOL : TOL;
	report_tol(wino ? "conv fwd (wino)" : "conv fwd", shape, "y", y, ry, ny, tol);
	if (cpu_conv_algo(1, algo, NULL, wt, dy, dx, n, ci, h, w, co, k, s, p, NULL, err,
			  sizeof err) < 0)
		op_failed("conv bwd-data");
	else
		report_tol(wino ? "conv bwd-d (wino)" : "conv bwd-data", shape, "dx", dx, rdx, nx, tol);
	if (cpu_conv_algo(2, algo, x, NULL, dy, dw, n, ci, h, w, co, k, s, p, NULL, err,
			  sizeof err) < 0)
		op_failed("conv bwd-weights");
	else
		report_tol(wino ? "conv bwd-w (wino)" : "conv bwd-weights", shape, "dw", dw, rdw, nw,
			   tol);
out:
	free(x), free(wt), free(dy), free(y), free(dx), free(dw), free(ry), free(rdx), free(rdw);
	free(x64), free(w64), free(dy64);
}

/* A conv's accumulating backward-data: dx = dx0 + bwd_data(dy, w), with
 * k = 2 pad + 1 (1x1, or the network's 3x3 run as a forward conv of the
 * turned weights, or a stride-2 3x3 on cpu_wino's stride-2 path). */
static void test_conv_acc(int algo, int n, int ci, int h, int w, int co, int k, int s)
{
	int pad = k / 2, wino = 0, ho = ref_out_side(h, k, s, pad), wo = ref_out_side(w, k, s, pad);
	size_t nx = (size_t)n * ci * h * w, nw = (size_t)co * ci * k * k, ny = (size_t)n * co * ho * wo;
	float *wt = test_alloc(nw * 4), *dy = test_alloc(ny * 4), *dx = test_alloc(nx * 4);
	double *rdx = test_alloc(nx * 8);
	char shape[96];
	test_fill(wt, nw, -1, 1);
	test_fill(dy, ny, -1, 1);
	test_fill(dx, nx, -2, 2);
	double *w64 = test_to_f64(wt, nw), *dy64 = test_to_f64(dy, ny), *dx0 = test_to_f64(dx, nx);
	ref_conv_backward_data(dy64, w64, rdx, n, ci, h, w, co, k, s, pad);
	for (size_t i = 0; i < nx; i++)
		rdx[i] += dx0[i];
	if (cpu_conv_backward_data_acc(dy, wt, dx, n, ci, h, w, co, k, s, pad, algo, &wino, err,
				       sizeof err) < 0) {
		snprintf(shape, sizeof shape, "n%d %dx%dx%d->%d k%d s%d p%d %s", n, ci, h, w, co, k,
			 s, pad, algo_name[algo]);
		op_failed("conv bwd-data acc");
	} else {
		snprintf(shape, sizeof shape, "n%d %dx%dx%d->%d k%d s%d p%d %s", n, ci, h, w, co, k,
			 s, pad, impl_name[wino]);
		report_tol("conv bwd-data acc", shape, "dx0+dx", dx, rdx, nx, wino ? WINO_TOL : TOL);
	}
	free(wt), free(dy), free(dx), free(rdx), free(w64), free(dy64), free(dx0);
}

/* The panel path's plan must take F(M x M, 3x3) for this shape, so that
 * a change to its cost model cannot quietly leave one tile size untested. */
static void want_panel_tile(int M, int n, int ci, int h, int w, int co)
{
	struct cpu_wino wg;
	if (!cpu_wino_plan(&wg, CPU_WINO_PANEL, n, ci, co, h, w, err, sizeof err)) {
		op_failed("cpu_wino_plan");
		return;
	}
	if (wg.tm != M) {
		printf("FAIL %-18s n%d %dx%dx%d->%d: F(%dx%d), expected F(%dx%d)\n", "panel tile size", n, ci,
		       h, w, co, wg.tm, wg.tm, M, M);
		failures++;
	}
}

/* The backend's default choice (what the network runs). */
static void test_conv(int n, int ci, int h, int w, int co, int k, int s, int p)
{
	test_conv_algo(0, -1, n, ci, h, w, co, k, s, p);
}

/* x uniform in [lo, hi). */
static void test_bn_x(int n, int c, int h, int w, int relu, double lo, double hi);

static void test_bn(int n, int c, int h, int w, int relu)
{
	test_bn_x(n, c, h, w, relu, -0.5, 2);
}

/* Shapes whose batch norm must run the own nChw16c kernels (cpu_bn_blk.c):
 * say so, so a change in the dispatch cannot make these checks test
 * oneDNN's primitive instead. */
static void test_bn_own(int n, int c, int h, int w, int relu, double lo, double hi)
{
	int own = cpu_bn_own_kernels(n, c, h, w);
	if (own != 1) {
		printf("FAIL %-18s n%d c%d %dx%d runs %s\n", "bn own kernels", n, c, h, w,
		       own < 0 ? "nothing (error)" : "oneDNN's primitive");
		failures++;
	}
	test_bn_x(n, c, h, w, relu, lo, hi);
}

static void test_bn_x(int n, int c, int h, int w, int relu, double lo, double hi)
{
	size_t nx = (size_t)n * c * h * w;
	const float eps = 1e-5f;
	float *x = test_alloc(nx * 4), *dy = test_alloc(nx * 4), *y = test_alloc(nx * 4);
	float *dx = test_alloc(nx * 4), *g = test_alloc(c * 4), *bt = test_alloc(c * 4);
	float *mean = test_alloc(c * 4), *var = test_alloc(c * 4), *dg = test_alloc(c * 4);
	float *db = test_alloc(c * 4), *rm = test_alloc(c * 4), *rv = test_alloc(c * 4);
	double *ry = test_alloc(nx * 8), *rdx = test_alloc(nx * 8), *rmean = test_alloc(c * 8);
	double *rvar = test_alloc(c * 8), *rdg = test_alloc(c * 8), *rdb = test_alloc(c * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d c%d %dx%d%s x~[%g,%g)", n, c, h, w, relu ? " +relu" : "",
		 lo, hi);
	/* Off-centre inputs so the mean matters. */
	test_fill(x, nx, lo, hi);
	test_fill(dy, nx, -1, 1);
	test_fill(g, c, 0.5, 1.5);
	test_fill(bt, c, -0.5, 0.5);
	test_fill(rm, c, -0.2, 0.8);
	test_fill(rv, c, 0.5, 1.5);
	double *x64 = test_to_f64(x, nx), *dy64 = test_to_f64(dy, nx), *g64 = test_to_f64(g, c);
	double *b64 = test_to_f64(bt, c), *rm64 = test_to_f64(rm, c), *rv64 = test_to_f64(rv, c);
	ref_bn_forward_train(x64, g64, b64, ry, rmean, rvar, n, c, h * w, eps);
	if (relu)
		ref_relu_forward(ry, ry, nx);
	double *dyin = test_alloc(nx * 8);
	if (cpu_bn_train(x, g, bt, dy, y, mean, var, dx, dg, db, n, c, h, w, relu, eps, err,
			 sizeof err) < 0) {
		op_failed("bn train");
	} else {
		report("bn train fwd", shape, "y", y, ry, nx);
		report("bn train fwd", shape, "mean", mean, rmean, c);
		report("bn train fwd", shape, "var", var, rvar, c);
		/* The fused ReLU's backward masks dy by the output first: by the
		 * float32 output's mask, which may differ from float64's where an
		 * output lies within rounding of 0 (one flipped value of 4 M put
		 * dbeta at 7.6e-4 in one random run); at most MASK_FLIPS of the
		 * values may (a wrong mask flips about half). */
		failures += !test_mask_by(y, ry, dy64, dyin, nx, relu, MASK_FLIPS * nx + 1, "bn train fwd", shape);
		ref_bn_backward(x64, dyin, g64, rmean, rvar, rdx, rdg, rdb, n, c, h * w, eps);
		report("bn bwd", shape, "dx", dx, rdx, nx);
		report("bn bwd", shape, "dgamma", dg, rdg, c);
		report("bn bwd", shape, "dbeta", db, rdb, c);
	}
	ref_bn_forward_eval(x64, g64, b64, rm64, rv64, ry, n, c, h * w, eps);
	if (relu)
		ref_relu_forward(ry, ry, nx);
	if (cpu_bn_eval(x, g, bt, rm, rv, y, n, c, h, w, relu, eps, err, sizeof err) < 0)
		op_failed("bn eval");
	else
		report("bn eval fwd", shape, "y", y, ry, nx);
	free(x), free(dy), free(y), free(dx), free(g), free(bt), free(mean), free(var), free(dg);
	free(db), free(rm), free(rv), free(ry), free(rdx), free(rmean), free(rvar), free(rdg);
	free(rdb), free(x64), free(dy64), free(g64), free(b64), free(rm64), free(rv64), free(dyin);
}

/* The network's fused BN + residual add (+ ReLU), training and inference. */
static void test_bn_add(int n, int c, int h, int w, int relu)
{
	size_t nx = (size_t)n * c * h * w;
	const float eps = 1e-5f;
	float *x = test_alloc(nx * 4), *sc = test_alloc(nx * 4), *z = test_alloc(nx * 4);
	float *g = test_alloc(c * 4), *bt = test_alloc(c * 4), *mean = test_alloc(c * 4);
	float *var = test_alloc(c * 4), *rm = test_alloc(c * 4), *rv = test_alloc(c * 4);
	double *rz = test_alloc(nx * 8), *rmean = test_alloc(c * 8), *rvar = test_alloc(c * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d c%d %dx%d%s", n, c, h, w, relu ? " +relu" : "");
	test_fill(x, nx, -0.5, 2);
	test_fill(sc, nx, -1, 1);
	test_fill(g, c, 0.5, 1.5);
	test_fill(bt, c, -0.5, 0.5);
	test_fill(rm, c, -0.2, 0.8);
	test_fill(rv, c, 0.5, 1.5);
	double *x64 = test_to_f64(x, nx), *s64 = test_to_f64(sc, nx), *g64 = test_to_f64(g, c);
	double *b64 = test_to_f64(bt, c), *rm64 = test_to_f64(rm, c), *rv64 = test_to_f64(rv, c);
	for (int train = 1; train >= 0; train--) {
		if (train)
			ref_bn_forward_train(x64, g64, b64, rz, rmean, rvar, n, c, h * w, eps);
		else
			ref_bn_forward_eval(x64, g64, b64, rm64, rv64, rz, n, c, h * w, eps);
		ref_add_forward(rz, s64, rz, nx);
		if (relu)
			ref_relu_forward(rz, rz, nx);
		if (cpu_bn_add(x, g, bt, sc, train ? NULL : rm, train ? NULL : rv, z, mean, var, n, c,
			       h, w, relu, eps, err, sizeof err) < 0) {
			op_failed("bn+add");
			continue;
		}
		report(train ? "bn+add train fwd" : "bn+add eval fwd", shape, "z", z, rz, nx);
		if (train) {
			report("bn+add train fwd", shape, "mean", mean, rmean, c);
			report("bn+add train fwd", shape, "var", var, rvar, c);
		}
	}
	free(x), free(sc), free(z), free(g), free(bt), free(mean), free(var), free(rm), free(rv);
	free(rz), free(rmean), free(rvar), free(x64), free(s64), free(g64), free(b64), free(rm64);
	free(rv64);
}

static void test_relu_add(int n, int c, int h, int w, int relu)
{
	size_t nx = (size_t)n * c * h * w;
	float *a = test_alloc(nx * 4), *b = test_alloc(nx * 4), *dy = test_alloc(nx * 4);
	float *y = test_alloc(nx * 4), *dx = test_alloc(nx * 4);
	double *ry = test_alloc(nx * 8), *rdx = test_alloc(nx * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d c%d %dx%d%s", n, c, h, w, relu ? " +relu" : "");
	test_fill(a, nx, -1, 1);
	test_fill(b, nx, -1, 1);
	test_fill(dy, nx, -1, 1);
	double *a64 = test_to_f64(a, nx), *b64 = test_to_f64(b, nx), *dy64 = test_to_f64(dy, nx);
	if (!relu) { /* plain ReLU op once per shape */
		ref_relu_forward(a64, ry, nx);
		ref_relu_backward(ry, dy64, rdx, nx);
		if (cpu_relu(a, dy, y, dx, n, c, h, w, err, sizeof err) < 0) {
			op_failed("relu");
		} else {
			report("relu fwd", shape, "y", y, ry, nx);
			report("relu bwd", shape, "dx", dx, rdx, nx);
		}
	}
	ref_add_forward(a64, b64, ry, nx);
	if (relu)
		ref_relu_forward(ry, ry, nx);
	if (relu)
		ref_relu_backward(ry, dy64, rdx, nx);
	else
		memcpy(rdx, dy64, nx * 8);
	if (cpu_add(a, b, dy, y, dx, n, c, h, w, relu, err, sizeof err) < 0) {
		op_failed("add");
	} else {
		report("add fwd", shape, "y", y, ry, nx);
		report("add bwd", shape, "da=db", dx, rdx, nx);
	}
	free(a), free(b), free(dy), free(y), free(dx), free(ry), free(rdx), free(a64), free(b64);
	free(dy64);
}

static void test_maxpool(int n, int c, int h, int w, int k, int s, int p)
{
	int ho = ref_out_side(h, k, s, p), wo = ref_out_side(w, k, s, p);
	size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * ho * wo;
	float *x = test_alloc(nx * 4), *dy = test_alloc(ny * 4), *y = test_alloc(ny * 4);
	float *dx = test_alloc(nx * 4);
	double *ry = test_alloc(ny * 8), *rdx = test_alloc(nx * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d c%d %dx%d k%d s%d p%d", n, c, h, w, k, s, p);
	/* Negative inputs: padding must lose even against them. */
	test_fill(x, nx, -2, -0.1);
	for (size_t i = 0; i < nx; i += 3)
		x[i] += 1.5f;
	test_fill(dy, ny, -1, 1);
	double *x64 = test_to_f64(x, nx), *dy64 = test_to_f64(dy, ny);
	ref_maxpool_forward(x64, ry, n, c, h, w, k, s, p);
	ref_maxpool_backward(x64, dy64, rdx, n, c, h, w, k, s, p);
	if (cpu_maxpool(x, dy, y, dx, n, c, h, w, k, s, p, err, sizeof err) < 0) {
		op_failed("maxpool");
	} else {
		report("maxpool fwd", shape, "y", y, ry, ny);
		report("maxpool bwd", shape, "dx", dx, rdx, nx);
	}
	free(x), free(dy), free(y), free(dx), free(ry), free(rdx), free(x64), free(dy64);
}

static void test_gap(int n, int c, int h, int w)
{
	size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c;
	float *x = test_alloc(nx * 4), *dy = test_alloc(ny * 4), *y = test_alloc(ny * 4);
	float *dx = test_alloc(nx * 4);
	double *ry = test_alloc(ny * 8), *rdx = test_alloc(nx * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d c%d %dx%d", n, c, h, w);
	test_fill(x, nx, -1, 1);
	test_fill(dy, ny, -1, 1);
	double *x64 = test_to_f64(x, nx), *dy64 = test_to_f64(dy, ny);
	ref_gap_forward(x64, ry, n, c, h * w);
	ref_gap_backward(dy64, rdx, n, c, h * w);
	if (cpu_gap(x, dy, y, dx, n, c, h, w, err, sizeof err) < 0) {
		op_failed("gap");
	} else {
		report("gap fwd", shape, "y", y, ry, ny);
		report("gap bwd", shape, "dx", dx, rdx, nx);
	}
	free(x), free(dy), free(y), free(dx), free(ry), free(rdx), free(x64), free(dy64);
}

static void test_fc(int n, int c, int k)
{
	size_t nx = (size_t)n * c, nw = (size_t)k * c, ny = (size_t)n * k;
	float *x = test_alloc(nx * 4), *w = test_alloc(nw * 4), *b = test_alloc(k * 4);
	float *dy = test_alloc(ny * 4), *y = test_alloc(ny * 4), *dx = test_alloc(nx * 4);
	float *dw = test_alloc(nw * 4), *db = test_alloc(k * 4);
	double *ry = test_alloc(ny * 8), *rdx = test_alloc(nx * 8), *rdw = test_alloc(nw * 8);
	double *rdb = test_alloc(k * 8);
	char shape[96];
	snprintf(shape, sizeof shape, "n%d %d->%d", n, c, k);
	test_fill(x, nx, -1, 1);
	test_fill(w, nw, -1, 1);
	test_fill(b, k, -1, 1);
	test_fill(dy, ny, -1, 1);
	double *x64 = test_to_f64(x, nx), *w64 = test_to_f64(w, nw), *b64 = test_to_f64(b, k);
	double *dy64 = test_to_f64(dy, ny);
	ref_fc_forward(x64, w64, b64, ry, n, c, k);
	ref_fc_backward_data(dy64, w64, rdx, n, c, k);
	ref_fc_backward_weights(x64, dy64, rdw, rdb, n, c, k);
	if (cpu_fc(x, w, b, dy, y, dx, dw, db, n, c, k, err, sizeof err) < 0) {
		op_failed("fc");
	} else {
		report("fc fwd", shape, "y", y, ry, ny);
		report("fc bwd-data", shape, "dx", dx, rdx, nx);
		report("fc bwd-weights", shape, "dw", dw, rdw, nw);
		report("fc bwd-weights", shape, "db", db, rdb, k);
	}
	free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db), free(ry);
	free(rdx), free(rdw), free(rdb), free(x64), free(w64), free(b64), free(dy64);
}

int main(void)
{
	test_seed();
	/* n, ci, h, w, co, k, stride, pad */
	test_conv(1, 3, 7, 9, 16, 3, 1, 1);
	test_conv(3, 3, 20, 20, 16, 7, 2, 3);   /* resnet stem */
	test_conv(3, 16, 9, 7, 24, 3, 2, 1);
	test_conv(1, 24, 7, 9, 16, 1, 1, 0);
	test_conv(3, 64, 8, 8, 64, 3, 1, 1);
	test_conv(1, 16, 9, 9, 64, 1, 2, 0);    /* downsample shortcut */
	test_conv(3, 24, 11, 10, 24, 3, 2, 0);
	test_conv(1, 16, 12, 12, 16, 7, 1, 3);
	/* Each algorithm on the 3x3 stride-1 shapes where Winograd can run:
	 * cpu_wino's kernels (where the CPU has AVX-512) up to 32 channels
	 * (its group path) and from 256 channels on both sides, multiples of
	 * 64, at 14x14 and smaller (its panel path), oneDNN's elsewhere (auto:
	 * from 32 channels on both sides, else direct).  Small and odd sides,
	 * Ci != Co, batches with many 8-tile groups and a partial last one;
	 * panel shapes with 1-4 panels of 64 channels and tile counts (n x
	 * ceil(h/4) x ceil(w/4)) with and without a partial 6-tile block.
	 * n, ci, h, w, co: */
	int own = cpu_wino_available();
	/* And the wgrad path: oneDNN's Winograd with cpu_wino's weight
	 * gradient at 64 and 128 channels on images over 14x14; chunks of 32
	 * tiles with a partial last one (n x ceil(h/4) x ceil(w/4) = 40, 32,
	 * 75 and 60 tiles), odd sides, Ci != Co. */
	int wino_shapes[][5] = {
		{ 2, 64, 17, 15, 64 },	{ 1, 64, 15, 29, 128 },	{ 3, 128, 19, 18, 64 },	{ 3, 128, 16, 20, 128 },
		{ 1, 32, 5, 5, 32 },	{ 2, 32, 9, 11, 32 },	{ 2, 64, 8, 8, 64 },	{ 4, 128, 7, 7, 128 },
		{ 2, 256, 4, 4, 256 },	{ 2, 512, 2, 2, 512 },	{ 3, 512, 2, 2, 512 },	{ 3, 256, 3, 3, 256 },
		{ 2, 64, 1, 1, 64 },	{ 3, 16, 9, 7, 16 },	{ 5, 16, 13, 10, 32 },	{ 2, 32, 6, 5, 16 },
		{ 9, 32, 14, 14, 32 },	{ 2, 16, 1, 1, 16 },	{ 3, 16, 2, 3, 16 },	{ 2, 64, 7, 7, 128 },
		{ 2, 256, 9, 9, 256 },	{ 5, 256, 5, 5, 256 },	{ 2, 256, 6, 7, 512 },	{ 2, 512, 5, 5, 256 },
		{ 1, 320, 7, 7, 256 },	{ 2, 256, 15, 15, 256 }, { 2, 512, 7, 7, 512 } };
	for (size_t i = 0; i < sizeof wino_shapes / sizeof wino_shapes[0]; i++) {
		int *d = wino_shapes[i], lo = d[1] < d[4] ? d[1] : d[4], hi = d[1] + d[4] - lo;
		int small = own && hi <= 32;
		int panel = own && d[1] % 64 == 0 && d[4] % 64 == 0 && lo >= 256 &&
			    d[2] * d[3] <= 196 && omp_get_max_threads() <= lo / 64;
		int wgrad = own && lo >= 64 && hi <= 128 && d[1] % 64 == 0 && d[4] % 64 == 0 &&
			    d[2] * d[3] > 196;
		int wino = small || panel ? 2 : wgrad ? 3 : 1;
		test_conv_algo(DL_CONV_DIRECT, 0, d[0], d[1], d[2], d[3], d[4], 3, 1, 1);
		test_conv_algo(DL_CONV_WINOGRAD, wino, d[0], d[1], d[2], d[3], d[4], 3, 1, 1);
		test_conv_algo(DL_CONV_AUTO, lo >= 32 || small ? wino : 0, d[0], d[1], d[2], d[3],
			       d[4], 3, 1, 1);
	}
	/* The panel path with an output over 2 MiB (streaming stores), on 2
	 * threads; on 5 (more than its 4 panels of 64 channels) oneDNN's
	 * Winograd instead, then the panel path again at 512 channels. */
	int threads = omp_get_max_threads();
	omp_set_num_threads(2);
	test_conv_algo(DL_CONV_AUTO, own ? 2 : 1, 11, 256, 14, 14, 256, 3, 1, 1);
	omp_set_num_threads(5);
	test_conv_algo(DL_CONV_AUTO, 1, 2, 256, 4, 4, 256, 3, 1, 1);
	test_conv_algo(DL_CONV_AUTO, own ? 2 : 1, 2, 512, 4, 4, 512, 3, 1, 1);
	omp_set_num_threads(threads);
	/* The panel path's F(6x6,3x3), which its plan takes where a pass has
	 * many tiles (n11 256x14x14 above is one): sides that are multiples of
	 * 6 (tiles never straddle; Ci < Co), one axis with a zero line between
	 * images and one without (all 13 images in one row; Ci > Co), lines on
	 * both axes with two empty slots (17 images, 3 to a row), and the
	 * accumulating backward-data.  resnet50's 7x7 layers keep F(4x4). */
	if (own) {
		want_panel_tile(6, 11, 256, 14, 14, 256);
		want_panel_tile(6, 16, 256, 14, 14, 256);
		want_panel_tile(4, 16, 512, 7, 7, 512);
	}
	int f6_shapes[][5] = { { 19, 256, 6, 6, 512 }, { 13, 512, 6, 10, 256 }, { 17, 256, 9, 9, 256 } };
	for (size_t i = 0; i < sizeof f6_shapes / sizeof f6_shapes[0]; i++) {
		int *d = f6_shapes[i];
		if (own)
			want_panel_tile(6, d[0], d[1], d[2], d[3], d[4]);
		test_conv_algo(DL_CONV_AUTO, own ? 2 : 1, d[0], d[1], d[2], d[3], d[4], 3, 1, 1);
	}
	test_conv_acc(DL_CONV_AUTO, 17, 256, 9, 9, 256, 3, 1);
	/* resnet20's layer1 at batch 48: outputs over 2 MiB, which cpu_wino
	 * writes with streaming stores. */
	test_conv_algo(DL_CONV_AUTO, own ? 2 : 0, 48, 16, 28, 28, 16, 3, 1, 1);
	/* 3x3 stride 2: cpu_wino's stride-2 path where C and K are multiples of
	 * 64 (asked for Winograd: any size, on every thread; auto: 64 or 128
	 * channels on 56x56 and larger inputs with 256 output tiles or more
	 * per thread, here on one thread), else direct.  Odd and even sides, 1
	 * to 4 tiles a side, Ci != Co, chunks of 32 tiles with a partial last
	 * one (2 x 7 x 7 = 98 tiles at 56x56), a thread with no chunk (1 tile),
	 * outputs over 2 MiB (streaming stores), and the accumulating
	 * backward-data of a basic block's conv1. */
	test_conv_algo(DL_CONV_WINOGRAD, own ? 2 : 0, 2, 64, 8, 8, 64, 3, 2, 1);
	test_conv_algo(DL_CONV_WINOGRAD, own ? 2 : 0, 3, 64, 7, 9, 128, 3, 2, 1);
	test_conv_algo(DL_CONV_WINOGRAD, own ? 2 : 0, 2, 128, 15, 13, 64, 3, 2, 1);
	test_conv_algo(DL_CONV_WINOGRAD, own ? 2 : 0, 1, 64, 1, 2, 64, 3, 2, 1);
	test_conv_algo(DL_CONV_WINOGRAD, own ? 2 : 0, 2, 128, 56, 56, 128, 3, 2, 1);
	test_conv_algo(DL_CONV_WINOGRAD, 0, 2, 48, 9, 9, 64, 3, 2, 1);
	test_conv_acc(DL_CONV_WINOGRAD, 3, 64, 9, 7, 64, 3, 2);
	omp_set_num_threads(1);
	test_conv_algo(DL_CONV_AUTO, own ? 2 : 0, 6, 128, 56, 56, 128, 3, 2, 1);
	test_conv_algo(DL_CONV_AUTO, own ? 2 : 0, 4, 64, 57, 59, 128, 3, 2, 1);
	test_conv_algo(DL_CONV_AUTO, 0, 2, 128, 56, 56, 128, 3, 2, 1);
	test_conv_acc(DL_CONV_AUTO, 6, 64, 56, 56, 128, 3, 2);
	omp_set_num_threads(threads);
	/* From 256 input channels oneDNN's direct kernel runs the forward and
	 * backward-data, and the weight gradient is one 1x1 weight gradient over
	 * the input gathered by tap (col_dw): resnet50's layer3.0 and layer4.0,
	 * odd sides with Ci != Co, a 1x2 input (one output, eight taps in the
	 * padding), and 240 channels or --conv-algo direct, which keep oneDNN's
	 * own weight gradient. */
	test_conv_algo(DL_CONV_AUTO, 4, 2, 256, 28, 28, 256, 3, 2, 1);
	test_conv_algo(DL_CONV_AUTO, 4, 2, 512, 14, 14, 512, 3, 2, 1);
	test_conv_algo(DL_CONV_AUTO, 4, 3, 256, 15, 13, 128, 3, 2, 1);
	test_conv_algo(DL_CONV_AUTO, 4, 1, 512, 1, 2, 256, 3, 2, 1);
	test_conv_algo(DL_CONV_AUTO, 0, 2, 240, 9, 9, 256, 3, 2, 1);
	test_conv_algo(DL_CONV_DIRECT, 0, 2, 256, 9, 9, 256, 3, 2, 1);
	test_conv_algo(DL_CONV_WINOGRAD, 0, 2, 64, 8, 8, 64, 1, 1, 0); /* 1x1: direct */
	/* resnet50's bottleneck conv1 (Ci = 4 Co, and Ci = Co in layer1). */
	test_conv_acc(DL_CONV_AUTO, 2, 64, 7, 9, 16, 1, 1);
	test_conv_acc(DL_CONV_AUTO, 3, 32, 5, 5, 32, 1, 1);
	test_conv_acc(DL_CONV_AUTO, 1, 256, 4, 3, 64, 1, 1);
	/* A basic block's conv1 (3x3) adding into the shortcut's gradient:
	 * cpu_wino at 16 and 32 channels, oneDNN's Winograd at 64, direct,
	 * odd sides, Ci != Co. */
	test_conv_acc(DL_CONV_AUTO, 3, 16, 9, 7, 16, 3, 1);
	test_conv_acc(DL_CONV_AUTO, 2, 32, 11, 10, 32, 3, 1);
	test_conv_acc(DL_CONV_AUTO, 5, 16, 13, 10, 32, 3, 1);
	test_conv_acc(DL_CONV_AUTO, 48, 16, 28, 28, 16, 3, 1);
	test_conv_acc(DL_CONV_AUTO, 2, 64, 7, 7, 64, 3, 1);
	test_conv_acc(DL_CONV_AUTO, 2, 256, 5, 5, 256, 3, 1); /* cpu_wino's panel path */
	test_conv_acc(DL_CONV_AUTO, 3, 512, 3, 4, 256, 3, 1);
	test_conv_acc(DL_CONV_DIRECT, 2, 64, 7, 7, 64, 3, 1);
	test_conv_acc(DL_CONV_DIRECT, 3, 16, 9, 7, 16, 3, 1);
	test_conv_acc(DL_CONV_WINOGRAD, 1, 16, 5, 6, 48, 3, 1);
	test_conv_acc(DL_CONV_DIRECT, 1, 16, 9, 9, 32, 5, 1);
	for (int relu = 0; relu < 2; relu++) {
		test_bn(3, 16, 7, 9, relu);
		test_bn(1, 24, 5, 5, relu);
		test_bn(3, 3, 7, 9, relu);
		test_bn(1, 64, 4, 4, relu);
		test_relu_add(3, 16, 7, 9, relu);
		test_relu_add(1, 24, 5, 3, relu);
		test_relu_add(3, 3, 4, 4, relu);
		/* The own nChw16c kernels: odd N/H/W, 1-3 channel blocks, more
		 * positions per chunk than one float partial sum covers (SUB),
		 * and inputs far off zero (the variance must not cancel). */
		test_bn_own(3, 16, 7, 9, relu, -0.5, 2);
		test_bn_own(1, 32, 5, 3, relu, -0.5, 2);
		test_bn_own(5, 48, 3, 7, relu, -0.5, 2);
		/* 1x1 with N >= 3: with only two values per channel dx is exactly 0. */
		test_bn_own(5, 16, 1, 1, relu, -0.5, 2);
		test_bn_own(3, 32, 11, 13, relu, -0.5, 2);
		test_bn_own(3, 16, 9, 11, relu, 99, 101);
		test_bn_add(3, 16, 7, 9, relu);
		test_bn_add(5, 48, 3, 7, relu);
		test_bn_add(1, 32, 11, 13, relu);
	}
	/* 16 MiB outputs: the own kernels' streaming-store passes
	 * (NT_MIN_BYTES in cpu_bn_blk.c), where the CPU has AVX-512. */
	test_bn_own(16, 64, 64, 64, 1, -0.5, 2);
	test_bn_add(16, 64, 64, 64, 1);
	test_maxpool(3, 16, 9, 7, 3, 2, 1);
	test_maxpool(1, 24, 8, 8, 3, 2, 1);
	test_maxpool(3, 3, 7, 9, 3, 2, 1);
	test_maxpool(1, 64, 6, 6, 2, 2, 0);
	test_gap(3, 64, 7, 7);
	test_gap(1, 24, 3, 5);
	test_gap(3, 3, 1, 1);
	test_fc(3, 64, 10);
	test_fc(1, 24, 7);
	test_fc(4, 16, 16);
	if (failures)
		printf("%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
