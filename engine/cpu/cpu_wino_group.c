/* The group path of the Winograd convolution (cpu_wino.h): TG tiles at a
 * time, their transforms in L1, per-position products with
 * register-blocked FMAs. */
#include "config.h"

#include <stdlib.h>

#include "engine/cpu/cpu_wino_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "engine/cpu/cpu_wino_kern.h"

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
void cpu_wino_group_conv(const struct cpu_wino *wg, int cin, int cout, const float *u,
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

void cpu_wino_group_wgrad(struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
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

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
