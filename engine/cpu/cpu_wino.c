#include "config.h"

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

size_t cpu_wino_plan(struct cpu_wino *wg, int n, int c, int k, int h, int w, char *err,
		     size_t errlen)
{
	memset(wg, 0, sizeof(*wg));
	if (n < 1 || h < 1 || w < 1 || !cpu_wino_shape_ok(c, k, 3, 1, 1)) {
		snprintf(err, errlen, "%s:%d: winograd: bad shape n=%d c=%d k=%d %dx%d", __FILE__,
			 __LINE__, n, c, k, h, w);
		return 0;
	}
	wg->n = n;
	wg->c = c;
	wg->k = k;
	wg->h = h;
	wg->w = w;
	wg->th = (h + 3) / 4;
	wg->tw = (w + 3) / 4;
	wg->ngroup = (n * wg->th * wg->tw + TG - 1) / TG;
	wg->nthr = omp_get_max_threads();
	/* Every piece is a multiple of 16 floats, so each stays 64-byte aligned. */
	wg->scratch_len = (size_t)36 * TG * 2 * (c > k ? c : k);
	size_t ucount = (size_t)36 * c * k;
	return wg->scratch_len * wg->nthr + 2 * ucount + ucount * wg->nthr;
}

/* The buffer must be zeroed: the GEMM also reads a last, partial group's
 * unused rows, which must hold finite numbers. */
void cpu_wino_bind(struct cpu_wino *wg, float *buf)
{
	size_t ucount = (size_t)36 * wg->c * wg->k;
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
 * than a function attribute) also covers OpenMP's outlined bodies. */
#pragma GCC push_options
#pragma GCC target("avx512f")

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

/* Tile index -> image and the tile's top-left output pixel. */
static inline void tile_pos(const struct cpu_wino *wg, int tile, int *n, int *y0, int *x0)
{
	int per = wg->th * wg->tw, r = tile % per;
	*n = tile / per;
	*y0 = r / wg->tw * 4;
	*x0 = r % wg->tw * 4;
}

/* V[p][t][c] for the 6x6 input window of tile t, channel block cb.  The
 * window starts one pixel up and left of the output tile (pad 1); pixels
 * outside the image are zero. */
static inline __attribute__((always_inline)) void
input_transform(const struct cpu_wino *wg, const float *src, int cin, int tile, int t, float *v)
{
	int n, y0, x0, h = wg->h, w = wg->w;
	tile_pos(wg, tile, &n, &y0, &x0);
	y0 -= 1;
	x0 -= 1;
	for (int cb = 0; cb < cin / 16; cb++) {
		// plane is (H, W, 16) of image n, channel block cb
		const float *plane = src + ((size_t)n * (cin / 16) + cb) * h * w * 16;
		vec d[6][6], tmp[6][6];
#pragma GCC unroll 6
		for (int i = 0; i < 6; i++)
#pragma GCC unroll 6
			for (int j = 0; j < 6; j++) {
				int y = y0 + i, x = x0 + j;
				d[i][j] = y >= 0 && y < h && x >= 0 && x < w
						  ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
						  : _mm512_setzero_ps();
			}
#pragma GCC unroll 6
		for (int j = 0; j < 6; j++) {
			vec col[6], out[6];
#pragma GCC unroll 6
			for (int i = 0; i < 6; i++)
				col[i] = d[i][j];
			bt_line(col, out);
#pragma GCC unroll 6
			for (int i = 0; i < 6; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 6
		for (int i = 0; i < 6; i++) {
			vec out[6];
			bt_line(tmp[i], out);
#pragma GCC unroll 6
			for (int j = 0; j < 6; j++)
				_mm512_storeu_ps(v + ((size_t)(i * 6 + j) * TG + t) * cin + cb * 16, out[j]);
		}
	}
}

/* Y[p][t][k] = A dy A^T for output-gradient tile t (outputs past the edge
 * are zero: they do not exist). */
static inline __attribute__((always_inline)) void
grad_transform(const struct cpu_wino *wg, const float *ddst, int kout, int tile, int t, float *yv)
{
	int n, y0, x0, h = wg->h, w = wg->w;
	tile_pos(wg, tile, &n, &y0, &x0);
	for (int kb = 0; kb < kout / 16; kb++) {
		const float *plane = ddst + ((size_t)n * (kout / 16) + kb) * h * w * 16;
		vec d[4][4], tmp[6][4];
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				int y = y0 + i, x = x0 + j;
				d[i][j] = y < h && x < w ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
							 : _mm512_setzero_ps();
			}
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			vec col[4], out[6];
#pragma GCC unroll 4
			for (int i = 0; i < 4; i++)
				col[i] = d[i][j];
			a_line(col, out);
#pragma GCC unroll 6
			for (int i = 0; i < 6; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 6
		for (int i = 0; i < 6; i++) {
			vec out[6];
			a_line(tmp[i], out);
#pragma GCC unroll 6
			for (int j = 0; j < 6; j++)
				_mm512_storeu_ps(yv + ((size_t)(i * 6 + j) * TG + t) * kout + kb * 16, out[j]);
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
output_transform(const struct cpu_wino *wg, const float *m, int kout, int tile, int t, float *dst,
		 enum wino_store how)
{
	int n, y0, x0, h = wg->h, w = wg->w;
	tile_pos(wg, tile, &n, &y0, &x0);
	for (int kb = 0; kb < kout / 16; kb++) {
		float *plane = dst + ((size_t)n * (kout / 16) + kb) * h * w * 16;
		vec tmp[4][6];
#pragma GCC unroll 6
		for (int j = 0; j < 6; j++) {
			vec col[6], out[4];
#pragma GCC unroll 6
			for (int i = 0; i < 6; i++)
				col[i] = _mm512_loadu_ps(m + ((size_t)(i * 6 + j) * TG + t) * kout + kb * 16);
			at_line(col, out);
#pragma GCC unroll 4
			for (int i = 0; i < 4; i++)
				tmp[i][j] = out[i];
		}
		int ni = h - y0 < 4 ? h - y0 : 4, nj = w - x0 < 4 ? w - x0 : 4;
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			if (i >= ni)
				break;
			vec out[4];
			at_line(tmp[i], out);
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++) {
				if (j >= nj)
					break;
				float *o = plane + ((size_t)(y0 + i) * w + x0 + j) * 16;
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
	int ntile = wg->n * wg->th * wg->tw;
#pragma omp for schedule(static) nowait
	for (int gi = 0; gi < wg->ngroup; gi++) {
		int t0 = gi * TG, nt = ntile - t0 < TG ? ntile - t0 : TG;
		for (int t = 0; t < nt; t++)
			input_transform(wg, src, cin, t0 + t, t, v);
		group_products(v, u, cin, cout, m);
		for (int t = 0; t < nt; t++)
			output_transform(wg, m, cout, t0 + t, t, dst, how);
	}
}

/* dst (cout channels) = (or +=, with accumulate) conv3x3(src (cin
 * channels)) through U (36, cin, cout). */
static void conv_tiles(const struct cpu_wino *wg, int cin, int cout, const float *u,
		       const float *src, float *dst, int accumulate)
{
	size_t out_bytes = (size_t)wg->n * cout * wg->h * wg->w * sizeof(float);
	/* Streaming stores need 64-byte aligned lines (the network's buffers
	 * all are; anything else takes plain stores). */
	int stream = out_bytes >= WINO_STREAM_MIN_BYTES && (uintptr_t)dst % 64 == 0;
	enum wino_store how = accumulate ? STORE_ADD : stream ? STORE_STREAM : STORE_PLAIN;
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
	int ntile = wg->n * wg->th * wg->tw;
#pragma omp for schedule(static) nowait
	for (int gi = 0; gi < wg->ngroup; gi++) {
		int t0 = gi * TG, nt = ntile - t0 < TG ? ntile - t0 : TG;
		for (int t = 0; t < nt; t++) {
			input_transform(wg, src, cin, t0 + t, t, v);
			grad_transform(wg, ddst, kout, t0 + t, t, yv);
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

#pragma GCC pop_options

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
#endif

void cpu_wino_forward(struct cpu_wino *wg, const float *w, const float *src, float *dst)
{
	transform_weights(w, wg->c, wg->k, 0, wg->u_fwd);
	conv_tiles(wg, wg->c, wg->k, wg->u_fwd, src, dst, 0);
}

void cpu_wino_backward_data(struct cpu_wino *wg, const float *w, const float *ddst, float *dsrc,
			    int accumulate)
{
	transform_weights(w, wg->c, wg->k, 1, wg->u_bwd);
	conv_tiles(wg, wg->k, wg->c, wg->u_bwd, ddst, dsrc, accumulate);
}

void cpu_wino_backward_weights(struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	weight_grad(wg, src, ddst, dw);
}
