#include "config.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "common/err.h"
#include "engine/cpu/cpu_wino_int.h"

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

/* M x M tiles along one axis of a stride-1 mosaic of g images of this
 * side: one zero line between images unless the side is a multiple of M. */
static long mosaic_tiles(long g, int side, int M)
{
	long extent = side % M ? g * (side + 1) - 1 : g * side;
	return (extent + M - 1) / M;
}

/* What building the filters' transform U costs on the panel path (once per
 * pass, P x Cin x Cout values), in tiles' products (P x Cin x Cout each):
 * a value between the two that timings of both tile sizes on resnet50's
 * 256-channel 14x14 and 512-channel 7x7 layers give, so that the plan picks
 * the faster size on each (tests/bench/RESULTS.md, "F(6x6,3x3) on the panel
 * path"). */
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

size_t cpu_wino_plan(struct cpu_wino *wg, enum cpu_wino_path path, int n, int c, int k, int h,
		     int w, char *err, size_t errlen)
{
	memset(wg, 0, sizeof(*wg));
	if (n < 1 || h < 1 || w < 1 || !cpu_wino_shape_ok(c, k, 3, 1, 1) ||
	    (path != CPU_WINO_GROUP && (c % 64 || k % 64))) {
		dl_errf(err, errlen, "%s:%d: winograd: bad shape n=%d c=%d k=%d %dx%d", __FILE__,
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

#if defined(__x86_64__) && defined(__GNUC__)

int cpu_wino_available(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

#else /* no x86-64 GCC: the kernels are not built, nothing selects them */

int cpu_wino_available(void)
{
	return 0;
}

void cpu_wino_group_conv(const struct cpu_wino *wg, int cin, int cout, const float *u,
		       const float *src, float *dst, int accumulate)
{
	(void)wg, (void)cin, (void)cout, (void)u, (void)src, (void)dst, (void)accumulate;
	abort();
}

void cpu_wino_group_wgrad(struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	(void)wg, (void)src, (void)ddst, (void)dw;
	abort();
}

void cpu_wino_panel_conv(const struct cpu_wino *wg, int cin, int cout, const float *w, int flip,
		       const float *src, float *dst, enum wino_store how)
{
	(void)wg, (void)cin, (void)cout, (void)w, (void)flip, (void)src, (void)dst, (void)how;
	abort();
}

void cpu_wino_panel_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst,
			      float *dw)
{
	(void)wg, (void)src, (void)ddst, (void)dw;
	abort();
}

void cpu_wino_chunk_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst,
			      float *dw, const struct cpu_wino_place *at)
{
	(void)wg, (void)src, (void)ddst, (void)dw, (void)at;
	abort();
}

void cpu_wino_s2_conv(const struct cpu_wino *wg, int flip, const float *w, const float *src,
		    float *dst, enum wino_store how)
{
	(void)wg, (void)flip, (void)w, (void)src, (void)dst, (void)how;
	abort();
}

void cpu_wino_s2_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	(void)wg, (void)src, (void)ddst, (void)dw;
	abort();
}

#endif


void cpu_wino_forward(struct cpu_wino *wg, const float *w, const float *src, float *dst)
{
	if (wg->path == CPU_WINO_S2) {
		size_t bytes = (size_t)wg->n * wg->k * wg->ho * wg->wo * sizeof(float);
		cpu_wino_s2_conv(wg, 0, w, src, dst, store_kind(dst, bytes, 0));
		return;
	}
	if (wg->path == CPU_WINO_PANEL) {
		size_t bytes = (size_t)wg->n * wg->k * wg->h * wg->w * sizeof(float);
		cpu_wino_panel_conv(wg, wg->c, wg->k, w, 0, src, dst, store_kind(dst, bytes, 0));
		return;
	}
	transform_weights(w, wg->c, wg->k, 0, wg->u_fwd);
	cpu_wino_group_conv(wg, wg->c, wg->k, wg->u_fwd, src, dst, 0);
}

void cpu_wino_backward_data(struct cpu_wino *wg, const float *w, const float *ddst, float *dsrc,
			    int accumulate)
{
	if (wg->path == CPU_WINO_S2) {
		size_t bytes = (size_t)wg->n * wg->c * wg->h * wg->w * sizeof(float);
		cpu_wino_s2_conv(wg, 1, w, ddst, dsrc, store_kind(dsrc, bytes, accumulate));
		return;
	}
	if (wg->path == CPU_WINO_PANEL) {
		size_t bytes = (size_t)wg->n * wg->c * wg->h * wg->w * sizeof(float);
		cpu_wino_panel_conv(wg, wg->k, wg->c, w, 1, ddst, dsrc, store_kind(dsrc, bytes, accumulate));
		return;
	}
	transform_weights(w, wg->c, wg->k, 1, wg->u_bwd);
	cpu_wino_group_conv(wg, wg->k, wg->c, wg->u_bwd, ddst, dsrc, accumulate);
}

void cpu_wino_backward_weights(struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	if (wg->path == CPU_WINO_S2) {
		cpu_wino_s2_wgrad(wg, src, ddst, dw);
		return;
	}
	if (wg->path == CPU_WINO_PANEL) {
		cpu_wino_panel_wgrad(wg, src, ddst, dw);
		return;
	}
	cpu_wino_group_wgrad(wg, src, ddst, dw);
}

void cpu_wino_backward_weights_at(struct cpu_wino *wg, const float *src, const float *ddst,
				  float *dw, const struct cpu_wino_place *at)
{
	cpu_wino_chunk_wgrad(wg, src, ddst, dw, at);
}
