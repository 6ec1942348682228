/* The panel path of the Winograd convolution (cpu_wino.h). */
#include "config.h"

#include <stdlib.h>

#include "engine/cpu/cpu_wino_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "engine/cpu/cpu_wino_kern.h"

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
 * the parallel region of cpu_wino_panel_conv below, which makes M a constant. */
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
void cpu_wino_panel_conv(const struct cpu_wino *wg, int cin, int cout, const float *w, int flip,
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
 * 3x3), inside cpu_wino_panel_wgrad's parallel region (M a constant). */
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
void cpu_wino_panel_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst,
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

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
