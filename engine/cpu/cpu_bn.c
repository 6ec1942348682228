#include "config.h"

#include "engine/cpu/cpu_layers.h"

/* Batch norm runs in the producer's (blocked) layout.  Scale, shift and
 * their diffs are plain (C) arrays, so they point straight at the graph's
 * params and grads; mean/var are the batch statistics, which the caller
 * folds into the running buffers. */
int cpu_bn_init(struct cpu_ctx *c, struct cpu_bn *l, const dnnl_memory_desc_t *md, int ch,
		int relu, float eps)
{
	dnnl_batch_normalization_desc_t ft, fe, bd;
	dnnl_memory_desc_t cmd;
	dnnl_dims_t cd = { ch };
	unsigned flags = dnnl_use_scale | dnnl_use_shift | (relu ? dnnl_fuse_norm_relu : 0);
	dnnl_primitive_desc_t ftpd, fepd, bpd;

	l->md = *md;
	l->c = ch;
	l->relu = relu;
	if (cpu_md(c, &cmd, 1, cd, dnnl_x) < 0)
		goto fail;
	l->blk = !c->bn_onednn && cpu_bn_blk_usable(c, md, ch);
	if (l->blk) {
		/* Own kernels: no oneDNN primitives, no workspace. */
		CHECK((l->mean = cpu_mem(c, &cmd, NULL)) && (l->var = cpu_mem(c, &cmd, NULL)),
		      "%s", c->err);
		l->ws = NULL;
		return cpu_bn_blk_init(c, l, md, eps);
	}
	DN(dnnl_batch_normalization_forward_desc_init(&ft, dnnl_forward_training, md, eps, flags));
	DN(dnnl_batch_normalization_forward_desc_init(&fe, dnnl_forward_inference, md, eps,
						      flags | dnnl_use_global_stats));
	DN(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, md, md, eps, flags));
	if (!(ftpd = cpu_pd(c, &ft, NULL, NULL)) || cpu_prim_make(c, &l->fwd_train, ftpd) < 0 ||
	    !(fepd = cpu_pd(c, &fe, NULL, NULL)) || cpu_prim_make(c, &l->fwd_eval, fepd) < 0 ||
	    !(bpd = cpu_pd(c, &bd, NULL, ftpd)) || cpu_prim_make(c, &l->bwd, bpd) < 0)
		goto fail;
	/* Views of the caller's arrays, but the batch statistics. */
	if (!(l->scale = cpu_view(c, &cmd)) || !(l->shift = cpu_view(c, &cmd)) ||
	    !(l->mean = cpu_mem(c, &cmd, NULL)) || !(l->var = cpu_mem(c, &cmd, NULL)) ||
	    !(l->run_mean = cpu_view(c, &cmd)) || !(l->run_var = cpu_view(c, &cmd)) ||
	    !(l->dscale = cpu_view(c, &cmd)) || !(l->dshift = cpu_view(c, &cmd)))
		goto fail;
	l->ws = NULL;
	if (relu)
		CHECK(l->ws = cpu_mem(c, cpu_query(ftpd, dnnl_query_workspace_md), NULL), "%s",
		      c->err);
	return 0;
fail:
	return -1;
}

int cpu_bn_forward_train_exec(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			      const float *beta, dnnl_memory_t src, dnnl_memory_t dst)
{
	if (l->blk)
		return cpu_bn_blk_forward_train(c, l, gamma, beta, src, dst);
	if (cpu_set_handle(c, l->scale, gamma) < 0 || cpu_set_handle(c, l->shift, beta) < 0)
		return -1;
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, src },	      { DNNL_ARG_DST, dst },
				{ DNNL_ARG_SCALE, l->scale }, { DNNL_ARG_SHIFT, l->shift },
				{ DNNL_ARG_MEAN, l->mean },   { DNNL_ARG_VARIANCE, l->var },
				{ DNNL_ARG_WORKSPACE, l->ws } };
	return cpu_exec(c, &l->fwd_train, l->relu ? 7 : 6, a);
}

int cpu_bn_forward_eval_exec(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			     const float *beta, const float *run_mean, const float *run_var,
			     dnnl_memory_t src, dnnl_memory_t dst)
{
	if (l->blk)
		return cpu_bn_blk_prepare(c, l, gamma, beta, run_mean, run_var, src) < 0 ? -1 :
			cpu_bn_blk_apply(c, l, src, NULL, NULL, dst, l->relu, NULL);
	if (cpu_set_handle(c, l->scale, gamma) < 0 || cpu_set_handle(c, l->shift, beta) < 0 ||
	    cpu_set_handle(c, l->run_mean, run_mean) < 0 ||
	    cpu_set_handle(c, l->run_var, run_var) < 0)
		return -1;
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, src },
				{ DNNL_ARG_DST, dst },
				{ DNNL_ARG_SCALE, l->scale },
				{ DNNL_ARG_SHIFT, l->shift },
				{ DNNL_ARG_MEAN, l->run_mean },
				{ DNNL_ARG_VARIANCE, l->run_var } };
	return cpu_exec(c, &l->fwd_eval, 6, a);
}

int cpu_bn_backward_exec(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			 float *dgamma, float *dbeta, dnnl_memory_t src, dnnl_memory_t diff_dst,
			 dnnl_memory_t diff_src)
{
	if (l->blk)
		return cpu_bn_blk_backward(c, l, gamma, dgamma, dbeta, src, diff_dst, diff_src, NULL);
	if (cpu_set_handle(c, l->scale, gamma) < 0 || cpu_set_handle(c, l->dscale, dgamma) < 0 ||
	    cpu_set_handle(c, l->dshift, dbeta) < 0)
		return -1;
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, src },
				{ DNNL_ARG_DIFF_DST, diff_dst },
				{ DNNL_ARG_SCALE, l->scale },
				/* 2.6 insists on shift in backward too (invalid_arguments without it). */
				{ DNNL_ARG_SHIFT, l->shift },
				{ DNNL_ARG_MEAN, l->mean },
				{ DNNL_ARG_VARIANCE, l->var },
				{ DNNL_ARG_DIFF_SRC, diff_src },
				{ DNNL_ARG_DIFF_SCALE, l->dscale },
				{ DNNL_ARG_DIFF_SHIFT, l->dshift },
				{ DNNL_ARG_WORKSPACE, l->ws } };
	return cpu_exec(c, &l->bwd, l->relu ? 10 : 9, a);
}
