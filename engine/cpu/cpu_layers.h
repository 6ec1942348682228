/* oneDNN layers: one struct per op family, built once for a batch size and
 * an input memory desc (usually a blocked layout chosen by the producer),
 * executed on caller-owned memories.  Weights cross as float arrays in the
 * layout the layer settled (cpu_weights: its forward's blocked layout, or
 * torchvision's plain one); other params (BN, bias) as plain arrays. */
#ifndef DLJOB_ENGINE_CPU_CPU_LAYERS_H
#define DLJOB_ENGINE_CPU_CPU_LAYERS_H

#include <stdint.h>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/cpu_wino.h"

/* A layer's weights (conv or FC) as its passes take them.  The caller
 * holds the weights w and their gradient dw in one layout, res_md: the
 * forward's own blocked layout if the layer is resident, else torchvision's
 * plain one.  Where a pass wants another layout, a reorder fills a buffer:
 * the forward's weights persist from forward to backward (backward-data may
 * read them), the others live in the ctx's shared temporaries only for the
 * pass.  Nothing is allocated for a layout that is the caller's. */
struct cpu_weights {
	/* As oneDNN chose them: forward weights, weight gradient, backward-data
	 * weights (set by the layer's init; bwd_md only with backward-data). */
	dnnl_memory_desc_t plain_md, fwd_md, dw_md, bwd_md;
	int has_bwd;
	/* cpu_weights_finish: */
	int resident;
	dnnl_memory_desc_t res_md;
	dnnl_memory_t user, duser;  /* views of the caller's w and dw (res_md) */
	dnnl_memory_t fwd, dw, bwd; /* the passes' memories (user / duser where the layout agrees) */
	struct cpu_prim to_fwd, dw_to_user, to_bwd; /* p NULL: not needed */
};
/* Settle res_md and make the memories and reorders (before
 * cpu_ctx_finalize).  resident_ok: the caller can keep w, dw (and its
 * optimizer state) in a blocked layout; the layer is resident iff the
 * forward's weights are blocked f32 and not plain (a weight gradient in
 * another layout is reordered into res_md).  bwd_off: backward-data does
 * not read fwd/bwd (the conv's acc path).  Returns 1 (resident), 0, -1. */
int cpu_weights_finish(struct cpu_ctx *c, struct cpu_weights *wt, int resident_ok, int bwd_off);
/* w (res_md) into wt->fwd for the forward. */
int cpu_weights_load_fwd(struct cpu_ctx *c, struct cpu_weights *wt, const float *w);
/* w (res_md) into wt->bwd for backward-data (after this step's forward). */
int cpu_weights_load_bwd(struct cpu_ctx *c, struct cpu_weights *wt, const float *w);
/* Before backward-weights: it writes wt->dw; after: into dw (res_md). */
int cpu_weights_dw_begin(struct cpu_ctx *c, struct cpu_weights *wt, float *dw);
int cpu_weights_dw_end(struct cpu_ctx *c, struct cpu_weights *wt);

/* Convolution without bias.  src (N,Ci,H,W) -> dst (N,Co,Ho,Wo), weight (Co,Ci,k,k). */
struct cpu_conv {
	dnnl_memory_desc_t src_md, dst_md; /* as executed (src fixed by caller or chosen) */
	struct cpu_prim fwd, bwd_data, bwd_w;
	int has_bwd_data;
	int winograd; /* the forward runs direct (0), oneDNN's Winograd (1) or cpu_wino's (2) */
	struct cpu_weights wt;
	/* acc (cpu_conv_acc_init): backward-data runs as a forward
	 * convolution of diff_dst with the transposed (k > 1: also turned)
	 * weights, adding into diff_src through a sum post-op where the value
	 * already holds another reader's gradient.  w_t is the caller's
	 * weights viewed with the first two axes swapped, reordered into w_acc
	 * (acc_fwd's layout wa_md; w_t itself if that is the same), where k > 1
	 * turns them in place (turn: the offset of (i, o, 0, 0) in wa_md is
	 * base[0][i] + base[1][o]; the spatial strides). */
	int acc, acc_k;
	dnnl_memory_desc_t wa_md;
	struct cpu_prim acc_fwd, w_to_acc;
	dnnl_memory_t w_t, w_acc;
	struct cpu_turn {
		dnnl_dim_t n[2], s2, s3; /* padded dims 0 and 1, spatial strides */
		dnnl_dim_t *base[2];
	} turn;
	/* winograd == 2: cpu_wino's kernels instead of oneDNN primitives, on
	 * plain weights; wino_acc: its backward-data adds into diff_src. */
	struct cpu_wino wg;
	dnnl_memory_t wino_scratch; /* the panel or wgrad path's buffer: shared scratch, bound per call */
	int wino_acc;
	/* own_dw: oneDNN's Winograd forward and backward-data, the weight
	 * gradient on cpu_wino's wgrad path (wg), written into the forward's
	 * weight layout at the places dw_at says. */
	int own_dw;
	struct cpu_wino_place dw_at;
	/* col_dw: a 3x3 stride-2 layer's weight gradient as one 1x1 weight
	 * gradient (bwd_w) over its input gathered by tap into col (N, 9*Ci,
	 * Ho, Wo), channel block ib*9 + tap, which makes the 1x1 gradient
	 * (Co, 9*Ci) in OIhw16i16o the 3x3 one in OIhw16i16o, byte for byte
	 * (col_w views wt.dw so); col sits in the shared scratchpad past
	 * bwd_w's own. */
	int col_dw;
	dnnl_memory_t col, col_w;
};
/* src_md NULL: let oneDNN choose the input layout (read it from l->src_md). */
int cpu_conv_init(struct cpu_ctx *c, struct cpu_conv *l, const dnnl_memory_desc_t *src_md,
		  int n, int ci, int h, int w, int co, int k, int stride, int pad,
		  int need_bwd_data);
/* Run backward-data as a forward convolution (f32, stride 1, 1x1 without
 * padding or k x k with pad (k-1)/2), adding into diff_src (diff_src += dx)
 * if accumulate, else overwriting it.  1x1 and Winograd layers qualify only
 * to accumulate (their own backward-data is as fast).  Returns 1 if set up,
 * 0 if the layer does not qualify (backward-data then overwrites), -1 on
 * error. */
int cpu_conv_acc_init(struct cpu_ctx *c, struct cpu_conv *l, int ci, int co, int k, int stride,
		      int pad, int accumulate);
/* Last of the set-up calls (after cpu_conv_acc_init, before
 * cpu_ctx_finalize): the weight memories (cpu_weights_finish).  With
 * resident_ok the layer takes w and dw in l->wt.res_md if it can (returns
 * 1); cpu_wino's layers take plain weights, which is their layout. */
int cpu_conv_finish(struct cpu_ctx *c, struct cpu_conv *l, int resident_ok);
/* Runs the convolution on the weights w (in l->wt.res_md). */
int cpu_conv_forward_exec(struct cpu_ctx *c, struct cpu_conv *l, const float *w,
			  dnnl_memory_t src, dnnl_memory_t dst);
/* dw (overwritten) from src and diff_dst; diff_src (if non-NULL and the
 * layer was built with need_bwd_data) from diff_dst and w.  w and dw in
 * l->wt.res_md; w is the one this step's forward ran on. */
int cpu_conv_backward_exec(struct cpu_ctx *c, struct cpu_conv *l, const float *w, float *dw,
			   dnnl_memory_t src, dnnl_memory_t diff_dst, dnnl_memory_t diff_src);

/* Per-chunk kernels of the own nChw16c batch norm (cpu_bn_blk.c), one
 * set per instruction set. */
struct cpu_bn_kern {
	void (*stats)(const float *x, size_t hw, const float *shift, double *s1, double *s2);
	void (*apply)(const float *x, const float *res, float *y, uint16_t *mask, size_t hw,
		      const float *m, const float *sc, const float *sh, const float *const *rn, int relu);
	void (*bwd_sums)(const float *x, const float *dy, size_t hw, const float *mean,
			 const float *sc, const float *sh, int relu, double *sdy, double *sdx);
	void (*bwd_sums_mask)(const float *x, float *dy, const uint16_t *mask, size_t hw,
			      const float *mean, double *sdy, double *sdx);
	void (*bwd_dx)(const float *x, const float *dy, float *dx, size_t hw, const float *mean,
		       const float *sc, const float *sh, int relu, const float *k0,
		       const float *k2);
};

/* Batch norm with scale and shift, optionally fused with the following ReLU
 * (oneDNN: the workspace keeps the ReLU mask for backward).  f32
 * activations in dense nChw16c with C % 16 == 0 run our own kernels
 * (blk = 1, cpu_bn_blk.c), everything else (bf16, other layouts) oneDNN's. */
struct cpu_bn {
	dnnl_memory_desc_t md;
	int c, relu;
	struct cpu_prim fwd_train, fwd_eval, bwd;
	dnnl_memory_t scale, shift, mean, var, run_mean, run_var, ws, dscale, dshift;
	int blk, n;
	size_t hw;
	float eps;
	const struct cpu_bn_kern *kern;
	/* blk: the forward's y = (x - fmean) * fscale + fshift (C each), kept
	 * for backward's ReLU mask; mlo: what the float batch mean lacks of
	 * the exact one; part: per-chunk partial sums (doubles). */
	dnnl_memory_t fmean, fscale, fshift, mlo, part;
};
int cpu_bn_init(struct cpu_ctx *c, struct cpu_bn *l, const dnnl_memory_desc_t *md, int ch,
		int relu, float eps);
/* Training: mean/var (C, biased var) of the batch land in l->mean/l->var. */
int cpu_bn_forward_train_exec(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			      const float *beta, dnnl_memory_t src, dnnl_memory_t dst);
int cpu_bn_forward_eval_exec(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			     const float *beta, const float *run_mean, const float *run_var,
			     dnnl_memory_t src, dnnl_memory_t dst);
int cpu_bn_backward_exec(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			 float *dgamma, float *dbeta, dnnl_memory_t src, dnnl_memory_t diff_dst,
			 dnnl_memory_t diff_src);

/* The own kernels, for cpu_bn_* above and the network's fused BN + add:
 * usable: whether md (C channels) qualifies; prepare: with run_mean NULL the
 * batch statistics of src into l->mean/l->var (training), else the given
 * running ones, folded with gamma/beta into l->fscale/fshift; apply: dst =
 * bn(src) (+ res if non-NULL; + lres's bn(res) if lres is non-NULL, a BN that
 * prepare also ran for) (ReLU'd if relu), with what prepare folded,
 * and with mask (relu only) the ReLU's mask, one bit per value (N*C/16*H*W
 * words); backward: as cpu_bn_backward_exec (diff_src may be diff_dst), or
 * with mask (a residual add's, from apply; a BN without ReLU, diff_src not
 * diff_dst) diff_dst masked first and written back masked. */
int cpu_bn_blk_usable(struct cpu_ctx *c, const dnnl_memory_desc_t *md, int ch);
int cpu_bn_blk_init(struct cpu_ctx *c, struct cpu_bn *l, const dnnl_memory_desc_t *md, float eps);
int cpu_bn_blk_prepare(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma, const float *beta,
		       const float *run_mean, const float *run_var, dnnl_memory_t src);
int cpu_bn_blk_apply(struct cpu_ctx *c, struct cpu_bn *l, dnnl_memory_t src, dnnl_memory_t res,
		     const struct cpu_bn *lres, dnnl_memory_t dst, int relu, uint16_t *mask);
/* prepare (training) + apply in one, group of channels by group so the
 * second read of src comes from the cache. */
int cpu_bn_blk_forward_train(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			     const float *beta, dnnl_memory_t src, dnnl_memory_t dst);
int cpu_bn_blk_backward(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma, float *dgamma,
			float *dbeta, dnnl_memory_t src, dnnl_memory_t diff_dst,
			dnnl_memory_t diff_src, const uint16_t *mask);

/* ReLU; backward uses the forward output (dst), so it can run in place. */
struct cpu_relu {
	struct cpu_prim fwd, bwd;
};
int cpu_relu_init(struct cpu_ctx *c, struct cpu_relu *l, const dnnl_memory_desc_t *md);
int cpu_relu_forward_exec(struct cpu_ctx *c, struct cpu_relu *l, dnnl_memory_t src,
			  dnnl_memory_t dst);
int cpu_relu_backward_exec(struct cpu_ctx *c, struct cpu_relu *l, dnnl_memory_t dst,
			   dnnl_memory_t diff_dst, dnnl_memory_t diff_src);

/* dst = src0 + src1 (+ ReLU as a post-op); dst has src0's layout. */
struct cpu_add {
	int relu;
	struct cpu_prim fwd;
	struct cpu_relu relu_l; /* backward of the fused ReLU */
};
int cpu_add_init(struct cpu_ctx *c, struct cpu_add *l, const dnnl_memory_desc_t *md0,
		 const dnnl_memory_desc_t *md1, int relu);
int cpu_add_forward_exec(struct cpu_ctx *c, struct cpu_add *l, dnnl_memory_t src0,
			 dnnl_memory_t src1, dnnl_memory_t dst);

/* Max pool (k, stride, pad; padding never wins) or, with k = 0, global
 * average pool over H x W.  dst layout chosen by oneDNN. */
struct cpu_pool {
	dnnl_memory_desc_t dst_md;
	struct cpu_prim fwd, bwd;
	dnnl_memory_t ws;
};
int cpu_pool_init(struct cpu_ctx *c, struct cpu_pool *l, const dnnl_memory_desc_t *src_md,
		  int n, int ch, int h, int w, int k, int stride, int pad);
int cpu_pool_forward_exec(struct cpu_ctx *c, struct cpu_pool *l, dnnl_memory_t src,
			  dnnl_memory_t dst);
int cpu_pool_backward_exec(struct cpu_ctx *c, struct cpu_pool *l, dnnl_memory_t diff_dst,
			   dnnl_memory_t diff_src);

/* Fully connected: src (N,C,h,w) -> dst (N,K) plain; weight (K,C*h*w), bias (K) or none. */
struct cpu_fc {
	dnnl_memory_desc_t dst_md;
	int has_bias, has_bwd_data;
	struct cpu_prim fwd, bwd_data, bwd_w;
	struct cpu_weights wt;
	dnnl_memory_t bias, dbias;
	/* A non-f32 src (bf16 mode) is converted to f32 at the edge, and
	 * diff_src back, so the classifier and the logits stay f32. */
	int cvt;
	struct cpu_prim src_to_f32, dsrc_from_f32;
	dnnl_memory_t src_f32, dsrc_f32;
};
/* Then cpu_weights_finish(c, &l->wt, resident_ok, 0) before cpu_ctx_finalize;
 * w and dw below are in l->wt.res_md. */
int cpu_fc_init(struct cpu_ctx *c, struct cpu_fc *l, const dnnl_memory_desc_t *src_md, int n,
		int ch, int h, int w, int k, int has_bias, int need_bwd_data);
int cpu_fc_forward_exec(struct cpu_ctx *c, struct cpu_fc *l, const float *w, const float *b,
			dnnl_memory_t src, dnnl_memory_t dst);
int cpu_fc_backward_exec(struct cpu_ctx *c, struct cpu_fc *l, const float *w, float *dw,
			 float *db, dnnl_memory_t src, dnnl_memory_t diff_dst,
			 dnnl_memory_t diff_src);

#endif
