#include "config.h"

#include "engine/cpu/cpu_layers.h"

/* Max pooling in oneDNN ignores padded positions, which is torch's -inf
 * padding; its workspace records the argmax for backward.  k = 0 means a
 * global average pool (kernel = whole plane). */
int cpu_pool_init(struct cpu_ctx *c, struct cpu_pool *l, const dnnl_memory_desc_t *src_md,
		  int n, int ch, int h, int w, int k, int stride, int pad)
{
	int gap = k == 0;
	dnnl_alg_kind_t alg = gap ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_max;
	int kh = gap ? h : k, kw = gap ? w : k, s = gap ? 1 : stride, p = gap ? 0 : pad;
	int ho = (h + 2 * p - kh) / s + 1, wo = (w + 2 * p - kw) / s + 1;
	dnnl_dims_t strides = { s, s }, kernel = { kh, kw }, dil = { 0, 0 }, pl = { p, p };
	dnnl_dims_t pr = { (ho - 1) * s + kh - h - p, (wo - 1) * s + kw - w - p };
	dnnl_memory_desc_t dst_any;
	dnnl_pooling_v2_desc_t fd, bd;
	dnnl_primitive_desc_t fpd, bpd;

	/* dst in src's data type: the jit pooling kernels do not convert. */
	if (cpu_md4_dt(c, &dst_any, n, ch, ho, wo, src_md->data_type, dnnl_format_tag_any) < 0)
		goto fail;
	DN(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, alg, src_md, &dst_any,
					     strides, kernel, dil, pl, pr));
	if (!(fpd = cpu_pd(c, &fd, NULL, NULL)) || cpu_prim_make(c, &l->fwd, fpd) < 0)
		goto fail;
	l->dst_md = *cpu_query(fpd, dnnl_query_dst_md);
	DN(dnnl_pooling_v2_backward_desc_init(&bd, alg, src_md, &l->dst_md, strides, kernel, dil,
					      pl, pr));
	if (!(bpd = cpu_pd(c, &bd, NULL, fpd)) || cpu_prim_make(c, &l->bwd, bpd) < 0)
		goto fail;
	l->ws = NULL;
	const dnnl_memory_desc_t *wmd = cpu_query(fpd, dnnl_query_workspace_md);
	if (wmd && dnnl_memory_desc_get_size(wmd) > 0)
		CHECK(l->ws = cpu_mem(c, wmd, NULL), "%s", c->err);
	return 0;
fail:
	return -1;
}

int cpu_pool_forward_exec(struct cpu_ctx *c, struct cpu_pool *l, dnnl_memory_t src,
			  dnnl_memory_t dst)
{
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, src }, { DNNL_ARG_DST, dst },
				{ DNNL_ARG_WORKSPACE, l->ws } };
	return cpu_exec(c, &l->fwd, l->ws ? 3 : 2, a);
}

int cpu_pool_backward_exec(struct cpu_ctx *c, struct cpu_pool *l, dnnl_memory_t diff_dst,
			   dnnl_memory_t diff_src)
{
	dnnl_exec_arg_t a[] = { { DNNL_ARG_DIFF_DST, diff_dst }, { DNNL_ARG_DIFF_SRC, diff_src },
				{ DNNL_ARG_WORKSPACE, l->ws } };
	return cpu_exec(c, &l->bwd, l->ws ? 3 : 2, a);
}
