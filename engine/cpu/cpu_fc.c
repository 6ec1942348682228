#include "config.h"

#include <string.h>

#include "engine/cpu/cpu_layers.h"

/* Inner product reading the pooled features in their blocked layout; the
 * (K,C) torch weight is the same bytes as a (K,C,h,w) oihw tensor. */
int cpu_fc_init(struct cpu_ctx *c, struct cpu_fc *l, const dnnl_memory_desc_t *src_md, int n,
		int ch, int h, int w, int k, int has_bias, int need_bwd_data)
{
	dnnl_memory_desc_t w_any, b_md;
	dnnl_dims_t wdims = { k, ch, h, w }, bdims = { k }, ddims = { n, k };
	dnnl_inner_product_desc_t fd, bdd, bwd;
	dnnl_primitive_desc_t fpd, bdpd, bwpd;
	dnnl_memory_desc_t src_f32_md;

	memset(l, 0, sizeof(*l));
	l->has_bias = has_bias;
	l->cvt = src_md->data_type != dnnl_f32;
	if (l->cvt) {
		/* src is (N,C,h,w) (after global pooling, h = w = 1): a few KB. */
		if (cpu_md4(c, &src_f32_md, n, ch, h, w, dnnl_nchw) < 0 ||
		    cpu_reorder_make(c, &l->src_to_f32, src_md, &src_f32_md) < 0 ||
		    cpu_reorder_make(c, &l->dsrc_from_f32, &src_f32_md, src_md) < 0)
			goto fail;
		CHECK((l->src_f32 = cpu_mem(c, &src_f32_md, NULL)) &&
			      (l->dsrc_f32 = cpu_mem(c, &src_f32_md, NULL)),
		      "%s", c->err);
		src_md = &src_f32_md;
	}
	l->has_bwd_data = need_bwd_data;
	if (cpu_md(c, &w_any, 4, wdims, dnnl_format_tag_any) < 0 ||
	    cpu_md(c, &l->wt.plain_md, 4, wdims, dnnl_oihw) < 0 || cpu_md(c, &b_md, 1, bdims, dnnl_x) < 0 ||
	    cpu_md(c, &l->dst_md, 2, ddims, dnnl_nc) < 0)
		goto fail;
	DN(dnnl_inner_product_forward_desc_init(&fd, dnnl_forward_training, src_md, &w_any,
						has_bias ? &b_md : NULL, &l->dst_md));
	if (!(fpd = cpu_pd(c, &fd, NULL, NULL)) || cpu_prim_make(c, &l->fwd, fpd) < 0)
		goto fail;
	l->wt.fwd_md = *cpu_query(fpd, dnnl_query_weights_md);
	if (!(l->bias = cpu_view(c, &b_md)) || !(l->dbias = cpu_view(c, &b_md)))
		goto fail;

	DN(dnnl_inner_product_backward_weights_desc_init(&bwd, src_md, &w_any,
							 has_bias ? &b_md : NULL, &l->dst_md));
	if (!(bwpd = cpu_pd(c, &bwd, NULL, fpd)) || cpu_prim_make(c, &l->bwd_w, bwpd) < 0)
		goto fail;
	l->wt.dw_md = *cpu_query(bwpd, dnnl_query_diff_weights_md);

	if (need_bwd_data) {
		DN(dnnl_inner_product_backward_data_desc_init(&bdd, src_md, &w_any, &l->dst_md));
		if (!(bdpd = cpu_pd(c, &bdd, NULL, fpd)) || cpu_prim_make(c, &l->bwd_data, bdpd) < 0)
			goto fail;
		l->wt.bwd_md = *cpu_query(bdpd, dnnl_query_weights_md);
		l->wt.has_bwd = 1;
	}
	return 0;
fail:
	return -1;
}

int cpu_fc_forward_exec(struct cpu_ctx *c, struct cpu_fc *l, const float *w, const float *b,
			dnnl_memory_t src, dnnl_memory_t dst)
{
	if (cpu_weights_load_fwd(c, &l->wt, w) < 0)
		return -1;
	if (l->has_bias && cpu_set_handle(c, l->bias, b) < 0)
		return -1;
	if (l->cvt) {
		if (cpu_reorder(c, &l->src_to_f32, src, l->src_f32) < 0)
			return -1;
		src = l->src_f32;
	}
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, src }, { DNNL_ARG_DST, dst },
				{ DNNL_ARG_WEIGHTS, l->wt.fwd }, { DNNL_ARG_BIAS, l->bias } };
	return cpu_exec(c, &l->fwd, l->has_bias ? 4 : 3, a);
}

int cpu_fc_backward_exec(struct cpu_ctx *c, struct cpu_fc *l, const float *w, float *dw,
			 float *db, dnnl_memory_t src, dnnl_memory_t diff_dst,
			 dnnl_memory_t diff_src)
{
	if (cpu_weights_dw_begin(c, &l->wt, dw) < 0)
		return -1;
	if (l->has_bias && cpu_set_handle(c, l->dbias, db) < 0)
		return -1;
	/* Forward left this step's f32 copy of src in src_f32. */
	if (l->cvt)
		src = l->src_f32;
	dnnl_exec_arg_t aw[] = { { DNNL_ARG_SRC, src }, { DNNL_ARG_DIFF_DST, diff_dst },
				 { DNNL_ARG_DIFF_WEIGHTS, l->wt.dw }, { DNNL_ARG_DIFF_BIAS, l->dbias } };
	if (cpu_exec(c, &l->bwd_w, l->has_bias ? 4 : 3, aw) < 0 || cpu_weights_dw_end(c, &l->wt) < 0)
		return -1;
	if (!diff_src || !l->has_bwd_data)
		return 0;
	if (cpu_weights_load_bwd(c, &l->wt, w) < 0)
		return -1;
	dnnl_exec_arg_t ad[] = { { DNNL_ARG_DIFF_DST, diff_dst }, { DNNL_ARG_WEIGHTS, l->wt.bwd },
				 { DNNL_ARG_DIFF_SRC, l->cvt ? l->dsrc_f32 : diff_src } };
	if (cpu_exec(c, &l->bwd_data, 3, ad) < 0)
		return -1;
	return l->cvt ? cpu_reorder(c, &l->dsrc_from_f32, l->dsrc_f32, diff_src) : 0;
}
