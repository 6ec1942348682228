#include "config.h"

#include "engine/cpu/cpu_layers.h"

/* relu_use_dst_for_bwd: backward needs only the forward output, which the
 * network keeps anyway, and may then run in place on the diff. */
int cpu_relu_init(struct cpu_ctx *c, struct cpu_relu *l, const dnnl_memory_desc_t *md)
{
	dnnl_eltwise_desc_t fd, bd;
	dnnl_primitive_desc_t fpd, bpd;
	DN(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training,
					  dnnl_eltwise_relu_use_dst_for_bwd, md, 0.f, 0.f));
	DN(dnnl_eltwise_backward_desc_init(&bd, dnnl_eltwise_relu_use_dst_for_bwd, md, md, 0.f,
					   0.f));
	if (!(fpd = cpu_pd(c, &fd, NULL, NULL)) || cpu_prim_make(c, &l->fwd, fpd) < 0 ||
	    !(bpd = cpu_pd(c, &bd, NULL, fpd)) || cpu_prim_make(c, &l->bwd, bpd) < 0)
		goto fail;
	return 0;
fail:
	return -1;
}

int cpu_relu_forward_exec(struct cpu_ctx *c, struct cpu_relu *l, dnnl_memory_t src,
			  dnnl_memory_t dst)
{
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, src }, { DNNL_ARG_DST, dst } };
	return cpu_exec(c, &l->fwd, 2, a);
}

int cpu_relu_backward_exec(struct cpu_ctx *c, struct cpu_relu *l, dnnl_memory_t dst,
			   dnnl_memory_t diff_dst, dnnl_memory_t diff_src)
{
	dnnl_exec_arg_t a[] = { { DNNL_ARG_DST, dst },
				{ DNNL_ARG_DIFF_DST, diff_dst },
				{ DNNL_ARG_DIFF_SRC, diff_src } };
	return cpu_exec(c, &l->bwd, 3, a);
}

/* Residual add as a binary primitive with the block's final ReLU as a
 * post-op, so the sum is written once. */
int cpu_add_init(struct cpu_ctx *c, struct cpu_add *l, const dnnl_memory_desc_t *md0,
		 const dnnl_memory_desc_t *md1, int relu)
{
	dnnl_binary_desc_t bd;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd;
	int rv = -1;

	l->relu = relu;
	DN(dnnl_binary_desc_init(&bd, dnnl_binary_add, md0, md1, md0));
	DN(dnnl_primitive_attr_clone(&attr, c->attr));
	if (relu) {
		DN(dnnl_post_ops_create(&po));
		DN(dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0.f, 0.f));
		DN(dnnl_primitive_attr_set_post_ops(attr, po));
		if (cpu_relu_init(c, &l->relu_l, md0) < 0)
			goto fail;
	}
	if (!(pd = cpu_pd(c, &bd, attr, NULL)) || cpu_prim_make(c, &l->fwd, pd) < 0)
		goto fail;
	rv = 0;
fail:
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return rv;
}

int cpu_add_forward_exec(struct cpu_ctx *c, struct cpu_add *l, dnnl_memory_t src0,
			 dnnl_memory_t src1, dnnl_memory_t dst)
{
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC_0, src0 }, { DNNL_ARG_SRC_1, src1 },
				{ DNNL_ARG_DST, dst } };
	return cpu_exec(c, &l->fwd, 3, a);
}
