#include "config.h"

#include <string.h>

#include <omp.h>

#include "engine/backend.h"
#include "engine/cpu/cpu_layers.h"

/* The algorithm this convolution asks oneDNN for (enum dl_conv_algo).
 * oneDNN 2.6 has Winograd (jit_wino_4x3) for f32 3x3 stride-1 only; at 16
 * channels it is no faster than direct, from 32 channels on it is faster in
 * each of the three passes, so `auto` asks for it from 32 channels (the
 * per-layer timings: tests/bench/RESULTS.md, "Winograd 3x3 convolutions").
 * Layers of 16 and 32 channels, wide ones on small images, and 3x3 stride-2
 * ones of 64 and 128 channels on large images run the engine's own
 * Winograd instead (own_wino). */
static dnnl_alg_kind_t conv_alg(const struct cpu_ctx *c, int ci, int co, int k, int stride)
{
	if (c->conv_algo == DL_CONV_DIRECT || c->act_dt != dnnl_f32 || k != 3 || stride != 1)
		return dnnl_convolution_direct;
	if (c->conv_algo == DL_CONV_AUTO && (ci < 32 || co < 32))
		return dnnl_convolution_direct;
	return dnnl_convolution_winograd;
}

/* cpu_wino's kernels take f32 3x3 stride-1 pad-1 convolutions on nChw16c
 * with C and K multiples of 16.  Up to 32 channels (its group path) they
 * beat both oneDNN kernels in the network; at 64 oneDNN's Winograd is
 * faster.  Its panel path beats oneDNN's Winograd on wide layers with small
 * images (cpu_wino_panel_fits), its stride-2 path oneDNN's direct kernel
 * on 3x3 stride-2 pad-1 layers of 64 and 128 channels on large images
 * (cpu_wino_s2_fits). The input must be nChw16c or left to choose. */
#define OWN_WINO_MAX_CHANNELS 32

static int own_wino(const struct cpu_ctx *c, const dnnl_memory_desc_t *src_md,
		    const dnnl_memory_desc_t *blk, int n, int ci, int co, int h, int w, int k,
		    int stride, int pad)
{
	if (c->conv_algo == DL_CONV_DIRECT || c->act_dt != dnnl_f32 || !cpu_wino_available() ||
	    (src_md && !cpu_md_eq(src_md, blk)))
		return 0;
	/* 3x3 stride 2: the stride-2 path where it pays (resnet50's
	 * layer2.0), or anywhere it runs when Winograd is asked for; not when
	 * the wide-layer paths are switched off. */
	if (stride == 2 && k == 3 && pad == 1)
		return !c->wino_wide_off && ci % 64 == 0 && co % 64 == 0 &&
		       (c->conv_algo == DL_CONV_WINOGRAD ||
			cpu_wino_s2_fits(n, ci, co, h, w, omp_get_max_threads()));
	if (!cpu_wino_shape_ok(ci, co, k, stride, pad))
		return 0;
	int group = ci <= OWN_WINO_MAX_CHANNELS && co <= OWN_WINO_MAX_CHANNELS;
	int panel = !c->wino_wide_off && cpu_wino_panel_fits(ci, co, h, w, omp_get_max_threads());
	return group || panel;
}

/* A layer own_wino took: the stride-2 path for stride 2, else the panel path
 * for multiples of 64 channels, else the group path. */
static int own_wino_init(struct cpu_ctx *c, struct cpu_conv *l, int n, int ci, int h, int w,
			 int co, int stride, int need_bwd_data)
{
	float *buf;
	enum cpu_wino_path path = stride == 2			 ? CPU_WINO_S2
				  : ci % 64 == 0 && co % 64 == 0 ? CPU_WINO_PANEL
								 : CPU_WINO_GROUP;
	size_t floats = cpu_wino_plan(&l->wg, path, n, ci, co, h, w, c->err, sizeof(c->err));
	if (!floats)
		return -1;
	if (cpu_wino_hwio(&l->wg)) {
		/* Its weights in (3, 3, C, K) (hwio), kept resident in it where
		 * the caller can (cpu_conv_finish); scratch shared. */
		dnnl_dims_t wdims = { co, ci, 3, 3 };
		if (!(l->wino_scratch = cpu_scratch_mem(c, floats * sizeof(float))) ||
		    cpu_md(c, &l->wt.plain_md, 4, wdims, dnnl_oihw) < 0 ||
		    cpu_md(c, &l->wt.fwd_md, 4, wdims, dnnl_hwio) < 0)
			return -1;
		l->wt.dw_md = l->wt.bwd_md = l->wt.fwd_md;
		l->wt.has_bwd = need_bwd_data;
	} else {
		if (!(buf = cpu_alloc(c, floats * sizeof(float))))
			return -1;
		cpu_wino_bind(&l->wg, buf);
	}
	l->winograd = 2;
	l->has_bwd_data = need_bwd_data;
	return cpu_md4(c, &l->dst_md, n, co, l->wg.ho, l->wg.wo, dnnl_nChw16c);
}

/* 1 if the layer's src (N, Ci, H, W) and dst (N, Co, Ho, Wo) are both
 * nChw16c, 0 if not, -1 on error. */
static int blocked_io(struct cpu_ctx *c, const struct cpu_conv *l, int n, int ci, int h, int w,
		      int co, int ho, int wo)
{
	dnnl_memory_desc_t src_blk, dst_blk;
	if (cpu_md4(c, &src_blk, n, ci, h, w, dnnl_nChw16c) < 0 ||
	    cpu_md4(c, &dst_blk, n, co, ho, wo, dnnl_nChw16c) < 0)
		return -1;
	return cpu_md_eq(&l->src_md, &src_blk) && cpu_md_eq(&l->dst_md, &dst_blk);
}

static int turnable(const dnnl_memory_desc_t *md);
static int turn_plan(struct cpu_ctx *c, struct cpu_turn *t, const dnnl_memory_desc_t *md);

/* A layer on oneDNN's Winograd whose weight gradient cpu_wino's wgrad path
 * computes instead (cpu_wino_wgrad_fits), writing it straight into the
 * forward's weight layout: where that layout has 16 consecutive output
 * channels side by side, and the activations are nChw16c.  0: not taken,
 * 1: taken, -1: error. */
static int own_wgrad_init(struct cpu_ctx *c, struct cpu_conv *l, int n, int ci, int h, int w,
			  int co)
{
	struct cpu_turn map; /* its offset arrays are the context's, as long as the layer */
	if (c->wino_wide_off || c->act_dt != dnnl_f32 || !cpu_wino_available() ||
	    !cpu_wino_wgrad_fits(ci, co, h, w) || !turnable(&l->wt.fwd_md))
		return 0;
	int io = blocked_io(c, l, n, ci, h, w, co, h, w);
	if (io <= 0)
		return io;
	if (turn_plan(c, &map, &l->wt.fwd_md) < 0)
		return -1;
	for (int k = 0; k < co; k++)
		if (map.base[0][k] != map.base[0][k & ~15] + (k & 15))
			return 0;
	size_t floats = cpu_wino_plan(&l->wg, CPU_WINO_WGRAD, n, ci, co, h, w, c->err,
				      sizeof(c->err));
	if (!floats || !(l->wino_scratch = cpu_scratch_mem(c, floats * sizeof(float))))
		return -1;
	l->dw_at = (struct cpu_wino_place){ .k_at = map.base[0], .c_at = map.base[1],
					    .r_step = map.s2, .s_step = map.s3 };
	l->wt.dw_md = l->wt.fwd_md;
	l->own_dw = 1;
	return 1;
}

enum conv_pass { PASS_FWD, PASS_BWD_DATA, PASS_BWD_WEIGHTS };

/* The primitive desc of one pass with algorithm *alg; where oneDNN has no
 * Winograd kernel for this shape or layout (the desc is valid but creating
 * the pd fails) it falls back to direct, and *alg says which ran.  For the
 * backward passes w is the weights' diff.  NULL on error. */
static dnnl_primitive_desc_t conv_pass_pd(struct cpu_ctx *c, enum conv_pass pass, dnnl_alg_kind_t *alg,
					  const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *w,
					  const dnnl_memory_desc_t *dst, const dnnl_dims_t strides,
					  const dnnl_dims_t pl, const dnnl_dims_t pr,
					  const_dnnl_primitive_desc_t hint)
{
	dnnl_convolution_desc_t d;
	for (;;) {
		if (pass == PASS_FWD)
			DN(dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, *alg, src, w, NULL,
							      dst, strides, pl, pr));
		else if (pass == PASS_BWD_DATA)
			DN(dnnl_convolution_backward_data_desc_init(&d, *alg, src, w, dst, strides, pl, pr));
		else
			DN(dnnl_convolution_backward_weights_desc_init(&d, *alg, src, w, NULL, dst, strides,
								       pl, pr));
		dnnl_primitive_desc_t pd = cpu_pd(c, &d, NULL, hint);
		if (pd || *alg == dnnl_convolution_direct)
			return pd;
		*alg = dnnl_convolution_direct;
	}
fail:
	return NULL;
}

/* The gathered weight gradient (col_dw) takes 3x3 stride-2 pad-1 layers on
 * oneDNN's direct kernel from this many input channels.  There oneDNN's
 * direct backward-weights runs well below its 1x1 kernel's rate, and one
 * 1x1 weight gradient over the input gathered by tap (one pass over x)
 * beats it: on resnet50's layer4.0 (512 channels) by much, on layer3.0
 * (256) by little, which sets the threshold (tests/bench/RESULTS.md, "The
 * weight gradient of layer3.0 and layer4.0 over their input gathered by
 * tap"). */
#define COL_DW_MIN_CHANNELS 256

/* col (N, k*k*Ci, Ho, Wo) nChw16c, channel block b*k*k + r*k + s of image
 * i: x (N, Ci, H, W) nChw16c's block b at (stride*oh + r - pad, stride*ow +
 * s - pad), zero outside. */
static void col_gather(const float *x, float *col, int n, int cb, int h, int w, int ho, int wo,
		       int k, int stride, int pad)
{
	enum { B = 16 };
	int kk = k * k;
#pragma omp parallel for collapse(2) schedule(static)
	for (int i = 0; i < n; i++)
		for (int b = 0; b < cb; b++) {
			const float *xb = x + ((size_t)i * cb + b) * h * w * B;
			float *o = col + ((size_t)i * cb + b) * kk * ho * wo * B;
			for (int t = 0; t < kk; t++)
				for (int oh = 0; oh < ho; oh++) {
					int ih = stride * oh + t / k - pad;
					for (int ow = 0; ow < wo; ow++, o += B) {
						int iw = stride * ow + t % k - pad;
						if (ih < 0 || ih >= h || iw < 0 || iw >= w)
							memset(o, 0, B * sizeof(float));
						else
							memcpy(o, xb + ((size_t)ih * w + iw) * B, B * sizeof(float));
					}
				}
		}
}

/* A 3x3 stride-2 layer on oneDNN's direct kernel whose weight gradient runs
 * as one 1x1 weight gradient over its gathered input (col_dw).  0: not
 * taken, 1: taken, -1: error. */
static int col_dw_init(struct cpu_ctx *c, struct cpu_conv *l, int n, int ci, int h, int w, int co,
		       int ho, int wo, int k, int stride, int pad)
{
	dnnl_memory_desc_t col_md, w1_md;
	dnnl_dims_t w1dims = { co, (dnnl_dim_t)k * k * ci, 1, 1 }, wdims = { co, ci, k, k };
	dnnl_dims_t one = { 1, 1 }, zero = { 0, 0 };
	dnnl_alg_kind_t alg = dnnl_convolution_direct;
	dnnl_primitive_desc_t fpd, bpd;
	if (c->conv_algo == DL_CONV_DIRECT || c->act_dt != dnnl_f32 || k != 3 || stride != 2 ||
	    pad != 1 || ci < COL_DW_MIN_CHANNELS || ci % 16 || co % 16)
		return 0;
	int io = blocked_io(c, l, n, ci, h, w, co, ho, wo);
	if (io <= 0)
		return io;
	if (cpu_md4(c, &col_md, n, k * k * ci, ho, wo, dnnl_nChw16c) < 0 ||
	    cpu_md(c, &w1_md, 4, w1dims, dnnl_OIhw16i16o) < 0 ||
	    cpu_md(c, &l->wt.dw_md, 4, wdims, dnnl_OIhw16i16o) < 0)
		return -1;
	if (!(fpd = conv_pass_pd(c, PASS_FWD, &alg, &col_md, &w1_md, &l->dst_md, one, zero, zero,
				 NULL)) ||
	    !(bpd = conv_pass_pd(c, PASS_BWD_WEIGHTS, &alg, &col_md, &w1_md, &l->dst_md, one, zero,
				 zero, fpd)) ||
	    cpu_prim_make(c, &l->bwd_w, bpd) < 0)
		return -1;
	/* The gathered input lives in the shared scratchpad past the 1x1
	 * kernel's own (only while it runs). */
	const dnnl_memory_desc_t *smd = cpu_query(bpd, dnnl_query_scratchpad_md);
	size_t off = smd ? dnnl_memory_desc_get_size(smd) : 0;
	off = (off + 4095) & ~(size_t)4095;
	if (!(l->col = cpu_scratch_at(c, &col_md, off)) || !(l->col_w = cpu_view(c, &w1_md)))
		return -1;
	l->col_dw = 1;
	return 1;
}

/* oneDNN picks the blocked layouts (format any) for dst and weights, and for
 * src too when the caller leaves it open; diffs use the forward layouts, so
 * activations stay blocked through the whole network.  The weight memories
 * come in cpu_conv_finish, once acc_init has said whether backward-data
 * reads them. */
int cpu_conv_init(struct cpu_ctx *c, struct cpu_conv *l, const dnnl_memory_desc_t *src_md,
		  int n, int ci, int h, int w, int co, int k, int stride, int pad,
		  int need_bwd_data)
{
	int ho = (h + 2 * pad - k) / stride + 1, wo = (w + 2 * pad - k) / stride + 1;
	dnnl_memory_desc_t src_any, w_any, dst_any, dw_any;
	dnnl_dims_t strides = { stride, stride }, pl = { pad, pad };
	/* Right padding that makes oneDNN's output side equal torch's floor. */
	dnnl_dims_t pr = { (ho - 1) * stride + k - h - pad, (wo - 1) * stride + k - w - pad };
	dnnl_dims_t wdims = { co, ci, k, k };
	dnnl_primitive_desc_t fpd, bdpd, bwpd;

	dnnl_alg_kind_t alg = conv_alg(c, ci, co, k, stride);

	memset(l, 0, sizeof(*l));
	if (cpu_md4(c, &l->src_md, n, ci, h, w, dnnl_nChw16c) < 0)
		goto fail;
	if (own_wino(c, src_md, &l->src_md, n, ci, co, h, w, k, stride, pad))
		return own_wino_init(c, l, n, ci, h, w, co, stride, need_bwd_data);
	l->has_bwd_data = need_bwd_data;
	/* In bf16 mode src, weights and dst are bf16 (oneDNN accumulates in
	 * f32); the weight gradient stays f32 for the optimizer's master
	 * weights, so the plain f32 weights are converted in the same reorder
	 * that blocks them. */
	if (cpu_md4_dt(c, &src_any, n, ci, h, w, c->act_dt, dnnl_format_tag_any) < 0 ||
	    cpu_md4_dt(c, &dst_any, n, co, ho, wo, c->act_dt, dnnl_format_tag_any) < 0 ||
	    cpu_md_dt(c, &w_any, 4, wdims, c->act_dt, dnnl_format_tag_any) < 0 ||
	    cpu_md(c, &dw_any, 4, wdims, dnnl_format_tag_any) < 0 ||
	    cpu_md(c, &l->wt.plain_md, 4, wdims, dnnl_oihw) < 0)
		goto fail;
	if (!(fpd = conv_pass_pd(c, PASS_FWD, &alg, src_md ? src_md : &src_any, &w_any, &dst_any,
				 strides, pl, pr, NULL)))
		goto fail;
	l->winograd = alg == dnnl_convolution_winograd;
	l->src_md = *cpu_query(fpd, dnnl_query_src_md);
	l->dst_md = *cpu_query(fpd, dnnl_query_dst_md);
	l->wt.fwd_md = *cpu_query(fpd, dnnl_query_weights_md);
	if (cpu_prim_make(c, &l->fwd, fpd) < 0)
		goto fail;

	/* The backward passes follow the forward's algorithm, each falling
	 * back to direct on its own; the weight gradient on cpu_wino's wgrad
	 * path or over the gathered input (col_dw) where either takes the
	 * layer. */
	dnnl_alg_kind_t alg_w = alg, alg_d = alg;
	int own_dw = l->winograd ? own_wgrad_init(c, l, n, ci, h, w, co) :
				   col_dw_init(c, l, n, ci, h, w, co, ho, wo, k, stride, pad);
	if (own_dw < 0)
		goto fail;
	if (!own_dw) {
		if (!(bwpd = conv_pass_pd(c, PASS_BWD_WEIGHTS, &alg_w, &l->src_md, &dw_any,
					  &l->dst_md, strides, pl, pr, fpd)) ||
		    cpu_prim_make(c, &l->bwd_w, bwpd) < 0)
			goto fail;
		l->wt.dw_md = *cpu_query(bwpd, dnnl_query_diff_weights_md);
	}

	if (need_bwd_data) {
		if (!(bdpd = conv_pass_pd(c, PASS_BWD_DATA, &alg_d, &l->src_md, &w_any, &l->dst_md,
					  strides, pl, pr, fpd)) ||
		    cpu_prim_make(c, &l->bwd_data, bdpd) < 0)
			goto fail;
		l->wt.bwd_md = *cpu_query(bdpd, dnnl_query_weights_md);
		l->wt.has_bwd = 1;
	}
	return 0;
fail:
	return -1;
}

/* Turning k x k weights by 180 degrees in a blocked layout: element
 * (a, b, r, s) sits at base0[a] + base1[b] + r * s2 + s * s3 when neither
 * spatial dim is blocked and dims 0 and 1 are blocked once at most (an
 * index's outer block times its stride plus its place inside its inner
 * block times the sizes of the inner blocks within it), so the turn swaps
 * (r, s) with (k-1-r, k-1-s) behind each base. */
static int turnable(const dnnl_memory_desc_t *md)
{
	const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
	int seen[2] = { 0, 0 };
	if (md->format_kind != dnnl_blocked || md->ndims != 4 || md->data_type != dnnl_f32)
		return 0;
	for (int i = 0; i < bd->inner_nblks; i++) {
		if (bd->inner_idxs[i] > 1 || seen[bd->inner_idxs[i]]++)
			return 0;
	}
	return 1;
}

static int turn_plan(struct cpu_ctx *c, struct cpu_turn *t, const dnnl_memory_desc_t *md)
{
	const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
	dnnl_dim_t blk[2] = { 1, 1 }, mul[2] = { 0, 0 }, inner = 1;
	for (int i = bd->inner_nblks - 1; i >= 0; i--) { /* innermost first */
		blk[bd->inner_idxs[i]] = bd->inner_blks[i];
		mul[bd->inner_idxs[i]] = inner;
		inner *= bd->inner_blks[i];
	}
	t->n[0] = md->padded_dims[0];
	t->n[1] = md->padded_dims[1];
	t->s2 = bd->strides[2];
	t->s3 = bd->strides[3];
	if (!(t->base[0] = cpu_alloc(c, (size_t)(t->n[0] + t->n[1]) * sizeof(dnnl_dim_t))))
		return -1;
	t->base[1] = t->base[0] + t->n[0];
	for (int d = 0; d < 2; d++)
		for (dnnl_dim_t x = 0; x < t->n[d]; x++)
			t->base[d][x] = (d ? 0 : md->offset0) + x / blk[d] * bd->strides[d] + x % blk[d] * mul[d];
	return 0;
}

/* w (in the planned layout) turned by 180 degrees in place. */
static void turn(const struct cpu_turn *t, float *w, int k)
{
	dnnl_dim_t half = k * k / 2;
#pragma omp parallel for schedule(static)
	for (dnnl_dim_t a = 0; a < t->n[0]; a++)
		for (dnnl_dim_t b = 0; b < t->n[1]; b++) {
			float *p = w + t->base[0][a] + t->base[1][b];
			for (dnnl_dim_t j = 0; j < half; j++) {
				dnnl_dim_t r = j / k, q = j % k;
				float *x = p + r * t->s2 + q * t->s3;
				float *y = p + (k - 1 - r) * t->s2 + (k - 1 - q) * t->s3;
				float v = *x;
				*x = *y;
				*y = v;
			}
		}
}

/* Backward-data of a stride-1 convolution is itself a forward convolution:
 * for 1x1, dx[i] = sum_o W[o][i] dy[o] at every pixel; for a k x k kernel
 * with pad (k-1)/2, dx = conv(dy, W') with the same pad, where
 * W'[i][o][r][s] = W[o][i][k-1-r][k-1-s] (transposed and turned by 180
 * degrees).  Forward convolutions take a sum post-op, so dx is added into
 * diff_src inside the kernel where backward-data would need a temporary and
 * a binary add after it; and for direct 3x3 at 16 channels oneDNN's forward
 * kernel is a little faster than its backward-data (tests/bench/RESULTS.md). */
int cpu_conv_acc_init(struct cpu_ctx *c, struct cpu_conv *l, int ci, int co, int k, int stride,
		      int pad, int accumulate)
{
	dnnl_memory_desc_t w_any;
	dnnl_convolution_desc_t d;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_dims_t one = { 1, 1 }, pads = { pad, pad }, wdims = { ci, co, k, k };
	dnnl_alg_kind_t alg = l->winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
	int rv = -1;

	l->acc = 0;
	if (l->winograd == 2) { /* cpu_wino adds in its output transform */
		l->wino_acc = accumulate && l->has_bwd_data;
		return l->wino_acc;
	}
	if (c->act_dt != dnnl_f32 || stride != 1 || !l->has_bwd_data)
		return 0;
	if (!(k == 1 && pad == 0) && !(k > 1 && k == 2 * pad + 1))
		return 0;
	/* Overwriting, only the direct k x k kernels gain (a little); 1x1 and
	 * Winograd backward-data are as fast as the forward. */
	if (!accumulate && (k == 1 || l->winograd))
		return 0;
	if (cpu_md(c, &w_any, 4, wdims, dnnl_format_tag_any) < 0)
		goto fail;
	DN(dnnl_primitive_attr_clone(&attr, c->attr));
	if (accumulate) {
		DN(dnnl_post_ops_create(&po));
		DN(dnnl_post_ops_append_sum(po, 1.f));
		DN(dnnl_primitive_attr_set_post_ops(attr, po));
	}
	/* The forward's algorithm; direct where oneDNN has no such kernel.
	 * forward_training: for inference oneDNN's Winograd wants weights
	 * pre-transformed by a reorder that costs more than the convolution. */
	for (;;) {
		DN(dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, alg, &l->dst_md,
						      &w_any, NULL, &l->src_md, one, pads, pads));
		if ((pd = cpu_pd(c, &d, attr, NULL)) || alg == dnnl_convolution_direct)
			break;
		alg = dnnl_convolution_direct;
	}
	if (!pd)
		goto fail;
	/* Only if it kept the network's layouts: otherwise diff_src would need
	 * a reorder and the point is lost. */
	if (!cpu_md_eq(cpu_query(pd, dnnl_query_src_md), &l->dst_md) ||
	    !cpu_md_eq(cpu_query(pd, dnnl_query_dst_md), &l->src_md)) {
		rv = 0;
		goto fail;
	}
	/* k > 1: the weights are turned in that layout (turn_plan). */
	l->wa_md = *cpu_query(pd, dnnl_query_weights_md);
	if (k > 1 && !turnable(&l->wa_md)) {
		rv = 0;
		goto fail;
	}
	if (cpu_prim_make(c, &l->acc_fwd, pd) < 0)
		goto fail;
	l->acc = 1;
	l->acc_k = k;
	rv = 1;
fail:
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return rv;
}

int cpu_conv_finish(struct cpu_ctx *c, struct cpu_conv *l, int resident_ok)
{
	if (l->winograd == 2)
		return cpu_wino_hwio(&l->wg) ? cpu_weights_finish(c, &l->wt, resident_ok, 0) : 0;
	int r = cpu_weights_finish(c, &l->wt, resident_ok, l->acc);
	if (r < 0 || !l->acc)
		return r;
	/* The acc path's weights: W^T[i][o] is W[o][i], the caller's array in
	 * res_md (blocked or not) with the first two axes swapped. */
	static const int swap01[4] = { 1, 0, 2, 3 };
	dnnl_memory_desc_t wt_md;
	DN(dnnl_memory_desc_permute_axes(&wt_md, &l->wt.res_md, swap01));
	if (!(l->w_t = cpu_view(c, &wt_md)))
		return -1;
	/* k > 1 turns them in place: never in the caller's array. */
	if (l->acc_k == 1 && cpu_md_eq(&wt_md, &l->wa_md)) {
		l->w_acc = l->w_t;
		return r;
	}
	if (!(l->w_acc = cpu_tmp_mem(c, &l->wa_md, CPU_TMP_W0)) ||
	    cpu_reorder_make(c, &l->w_to_acc, &wt_md, &l->wa_md) < 0 ||
	    (l->acc_k > 1 && turn_plan(c, &l->turn, &l->wa_md) < 0))
		return -1;
	return r;
fail:
	return -1;
}

int cpu_conv_forward_exec(struct cpu_ctx *c, struct cpu_conv *l, const float *w,
			  dnnl_memory_t src, dnnl_memory_t dst)
{
	if (l->winograd == 2 && cpu_wino_hwio(&l->wg)) {
		if (cpu_weights_load_fwd(c, &l->wt, w) < 0)
			return -1;
		cpu_wino_bind(&l->wg, cpu_handle(l->wino_scratch));
		cpu_wino_forward(&l->wg, cpu_handle(l->wt.fwd), cpu_handle(src), cpu_handle(dst));
		return 0;
	}
	if (l->winograd == 2) {
		cpu_wino_forward(&l->wg, w, cpu_handle(src), cpu_handle(dst));
		return 0;
	}
	if (cpu_weights_load_fwd(c, &l->wt, w) < 0)
		return -1;
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, src }, { DNNL_ARG_WEIGHTS, l->wt.fwd },
				{ DNNL_ARG_DST, dst } };
	return cpu_exec(c, &l->fwd, 3, a);
}

/* The acc path's backward-data: diff_src (+)= conv(diff_dst, W^T turned). */
static int acc_exec(struct cpu_ctx *c, struct cpu_conv *l, const float *w, dnnl_memory_t diff_dst,
		    dnnl_memory_t diff_src)
{
	if (cpu_set_handle(c, l->w_t, w) < 0)
		return -1;
	if (l->w_to_acc.p) {
		c->wreorders[CPU_WREORDER_BWD]++;
		if (cpu_reorder(c, &l->w_to_acc, l->w_t, l->w_acc) < 0)
			return -1;
	}
	if (l->acc_k > 1)
		turn(&l->turn, cpu_handle(l->w_acc), l->acc_k);
	dnnl_exec_arg_t af[] = { { DNNL_ARG_SRC, diff_dst }, { DNNL_ARG_WEIGHTS, l->w_acc },
				 { DNNL_ARG_DST, diff_src } };
	return cpu_exec(c, &l->acc_fwd, 3, af);
}

int cpu_conv_backward_exec(struct cpu_ctx *c, struct cpu_conv *l, const float *w, float *dw,
			   dnnl_memory_t src, dnnl_memory_t diff_dst, dnnl_memory_t diff_src)
{
	if (l->winograd == 2 && cpu_wino_hwio(&l->wg)) {
		/* Backward-data first, while diff_dst (just written) is still in
		 * the cache: the weight gradient's transforms evict it. */
		cpu_wino_bind(&l->wg, cpu_handle(l->wino_scratch));
		if (diff_src && l->has_bwd_data) {
			if (cpu_weights_load_bwd(c, &l->wt, w) < 0)
				return -1;
			cpu_wino_backward_data(&l->wg, cpu_handle(l->wt.bwd), cpu_handle(diff_dst),
					       cpu_handle(diff_src), l->wino_acc);
		}
		if (cpu_weights_dw_begin(c, &l->wt, dw) < 0)
			return -1;
		cpu_wino_backward_weights(&l->wg, cpu_handle(src), cpu_handle(diff_dst),
					  cpu_handle(l->wt.dw));
		return cpu_weights_dw_end(c, &l->wt);
	}
	if (l->winograd == 2) {
		cpu_wino_backward_weights(&l->wg, cpu_handle(src), cpu_handle(diff_dst), dw);
		if (diff_src && l->has_bwd_data)
			cpu_wino_backward_data(&l->wg, w, cpu_handle(diff_dst), cpu_handle(diff_src),
					       l->wino_acc);
		return 0;
	}
	/* The weight gradient straight into the caller's array where oneDNN
	 * (or the wgrad path) writes its layout, else through a reorder. */
	if (cpu_weights_dw_begin(c, &l->wt, dw) < 0)
		return -1;
	if (l->own_dw) {
		cpu_wino_bind(&l->wg, cpu_handle(l->wino_scratch));
		cpu_wino_backward_weights_at(&l->wg, cpu_handle(src), cpu_handle(diff_dst),
					     cpu_handle(l->wt.dw), &l->dw_at);
	} else if (l->col_dw) {
		const dnnl_dim_t *sd = l->src_md.dims, *dd = l->dst_md.dims;
		const float *x = cpu_handle(src);
		float *col = cpu_handle(l->col);
		if (!x || !col) {
			dl_errf(c->err, sizeof(c->err), "%s:%d: convolution memory has no buffer", __FILE__, __LINE__);
			return -1;
		}
		/* col_dw_init took 3x3 stride-2 pad-1 only */
		col_gather(x, col, (int)sd[0], (int)sd[1] / 16, (int)sd[2], (int)sd[3], (int)dd[2],
			   (int)dd[3], 3, 2, 1);
		if (cpu_set_handle(c, l->col_w, cpu_handle(l->wt.dw)) < 0)
			return -1;
		dnnl_exec_arg_t aw[] = { { DNNL_ARG_SRC, l->col }, { DNNL_ARG_DIFF_DST, diff_dst },
					 { DNNL_ARG_DIFF_WEIGHTS, l->col_w } };
		if (cpu_exec(c, &l->bwd_w, 3, aw) < 0)
			return -1;
	} else {
		dnnl_exec_arg_t aw[] = { { DNNL_ARG_SRC, src }, { DNNL_ARG_DIFF_DST, diff_dst },
					 { DNNL_ARG_DIFF_WEIGHTS, l->wt.dw } };
		if (cpu_exec(c, &l->bwd_w, 3, aw) < 0)
			return -1;
	}
	if (cpu_weights_dw_end(c, &l->wt) < 0)
		return -1;
	if (!diff_src || !l->has_bwd_data)
		return 0;
	if (l->acc)
		return acc_exec(c, l, w, diff_dst, diff_src);
	/* Where backward-data reads the forward's layout, the forward's
	 * weights of this step serve (they do not change in between). */
	if (cpu_weights_load_bwd(c, &l->wt, w) < 0)
		return -1;
	dnnl_exec_arg_t ad[] = { { DNNL_ARG_DIFF_DST, diff_dst }, { DNNL_ARG_WEIGHTS, l->wt.bwd },
				 { DNNL_ARG_DIFF_SRC, diff_src } };
	return cpu_exec(c, &l->bwd_data, 3, ad);
}
