/* The AVX-512 code the group, panel, wgrad and stride-2 paths share: the
 * lines of B^T, A^T and A, a tile's input, gradient and output transforms
 * over the batch's mosaic, the panel GEMM and the filters' vector
 * transforms.  Included by those paths' files only on x86-64 with GCC or
 * clang, it switches the target to AVX-512F; each includer ends with the
 * matching pop (cpu_wino_int.h names the files). */
#ifndef DLJOB_ENGINE_CPU_WINO_KERN_H
#define DLJOB_ENGINE_CPU_WINO_KERN_H

#include "engine/cpu/cpu_wino_int.h"

#include <immintrin.h>


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
 * Its float32 error is about twice F(4x4)'s (tests/bench/RESULTS.md,
 * "F(6x6,3x3) on the panel path"; test_ops holds it to its limit). */

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

static __attribute__((noinline, unused)) void gemm_rows(int nrows, int S, const float *a, size_t lda, size_t sa, const float *b,
		      size_t ldb, float *c, size_t ldc)
{
	gemm_rows_as(0, nrows, S, a, lda, sa, b, ldb, c, ldc);
}

static __attribute__((noinline, unused)) void gemm_rows_add(int nrows, int S, const float *a, size_t lda, size_t sa,
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

#endif
