/* The wgrad path of the Winograd convolution (cpu_wino.h). */
#include "config.h"

#include <stdlib.h>

#include "engine/cpu/cpu_wino_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "engine/cpu/cpu_wino_kern.h"

/* ---- The wgrad path: the weight gradient over chunks of tiles ----
 *
 * On 64 and 128 channels with larger images (resnet50's 56x56 and 28x28
 * layers) V and Y of every tile would not fit the cache (29 MB each at
 * 64 channels on 56x56), and the panel path's split by output channels
 * leaves threads idle.  Here each thread takes chunks of TC tiles: their
 * V (36, TC, C) and Y (36, TC, K), then dU_p (C, K) += V_p^T Y_p for each
 * p, into a dU of its own; then the threads' dU are summed and turned into
 * dw = G^T dU G per filter, written where `at` says. */
void cpu_wino_chunk_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst,
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

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
