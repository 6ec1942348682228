/* oneDNN layers: one struct per op family, built once for a batch size and
 * an input memory desc (usually a blocked layout chosen by the producer),
 * executed on caller-owned memories.  Params cross in plain torchvision
 * layouts (float arrays) and are reordered at the edges. */
#ifndef DLJOB_ENGINE_CPU_CPU_LAYERS_H
#define DLJOB_ENGINE_CPU_CPU_LAYERS_H

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/cpu_wino.h"

/* Convolution without bias.  src (N,Ci,H,W) -> dst (N,Co,Ho,Wo), weight (Co,Ci,k,k). */
struct cpu_conv {
	dnnl_memory_desc_t src_md, dst_md; /* as executed (src fixed by caller or chosen) */
	struct cpu_prim fwd, bwd_data, bwd_w;
	struct cpu_prim w_to_fwd, w_to_bwd, dw_to_plain;
	int w_fwd_plain, w_bwd_same, dw_plain_direct, has_bwd_data;
	int winograd; /* the forward runs direct (0), oneDNN's Winograd (1) or cpu_wino's (2) */
	dnnl_memory_t w_plain, w_fwd, w_bwd, dw_plain, dw_blk;
	/* acc (cpu_conv_acc_init): backward-data runs as a forward
	 * convolution of diff_dst with the transposed (k > 1: also turned)
	 * weights, adding into diff_src through a sum post-op where the value
	 * already holds another reader's gradient. */
	int acc, acc_k, acc_ci, acc_co;
	struct cpu_prim acc_fwd, w_to_acc;
	dnnl_memory_t w_plain_t, w_acc;
	/* winograd == 2: cpu_wino's kernels instead of oneDNN primitives;
	 * wino_acc: its backward-data adds into diff_src. */
	struct cpu_wino wg;
	int wino_acc;
	/* resident (cpu_conv_resident): the caller keeps the weights, their
	 * gradient and momentum in the forward's blocked layout res_md; the
	 * exec calls then take w and dw in that layout and skip the weight
	 * and weight-gradient reorders. */
	int resident;
	dnnl_memory_desc_t res_md;
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
/* Whether the layer can take its weights resident in one blocked layout
 * (call after cpu_conv_acc_init): an f32 oneDNN convolution whose forward
 * weights are blocked, whose weight gradient has that same layout, and
 * whose backward-data reads it too (not the transposed-weights trick).  If
 * so, switches the layer to it (l->resident, l->res_md) and returns 1;
 * else 0 (plain weights, reordered inside each step). */
int cpu_conv_resident(struct cpu_ctx *c, struct cpu_conv *l);
/* Reorders the plain weights in (resident: w is already in l->res_md) and
 * runs the convolution. */
int cpu_conv_forward_exec(struct cpu_ctx *c, struct cpu_conv *l, const float *w,
			  dnnl_memory_t src, dnnl_memory_t dst);
/* dw (plain, overwritten; resident: in l->res_md) from src and diff_dst;
 * diff_src (if non-NULL and the layer was built with need_bwd_data) from
 * diff_dst and w. */
int cpu_conv_backward_exec(struct cpu_ctx *c, struct cpu_conv *l, const float *w, float *dw,
			   dnnl_memory_t src, dnnl_memory_t diff_dst, dnnl_memory_t diff_src);

/* Per-chunk kernels of the own nChw16c batch norm (cpu_bn_blk.c), one
 * set per instruction set. */
struct cpu_bn_kern {
	void (*stats)(const float *x, size_t hw, const float *shift, double *s1, double *s2);
	void (*apply)(const float *x, const float *res, float *y, size_t hw, const float *m,
		      const float *sc, const float *sh, int relu);
	void (*bwd_sums)(const float *x, const float *dy, size_t hw, const float *mean,
			 const float *sc, const float *sh, int relu, double *sdy, double *sdx);
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
 * bn(src) (+ res if non-NULL) (ReLU'd if relu), with what prepare folded;
 * backward: as cpu_bn_backward_exec (diff_src may be diff_dst). */
int cpu_bn_blk_usable(struct cpu_ctx *c, const dnnl_memory_desc_t *md, int ch);
int cpu_bn_blk_init(struct cpu_ctx *c, struct cpu_bn *l, const dnnl_memory_desc_t *md, float eps);
int cpu_bn_blk_prepare(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma, const float *beta,
		       const float *run_mean, const float *run_var, dnnl_memory_t src);
int cpu_bn_blk_apply(struct cpu_ctx *c, struct cpu_bn *l, dnnl_memory_t src, dnnl_memory_t res,
		     dnnl_memory_t dst, int relu);
/* prepare (training) + apply in one, group of channels by group so the
 * second read of src comes from the cache. */
int cpu_bn_blk_forward_train(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			     const float *beta, dnnl_memory_t src, dnnl_memory_t dst);
int cpu_bn_blk_backward(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma, float *dgamma,
			float *dbeta, dnnl_memory_t src, dnnl_memory_t diff_dst,
			dnnl_memory_t diff_src);

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
	struct cpu_prim w_to_fwd, w_to_bwd, dw_to_plain;
	int w_fwd_plain, w_bwd_same, dw_plain_direct;
	dnnl_memory_t w_plain, w_fwd, w_bwd, dw_plain, dw_blk, bias, dbias;
	/* A non-f32 src (bf16 mode) is converted to f32 at the edge, and
	 * diff_src back, so the classifier and the logits stay f32. */
	int cvt;
	struct cpu_prim src_to_f32, dsrc_from_f32;
	dnnl_memory_t src_f32, dsrc_f32;
};
int cpu_fc_init(struct cpu_ctx *c, struct cpu_fc *l, const dnnl_memory_desc_t *src_md, int n,
		int ch, int h, int w, int k, int has_bias, int need_bwd_data);
int cpu_fc_forward_exec(struct cpu_ctx *c, struct cpu_fc *l, const float *w, const float *b,
			dnnl_memory_t src, dnnl_memory_t dst);
int cpu_fc_backward_exec(struct cpu_ctx *c, struct cpu_fc *l, const float *w, float *dw,
			 float *db, dnnl_memory_t src, dnnl_memory_t diff_dst,
			 dnnl_memory_t diff_src);

#endif
