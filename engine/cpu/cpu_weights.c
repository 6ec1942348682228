#include "config.h"

#include "engine/cpu/cpu_layers.h"

/* A memory for layout md standing in for the caller's view `user` (layout
 * res): user itself where they agree (*reorder untouched), else a buffer
 * (own: one of the layer's own, else the shared temporary tmp) and in
 * *reorder the reorder from it into res (into_user) or from res into it. */
static dnnl_memory_t pass_mem(struct cpu_ctx *c, const dnnl_memory_desc_t *md,
			      const dnnl_memory_desc_t *res, dnnl_memory_t user, int own,
			      enum cpu_tmp tmp, int into_user, struct cpu_prim *reorder)
{
	dnnl_memory_t m;
	if (cpu_md_eq(md, res))
		return user;
	if (!(m = own ? cpu_mem(c, md, NULL) : cpu_tmp_mem(c, md, tmp)))
		return NULL;
	if (into_user ? cpu_reorder_make(c, reorder, md, res) < 0 : cpu_reorder_make(c, reorder, res, md) < 0)
		return NULL;
	return m;
}

int cpu_weights_finish(struct cpu_ctx *c, struct cpu_weights *wt, int resident_ok, int bwd_off)
{
	const dnnl_memory_desc_t *f = &wt->fwd_md;
	/* Plain blocked f32 only (not a kernel-specific format such as
	 * Winograd's transformed weights): SGD, LARS norms and the layout
	 * check across ranks read it as an array of floats with zero padding. */
	wt->resident = resident_ok && f->data_type == dnnl_f32 && f->format_kind == dnnl_blocked &&
		       !cpu_md_eq(f, &wt->plain_md);
	wt->res_md = wt->resident ? *f : wt->plain_md;
	/* Errors: cpu_view, cpu_mem and cpu_reorder_make have set c->err. */
	if (!(wt->user = cpu_view(c, &wt->res_md)) || !(wt->duser = cpu_view(c, &wt->res_md)))
		return -1;
	/* The forward's weights are kept to backward, which may read them. */
	if (!(wt->fwd = pass_mem(c, f, &wt->res_md, wt->user, 1, CPU_TMP_W0, 0, &wt->to_fwd)) ||
	    !(wt->dw = pass_mem(c, &wt->dw_md, &wt->res_md, wt->duser, 0, CPU_TMP_W1, 1, &wt->dw_to_user)))
		return -1;
	wt->bwd = NULL;
	if (wt->has_bwd && !bwd_off)
		wt->bwd = cpu_md_eq(&wt->bwd_md, f) ?
				  wt->fwd :
				  pass_mem(c, &wt->bwd_md, &wt->res_md, wt->user, 0, CPU_TMP_W0, 0, &wt->to_bwd);
	if (wt->has_bwd && !bwd_off && !wt->bwd)
		return -1;
	return wt->resident;
}

int cpu_weights_load_fwd(struct cpu_ctx *c, struct cpu_weights *wt, const float *w)
{
	if (cpu_set_handle(c, wt->user, w) < 0)
		return -1;
	if (!wt->to_fwd.p)
		return 0;
	c->wreorders[CPU_WREORDER_FWD]++;
	return cpu_reorder(c, &wt->to_fwd, wt->user, wt->fwd);
}

int cpu_weights_load_bwd(struct cpu_ctx *c, struct cpu_weights *wt, const float *w)
{
	if (cpu_set_handle(c, wt->user, w) < 0)
		return -1;
	if (!wt->to_bwd.p)
		return 0;
	c->wreorders[CPU_WREORDER_BWD]++;
	return cpu_reorder(c, &wt->to_bwd, wt->user, wt->bwd);
}

int cpu_weights_dw_begin(struct cpu_ctx *c, struct cpu_weights *wt, float *dw)
{
	return cpu_set_handle(c, wt->duser, dw);
}

int cpu_weights_dw_end(struct cpu_ctx *c, struct cpu_weights *wt)
{
	if (!wt->dw_to_user.p)
		return 0;
	c->wreorders[CPU_WREORDER_DW]++;
	return cpu_reorder(c, &wt->dw_to_user, wt->dw, wt->duser);
}
