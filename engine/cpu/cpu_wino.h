/* Winograd F(4x4,3x3) convolution for small channel counts, written for
 * this engine: f32, 3x3, stride 1, pad 1, activations in oneDNN's nChw16c
 * layout (aBcd16b), C and K multiples of 16.
 *
 * Why not oneDNN's: at 16 channels its jit_wino_4x3 is no faster than its
 * direct kernel, at 32 a little.  This kernel keeps a group of 8 tiles'
 * transforms in L1, does the per-position products with register-blocked
 * FMAs, and writes large outputs with streaming stores.  Inside resnet20's
 * step (batch 128, 2 threads; forward / backward-data / backward-weights):
 *   16->16 at 28x28: 1.42 / 1.54 / 1.82 ms, oneDNN direct 2.0 / 2.0 / 2.05
 *   32->32 at 14x14: 1.30 / 1.31 / 1.55 ms, oneDNN Winograd 1.41 / 1.38 / 1.83
 *   64->64 at 7x7:   1.32 / 1.29 / 1.48 ms, oneDNN Winograd 1.05 / 1.07 / 1.40
 * so the backend uses it up to 32 channels (tests/bench/RESULTS.md).
 *
 * All three passes share the transforms of Lavin & Gray's F(4x4,3x3):
 *   forward         y  = A^T [ (G g G^T) . (B^T d B) ] A   per 4x4 output tile
 *   backward-data   the forward over dy with the weights flipped and Ci/Co swapped
 *   backward-weights dg = G^T [ sum over tiles (A dy A^T) . (B^T d B) ] G
 * (. is the elementwise product, summed over input channels inside).
 * Backward-data may add into its output instead of overwriting it, which
 * saves the residual gradient's separate accumulation pass. */
#ifndef DLJOB_ENGINE_CPU_CPU_WINO_H
#define DLJOB_ENGINE_CPU_CPU_WINO_H

#include <stddef.h>

struct cpu_wino {
	int n, c, k, h, w;  /* batch, input and output channels, spatial size (in = out) */
	int th, tw, ngroup; /* 4x4 tiles per column/row, groups of tiles */
	int nthr;           /* OpenMP threads the buffers are sized for */
	size_t scratch_len; /* floats per thread */
	/* Carved out of one caller-owned buffer (cpu_wino_bind): */
	float *scratch;     /* per thread: transformed inputs and products of one group */
	float *u_fwd;       /* (36, C, K): G g G^T of the forward weights */
	float *u_bwd;       /* (36, K, C): the same of the flipped, transposed weights */
	float *du;          /* per thread (36, C, K): weight-gradient sums in the transform domain */
};

/* Whether this CPU can run the kernels (AVX-512F). */
int cpu_wino_available(void);
/* Whether (c, k, stride, pad) is a shape the kernels take. */
int cpu_wino_shape_ok(int c, int k, int ksize, int stride, int pad);
/* Plans batch n, c -> k channels, h x w, with buffers for the current
 * omp_get_max_threads(); returns how many floats of buffer it needs (0 with
 * a message in err for a shape it does not take).  The caller allocates
 * them (64-byte aligned, zeroed) and hands them to cpu_wino_bind, which
 * keeps pointers into that buffer; the caller frees it. */
size_t cpu_wino_plan(struct cpu_wino *wg, int n, int c, int k, int h, int w, char *err,
		     size_t errlen);
void cpu_wino_bind(struct cpu_wino *wg, float *buf);

/* w is the plain (K, C, 3, 3) weight; src (N, C/16, H, W, 16), dst (N, K/16, H, W, 16). */
void cpu_wino_forward(struct cpu_wino *wg, const float *w, const float *src, float *dst);
/* dsrc (N, C/16, H, W, 16) = (or +=, with accumulate) the input gradient from ddst. */
void cpu_wino_backward_data(struct cpu_wino *wg, const float *w, const float *ddst, float *dsrc,
			    int accumulate);
/* dw (K, C, 3, 3) plain, overwritten. */
void cpu_wino_backward_weights(struct cpu_wino *wg, const float *src, const float *ddst,
			       float *dw);

#endif
