/* Winograd convolution written for this engine: f32, 3x3, pad 1,
 * activations in oneDNN's nChw16c layout (aBcd16b), C and K multiples of
 * 16.  For stride 1, F(4x4,3x3), three ways to run it, chosen by shape
 * (cpu_wino_plan), and a fourth for stride 2.  Where each is used follows
 * from bench_ops runs against oneDNN in the same run; the figures are in
 * tests/bench/RESULTS.md ("The Winograd paths against oneDNN").
 *
 * The group path (small channel counts, up to 32; cpu_wino_group.c): at
 * 16 channels oneDNN's jit_wino_4x3 is no faster than its direct kernel,
 * at 32 a little.  This path keeps a group of 8 tiles' transforms in L1,
 * does the per-position products with register-blocked FMAs, and writes
 * large outputs with streaming stores.
 *
 * The panel path (C and K multiples of 64, from 256 channels at 14x14 and
 * smaller; cpu_wino_panel.c): every tile of the batch at once, one GEMM
 * per transform position, 64 output channels at a time, its tiles laid
 * over a mosaic of the batch's images with one zero line between them, so
 * that a 14x14 image no longer pads to 16x16 (at batch 16, 4 x 4 images
 * take 15 x 15 tiles instead of 16 x 16).  Where a pass has many tiles
 * its plan takes F(6x6,3x3) instead (64 products per 6x6 output tile,
 * 1.78 a pixel against F(4x4)'s 2.25, about twice the rounding error):
 * resnet50's 14x14 layers at batch 16, 100 tiles instead of 225; the
 * filters' transform, rebuilt every pass, is what keeps the 7x7 layers
 * (32 tiles) on F(4x4).  oneDNN's kernel pads 14 and 7 up to whole 4x4
 * tiles; at 64 and 128 channels on 56x56 and 28x28 oneDNN's is as fast or
 * faster, so the panel path is not used there.
 *
 * The wgrad path (backward-weights only, C and K of 64 or 128;
 * cpu_wino_wgrad.c): on resnet50's 56x56 and 28x28 layers oneDNN's
 * Winograd backward-weights is its slow pass, and the panel path's
 * buffers would not fit the cache.  Each thread takes chunks of 32 tiles,
 * transforms them and adds their products into a dU of its own; the
 * threads' dU are summed at the end.  The backend keeps oneDNN's Winograd
 * for the forward and backward-data of these layers and writes this
 * path's gradient straight into their weight layout.
 *
 * The stride-2 path (3x3 stride 2 pad 1, C and K multiples of 64;
 * cpu_wino_s2.c): a polyphase Winograd, the even taps of each axis as
 * F(4,2) and the odd one as a plain product, 81 products per 4x4 output
 * tile instead of the direct convolution's 144, in all three passes, over
 * chunks of 32 tiles per thread; used on resnet50's layer2.0 (128
 * channels, 56x56 -> 28x28; oneDNN 2.6 has no Winograd for stride 2).  At
 * 256 and 512 channels the outputs are 14x14 and 7x7, which whole 4x4
 * tiles pad by 31 %, and the whole filter transform no longer fits the
 * cache: not used there.
 *
 * The stride-1 passes share the transforms of Lavin & Gray's F(4x4,3x3)
 * (the panel path's F(6x6,3x3) has the same form, cpu_wino_kern.h):
 *   forward         y  = A^T [ (G g G^T) . (B^T d B) ] A   per 4x4 output tile
 *   backward-data   the forward over dy with the weights flipped and Ci/Co swapped
 *   backward-weights dg = G^T [ sum over tiles (A dy A^T) . (B^T d B) ] G
 * (. is the elementwise product, summed over input channels inside).
 * Backward-data may add into its output instead of overwriting it, which
 * saves the residual gradient's separate accumulation pass. */
#ifndef DLJOB_ENGINE_CPU_CPU_WINO_H
#define DLJOB_ENGINE_CPU_CPU_WINO_H

#include <stddef.h>
#include <stdint.h>

/* Which way a layer runs (cpu_wino_plan). */
enum cpu_wino_path {
	CPU_WINO_GROUP, /* all passes, 8 tiles at a time: up to 32 channels */
	CPU_WINO_PANEL, /* all passes, every tile at once: wide layers, small images */
	CPU_WINO_WGRAD, /* backward-weights only, chunks of tiles: 64 and 128
			 * channels on larger images (forward and backward-data
			 * stay on oneDNN's Winograd) */
	CPU_WINO_S2,    /* stride 2: all passes, chunks of tiles */
};

struct cpu_wino {
	int n, c, k, h, w;  /* batch, input and output channels, input size */
	int ho, wo;         /* output size: h x w but on the stride-2 path */
	int th, tw, ngroup; /* 4x4 tiles per column/row, groups of tiles */
	int ntile;          /* tiles in all */
	/* The panel path's tiles cover a mosaic of the batch's images (th x
	 * tw tiles in all), gx to a row, each axis either with one zero line
	 * between images, which is the padding of both, so that tiles may
	 * straddle two images (side not a multiple of 4), or with images
	 * side by side and tiles that never straddle (side a multiple of 4):
	 * sy (sx) is an image's pitch in the mosaic, side + 1 or side.  The
	 * other paths tile each image on its own (th x tw tiles each), where
	 * the mosaic's addressing cost more than it saved (16 and 32
	 * channels) or saves nothing (sides that are multiples of 4). */
	int gx, sy, sx;
	int tm;             /* output tile side: 4 (F(4x4,3x3)), or 6 (F(6x6,3x3)) where
			     * the panel path's plan finds it fewer products */
	int nthr;           /* OpenMP threads the buffers are sized for */
	/* The panel and wgrad paths' buffers hold nothing between calls, so
	 * they may be shared scratch (bound before each call); the group
	 * path's is kept zeroed. */
	enum cpu_wino_path path;
	size_t scratch_len; /* group path: floats per thread */
	size_t panel_len;   /* panel path: floats per thread of one panel's U or dU;
			     * wgrad path: floats per thread of dU, V and Y of a chunk */
	/* Carved out of one caller-owned buffer (cpu_wino_bind): */
	float *scratch;     /* group path, per thread: transformed inputs and products of one group */
	float *u_fwd;       /* group path (36, C, K): G g G^T of the forward weights */
	float *u_bwd;       /* group path (36, K, C): the same of the flipped, transposed weights */
	float *du;          /* (36, C, K): weight-gradient sums in the transform domain
			     * (group and wgrad paths: one per thread; panel path: u_fwd,
			     * u_bwd and du are one buffer of (P, max(C, K), 64) per thread,
			     * P = (tm + 2)^2 transform positions) */
	float *pv, *pm;     /* panel path: V (P, T, Cin) and M (P, T, Cout) or Y (P, T, K) */
};

/* Where the wgrad path writes the weight gradient: element (k, c, r, s) at
 * k_at[k] + c_at[c] + r * r_step + s * s_step, in a layout where every 16
 * output channels from a multiple of 16 lie side by side (k_at[16j + i] =
 * k_at[16j] + i), as in hwio and in oneDNN's blocked layouts with the
 * output channel innermost. */
struct cpu_wino_place {
	const int64_t *k_at, *c_at;
	int64_t r_step, s_step;
};

/* Whether a planned layer's path reads (3, 3, C, K) (hwio) weights and
 * runs on scratch bound before each call (the panel and stride-2 paths). */
static inline int cpu_wino_hwio(const struct cpu_wino *wg)
{
	return wg->path == CPU_WINO_PANEL || wg->path == CPU_WINO_S2;
}

/* Whether this CPU can run the kernels (AVX-512F). */
int cpu_wino_available(void);
/* Whether (c, k, stride, pad) is a shape the kernels take. */
int cpu_wino_shape_ok(int c, int k, int ksize, int stride, int pad);
/* Whether the panel path is the one to run c -> k channels on h x w images
 * with `threads` OpenMP threads: from 256 channels (multiples of 64) at
 * 14x14 and smaller, where it beats oneDNN's Winograd (at 64 and 128
 * channels on 56x56 and 28x28 it does not: tests/bench/RESULTS.md); and only while every thread gets one of
 * the 64-channel panels its products are split into (up to 4 threads at
 * 256 channels, 8 at 512): beyond that the rest would idle. */
int cpu_wino_panel_fits(int c, int k, int h, int w, int threads);
/* Whether the wgrad path is the one to run the weight gradient of c -> k
 * channels on h x w images: C and K of 64 or 128 on images over 14x14,
 * where oneDNN's Winograd backward-weights is its slow pass and this path
 * is faster (tests/bench/RESULTS.md). */
int cpu_wino_wgrad_fits(int c, int k, int h, int w);
/* Whether the stride-2 path is the one to run a 3x3 stride-2 pad-1
 * convolution of batch n, c -> k channels on h x w input images with
 * `threads` OpenMP threads: C and K of 64 or 128 on inputs of 56x56 and
 * more (resnet50's layer2.0 conv2), with at least 256 output tiles per
 * thread.  Its 81 products per 4x4 tile are 56 % of the direct
 * convolution's multiplications; the filter transform of each call and
 * each thread's weight-gradient sums are fixed costs, which a thread's
 * tiles must outweigh: with too few per thread its backward-weights is
 * slower than oneDNN's direct kernel (tests/bench/RESULTS.md, "A stride-2
 * Winograd for resnet50's layer2.0").  Where the output is 14x14 or 7x7
 * the tiles' padding takes the rest of the gain. */
int cpu_wino_s2_fits(int n, int c, int k, int h, int w, int threads);
/* Plans batch n, c -> k channels, h x w on path, with buffers for the
 * current omp_get_max_threads(); returns how many floats of buffer it needs
 * (0 with a message in err for a shape it does not take).  The caller
 * allocates them (64-byte aligned, zeroed) and hands them to cpu_wino_bind,
 * which keeps pointers into that buffer; the caller frees it.  On the
 * panel and wgrad paths the buffer need not be zeroed nor kept: the caller
 * may bind shared scratch before each call instead. */
size_t cpu_wino_plan(struct cpu_wino *wg, enum cpu_wino_path path, int n, int c, int k, int h,
		     int w, char *err, size_t errlen);
void cpu_wino_bind(struct cpu_wino *wg, float *buf);

/* w is the weight: (K, C, 3, 3) (oihw) on the group path, (3, 3, C, K)
 * (hwio) on the panel and stride-2 paths; src (N, C/16, H, W, 16), dst
 * (N, K/16, Ho, Wo, 16). */
void cpu_wino_forward(struct cpu_wino *wg, const float *w, const float *src, float *dst);
/* dsrc (N, C/16, H, W, 16) = (or +=, with accumulate) the input gradient from ddst. */
void cpu_wino_backward_data(struct cpu_wino *wg, const float *w, const float *ddst, float *dsrc,
			    int accumulate);
/* dw in w's layout, overwritten (group and panel paths). */
void cpu_wino_backward_weights(struct cpu_wino *wg, const float *src, const float *ddst,
			       float *dw);
/* The wgrad path: dw, overwritten, laid out as at says. */
void cpu_wino_backward_weights_at(struct cpu_wino *wg, const float *src, const float *ddst,
				  float *dw, const struct cpu_wino_place *at);

#endif
