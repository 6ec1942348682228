/* Internals shared by the Winograd paths (cpu_wino.h has the interface and
 * what each path is for): the planner and dispatcher (cpu_wino.c), the
 * group path (cpu_wino_group.c), the panel path (cpu_wino_panel.c), the
 * wgrad path (cpu_wino_wgrad.c) and the stride-2 path (cpu_wino_s2.c).
 * The AVX-512 transforms and GEMM they share are in cpu_wino_kern.h. */
#ifndef DLJOB_ENGINE_CPU_WINO_INT_H
#define DLJOB_ENGINE_CPU_WINO_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
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
 * skips reading the old lines in first, the read that made an earlier
 * version of this path lose to oneDNN's direct kernel (tests/bench/
 * RESULTS.md, "Current: own Winograd for the 16- and 32-channel layers").  Each output pixel's 16 channels are one whole
 * 64-byte line, so every streamed line is complete. */
enum wino_store { STORE_PLAIN, STORE_STREAM, STORE_ADD };
#define WINO_STREAM_MIN_BYTES ((size_t)2 << 20)


/* How the output transform stores an output of `bytes` at dst. */
static inline enum wino_store store_kind(const float *dst, size_t bytes, int accumulate)
{
	/* Streaming stores need 64-byte aligned lines (the network's buffers
	 * all are; anything else takes plain stores). */
	int stream = bytes >= WINO_STREAM_MIN_BYTES && (uintptr_t)dst % 64 == 0;
	return accumulate ? STORE_ADD : stream ? STORE_STREAM : STORE_PLAIN;
}

/* Tiles per chunk on the wgrad path, and on the stride-2 path. */
#define TC 32
#define S2_TC 32

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

static inline void gt_1d(const float h[6], float g[3])
{
	g[0] = h[0] / 4 - h[1] / 6 - h[2] / 6 + h[3] / 24 + h[4] / 24;
	g[1] = -h[1] / 6 + h[2] / 6 + h[3] / 12 - h[4] / 12;
	g[2] = -h[1] / 6 - h[2] / 6 + h[3] / 6 + h[4] / 6 + h[5];
}

/* Transform positions of F(M x M, 3x3): (M + 2)^2, 36 or 64. */
static inline int wino_positions(int M)
{
	return (M + 2) * (M + 2);
}


static inline int team_size(const struct cpu_wino *wg)
{
	int t = omp_get_max_threads();
	return t < wg->nthr ? t : wg->nthr;
}

/* The paths' passes (AVX-512 kernels; where none are built they abort,
 * and nothing selects them: cpu_wino_available()). */
void cpu_wino_group_conv(const struct cpu_wino *wg, int cin, int cout, const float *u,
			 const float *src, float *dst, int accumulate);
void cpu_wino_group_wgrad(struct cpu_wino *wg, const float *src, const float *ddst, float *dw);
void cpu_wino_panel_conv(const struct cpu_wino *wg, int cin, int cout, const float *w, int flip,
			 const float *src, float *dst, enum wino_store how);
void cpu_wino_panel_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst, float *dw);
void cpu_wino_chunk_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst, float *dw,
			  const struct cpu_wino_place *at);
void cpu_wino_s2_conv(const struct cpu_wino *wg, int flip, const float *w, const float *src,
		      float *dst, enum wino_store how);
void cpu_wino_s2_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst, float *dw);

#endif
