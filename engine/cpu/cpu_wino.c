#include "config.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "engine/cpu/cpu_wino.h"

/* Tiles per group: the GEMM's register block (8 accumulators of 16 output
 * channels, plus the weight vector, stay in registers), and small enough
 * that a group's transforms (36 x 8 x C floats in, as many out) stay in L1
 * at 16 channels and in L2 at 64. */
#define TG 8

/* How the output transform writes a tile: plain stores, streaming
 * (non-temporal) stores, or adding to what the output holds.  Streaming
 * pays where the output is larger than the cores' L2 caches: the write then
 * skips reading the old lines in first, which measured 0.3-0.5 ms of a
 * 2 ms layer (tests/bench/RESULTS.md).  Each output pixel's 16 channels are
 * one whole 64-byte line, so every streamed line is complete. */
enum wino_store { STORE_PLAIN, STORE_STREAM, STORE_ADD };
#define WINO_STREAM_MIN_BYTES ((size_t)2 << 20)

/* How the output transform stores an output of `bytes` at dst. */
static enum wino_store store_kind(const float *dst, size_t bytes, int accumulate)
{
	/* Streaming stores need 64-byte aligned lines (the network's buffers
	 * all are; anything else takes plain stores). */
	int stream = bytes >= WINO_STREAM_MIN_BYTES && (uintptr_t)dst % 64 == 0;
	return accumulate ? STORE_ADD : stream ? STORE_STREAM : STORE_PLAIN;
}

/* The 1-D transforms of F(4,3) with interpolation points 0, +-1, +-2, inf,
 * written out (the matrices are in cpu_wino.h's references):
 *   B^T (6x6) maps 6 inputs to 6 transform-domain values,
 *   A^T (4x6) maps 6 products to 4 outputs,
 *   G   (6x3) maps a 3-tap filter to 6 values, and G^T back,
 *   A   (6x4) maps 4 output gradients to 6. */
static inline void g_1d(const float g[3], float u[6])
{
	/* Multiplications by the reciprocals: this runs for every filter on
	 * every step. */
	const float r4 = 1.f / 4, r6 = 1.f / 6, r12 = 1.f / 12, r24 = 1.f / 24;
	u[0] = g[0] * r4;
	u[1] = -(g[0] + g[1] + g[2]) * r6;
	u[2] = -(g[0] - g[1] + g[2]) * r6;
	u[3] = g[0] * r24 + g[1] * r12 + g[2] * r6;
	u[4] = g[0] * r24 - g[1] * r12 + g[2] * r6;
	u[5] = g[2];
}

static void gt_1d(const float h[6], float g[3])
{
	g[0] = h[0] / 4 - h[1] / 6 - h[2] / 6 + h[3] / 24 + h[4] / 24;
	g[1] = -h[1] / 6 + h[2] / 6 + h[3] / 12 - h[4] / 12;
	g[2] = -h[1] / 6 - h[2] / 6 + h[3] / 6 + h[4] / 6 + h[5];
}

/* u (6x6) = G g G^T for a 3x3 filter g (row-major); flipped: g rotated by
 * 180 degrees, as backward-data needs. */
static inline void filter_transform(const float *g, int flip, float u[36])
{
	float gg[9], t[6][3], col[3], out[6];
	for (int i = 0; i < 9; i++)
		gg[i] = flip ? g[8 - i] : g[i];
	for (int j = 0; j < 3; j++) {
		for (int i = 0; i < 3; i++)
			col[i] = gg[i * 3 + j];
		g_1d(col, out);
		for (int i = 0; i < 6; i++)
			t[i][j] = out[i];
	}
	for (int i = 0; i < 6; i++)
		g_1d(t[i], &u[i * 6]);
}

/* Forward: U (36, C, K) from w (K, C, 3, 3).  Backward-data: the kernel
 * runs with K input and C output channels, so U (36, K, C) from the
 * flipped filters. */
static void transform_weights(const float *w, int c_n, int k_n, int flip, float *u_out)
{
#pragma omp parallel for schedule(static)
	for (int k = 0; k < k_n; k++)
		for (int c = 0; c < c_n; c++) {
			float u[36];
			filter_transform(w + ((size_t)k * c_n + c) * 9, flip, u);
			size_t at = flip ? (size_t)k * c_n + c : (size_t)c * k_n + k;
			for (int p = 0; p < 36; p++)
				u_out[(size_t)p * c_n * k_n + at] = u[p];
		}
}

int cpu_wino_shape_ok(int c, int k, int ksize, int stride, int pad)
{
	return ksize == 3 && stride == 1 && pad == 1 && c > 0 && k > 0 && c % 16 == 0 &&
	       k % 16 == 0;
}

int cpu_wino_panel_fits(int c, int k, int h, int w, int threads)
{
	int lo = c < k ? c : k;
	return c % 64 == 0 && k % 64 == 0 && lo >= 256 && (long)h * w <= 14 * 14 &&
	       threads <= lo / 64;
}

int cpu_wino_s2_fits(int n, int c, int k, int h, int w, int threads)
{
	long tiles = (long)n * (((h + 1) / 2 + 3) / 4) * (((w + 1) / 2 + 3) / 4);
	return (c == 64 || c == 128) && (k == 64 || k == 128) && (long)h * w >= 56 * 56 &&
	       tiles >= 256L * threads;
}

int cpu_wino_wgrad_fits(int c, int k, int h, int w)
{
	return (c == 64 || c == 128) && (k == 64 || k == 128) && (long)h * w > 14 * 14;
}

/* Transform positions of F(M x M, 3x3): (M + 2)^2, 36 or 64. */
static inline int wino_positions(int M)
{
	return (M + 2) * (M + 2);
}

/* M x M tiles along one axis of a stride-1 mosaic of g images of this
 * side: one zero line between images unless the side is a multiple of M. */
static long mosaic_tiles(long g, int side, int M)
{
	long extent = side % M ? g * (side + 1) - 1 : g * side;
	return (extent + M - 1) / M;
}

/* What building the filters' transform U costs on the panel path (once per
 * pass, P x Cin x Cout values), in tiles' products (P x Cin x Cout each):
 * fitted to the passes timed on the Zen 4 VM, where F(6x6) took 0.90 of
 * F(4x4)'s time on 256 channels at 14x14 (100 tiles against 225) and 1.28
 * on 512 at 7x7 (32 against 64): 28 and 50 tiles (tests/bench/RESULTS.md). */
#define PANEL_U_TILES 32

/* The stride-1 mosaic of the batch and the tile size, F(4x4) or F(6x6),
 * that cost least: (tiles + PANEL_U_TILES) x P products (P = 36 or 64);
 * F(4x4), the more exact, on a tie.  resnet50 at batch 16: its 14x14
 * layers take F(6x6), 2 images to a row, 20 x 5 tiles (F(4x4): 15 x 15 on
 * 4 x 4 images, where tiles of each image would be 16 x 16), its 7x7
 * layers F(4x4), 8 x 8 tiles (F(6x6) would have 32). */
static void plan_mosaic(struct cpu_wino *wg)
{
	long best = -1;
	for (int M = 4; M <= 6; M += 2)
		for (int gx = 1; gx <= wg->n; gx++) {
			long gy = (wg->n + gx - 1) / gx;
			long th = mosaic_tiles(gy, wg->h, M), tw = mosaic_tiles(gx, wg->w, M);
			long cost = (th * tw + PANEL_U_TILES) * wino_positions(M);
			if (best < 0 || cost < best) {
				best = cost;
				wg->tm = M;
				wg->gx = gx;
				wg->th = (int)th;
				wg->tw = (int)tw;
			}
		}
	wg->sy = wg->h % wg->tm ? wg->h + 1 : wg->h;
	wg->sx = wg->w % wg->tm ? wg->w + 1 : wg->w;
	wg->ntile = wg->th * wg->tw;
}

/* Tiles per chunk on the wgrad path, and on the stride-2 path. */
#define TC 32
#define S2_TC 32

size_t cpu_wino_plan(struct cpu_wino *wg, enum cpu_wino_path path, int n, int c, int k, int h,
		     int w, char *err, size_t errlen)
{
	memset(wg, 0, sizeof(*wg));
	if (n < 1 || h < 1 || w < 1 || !cpu_wino_shape_ok(c, k, 3, 1, 1) ||
	    (path != CPU_WINO_GROUP && (c % 64 || k % 64))) {
		snprintf(err, errlen, "%s:%d: winograd: bad shape n=%d c=%d k=%d %dx%d", __FILE__,
			 __LINE__, n, c, k, h, w);
		return 0;
	}
	int stride = path == CPU_WINO_S2 ? 2 : 1;
	wg->n = n;
	wg->c = c;
	wg->k = k;
	wg->h = h;
	wg->w = w;
	wg->ho = (h - 1) / stride + 1;
	wg->wo = (w - 1) / stride + 1;
	if (path != CPU_WINO_PANEL) {
		wg->tm = 4;
		wg->gx = 1;
		wg->th = (wg->ho + 3) / 4;
		wg->tw = (wg->wo + 3) / 4;
		wg->ntile = n * wg->th * wg->tw;
	} else {
		plan_mosaic(wg);
	}
	wg->ngroup = (wg->ntile + TG - 1) / TG;
	wg->nthr = omp_get_max_threads();
	wg->path = path;
	size_t ucount = (size_t)36 * c * k;
	/* Every piece is a multiple of 16 floats, so each stays 64-byte aligned. */
	if (path == CPU_WINO_S2) { /* the pass's U, shared; per thread dU, then V and M (or Y) of a chunk */
		ucount = (size_t)81 * c * k;
		wg->panel_len = ucount + (size_t)2 * 81 * S2_TC * (c > k ? c : k);
		return ucount + wg->panel_len * wg->nthr;
	}
	if (path == CPU_WINO_WGRAD) { /* per thread dU, then V and Y of a chunk */
		wg->panel_len = ucount + (size_t)36 * TC * (c + k);
		return wg->panel_len * wg->nthr;
	}
	if (path == CPU_WINO_PANEL) { /* per thread a panel's U (or dU), then V and M (or Y) of every tile */
		size_t nn = (size_t)wino_positions(wg->tm);
		wg->panel_len = nn * 64 * (c > k ? c : k);
		return wg->panel_len * wg->nthr + 2 * nn * wg->ntile * (c > k ? c : k);
	}
	wg->scratch_len = (size_t)36 * TG * 2 * (c > k ? c : k);
	return wg->scratch_len * wg->nthr + 2 * ucount + ucount * wg->nthr;
}

/* The buffer must be zeroed: the GEMM also reads a last, partial group's
 * unused rows, which must hold finite numbers. */
void cpu_wino_bind(struct cpu_wino *wg, float *buf)
{
	size_t ucount = (size_t)36 * wg->c * wg->k;
	if (wg->path == CPU_WINO_S2) {
		wg->u_fwd = wg->u_bwd = buf;
		wg->du = buf + (size_t)81 * wg->c * wg->k;
		return;
	}
	if (wg->path == CPU_WINO_WGRAD) {
		wg->du = buf;
		return;
	}
	if (wg->path == CPU_WINO_PANEL) {
		wg->u_fwd = wg->u_bwd = wg->du = buf;
		wg->pv = buf + wg->panel_len * wg->nthr;
		wg->pm = wg->pv + (size_t)wino_positions(wg->tm) * wg->ntile * (wg->c > wg->k ? wg->c : wg->k);
		return;
	}
	wg->scratch = buf;
	wg->u_fwd = wg->scratch + wg->scratch_len * wg->nthr;
	wg->u_bwd = wg->u_fwd + ucount;
	wg->du = wg->u_bwd + ucount;
}

static int team_size(const struct cpu_wino *wg)
{
	int t = omp_get_max_threads();
	return t < wg->nthr ? t : wg->nthr;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int cpu_wino_available(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

/* The kernels below are compiled for AVX-512F whatever the build's flags;
 * they only run where cpu_wino_available() said yes.  The pragma (rather
 * than a function attribute) also covers OpenMP's outlined bodies; clang
 * (the sanitizer build) has its own. */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif

typedef __m512 vec;

/* t = B^T d along one line of 6. */
static inline void bt_line(const vec d[6], vec t[6])
{
	const vec four = _mm512_set1_ps(4.f), five = _mm512_set1_ps(5.f), two = _mm512_set1_ps(2.f);
	vec s12 = _mm512_add_ps(d[1], d[2]), s34 = _mm512_add_ps(d[3], d[4]);
	vec d12 = _mm512_sub_ps(d[1], d[2]), d43 = _mm512_sub_ps(d[4], d[3]);
	vec d42 = _mm512_sub_ps(d[4], d[2]), d31 = _mm512_sub_ps(d[3], d[1]);
	t[0] = _mm512_add_ps(_mm512_fmsub_ps(four, d[0], _mm512_mul_ps(five, d[2])), d[4]);
	t[1] = _mm512_fnmadd_ps(four, s12, s34); /* -4d1 - 4d2 + d3 + d4 */
	t[2] = _mm512_fmadd_ps(four, d12, d43);  /*  4d1 - 4d2 - d3 + d4 */
	t[3] = _mm512_fmadd_ps(two, d31, d42);   /* -2d1 - d2 + 2d3 + d4 */
	t[4] = _mm512_fnmadd_ps(two, d31, d42);  /*  2d1 - d2 - 2d3 + d4 */
	t[5] = _mm512_add_ps(_mm512_fmsub_ps(four, d[1], _mm512_mul_ps(five, d[3])), d[5]);
}

/* o = A^T m along one line: 6 products to 4 outputs. */
static inline void at_line(const vec m[6], vec o[4])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
	vec s34 = _mm512_add_ps(m[3], m[4]), d34 = _mm512_sub_ps(m[3], m[4]);
	o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), s34);
	o[1] = _mm512_fmadd_ps(two, d34, d12);
	o[2] = _mm512_fmadd_ps(four, s34, s12);
	o[3] = _mm512_add_ps(_mm512_fmadd_ps(eight, d34, d12), m[5]);
}

/* a = A y along one line: 4 output gradients to 6 transform-domain values. */
static inline void a_line(const vec y[4], vec a[6])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec e = _mm512_add_ps(y[0], y[2]), o = _mm512_add_ps(y[1], y[3]);
	vec e4 = _mm512_fmadd_ps(four, y[2], y[0]), o8 = _mm512_fmadd_ps(eight, y[3], _mm512_mul_ps(two, y[1]));
	a[0] = y[0];
	a[1] = _mm512_add_ps(e, o);
	a[2] = _mm512_sub_ps(e, o);
	a[3] = _mm512_add_ps(e4, o8);
	a[4] = _mm512_sub_ps(e4, o8);
	a[5] = y[3];
}

/* F(6x6,3x3) on the panel path: the same construction on the points 0,
 * 1, -1, 2, -2, 1/2, -1/2 and inf (8 per axis, 64 products per 6x6 output
 * tile), row 0 of B^T and G negated (their product is unchanged):
 *   B^T = [ 1    0  -21/4    0   21/4    0  -1  0 ]
 *         [ 0    1    1   -17/4 -17/4    1   1  0 ]
 *         [ 0   -1    1    17/4 -17/4   -1   1  0 ]
 *         [ 0  1/2  1/4   -5/2   -5/4    2   1  0 ]
 *         [ 0 -1/2  1/4    5/2   -5/4   -2   1  0 ]
 *         [ 0    2    4   -5/2    -5   1/2   1  0 ]
 *         [ 0   -2    4    5/2    -5  -1/2   1  0 ]
 *         [ 0   -1    0   21/4     0 -21/4   0  1 ]
 *   G   = [ 1 0 0; -2/9 -2/9 -2/9; -2/9 2/9 -2/9; 1/90 1/45 2/45;
 *           1/90 -1/45 2/45; 32/45 16/45 8/45; 32/45 -16/45 8/45; 0 0 1 ]
 *   A^T = the powers 0..5 of the points (inf: only the last output).
 * Its float32 error is about twice F(4x4)'s: 5.2e-6 of the output's RMS
 * against 2.5e-6 over 256 channels (tests/bench/RESULTS.md). */

/* t = B^T d along one line of 8. */
static inline void bt8_line(const vec d[8], vec t[8])
{
	const vec c525 = _mm512_set1_ps(5.25f), c425 = _mm512_set1_ps(4.25f);
	const vec c25 = _mm512_set1_ps(2.5f), c125 = _mm512_set1_ps(1.25f), c5 = _mm512_set1_ps(5.f);
	const vec half = _mm512_set1_ps(0.5f), quarter = _mm512_set1_ps(0.25f);
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f);
	t[0] = _mm512_fmadd_ps(c525, _mm512_sub_ps(d[4], d[2]), _mm512_sub_ps(d[0], d[6]));
	t[7] = _mm512_fmadd_ps(c525, _mm512_sub_ps(d[3], d[5]), _mm512_sub_ps(d[7], d[1]));
	vec e = _mm512_fnmadd_ps(c425, d[4], _mm512_add_ps(d[2], d[6]));
	vec o = _mm512_fnmadd_ps(c425, d[3], _mm512_add_ps(d[1], d[5]));
	t[1] = _mm512_add_ps(e, o);
	t[2] = _mm512_sub_ps(e, o);
	e = _mm512_fmadd_ps(quarter, d[2], _mm512_fnmadd_ps(c125, d[4], d[6]));
	o = _mm512_fmadd_ps(half, d[1], _mm512_fnmadd_ps(c25, d[3], _mm512_mul_ps(two, d[5])));
	t[3] = _mm512_add_ps(e, o);
	t[4] = _mm512_sub_ps(e, o);
	e = _mm512_fmadd_ps(four, d[2], _mm512_fnmadd_ps(c5, d[4], d[6]));
	o = _mm512_fmadd_ps(two, d[1], _mm512_fnmadd_ps(c25, d[3], _mm512_mul_ps(half, d[5])));
	t[5] = _mm512_add_ps(e, o);
	t[6] = _mm512_sub_ps(e, o);
}

/* o = A^T m along one line: 8 products to 6 outputs. */
static inline void at8_line(const vec m[8], vec o[6])
{
	const vec c2 = _mm512_set1_ps(2.f), c4 = _mm512_set1_ps(4.f), c8 = _mm512_set1_ps(8.f);
	const vec c16 = _mm512_set1_ps(16.f), c32 = _mm512_set1_ps(32.f);
	const vec r2 = _mm512_set1_ps(0.5f), r4 = _mm512_set1_ps(0.25f), r8 = _mm512_set1_ps(0.125f);
	const vec r16 = _mm512_set1_ps(0.0625f), r32 = _mm512_set1_ps(0.03125f);
	vec s1 = _mm512_add_ps(m[1], m[2]), d1 = _mm512_sub_ps(m[1], m[2]);
	vec s2 = _mm512_add_ps(m[3], m[4]), d2 = _mm512_sub_ps(m[3], m[4]);
	vec s3 = _mm512_add_ps(m[5], m[6]), d3 = _mm512_sub_ps(m[5], m[6]);
	o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s1), _mm512_add_ps(s2, s3));
	o[1] = _mm512_fmadd_ps(c2, d2, _mm512_fmadd_ps(r2, d3, d1));
	o[2] = _mm512_fmadd_ps(c4, s2, _mm512_fmadd_ps(r4, s3, s1));
	o[3] = _mm512_fmadd_ps(c8, d2, _mm512_fmadd_ps(r8, d3, d1));
	o[4] = _mm512_fmadd_ps(c16, s2, _mm512_fmadd_ps(r16, s3, s1));
	o[5] = _mm512_add_ps(_mm512_fmadd_ps(c32, d2, _mm512_fmadd_ps(r32, d3, d1)), m[7]);
}

/* a = A y along one line: 6 output gradients to 8 transform-domain values. */
static inline void a8_line(const vec y[6], vec a[8])
{
	const vec c2 = _mm512_set1_ps(2.f), c4 = _mm512_set1_ps(4.f), c8 = _mm512_set1_ps(8.f);
	const vec c16 = _mm512_set1_ps(16.f), c32 = _mm512_set1_ps(32.f);
	const vec r2 = _mm512_set1_ps(0.5f), r4 = _mm512_set1_ps(0.25f), r8 = _mm512_set1_ps(0.125f);
	const vec r16 = _mm512_set1_ps(0.0625f), r32 = _mm512_set1_ps(0.03125f);
	vec e = _mm512_add_ps(_mm512_add_ps(y[0], y[2]), y[4]);
	vec o = _mm512_add_ps(_mm512_add_ps(y[1], y[3]), y[5]);
	a[0] = y[0];
	a[1] = _mm512_add_ps(e, o);
	a[2] = _mm512_sub_ps(e, o);
	e = _mm512_fmadd_ps(c16, y[4], _mm512_fmadd_ps(c4, y[2], y[0]));
	o = _mm512_fmadd_ps(c32, y[5], _mm512_fmadd_ps(c8, y[3], _mm512_mul_ps(c2, y[1])));
	a[3] = _mm512_add_ps(e, o);
	a[4] = _mm512_sub_ps(e, o);
	e = _mm512_fmadd_ps(r16, y[4], _mm512_fmadd_ps(r4, y[2], y[0]));
	o = _mm512_fmadd_ps(r32, y[5], _mm512_fmadd_ps(r8, y[3], _mm512_mul_ps(r2, y[1])));
	a[5] = _mm512_add_ps(e, o);
	a[6] = _mm512_sub_ps(e, o);
	a[7] = y[5];
}

/* The line transforms of F(M x M, 3x3), M 4 or 6 (a constant where they
 * are inlined): N = M + 2 points. */
static inline __attribute__((always_inline)) void bt_n(int M, const vec *d, vec *t)
{
	if (M == 4)
		bt_line(d, t);
	else
		bt8_line(d, t);
}

static inline __attribute__((always_inline)) void at_n(int M, const vec *m, vec *o)
{
	if (M == 4)
		at_line(m, o);
	else
		at8_line(m, o);
}

static inline __attribute__((always_inline)) void a_n(int M, const vec *y, vec *a)
{
	if (M == 4)
		a_line(y, a);
	else
		a8_line(y, a);
}

/* Tile index -> image and the tile's top-left output pixel, where each
 * image has tiles of its own (all paths but the panel path). */
static inline void tile_pos(const struct cpu_wino *wg, int tile, int *n, int *y0, int *x0)
{
	int per = wg->th * wg->tw, r = tile % per;
	*n = tile / per;
	*y0 = r / wg->tw * 4;
	*x0 = r % wg->tw * 4;
}

/* One axis of stride-1 tile `at` (its first output line): for the len
 * lines from at + first (first -1: the input window; 0: the outputs),
 * each line's image along this axis (-1 where it is padding, a gap or
 * past the mosaic's count images) and its line inside that image.  With
 * pitch == side, tiles never straddle images and a window's lines in the
 * next or last image are padding. */
static inline void mosaic_axis(int at, int first, int len, int side, int pitch, int count,
			       int *img, int *line)
{
	int own = at / pitch, g = own, r = at - own * pitch + first;
	for (int i = 0; i < len; i++, r++) {
		if (r == pitch) { /* on into the next image */
			r = 0;
			g++;
		}
		/* r is -1 only for a window's first line on an image's first:
		 * padding, or the gap or the last image before it */
		img[i] = r >= 0 && r < side && g < count && (pitch > side || g == own) ? g : -1;
		line[i] = r;
	}
}

/* Where the pixels of stride-1 tile `tile`'s len x len window (first as
 * mosaic_axis; tiles M x M outputs) lie in a (N, c/16, H, W, 16) tensor, channel block 0:
 * pixel (i, j) is there if col[j] < lim[i] (lim[i] 0: a row of padding or
 * gaps; col[j] INT_MAX: such a column; else images in that mosaic row and
 * the column's image), at row[i] + off[j]; else it is zero (inputs) or not
 * stored (outputs). */
struct tile_win {
	int64_t row[8], off[8];
	int lim[8], col[8];
};

static inline __attribute__((always_inline)) void
tile_window(const struct cpu_wino *wg, int M, int tile, int first, int len, int c,
	    struct tile_win *tw)
{
	int ri[8], ry[8], ci[8], cx[8], gy = (wg->n + wg->gx - 1) / wg->gx;
	mosaic_axis(tile / wg->tw * M, first, len, wg->h, wg->sy, gy, ri, ry);
	mosaic_axis(tile % wg->tw * M, first, len, wg->w, wg->sx, wg->gx, ci, cx);
	int64_t image = (int64_t)c * wg->h * wg->w;
	for (int i = 0; i < len; i++) {
		int left = wg->n - ri[i] * wg->gx;
		tw->lim[i] = ri[i] < 0 ? 0 : left < wg->gx ? left : wg->gx;
		tw->row[i] = ((int64_t)ri[i] * wg->gx * image + (int64_t)ry[i] * wg->w * 16);
		tw->col[i] = ci[i] < 0 ? INT_MAX : ci[i];
		tw->off[i] = (int64_t)ci[i] * image + (int64_t)cx[i] * 16;
	}
}

/* V[p][t][c] for the N x N input window (N = M + 2) of tile t, channel
 * block cb.  The window starts one pixel up and left of the output tile
 * (pad 1); pixels outside the image are zero.  M (the output tile's side)
 * and mosaic are constants where this is inlined; only the panel path
 * (mosaic) takes M = 6. */
static inline __attribute__((always_inline)) void
input_transform(const struct cpu_wino *wg, int M, int mosaic, const float *src, int cin, int tile,
		int t, int rows, float *v)
{
	int n = 0, y0 = 0, x0 = 0, h = wg->h, w = wg->w, N = M + 2;
	struct tile_win tw;
	if (mosaic)
		tile_window(wg, M, tile, -1, N, cin, &tw);
	else
		tile_pos(wg, tile, &n, &y0, &x0);
	y0 -= 1;
	x0 -= 1;
	for (int cb = 0; cb < cin / 16; cb++) {
		// plane is (H, W, 16) of image n (mosaic: 0), channel block cb
		const float *plane = src + ((size_t)n * (cin / 16) + cb) * h * w * 16;
		vec d[8][8], tmp[8][8];
#pragma GCC unroll 8
		for (int i = 0; i < N; i++)
#pragma GCC unroll 8
			for (int j = 0; j < N; j++) {
				int y = y0 + i, x = x0 + j;
				if (mosaic)
					d[i][j] = tw.col[j] < tw.lim[i]
							  ? _mm512_loadu_ps(plane + tw.row[i] + tw.off[j])
							  : _mm512_setzero_ps();
				else
					d[i][j] = y >= 0 && y < h && x >= 0 && x < w
							  ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
							  : _mm512_setzero_ps();
			}
#pragma GCC unroll 8
		for (int j = 0; j < N; j++) {
			vec col[8], out[8];
#pragma GCC unroll 8
			for (int i = 0; i < N; i++)
				col[i] = d[i][j];
			bt_n(M, col, out);
#pragma GCC unroll 8
			for (int i = 0; i < N; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 8
		for (int i = 0; i < N; i++) {
			vec out[8];
			bt_n(M, tmp[i], out);
#pragma GCC unroll 8
			for (int j = 0; j < N; j++)
				_mm512_storeu_ps(v + ((size_t)(i * N + j) * rows + t) * cin + cb * 16, out[j]);
		}
	}
}

/* Y[p][t][k] = A dy A^T for output-gradient tile t (outputs past the edge
 * are zero: they do not exist). */
static inline __attribute__((always_inline)) void
grad_transform(const struct cpu_wino *wg, int M, int mosaic, const float *ddst, int kout, int tile,
	       int t, int rows, float *yv)
{
	int n = 0, y0 = 0, x0 = 0, h = wg->h, w = wg->w, N = M + 2;
	struct tile_win tw;
	if (mosaic)
		tile_window(wg, M, tile, 0, M, kout, &tw);
	else
		tile_pos(wg, tile, &n, &y0, &x0);
	for (int kb = 0; kb < kout / 16; kb++) {
		const float *plane = ddst + ((size_t)n * (kout / 16) + kb) * h * w * 16;
		vec d[6][6], tmp[8][6];
#pragma GCC unroll 6
		for (int i = 0; i < M; i++)
#pragma GCC unroll 6
			for (int j = 0; j < M; j++) {
				int y = y0 + i, x = x0 + j;
				if (mosaic)
					d[i][j] = tw.col[j] < tw.lim[i]
							  ? _mm512_loadu_ps(plane + tw.row[i] + tw.off[j])
							  : _mm512_setzero_ps();
				else
					d[i][j] = y < h && x < w
							  ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
							  : _mm512_setzero_ps();
			}
#pragma GCC unroll 6
		for (int j = 0; j < M; j++) {
			vec col[6], out[8];
#pragma GCC unroll 6
			for (int i = 0; i < M; i++)
				col[i] = d[i][j];
			a_n(M, col, out);
#pragma GCC unroll 8
			for (int i = 0; i < N; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 8
		for (int i = 0; i < N; i++) {
			vec out[8];
			a_n(M, tmp[i], out);
#pragma GCC unroll 8
			for (int j = 0; j < N; j++)
				_mm512_storeu_ps(yv + ((size_t)(i * N + j) * rows + t) * kout + kb * 16, out[j]);
		}
	}
}

/* M[p][t][k] = sum_c V[p][t][c] U[p][c][k] for the TG tiles of a group. */
static inline __attribute__((always_inline)) void
group_products(const float *v, const float *u, int cin, int kout, float *m)
{
	for (int p = 0; p < 36; p++) {
		const float *vp = v + (size_t)p * TG * cin, *up = u + (size_t)p * cin * kout;
		float *mp = m + (size_t)p * TG * kout;
		for (int kb = 0; kb < kout / 16; kb++) {
			vec acc[TG];
#pragma GCC unroll 8
			for (int t = 0; t < TG; t++)
				acc[t] = _mm512_setzero_ps();
#pragma GCC unroll 4
			for (int c = 0; c < cin; c++) {
				vec wv = _mm512_loadu_ps(up + (size_t)c * kout + kb * 16);
#pragma GCC unroll 8
				for (int t = 0; t < TG; t++)
					acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(vp[t * cin + c]), wv, acc[t]);
			}
#pragma GCC unroll 8
			for (int t = 0; t < TG; t++)
				_mm512_storeu_ps(mp + (size_t)t * kout + kb * 16, acc[t]);
		}
	}
}

/* dst tile t = A^T M A (or dst += that), clipped at the image edge. */
static inline __attribute__((always_inline)) void
output_transform(const struct cpu_wino *wg, int M, int mosaic, const float *m, int kout, int tile,
		 int t, int rows, float *dst, enum wino_store how)
{
	int n = 0, y0 = 0, x0 = 0, h = wg->h, w = wg->w, N = M + 2;
	struct tile_win tw;
	if (mosaic)
		tile_window(wg, M, tile, 0, M, kout, &tw);
	else
		tile_pos(wg, tile, &n, &y0, &x0);
	for (int kb = 0; kb < kout / 16; kb++) {
		float *plane = dst + ((size_t)n * (kout / 16) + kb) * h * w * 16;
		vec tmp[6][8];
#pragma GCC unroll 8
		for (int j = 0; j < N; j++) {
			vec col[8], out[6];
#pragma GCC unroll 8
			for (int i = 0; i < N; i++)
				col[i] = _mm512_loadu_ps(m + ((size_t)(i * N + j) * rows + t) * kout + kb * 16);
			at_n(M, col, out);
#pragma GCC unroll 6
			for (int i = 0; i < M; i++)
				tmp[i][j] = out[i];
		}
		int ni = h - y0 < M ? h - y0 : M, nj = w - x0 < M ? w - x0 : M;
#pragma GCC unroll 6
		for (int i = 0; i < M; i++) {
			if (!mosaic && i >= ni)
				break;
			vec out[6];
			at_n(M, tmp[i], out);
#pragma GCC unroll 6
			for (int j = 0; j < M; j++) {
				if (mosaic ? tw.col[j] >= tw.lim[i] : j >= nj)
					continue;
				float *o = plane + (mosaic ? tw.row[i] + tw.off[j]
							   : ((int64_t)(y0 + i) * w + x0 + j) * 16);
				if (how == STORE_ADD)
					_mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), out[j]));
				else if (how == STORE_STREAM)
					_mm512_stream_ps(o, out[j]);
				else
					_mm512_storeu_ps(o, out[j]);
			}
		}
	}
}

/* One thread's share of the tile groups.  Inlined into the dispatch
 * below with constant channel counts, so every offset in the transforms
 * and products is an immediate and the channel loops unroll. */
static inline __attribute__((always_inline)) void
conv_groups(const struct cpu_wino *wg, int cin, int cout, const float *u, const float *src,
	    float *dst, enum wino_store how, float *v, float *m)
{
	int ntile = wg->ntile;
#pragma omp for schedule(static) nowait
	for (int gi = 0; gi < wg->ngroup; gi++) {
		int t0 = gi * TG, nt = ntile - t0 < TG ? ntile - t0 : TG;
		for (int t = 0; t < nt; t++)
			input_transform(wg, 4, 0, src, cin, t0 + t, t, TG, v);
		group_products(v, u, cin, cout, m);
		for (int t = 0; t < nt; t++)
			output_transform(wg, 4, 0, m, cout, t0 + t, t, TG, dst, how);
	}
}

/* dst (cout channels) = (or +=, with accumulate) conv3x3(src (cin
 * channels)) through U (36, cin, cout). */
static void conv_tiles(const struct cpu_wino *wg, int cin, int cout, const float *u,
		       const float *src, float *dst, int accumulate)
{
	size_t out_bytes = (size_t)wg->n * cout * wg->h * wg->w * sizeof(float);
	enum wino_store how = store_kind(dst, out_bytes, accumulate);
#pragma omp parallel num_threads(team_size(wg))
	{
		float *v = wg->scratch + wg->scratch_len * omp_get_thread_num();
		float *m = v + (size_t)36 * TG * cin;
		if (cin == 16 && cout == 16)
			conv_groups(wg, 16, 16, u, src, dst, how, v, m);
		else if (cin == 16 && cout == 32)
			conv_groups(wg, 16, 32, u, src, dst, how, v, m);
		else if (cin == 32 && cout == 16)
			conv_groups(wg, 32, 16, u, src, dst, how, v, m);
		else if (cin == 32 && cout == 32)
			conv_groups(wg, 32, 32, u, src, dst, how, v, m);
		else
			conv_groups(wg, cin, cout, u, src, dst, how, v, m);
		/* Streaming stores are weakly ordered: drain them before the
		 * region's closing barrier publishes dst to other threads. */
		if (how == STORE_STREAM)
			_mm_sfence();
	}
}

/* du[p][c][k] += sum over the group's nt tiles of V[p][t][c] Y[p][t][k]. */
static inline __attribute__((always_inline)) void
group_outer(const float *v, const float *yv, int cin, int kout, int nt, float *du)
{
	for (int p = 0; p < 36; p++) {
		const float *vp = v + (size_t)p * TG * cin, *yp = yv + (size_t)p * TG * kout;
		float *dp = du + (size_t)p * cin * kout;
		for (int kb = 0; kb < kout / 16; kb++)
			for (int cb = 0; cb < cin / 16; cb++) {
				vec acc[16];
#pragma GCC unroll 16
				for (int i = 0; i < 16; i++)
					acc[i] = _mm512_loadu_ps(dp + (size_t)(cb * 16 + i) * kout + kb * 16);
				for (int t = 0; t < nt; t++) {
					vec yk = _mm512_loadu_ps(yp + (size_t)t * kout + kb * 16);
					const float *vt = vp + (size_t)t * cin + cb * 16;
#pragma GCC unroll 16
					for (int i = 0; i < 16; i++)
						acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(vt[i]), yk, acc[i]);
				}
#pragma GCC unroll 16
				for (int i = 0; i < 16; i++)
					_mm512_storeu_ps(dp + (size_t)(cb * 16 + i) * kout + kb * 16, acc[i]);
			}
	}
}

/* One thread's share of the tile groups' weight-gradient sums (constant
 * channel counts, as conv_groups). */
static inline __attribute__((always_inline)) void
grad_groups(const struct cpu_wino *wg, int cin, int kout, const float *src, const float *ddst,
	    float *v, float *yv, float *du)
{
	int ntile = wg->ntile;
#pragma omp for schedule(static) nowait
	for (int gi = 0; gi < wg->ngroup; gi++) {
		int t0 = gi * TG, nt = ntile - t0 < TG ? ntile - t0 : TG;
		for (int t = 0; t < nt; t++) {
			input_transform(wg, 4, 0, src, cin, t0 + t, t, TG, v);
			grad_transform(wg, 4, 0, ddst, kout, t0 + t, t, TG, yv);
		}
		group_outer(v, yv, cin, kout, nt, du);
	}
}

static void weight_grad(struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	int cin = wg->c, kout = wg->k, team = team_size(wg);
	size_t ucount = (size_t)36 * cin * kout;
#pragma omp parallel num_threads(team)
	{
		int me = omp_get_thread_num();
		float *v = wg->scratch + wg->scratch_len * me;
		float *yv = v + (size_t)36 * TG * cin;
		float *du = wg->du + ucount * me;
		memset(du, 0, ucount * sizeof(float));
		if (cin == 16 && kout == 16)
			grad_groups(wg, 16, 16, src, ddst, v, yv, du);
		else if (cin == 16 && kout == 32)
			grad_groups(wg, 16, 32, src, ddst, v, yv, du);
		else if (cin == 32 && kout == 16)
			grad_groups(wg, 32, 16, src, ddst, v, yv, du);
		else if (cin == 32 && kout == 32)
			grad_groups(wg, 32, 32, src, ddst, v, yv, du);
		else
			grad_groups(wg, cin, kout, src, ddst, v, yv, du);
		/* Every thread's sums are done past this barrier. */
#pragma omp barrier
#pragma omp for schedule(static)
		for (size_t i = 0; i < ucount; i++)
			for (int j = 1; j < team; j++)
				wg->du[i] += wg->du[ucount * j + i];
		// dw is (K, C, 3, 3): G^T du G per (c, k)
#pragma omp for schedule(static)
		for (int k = 0; k < kout; k++)
			for (int c = 0; c < cin; c++) {
				float h[6][6], t[3][6], col[6], out[3];
				for (int p = 0; p < 36; p++)
					h[p / 6][p % 6] = wg->du[((size_t)p * cin + c) * kout + k];
#pragma GCC unroll 6
				for (int j = 0; j < 6; j++) {
#pragma GCC unroll 6
					for (int i = 0; i < 6; i++)
						col[i] = h[i][j];
					gt_1d(col, out);
#pragma GCC unroll 3
					for (int i = 0; i < 3; i++)
						t[i][j] = out[i];
				}
				float *g = dw + ((size_t)k * cin + c) * 9;
#pragma GCC unroll 3
				for (int i = 0; i < 3; i++)
					gt_1d(t[i], &g[i * 3]);
			}
	}
}

/* ---- The panel path: every tile at once, one GEMM per transform position ----
 *
 * For wide layers on small images (resnet50's 256 channels at 14x14, 512 at
 * 7x7) the group path above would read the whole U (36 C K floats: 38 MB at
 * 512 channels) once per group of 8 tiles.  Here a pass runs in phases over
 * the whole batch, each ending at a barrier (P = N x N transform positions:
 * 36 with F(4x4,3x3), 64 with F(6x6,3x3), whichever plan_mosaic chose):
 *   1. every input tile's transform V (P, T, Ci), T tiles in all;
 *   2. per 64 output channels (a panel; threads take whole panels): the
 *      panel's filters' transform U (P, Ci, 64), then the P products
 *      M_p (T, 64) = V_p (T, Ci) U_p (Ci, 64) with 6 x 64 register blocks,
 *      while U (at most 8.4 MB) is still in the cache;
 *   3. every tile's output transform from M (P, T, Co).
 * Backward-weights is V (P, T, C) and Y (P, T, K) first, then per panel
 * dU_p (C, 64) = V_p^T (C, T) Y_p (T, 64) and that panel's dw = G^T dU G:
 * each part of dU has one owner, so no sum between threads.
 *
 * The weights are (3, 3, C, K) (hwio) here, so that 16 filters of
 * consecutive output channels are one vector load per tap and their
 * gradient one store; the backend keeps these layers' weights resident in
 * that layout (cpu_conv.c).  Backward-data reads them turned by 16 x 16
 * transposes. */
#define PR 6  /* rows of the register block */
#define PV 4  /* 16-float vectors of a row: one 64-channel panel */

/* c[r][0..63] = (or +=, with add) sum over s < S of a[r * lda + s * sa] *
 * b[s * ldb + 0..63] for r < R.  R and add are constants where this is
 * inlined (gemm_rows). */
static inline __attribute__((always_inline)) void
gemm_block(int R, int add, int S, const float *a, size_t lda, size_t sa, const float *b,
	   size_t ldb, float *c, size_t ldc)
{
	vec acc[PR][PV];
#pragma GCC unroll 6
	for (int r = 0; r < R; r++)
#pragma GCC unroll 4
		for (int j = 0; j < PV; j++)
			acc[r][j] = add ? _mm512_loadu_ps(c + (size_t)r * ldc + 16 * j) : _mm512_setzero_ps();
	for (int s = 0; s < S; s++) {
		const float *bs = b + (size_t)s * ldb, *as = a + (size_t)s * sa;
		vec bv[PV];
#pragma GCC unroll 4
		for (int j = 0; j < PV; j++)
			bv[j] = _mm512_loadu_ps(bs + 16 * j);
#pragma GCC unroll 6
		for (int r = 0; r < R; r++) {
			vec ar = _mm512_set1_ps(as[(size_t)r * lda]);
#pragma GCC unroll 4
			for (int j = 0; j < PV; j++)
				acc[r][j] = _mm512_fmadd_ps(ar, bv[j], acc[r][j]);
		}
	}
#pragma GCC unroll 6
	for (int r = 0; r < R; r++)
#pragma GCC unroll 4
		for (int j = 0; j < PV; j++)
			_mm512_storeu_ps(c + (size_t)r * ldc + 16 * j, acc[r][j]);
}

/* c (nrows x 64) = (or +=, with add) a b, a's row r at a + r * lda, its
 * step s at s * sa, b (S x 64) with rows ldb apart; PR rows at a time. */
static inline __attribute__((always_inline)) void
gemm_rows_as(int add, int nrows, int S, const float *a, size_t lda, size_t sa, const float *b,
	     size_t ldb, float *c, size_t ldc)
{
	int r0 = 0;
	for (; r0 + PR <= nrows; r0 += PR)
		gemm_block(PR, add, S, a + r0 * lda, lda, sa, b, ldb, c + r0 * ldc, ldc);
	const float *ar = a + r0 * lda;
	float *cr = c + r0 * ldc;
	switch (nrows - r0) {
	case 5: gemm_block(5, add, S, ar, lda, sa, b, ldb, cr, ldc); break;
	case 4: gemm_block(4, add, S, ar, lda, sa, b, ldb, cr, ldc); break;
	case 3: gemm_block(3, add, S, ar, lda, sa, b, ldb, cr, ldc); break;
	case 2: gemm_block(2, add, S, ar, lda, sa, b, ldb, cr, ldc); break;
	case 1: gemm_block(1, add, S, ar, lda, sa, b, ldb, cr, ldc); break;
	default: break;
	}
}

static void gemm_rows(int nrows, int S, const float *a, size_t lda, size_t sa, const float *b,
		      size_t ldb, float *c, size_t ldc)
{
	gemm_rows_as(0, nrows, S, a, lda, sa, b, ldb, c, ldc);
}

static void gemm_rows_add(int nrows, int S, const float *a, size_t lda, size_t sa,
			  const float *b, size_t ldb, float *c, size_t ldc)
{
	gemm_rows_as(1, nrows, S, a, lda, sa, b, ldb, c, ldc);
}

/* g_1d on 16 filters at once. */
static inline void g_1d_v(const vec g[3], vec u[6])
{
	const vec r4 = _mm512_set1_ps(1.f / 4), r6 = _mm512_set1_ps(1.f / 6);
	const vec r12 = _mm512_set1_ps(1.f / 12), r24 = _mm512_set1_ps(1.f / 24);
	vec s02 = _mm512_add_ps(g[0], g[2]);
	vec e = _mm512_fmadd_ps(g[0], r24, _mm512_mul_ps(g[2], r6)), o = _mm512_mul_ps(g[1], r12);
	u[0] = _mm512_mul_ps(g[0], r4);
	u[1] = _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_add_ps(s02, g[1])), r6);
	u[2] = _mm512_mul_ps(_mm512_sub_ps(g[1], s02), r6);
	u[3] = _mm512_add_ps(e, o);
	u[4] = _mm512_sub_ps(e, o);
	u[5] = g[2];
}

/* gt_1d on 16 at once. */
static inline void gt_1d_v(const vec h[6], vec g[3])
{
	const vec r4 = _mm512_set1_ps(1.f / 4), r6 = _mm512_set1_ps(1.f / 6);
	const vec r12 = _mm512_set1_ps(1.f / 12), r24 = _mm512_set1_ps(1.f / 24);
	vec s12 = _mm512_add_ps(h[1], h[2]), d21 = _mm512_sub_ps(h[2], h[1]);
	vec s34 = _mm512_add_ps(h[3], h[4]), d34 = _mm512_sub_ps(h[3], h[4]);
	g[0] = _mm512_fmadd_ps(s34, r24, _mm512_fmsub_ps(h[0], r4, _mm512_mul_ps(s12, r6)));
	g[1] = _mm512_fmadd_ps(d34, r12, _mm512_mul_ps(d21, r6));
	g[2] = _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(s34, s12), r6), h[5]);
}

/* F(6x6,3x3)'s G g on 16 filters at once (G above). */
static inline void g8_1d_v(const vec g[3], vec u[8])
{
	const vec m29 = _mm512_set1_ps(-2.f / 9), r90 = _mm512_set1_ps(1.f / 90);
	const vec r45 = _mm512_set1_ps(1.f / 45), t45 = _mm512_set1_ps(2.f / 45);
	const vec c32 = _mm512_set1_ps(32.f / 45), c16 = _mm512_set1_ps(16.f / 45);
	const vec c8 = _mm512_set1_ps(8.f / 45);
	vec s02 = _mm512_add_ps(g[0], g[2]);
	u[0] = g[0];
	u[1] = _mm512_mul_ps(m29, _mm512_add_ps(s02, g[1]));
	u[2] = _mm512_mul_ps(m29, _mm512_sub_ps(s02, g[1]));
	vec e = _mm512_fmadd_ps(r90, g[0], _mm512_mul_ps(t45, g[2])), o = _mm512_mul_ps(r45, g[1]);
	u[3] = _mm512_add_ps(e, o);
	u[4] = _mm512_sub_ps(e, o);
	e = _mm512_fmadd_ps(c32, g[0], _mm512_mul_ps(c8, g[2]));
	o = _mm512_mul_ps(c16, g[1]);
	u[5] = _mm512_add_ps(e, o);
	u[6] = _mm512_sub_ps(e, o);
	u[7] = g[2];
}

/* G^T h for F(6x6,3x3), 16 at once. */
static inline void gt8_1d_v(const vec h[8], vec g[3])
{
	const vec m29 = _mm512_set1_ps(-2.f / 9), r90 = _mm512_set1_ps(1.f / 90);
	const vec r45 = _mm512_set1_ps(1.f / 45), t45 = _mm512_set1_ps(2.f / 45);
	const vec c32 = _mm512_set1_ps(32.f / 45), c16 = _mm512_set1_ps(16.f / 45);
	const vec c8 = _mm512_set1_ps(8.f / 45);
	vec s1 = _mm512_add_ps(h[1], h[2]), d1 = _mm512_sub_ps(h[1], h[2]);
	vec s2 = _mm512_add_ps(h[3], h[4]), d2 = _mm512_sub_ps(h[3], h[4]);
	vec s3 = _mm512_add_ps(h[5], h[6]), d3 = _mm512_sub_ps(h[5], h[6]);
	vec ms1 = _mm512_mul_ps(m29, s1);
	g[0] = _mm512_add_ps(_mm512_add_ps(h[0], ms1), _mm512_fmadd_ps(r90, s2, _mm512_mul_ps(c32, s3)));
	g[1] = _mm512_fmadd_ps(m29, d1, _mm512_fmadd_ps(r45, d2, _mm512_mul_ps(c16, d3)));
	g[2] = _mm512_add_ps(_mm512_add_ps(ms1, h[7]), _mm512_fmadd_ps(t45, s2, _mm512_mul_ps(c8, s3)));
}

static inline __attribute__((always_inline)) void g_n(int M, const vec *g, vec *u)
{
	if (M == 4)
		g_1d_v(g, u);
	else
		g8_1d_v(g, u);
}

static inline __attribute__((always_inline)) void gt_n(int M, const vec *h, vec *g)
{
	if (M == 4)
		gt_1d_v(h, g);
	else
		gt8_1d_v(h, g);
}

/* u (N x N vectors, N = M + 2) = G g G^T for 16 filters g (9 vectors, a
 * 3x3 row-major each), F(M x M, 3x3), M a constant 4 or 6. */
static inline __attribute__((always_inline)) void filter_transform_v(int M, const vec g[9], vec *u)
{
	int N = M + 2;
	vec t[8][3];
#pragma GCC unroll 3
	for (int j = 0; j < 3; j++) {
		vec col[3] = { g[j], g[3 + j], g[6 + j] }, out[8];
		g_n(M, col, out);
#pragma GCC unroll 8
		for (int i = 0; i < N; i++)
			t[i][j] = out[i];
	}
#pragma GCC unroll 8
	for (int i = 0; i < N; i++)
		g_n(M, t[i], &u[i * N]);
}

/* g (9 vectors, a 3x3 row-major each) = G^T h G for 16 filters' transform-
 * domain gradients h, h's value p at h + p * step: filter_transform_v's
 * adjoint. */
static inline __attribute__((always_inline)) void filter_grad_v(int M, const float *h, size_t step,
								 vec g[9])
{
	int N = M + 2;
	vec t[3][8];
#pragma GCC unroll 8
	for (int j = 0; j < N; j++) {
		vec col[8], out[3];
#pragma GCC unroll 8
		for (int i = 0; i < N; i++)
			col[i] = _mm512_loadu_ps(h + (i * N + j) * step);
		gt_n(M, col, out);
#pragma GCC unroll 3
		for (int i = 0; i < 3; i++)
			t[i][j] = out[i];
	}
#pragma GCC unroll 3
	for (int i = 0; i < 3; i++)
		gt_n(M, t[i], &g[i * 3]);
}

/* g (3 x 3 taps of 16 filters; tap (r, s) at g + r * r_step + s * s_step) =
 * G^T h G, h as filter_grad_v's. */
static inline __attribute__((always_inline)) void
store_filter_grads(int M, const float *h, size_t step, float *g, int64_t r_step, int64_t s_step)
{
	vec gv[9];
	filter_grad_v(M, h, step, gv);
#pragma GCC unroll 9
	for (int i = 0; i < 9; i++)
		_mm512_storeu_ps(g + i / 3 * r_step + i % 3 * s_step, gv[i]);
}

/* h[p * step + 0..15] += hj[p * step + 0..15] for p < 36. */
static inline __attribute__((always_inline)) void add_36(float *h, const float *hj, size_t step)
{
	for (int p = 0; p < 36; p++)
		_mm512_storeu_ps(h + p * step, _mm512_add_ps(_mm512_loadu_ps(h + p * step),
							     _mm512_loadu_ps(hj + p * step)));
}

/* out[c][r] = in[r][c] for a 16 x 16 block of floats. */
static inline __attribute__((always_inline)) void transpose16(const vec in[16], vec out[16])
{
	vec t[16], u[16];
	// pairs of rows interleaved by element, then by 2 elements
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(in[2 * i], in[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(in[2 * i], in[2 * i + 1]);
	}
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		u[4 * i] = (vec)_mm512_unpacklo_pd((__m512d)t[4 * i], (__m512d)t[4 * i + 2]);
		u[4 * i + 1] = (vec)_mm512_unpackhi_pd((__m512d)t[4 * i], (__m512d)t[4 * i + 2]);
		u[4 * i + 2] = (vec)_mm512_unpacklo_pd((__m512d)t[4 * i + 1], (__m512d)t[4 * i + 3]);
		u[4 * i + 3] = (vec)_mm512_unpackhi_pd((__m512d)t[4 * i + 1], (__m512d)t[4 * i + 3]);
	}
	// now u[4i + m] holds, in each 128-bit lane L, column 4L + m of rows 4i..4i+3;
	// gather the 128-bit lanes: first pairs of row groups, then all four
#pragma GCC unroll 4
	for (int m = 0; m < 4; m++) {
		vec a0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);	   // lanes 0,2 of both
		vec a1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xdd);	   // lanes 1,3
		vec b0 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
		vec b1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xdd);
		out[m] = _mm512_shuffle_f32x4(a0, b0, 0x88);	   // lane 0
		out[8 + m] = _mm512_shuffle_f32x4(a0, b0, 0xdd);   // lane 2
		out[4 + m] = _mm512_shuffle_f32x4(a1, b1, 0x88);   // lane 1
		out[12 + m] = _mm512_shuffle_f32x4(a1, b1, 0xdd);  // lane 3
	}
}

/* The filters' transform of one pass for the 64 output channels of panel
 * q, into u (P, Cin, 64), P = (M + 2)^2 transform positions: Cin is the
 * pass's input channels, the panel's channels its outputs; each position's
 * U_p (Cin, 64) is one block for its GEMM to stream.  w is (3, 3, C, K) (hwio): forward, the filters
 * w[.][.][c][64q + o], 16 consecutive output channels per vector load;
 * backward-data (flip), w[.][.][64q + o][k] turned by 180 degrees, its
 * inputs k being the forward's outputs: 16 channels 64q + o at stride K, a
 * gather, over consecutive k so that the gathers' 9 x 16 lines stay in L1. */
static inline __attribute__((always_inline)) void
panel_weights(int M, const float *w, int c_n, int k_n, int q, int flip, float *u)
{
	int cin = flip ? k_n : c_n, NN = wino_positions(M);
	size_t tap = (size_t)c_n * k_n, pstep = (size_t)cin * 64;
	vec g[9], uv[64];
	if (flip) {
		/* 16 x 16 blocks (16 channels c of the panel, 16 inputs k) of
		 * each tap, turned so that a vector holds the 16 c of one k. */
		vec tr[9][16];
		for (int b = 0; b < 4; b++)
			for (int k0 = 0; k0 < cin; k0 += 16) {
				const float *g0 = w + (size_t)(64 * q + 16 * b) * k_n + k0;
				for (int j = 0; j < 9; j++) {
					vec rows[16];
#pragma GCC unroll 16
					for (int r = 0; r < 16; r++)
						rows[r] = _mm512_loadu_ps(g0 + (8 - j) * tap + (size_t)r * k_n);
					transpose16(rows, tr[j]);
				}
				for (int kk = 0; kk < 16; kk++) {
#pragma GCC unroll 9
					for (int j = 0; j < 9; j++)
						g[j] = tr[j][kk];
					filter_transform_v(M, g, uv);
					float *dst = u + (size_t)(k0 + kk) * 64 + 16 * b;
#pragma GCC unroll 64
					for (int p = 0; p < NN; p++)
						_mm512_storeu_ps(dst + p * pstep, uv[p]);
				}
			}
		return;
	}
	for (int i = 0; i < cin; i++) {
		const float *g0 = w + (size_t)i * k_n + 64 * q;
		if (i + 4 < cin)
			for (int j = 0; j < 9; j++)
				for (int b = 0; b < 4; b++)
					_mm_prefetch((const char *)(g0 + j * tap + 4 * (size_t)k_n + 16 * b), _MM_HINT_T0);
#pragma GCC unroll 1
		for (int b = 0; b < 4; b++) {
#pragma GCC unroll 9
			for (int j = 0; j < 9; j++)
				g[j] = _mm512_loadu_ps(g0 + j * tap + 16 * b);
			filter_transform_v(M, g, uv);
			float *dst = u + (size_t)i * 64 + 16 * b;
#pragma GCC unroll 64
			for (int p = 0; p < NN; p++)
				_mm512_storeu_ps(dst + p * pstep, uv[p]);
		}
	}
}

/* One thread's part of a pass on the panel path with F(M x M, 3x3), inside
 * the parallel region of panel_conv below, which makes M a constant. */
static inline __attribute__((always_inline)) void
panel_conv_m(const struct cpu_wino *wg, int M, int cin, int cout, const float *w, int flip,
	     const float *src, float *dst, enum wino_store how)
{
	int ntile = wg->ntile, panels = cout / 64, NN = wino_positions(M);
	float *v = wg->pv, *m = wg->pm;
	float *u = wg->u_fwd + wg->panel_len * omp_get_thread_num();
#pragma omp for schedule(static)
	for (int t = 0; t < ntile; t++)
		input_transform(wg, M, 1, src, cin, t, t, ntile, v);
	/* Per 64 output channels: their filters' transform (NN x cin x
	 * 64 floats, at most 8.4 MB: it stays in the cache for its
	 * GEMMs), then M_p (T, 64) = V_p (T, cin) U_p (cin, 64) for each
	 * p. */
#pragma omp for schedule(static)
	for (int q = 0; q < panels; q++) {
		panel_weights(M, w, wg->c, wg->k, q, flip, u);
		for (int p = 0; p < NN; p++)
			gemm_rows(ntile, cin, v + (size_t)p * ntile * cin, cin, 1,
				  u + (size_t)p * cin * 64, 64,
				  m + (size_t)p * ntile * cout + 64 * q, cout);
	}
#pragma omp for schedule(static)
	for (int t = 0; t < ntile; t++)
		output_transform(wg, M, 1, m, cout, t, t, ntile, dst, how);
	if (how == STORE_STREAM)
		_mm_sfence();
}

/* dst (cout channels) = (or +=) conv3x3(src (cin channels)) on the panel
 * path, w (3, 3, C, K); flip as panel_weights (backward-data: cin = K,
 * cout = C). */
static void panel_conv(const struct cpu_wino *wg, int cin, int cout, const float *w, int flip,
		       const float *src, float *dst, enum wino_store how)
{
#pragma omp parallel num_threads(team_size(wg))
	{
		if (wg->tm == 6)
			panel_conv_m(wg, 6, cin, cout, w, flip, src, dst, how);
		else
			panel_conv_m(wg, 4, cin, cout, w, flip, src, dst, how);
	}
}

/* One thread's part of the weight gradient on the panel path, F(M x M,
 * 3x3), inside panel_weight_grad's parallel region (M a constant). */
static inline __attribute__((always_inline)) void
panel_weight_grad_m(const struct cpu_wino *wg, int M, const float *src, const float *ddst,
		    float *dw)
{
	int cin = wg->c, kout = wg->k, ntile = wg->ntile, panels = kout / 64;
	int NN = wino_positions(M);
	float *v = wg->pv, *yv = wg->pm;
	size_t tap = (size_t)cin * kout;
	float *du = wg->du + wg->panel_len * omp_get_thread_num();
#pragma omp for schedule(static)
	for (int t = 0; t < ntile; t++) {
		input_transform(wg, M, 1, src, cin, t, t, ntile, v);
		grad_transform(wg, M, 1, ddst, kout, t, t, ntile, yv);
	}
	/* Per 64 output channels: dU_p (C, 64) = V_p^T (C, T) Y_p (T, 64)
	 * for each p (row c of a is column c of V_p), then their part
	 * of dw = G^T dU G while dU is in the cache. */
#pragma omp for schedule(static)
	for (int q = 0; q < panels; q++) {
		for (int p = 0; p < NN; p++)
			gemm_rows(cin, ntile, v + (size_t)p * ntile * cin, 1, cin,
				  yv + (size_t)p * ntile * kout + 64 * q, kout,
				  du + (size_t)p * cin * 64, 64);
		for (int c = 0; c < cin; c++)
#pragma GCC unroll 4
			for (int b = 0; b < 4; b++)
				// dw[.][.][c][64q + 16b + lane]
				store_filter_grads(M, du + (size_t)c * 64 + 16 * b, (size_t)cin * 64,
						   dw + (size_t)c * kout + 64 * q + 16 * b,
						   (int64_t)(3 * tap), (int64_t)tap);
	}
}

/* dw (3, 3, C, K) from src and ddst on the panel path. */
static void panel_weight_grad(const struct cpu_wino *wg, const float *src, const float *ddst,
			      float *dw)
{
#pragma omp parallel num_threads(team_size(wg))
	{
		if (wg->tm == 6)
			panel_weight_grad_m(wg, 6, src, ddst, dw);
		else
			panel_weight_grad_m(wg, 4, src, ddst, dw);
	}
}

/* ---- The wgrad path: the weight gradient over chunks of tiles ----
 *
 * On 64 and 128 channels with larger images (resnet50's 56x56 and 28x28
 * layers) V and Y of every tile would not fit the cache (29 MB each at
 * 64 channels on 56x56), and the panel path's split by output channels
 * leaves threads idle.  Here each thread takes chunks of TC tiles: their
 * V (36, TC, C) and Y (36, TC, K), then dU_p (C, K) += V_p^T Y_p for each
 * p, into a dU of its own; then the threads' dU are summed and turned into
 * dw = G^T dU G per filter, written where `at` says. */
static void chunk_weight_grad(const struct cpu_wino *wg, const float *src, const float *ddst,
			      float *dw, const struct cpu_wino_place *at)
{
	int cin = wg->c, kout = wg->k, team = team_size(wg);
	int ntile = wg->ntile, nchunk = (ntile + TC - 1) / TC;
	size_t pstep = (size_t)cin * kout, ucount = 36 * pstep; /* dU is (36, C, K) */
#pragma omp parallel num_threads(team)
	{
		float *du = wg->du + wg->panel_len * omp_get_thread_num();
		float *v = du + ucount, *yv = v + (size_t)36 * TC * cin;
		memset(du, 0, ucount * sizeof(float));
#pragma omp for schedule(static)
		for (int ch = 0; ch < nchunk; ch++) {
			int t0 = ch * TC, nt = ntile - t0 < TC ? ntile - t0 : TC;
			for (int t = 0; t < nt; t++) {
				input_transform(wg, 4, 0, src, cin, t0 + t, t, TC, v);
				grad_transform(wg, 4, 0, ddst, kout, t0 + t, t, TC, yv);
			}
			// dU_p (C, K) += V_p^T (C, nt) Y_p (nt, K): row c of a is column c of V_p
			for (int p = 0; p < 36; p++)
				for (int q = 0; q < kout / 64; q++)
					gemm_rows_add(cin, nt, v + (size_t)p * TC * cin, 1, cin,
						      yv + (size_t)p * TC * kout + 64 * q, kout,
						      du + p * pstep + 64 * q, kout);
		}
		/* Every thread's sums are done past the loop's barrier: per
		 * filter row (c, 16 output channels) the threads' 36 values
		 * summed into the first thread's dU, then G^T dU G. */
#pragma omp for schedule(static)
		for (int c = 0; c < cin; c++)
			for (int kb = 0; kb < kout / 16; kb++) {
				float *h = wg->du + (size_t)c * kout + 16 * kb;
				for (int j = 1; j < team; j++)
					add_36(h, h + wg->panel_len * j, pstep);
				store_filter_grads(4, h, pstep, dw + at->k_at[16 * kb] + at->c_at[c],
						   at->r_step, at->s_step);
			}
	}
}

/* ---- The stride-2 path: 3x3 stride-2 convolutions, polyphase Winograd ----
 *
 * A stride-2 3-tap correlation splits by the parity of the input: along
 * each axis output i reads x[2i-1] g0 + x[2i] g1 + x[2i+1] g2, i.e. the
 * even-offset inputs (window positions 0, 2, .., 8 of a 4-output tile's 9)
 * against the 2-tap filter (g0, g2), an F(4,2) with 5 products, and the
 * odd-offset ones (positions 1, 3, 5, 7) against g1 alone, 4 products.
 * That is a 9-point transform per axis: 81 products per 4x4 output tile
 * instead of 144, all passes:
 *   forward          y  = A^T [ (G g G^T) . (B^T x B) ] A  over 9x9 input windows
 *   backward-data    the same form over 5x5 windows of dy, 8x8 dx tiles:
 *                    the even dx rows of a tile are g1 dy (identity), the
 *                    odd ones g2 dy[i] + g0 dy[i+1], an F(4,2) on the
 *                    filter rotated by 180 degrees
 *   backward-weights dg = G^T [ sum over tiles (A dy A^T) . (B^T x B) ] G
 * F(4,2) is Lavin & Gray's construction with the points 0, 1, -1, 2, inf,
 * its denominators moved into G.  The products run over chunks of S2_TC
 * tiles per thread with the whole U (81, Cin, Cout) computed once per call;
 * backward-weights adds into a dU of each thread's own, summed at the end
 * (as the wgrad path).  Weights (3, 3, C, K) (hwio), as on the panel path. */

/* t (9) from a window x (9): F(4,2)'s B^T on x0, x2, .., x8, then x1, x3, x5, x7. */
static inline void s2_bt(const vec x[9], vec t[9])
{
	const vec two = _mm512_set1_ps(2.f), three = _mm512_set1_ps(3.f);
	vec d0 = x[0], d1 = x[2], d2 = x[4], d3 = x[6], d4 = x[8];
	t[0] = _mm512_add_ps(_mm512_fmsub_ps(two, _mm512_sub_ps(d0, d2), d1), d3); /* 2d0 - d1 - 2d2 + d3 */
	t[1] = _mm512_fmadd_ps(two, d1, _mm512_sub_ps(d2, d3));		  /* 2d1 + d2 - d3 */
	t[2] = _mm512_fmsub_ps(three, d2, _mm512_fmadd_ps(two, d1, d3));	  /* -2d1 + 3d2 - d3 */
	t[3] = _mm512_sub_ps(d3, d1);
	t[4] = _mm512_add_ps(_mm512_fmsub_ps(two, _mm512_sub_ps(d1, d3), d2), d4); /* 2d1 - d2 - 2d3 + d4 */
	t[5] = x[1];
	t[6] = x[3];
	t[7] = x[5];
	t[8] = x[7];
}

/* o (4 outputs) = A^T m: F(4,2)'s A^T on m0..m4, plus m5..m8. */
static inline void s2_at(const vec m[9], vec o[4])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
	o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), _mm512_add_ps(m[3], m[5]));
	o[1] = _mm512_add_ps(_mm512_fmadd_ps(two, m[3], d12), m[6]);
	o[2] = _mm512_add_ps(_mm512_fmadd_ps(four, m[3], s12), m[7]);
	o[3] = _mm512_add_ps(_mm512_fmadd_ps(eight, m[3], d12), _mm512_add_ps(m[4], m[8]));
}

/* Backward-data: 8 dx values of a tile from its 9 products; even ones are
 * the identity part, odd ones F(4,2)'s A^T. */
static inline void s2_at_dx(const vec m[9], vec o[8])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
	o[0] = m[5];
	o[1] = _mm512_add_ps(_mm512_add_ps(m[0], s12), m[3]);
	o[2] = m[6];
	o[3] = _mm512_fmadd_ps(two, m[3], d12);
	o[4] = m[7];
	o[5] = _mm512_fmadd_ps(four, m[3], s12);
	o[6] = m[8];
	o[7] = _mm512_add_ps(_mm512_fmadd_ps(eight, m[3], d12), m[4]);
}

/* a (9) = A y for 4 output gradients. */
static inline void s2_a(const vec y[4], vec a[9])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec e = _mm512_add_ps(y[0], y[2]), o = _mm512_add_ps(y[1], y[3]);
	a[0] = y[0];
	a[1] = _mm512_add_ps(e, o);
	a[2] = _mm512_sub_ps(e, o);
	a[3] = _mm512_fmadd_ps(eight, y[3], _mm512_fmadd_ps(four, y[2], _mm512_fmadd_ps(two, y[1], y[0])));
	a[4] = y[3];
	a[5] = y[0];
	a[6] = y[1];
	a[7] = y[2];
	a[8] = y[3];
}

/* u (9) = G g for 16 filters' 3 taps. */
static inline void s2_g(const vec g[3], vec u[9])
{
	const vec half = _mm512_set1_ps(0.5f), sixth = _mm512_set1_ps(1.f / 6), two = _mm512_set1_ps(2.f);
	u[0] = _mm512_mul_ps(g[0], half);
	u[1] = _mm512_mul_ps(_mm512_add_ps(g[0], g[2]), half);
	u[2] = _mm512_mul_ps(_mm512_sub_ps(g[0], g[2]), sixth);
	u[3] = _mm512_mul_ps(_mm512_fmadd_ps(two, g[2], g[0]), sixth);
	u[4] = g[2];
	u[5] = u[6] = u[7] = u[8] = g[1];
}

/* g (3) = G^T h: s2_g's adjoint. */
static inline void s2_gt(const vec h[9], vec g[3])
{
	const vec half = _mm512_set1_ps(0.5f), sixth = _mm512_set1_ps(1.f / 6), third = _mm512_set1_ps(1.f / 3);
	g[0] = _mm512_fmadd_ps(_mm512_add_ps(h[0], h[1]), half, _mm512_mul_ps(_mm512_add_ps(h[2], h[3]), sixth));
	g[1] = _mm512_add_ps(_mm512_add_ps(h[5], h[6]), _mm512_add_ps(h[7], h[8]));
	g[2] = _mm512_add_ps(_mm512_fmadd_ps(h[1], half, _mm512_fmsub_ps(h[3], third, _mm512_mul_ps(h[2], sixth))), h[4]);
}

/* V[p][t][c] for tile t's input window: forward 9x9 from (2 y0 - 1, 2 x0 - 1)
 * of the input; backward-data (dy) 5x5 from (y0, x0) of dy, whose even
 * and odd parts are the window itself and its first 4. */
static inline __attribute__((always_inline)) void
s2_input(const struct cpu_wino *wg, int dy, const float *src, int cin, int tile, int t, int rows,
	 float *v)
{
	int n, y0, x0;
	tile_pos(wg, tile, &n, &y0, &x0);
	int h = dy ? wg->ho : wg->h, w = dy ? wg->wo : wg->w, len = dy ? 5 : 9;
	if (!dy) {
		y0 = 2 * y0 - 1;
		x0 = 2 * x0 - 1;
	}
	for (int cb = 0; cb < cin / 16; cb++) {
		const float *plane = src + ((size_t)n * (cin / 16) + cb) * h * w * 16;
		vec tmp[9][9];
#pragma GCC unroll 9
		for (int j = 0; j < len; j++) {
			vec col[9], out[9], d[9];
			int x = x0 + j;
#pragma GCC unroll 9
			for (int i = 0; i < len; i++) {
				int y = y0 + i;
				d[i] = y >= 0 && y < h && x >= 0 && x < w
					       ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
					       : _mm512_setzero_ps();
			}
			if (dy)
#pragma GCC unroll 9
				for (int i = 0; i < 9; i++)
					col[i] = d[i / 2]; /* e0 e0 e1 e1 .. e4: evens e0..e4, odds e0..e3 */
			else
#pragma GCC unroll 9
				for (int i = 0; i < 9; i++)
					col[i] = d[i];
			s2_bt(col, out);
#pragma GCC unroll 9
			for (int i = 0; i < 9; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++) {
			vec row[9], out[9];
			if (dy)
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					row[j] = tmp[i][j / 2];
			else
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					row[j] = tmp[i][j];
			s2_bt(row, out);
#pragma GCC unroll 9
			for (int j = 0; j < 9; j++)
				_mm512_storeu_ps(v + ((size_t)(i * 9 + j) * rows + t) * cin + cb * 16, out[j]);
		}
	}
}

static inline __attribute__((always_inline)) void s2_store(float *o, vec x, enum wino_store how)
{
	if (how == STORE_ADD)
		_mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), x));
	else if (how == STORE_STREAM)
		_mm512_stream_ps(o, x);
	else
		_mm512_storeu_ps(o, x);
}

/* Tile t's outputs from its 81 products: forward the 4x4 at (y0, x0) of
 * dst (ho x wo); backward-data (dx) the 8x8 at (2 y0, 2 x0) of dx (h x w);
 * clipped at the edge. */
static inline __attribute__((always_inline)) void
s2_output(const struct cpu_wino *wg, int dx, const float *m, int cout, int tile, int t, int rows,
	  float *dst, enum wino_store how)
{
	int n, y0, x0;
	tile_pos(wg, tile, &n, &y0, &x0);
	int h = dx ? wg->h : wg->ho, w = dx ? wg->w : wg->wo, len = dx ? 8 : 4;
	if (dx) {
		y0 *= 2;
		x0 *= 2;
	}
	int ni = h - y0 < len ? h - y0 : len, nj = w - x0 < len ? w - x0 : len;
	for (int kb = 0; kb < cout / 16; kb++) {
		float *plane = dst + ((size_t)n * (cout / 16) + kb) * h * w * 16;
		vec tmp[8][9];
#pragma GCC unroll 9
		for (int j = 0; j < 9; j++) {
			vec col[9], out[8];
#pragma GCC unroll 9
			for (int i = 0; i < 9; i++)
				col[i] = _mm512_loadu_ps(m + ((size_t)(i * 9 + j) * rows + t) * cout + kb * 16);
			if (dx)
				s2_at_dx(col, out);
			else
				s2_at(col, out);
#pragma GCC unroll 9
			for (int i = 0; i < len; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 9
		for (int i = 0; i < ni; i++) {
			vec out[8];
			if (dx)
				s2_at_dx(tmp[i], out);
			else
				s2_at(tmp[i], out);
#pragma GCC unroll 9
			for (int j = 0; j < nj; j++)
				s2_store(plane + ((size_t)(y0 + i) * w + x0 + j) * 16, out[j], how);
		}
	}
}

/* Y[p][t][k] = A dy A^T for tile t's 4x4 output gradients. */
static inline __attribute__((always_inline)) void
s2_grad(const struct cpu_wino *wg, const float *ddst, int kout, int tile, int t, int rows, float *yv)
{
	int n, y0, x0, h = wg->ho, w = wg->wo;
	tile_pos(wg, tile, &n, &y0, &x0);
	for (int kb = 0; kb < kout / 16; kb++) {
		const float *plane = ddst + ((size_t)n * (kout / 16) + kb) * h * w * 16;
		vec tmp[9][4];
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			vec col[4], out[9];
#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				int y = y0 + i, x = x0 + j;
				col[i] = y < h && x < w ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
							: _mm512_setzero_ps();
			}
			s2_a(col, out);
#pragma GCC unroll 9
			for (int i = 0; i < 9; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++) {
			vec out[9];
			s2_a(tmp[i], out);
#pragma GCC unroll 9
			for (int j = 0; j < 9; j++)
				_mm512_storeu_ps(yv + ((size_t)(i * 9 + j) * rows + t) * kout + kb * 16, out[j]);
		}
	}
}

/* u (81 vectors) = G g G^T for 16 filters g (9 vectors, a 3x3 row-major each). */
static inline __attribute__((always_inline)) void s2_filter(const vec g[9], vec u[81])
{
	vec t[9][3];
#pragma GCC unroll 3
	for (int j = 0; j < 3; j++) {
		vec col[3] = { g[j], g[3 + j], g[6 + j] }, out[9];
		s2_g(col, out);
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++)
			t[i][j] = out[i];
	}
#pragma GCC unroll 9
	for (int i = 0; i < 9; i++)
		s2_g(t[i], &u[i * 9]);
}

/* The whole U of a pass, shared by the team (call inside a parallel
 * region; ends at a barrier).  Forward: U (81, C, K), rows c, from
 * w[.][.][c][k], 16 k per vector.  Backward-data (flip): U (81, K, C), rows
 * k, from the filters rotated by 180 degrees, 16 c per vector: 16 x 16
 * blocks of each tap turned. */
static void s2_weights(const float *w, int c_n, int k_n, int flip, float *u)
{
	size_t tap = (size_t)c_n * k_n;
	vec g[9], uv[81];
	if (!flip) {
#pragma omp for schedule(static)
		for (int c = 0; c < c_n; c++)
			for (int kb = 0; kb < k_n / 16; kb++) {
				const float *g0 = w + (size_t)c * k_n + 16 * kb;
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					g[j] = _mm512_loadu_ps(g0 + j * tap);
				s2_filter(g, uv);
#pragma GCC unroll 81
				for (int p = 0; p < 81; p++)
					_mm512_storeu_ps(u + p * tap + (size_t)c * k_n + 16 * kb, uv[p]);
			}
		return;
	}
#pragma omp for schedule(static)
	for (int kb = 0; kb < k_n / 16; kb++)
		for (int cb = 0; cb < c_n / 16; cb++) {
			vec tr[9][16];
			const float *g0 = w + (size_t)(16 * cb) * k_n + 16 * kb;
#pragma GCC unroll 9
			for (int j = 0; j < 9; j++) {
				vec rows[16];
#pragma GCC unroll 16
				for (int r = 0; r < 16; r++)
					rows[r] = _mm512_loadu_ps(g0 + j * tap + (size_t)r * k_n);
				transpose16(rows, tr[j]); /* tr[j][kk]: the 16 c of k = 16 kb + kk */
			}
			for (int kk = 0; kk < 16; kk++) {
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					g[j] = tr[8 - j][kk];
				s2_filter(g, uv);
#pragma GCC unroll 81
				for (int p = 0; p < 81; p++)
					_mm512_storeu_ps(u + p * tap + (size_t)(16 * kb + kk) * c_n + 16 * cb, uv[p]);
			}
		}
}

/* Forward (flip 0: src (N, C/16, H, W, 16) -> dst (N, K/16, Ho, Wo, 16)) or
 * backward-data (flip 1: dy -> dx) on the stride-2 path. */
static void s2_conv(const struct cpu_wino *wg, int flip, const float *w, const float *src,
		    float *dst, enum wino_store how)
{
	int cin = flip ? wg->k : wg->c, cout = flip ? wg->c : wg->k;
	int ntile = wg->ntile, nchunk = (ntile + S2_TC - 1) / S2_TC;
	size_t ucount = (size_t)81 * cin * cout, pstep = (size_t)cin * cout;
	float *u = wg->u_fwd;
#pragma omp parallel num_threads(team_size(wg))
	{
		float *v = wg->du + wg->panel_len * omp_get_thread_num() + ucount;
		float *m = v + (size_t)81 * S2_TC * (wg->c > wg->k ? wg->c : wg->k);
		s2_weights(w, wg->c, wg->k, flip, u);
#pragma omp for schedule(static)
		for (int ch = 0; ch < nchunk; ch++) {
			int t0 = ch * S2_TC, nt = ntile - t0 < S2_TC ? ntile - t0 : S2_TC;
			for (int t = 0; t < nt; t++)
				if (flip)
					s2_input(wg, 1, src, cin, t0 + t, t, S2_TC, v);
				else
					s2_input(wg, 0, src, cin, t0 + t, t, S2_TC, v);
			// M_p (nt, cout) = V_p (nt, cin) U_p (cin, cout), 64 outputs at a time
			for (int p = 0; p < 81; p++)
				for (int q = 0; q < cout / 64; q++)
					gemm_rows(nt, cin, v + (size_t)p * S2_TC * cin, cin, 1,
						  u + p * pstep + 64 * q, cout,
						  m + (size_t)p * S2_TC * cout + 64 * q, cout);
			for (int t = 0; t < nt; t++)
				if (flip)
					s2_output(wg, 1, m, cout, t0 + t, t, S2_TC, dst, how);
				else
					s2_output(wg, 0, m, cout, t0 + t, t, S2_TC, dst, how);
		}
		if (how == STORE_STREAM)
			_mm_sfence();
	}
}

/* The weight gradient of 16 filters: the team's dU values of them (thread
 * j's value p at h + j * tstep + p * pstep) summed into thread 0's, then
 * its 3 x 3 taps G^T h G written to g + tap * pstep ((3, 3, C, K): taps are
 * C K = pstep floats apart).  Out of the OpenMP body, which clang's target
 * attribute does not reach. */
static inline __attribute__((always_inline)) void
s2_filter_grads(float *h, size_t tstep, int team, size_t pstep, float *g)
{
	vec t[3][9], gv[9];
	for (int j = 1; j < team; j++) {
		const float *hj = h + tstep * j;
#pragma GCC unroll 81
		for (int p = 0; p < 81; p++)
			_mm512_storeu_ps(h + p * pstep, _mm512_add_ps(_mm512_loadu_ps(h + p * pstep),
								       _mm512_loadu_ps(hj + p * pstep)));
	}
#pragma GCC unroll 9
	for (int j = 0; j < 9; j++) {
		vec col[9], out[3];
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++)
			col[i] = _mm512_loadu_ps(h + (i * 9 + j) * pstep);
		s2_gt(col, out);
#pragma GCC unroll 3
		for (int i = 0; i < 3; i++)
			t[i][j] = out[i];
	}
#pragma GCC unroll 3
	for (int i = 0; i < 3; i++)
		s2_gt(t[i], &gv[i * 3]);
#pragma GCC unroll 9
	for (int i = 0; i < 9; i++)
		_mm512_storeu_ps(g + i * pstep, gv[i]);
}

/* dw (3, 3, C, K) on the stride-2 path: each thread's chunks add into its
 * own dU (81, C, K); then per filter row the threads' dU summed and turned
 * into taps. */
static void s2_weight_grad(const struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	int cin = wg->c, kout = wg->k, team = team_size(wg);
	int ntile = wg->ntile, nchunk = (ntile + S2_TC - 1) / S2_TC;
	size_t pstep = (size_t)cin * kout, ucount = 81 * pstep;
#pragma omp parallel num_threads(team)
	{
		float *du = wg->du + wg->panel_len * omp_get_thread_num();
		float *v = du + ucount, *yv = v + (size_t)81 * S2_TC * (cin > kout ? cin : kout);
		int first = 1; /* a thread's first chunk writes its dU, the others add */
#pragma omp for schedule(static)
		for (int ch = 0; ch < nchunk; ch++) {
			int t0 = ch * S2_TC, nt = ntile - t0 < S2_TC ? ntile - t0 : S2_TC;
			for (int t = 0; t < nt; t++) {
				s2_input(wg, 0, src, cin, t0 + t, t, S2_TC, v);
				s2_grad(wg, ddst, kout, t0 + t, t, S2_TC, yv);
			}
			// dU_p (C, K) (+)= V_p^T (C, nt) Y_p (nt, K)
			for (int p = 0; p < 81; p++)
				for (int q = 0; q < kout / 64; q++)
					(first ? gemm_rows : gemm_rows_add)(
						cin, nt, v + (size_t)p * S2_TC * cin, 1, cin,
						yv + (size_t)p * S2_TC * kout + 64 * q, kout,
						du + p * pstep + 64 * q, kout);
			first = 0;
		}
		if (first) /* no chunk came to this thread */
			memset(du, 0, ucount * sizeof(float));
#pragma omp barrier
#pragma omp for schedule(static)
		for (int c = 0; c < cin; c++)
			for (int kb = 0; kb < kout / 16; kb++)
				s2_filter_grads(wg->du + (size_t)c * kout + 16 * kb, wg->panel_len, team,
						pstep, dw + (size_t)c * kout + 16 * kb);
	}
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else /* no x86-64 GCC: the kernels are not built, nothing selects them */

int cpu_wino_available(void)
{
	return 0;
}

static void conv_tiles(const struct cpu_wino *wg, int cin, int cout, const float *u,
		       const float *src, float *dst, int accumulate)
{
	(void)wg, (void)cin, (void)cout, (void)u, (void)src, (void)dst, (void)accumulate;
	abort();
}

static void weight_grad(struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	(void)wg, (void)src, (void)ddst, (void)dw;
	abort();
}

static void panel_conv(const struct cpu_wino *wg, int cin, int cout, const float *w, int flip,
		       const float *src, float *dst, enum wino_store how)
{
	(void)wg, (void)cin, (void)cout, (void)w, (void)flip, (void)src, (void)dst, (void)how;
	abort();
}

static void panel_weight_grad(const struct cpu_wino *wg, const float *src, const float *ddst,
			      float *dw)
{
	(void)wg, (void)src, (void)ddst, (void)dw;
	abort();
}

static void chunk_weight_grad(const struct cpu_wino *wg, const float *src, const float *ddst,
			      float *dw, const struct cpu_wino_place *at)
{
	(void)wg, (void)src, (void)ddst, (void)dw, (void)at;
	abort();
}

static void s2_conv(const struct cpu_wino *wg, int flip, const float *w, const float *src,
		    float *dst, enum wino_store how)
{
	(void)wg, (void)flip, (void)w, (void)src, (void)dst, (void)how;
	abort();
}

static void s2_weight_grad(const struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	(void)wg, (void)src, (void)ddst, (void)dw;
	abort();
}

#endif

void cpu_wino_forward(struct cpu_wino *wg, const float *w, const float *src, float *dst)
{
	if (wg->path == CPU_WINO_S2) {
		size_t bytes = (size_t)wg->n * wg->k * wg->ho * wg->wo * sizeof(float);
		s2_conv(wg, 0, w, src, dst, store_kind(dst, bytes, 0));
		return;
	}
	if (wg->path == CPU_WINO_PANEL) {
		size_t bytes = (size_t)wg->n * wg->k * wg->h * wg->w * sizeof(float);
		panel_conv(wg, wg->c, wg->k, w, 0, src, dst, store_kind(dst, bytes, 0));
		return;
	}
	transform_weights(w, wg->c, wg->k, 0, wg->u_fwd);
	conv_tiles(wg, wg->c, wg->k, wg->u_fwd, src, dst, 0);
}

void cpu_wino_backward_data(struct cpu_wino *wg, const float *w, const float *ddst, float *dsrc,
			    int accumulate)
{
	if (wg->path == CPU_WINO_S2) {
		size_t bytes = (size_t)wg->n * wg->c * wg->h * wg->w * sizeof(float);
		s2_conv(wg, 1, w, ddst, dsrc, store_kind(dsrc, bytes, accumulate));
		return;
	}
	if (wg->path == CPU_WINO_PANEL) {
		size_t bytes = (size_t)wg->n * wg->c * wg->h * wg->w * sizeof(float);
		panel_conv(wg, wg->k, wg->c, w, 1, ddst, dsrc, store_kind(dsrc, bytes, accumulate));
		return;
	}
	transform_weights(w, wg->c, wg->k, 1, wg->u_bwd);
	conv_tiles(wg, wg->k, wg->c, wg->u_bwd, ddst, dsrc, accumulate);
}

void cpu_wino_backward_weights(struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	if (wg->path == CPU_WINO_S2) {
		s2_weight_grad(wg, src, ddst, dw);
		return;
	}
	if (wg->path == CPU_WINO_PANEL) {
		panel_weight_grad(wg, src, ddst, dw);
		return;
	}
	weight_grad(wg, src, ddst, dw);
}

void cpu_wino_backward_weights_at(struct cpu_wino *wg, const float *src, const float *ddst,
				  float *dw, const struct cpu_wino_place *at)
{
	chunk_weight_grad(wg, src, ddst, dw, at);
}
