#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_layers.h"
#include "engine/cpu/cpu_ops.h"

/* A tensor as the caller holds it (plain) and as the layer holds it. */
struct io {
	dnnl_memory_t plain, blk;
	struct cpu_prim to_blk, to_plain;
};

static int io_make(struct cpu_ctx *c, struct io *t, const dnnl_memory_desc_t *plain_md,
		   const dnnl_memory_desc_t *blk_md)
{
	if (!(t->plain = cpu_view(c, plain_md)) || !(t->blk = cpu_mem(c, blk_md, NULL)) ||
	    cpu_reorder_make(c, &t->to_blk, plain_md, blk_md) < 0 ||
	    cpu_reorder_make(c, &t->to_plain, blk_md, plain_md) < 0)
		return -1;
	return 0;
}

static int io_in(struct cpu_ctx *c, struct io *t, const float *src)
{
	if (cpu_set_handle(c, t->plain, src) < 0)
		return -1;
	return cpu_reorder(c, &t->to_blk, t->plain, t->blk);
}

static int io_out(struct cpu_ctx *c, struct io *t, float *dst)
{
	if (cpu_set_handle(c, t->plain, dst) < 0)
		return -1;
	return cpu_reorder(c, &t->to_plain, t->blk, t->plain);
}

/* The layout the network keeps activations in between layers. */
static int blocked(struct cpu_ctx *c, dnnl_memory_desc_t *md, int n, int ch, int h, int w)
{
	return cpu_md4_dt(c, md, n, ch, h, w, c->act_dt, dnnl_nChw16c);
}

static int finish(struct cpu_ctx *c, int rv, char *err, size_t errlen)
{
	if (rv < 0)
		dl_errf(err, errlen, "%s", c->err[0] ? c->err : "cpu op failed");
	cpu_ctx_destroy(c);
	return rv;
}

/* CONV_BWD_DATA_ACC: backward-data adding into out (cpu_conv_acc_init). */
enum conv_mode { CONV_FWD, CONV_BWD_DATA, CONV_BWD_W, CONV_BWD_DATA_ACC };

static int conv_run(enum conv_mode mode, const float *x, const float *w, const float *dy,
		    float *out, int n, int ci, int h, int wd, int co, int k, int stride, int pad,
		    int bf16, int algo, int *winograd, char *err, size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_conv l;
	struct io tx, ty;
	dnnl_memory_desc_t xp, yp, xb;
	int ho = (h + 2 * pad - k) / stride + 1, wo = (wd + 2 * pad - k) / stride + 1;
	int rv = -1;
	float *dw = NULL, *zeros = NULL;
	if (cpu_ctx_init(c) < 0)
		goto out;
	if (bf16)
		c->act_dt = dnnl_bf16;
	c->conv_algo = algo;
	if (blocked(c, &xb, n, ci, h, wd) < 0 ||
	    cpu_conv_init(c, &l, ci == 3 ? NULL : &xb, n, ci, h, wd, co, k, stride, pad,
			  mode == CONV_BWD_DATA || mode == CONV_BWD_DATA_ACC) < 0 ||
	    cpu_md4(c, &xp, n, ci, h, wd, dnnl_nchw) < 0 ||
	    cpu_md4(c, &yp, n, co, ho, wo, dnnl_nchw) < 0 || io_make(c, &tx, &xp, &l.src_md) < 0 ||
	    io_make(c, &ty, &yp, &l.dst_md) < 0)
		goto out;
	/* Backward-data as the network runs it: a forward convolution where
	 * the layer qualifies, else oneDNN's backward-data. */
	if (mode == CONV_BWD_DATA || mode == CONV_BWD_DATA_ACC) {
		int acc = cpu_conv_acc_init(c, &l, ci, co, k, stride, pad, mode == CONV_BWD_DATA_ACC);
		if (acc < 0)
			goto out;
		CHECK(acc == 1 || mode == CONV_BWD_DATA,
		      "conv %d->%d k%d s%d p%d: no accumulating backward-data", ci, co, k, stride,
		      pad);
	}
	if (cpu_conv_finish(c, &l, 0) < 0 || cpu_ctx_finalize(c) < 0)
		goto out;
	size_t wcount = (size_t)co * ci * k * k;
	if (winograd)
		*winograd = l.own_dw ? 3 : l.col_dw ? 4 : l.winograd;
	if (mode == CONV_FWD) {
		if (io_in(c, &tx, x) < 0 || cpu_conv_forward_exec(c, &l, w, tx.blk, ty.blk) < 0 ||
		    io_out(c, &ty, out) < 0)
			goto out;
	} else if (mode == CONV_BWD_DATA || mode == CONV_BWD_DATA_ACC) {
		/* Backward also makes weight grads, from a zero src here. */
		dw = malloc(wcount * sizeof(float));
		zeros = calloc(wcount, sizeof(float));
		CHECK(dw && zeros, "out of memory");
		/* bwd may reuse the forward weight layout: load it as forward would. */
		if (cpu_conv_forward_exec(c, &l, w, tx.blk, ty.blk) < 0 || io_in(c, &ty, dy) < 0 ||
		    (mode == CONV_BWD_DATA_ACC && io_in(c, &tx, out) < 0) ||
		    cpu_conv_backward_exec(c, &l, w, dw, tx.blk, ty.blk, tx.blk) < 0 ||
		    io_out(c, &tx, out) < 0)
			goto out;
	} else {
		if (io_in(c, &tx, x) < 0 || io_in(c, &ty, dy) < 0 ||
		    cpu_conv_backward_exec(c, &l, w, out, tx.blk, ty.blk, NULL) < 0)
			goto out;
	}
	rv = 0;
out:
fail:
	free(dw);
	free(zeros);
	return finish(c, rv, err, errlen);
}

int cpu_conv_backward_data_acc(const float *dy, const float *w, float *dx, int n, int ci, int h,
			       int wd, int co, int k, int stride, int pad, int algo, int *winograd,
			       char *err, size_t errlen)
{
	return conv_run(CONV_BWD_DATA_ACC, NULL, w, dy, dx, n, ci, h, wd, co, k, stride, pad, 0,
			algo, winograd, err, errlen);
}

int cpu_conv_forward(const float *x, const float *w, float *y, int n, int ci, int h, int wd,
		     int co, int k, int stride, int pad, char *err, size_t errlen)
{
	return conv_run(CONV_FWD, x, w, NULL, y, n, ci, h, wd, co, k, stride, pad, 0, 0, NULL, err,
			errlen);
}

int cpu_conv_backward_data(const float *dy, const float *w, float *dx, int n, int ci, int h,
			   int wd, int co, int k, int stride, int pad, char *err, size_t errlen)
{
	return conv_run(CONV_BWD_DATA, NULL, w, dy, dx, n, ci, h, wd, co, k, stride, pad, 0, 0, NULL,
			err, errlen);
}

int cpu_conv_backward_weights(const float *x, const float *dy, float *dw, int n, int ci, int h,
			      int wd, int co, int k, int stride, int pad, char *err, size_t errlen)
{
	return conv_run(CONV_BWD_W, x, NULL, dy, dw, n, ci, h, wd, co, k, stride, pad, 0, 0, NULL,
			err, errlen);
}

int cpu_conv_bf16(int mode, const float *x, const float *w, const float *dy, float *out, int n,
		  int ci, int h, int wd, int co, int k, int stride, int pad, char *err,
		  size_t errlen)
{
	if (mode < 0 || mode > 2) {
		dl_errf(err, errlen, "cpu_conv_bf16: mode %d is not 0, 1 or 2", mode);
		return -1;
	}
	return conv_run((enum conv_mode)mode, x, w, dy, out, n, ci, h, wd, co, k, stride, pad, 1, 0,
			NULL, err, errlen);
}

int cpu_conv_algo(int mode, int algo, const float *x, const float *w, const float *dy,
		  float *out, int n, int ci, int h, int wd, int co, int k, int stride, int pad,
		  int *winograd, char *err, size_t errlen)
{
	if (mode < 0 || mode > 2) {
		dl_errf(err, errlen, "cpu_conv_algo: mode %d is not 0, 1 or 2", mode);
		return -1;
	}
	return conv_run((enum conv_mode)mode, x, w, dy, out, n, ci, h, wd, co, k, stride, pad, 0,
			algo, winograd, err, errlen);
}

static int bn_train_run(const float *x, const float *gamma, const float *beta, const float *dy,
			float *y, float *mean, float *var, float *dx, float *dgamma, float *dbeta,
			int n, int ch, int h, int w, int relu, float eps, int bf16, char *err,
			size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_bn l;
	struct io tx, ty, tdy, tdx;
	dnnl_memory_desc_t p, bl;
	int rv = -1;
	if (cpu_ctx_init(c) == 0 && bf16)
		c->act_dt = dnnl_bf16;
	if (c->err[0] || cpu_md4(c, &p, n, ch, h, w, dnnl_nchw) < 0 ||
	    blocked(c, &bl, n, ch, h, w) < 0 || cpu_bn_init(c, &l, &bl, ch, relu, eps) < 0 ||
	    io_make(c, &tx, &p, &bl) < 0 || io_make(c, &ty, &p, &bl) < 0 ||
	    io_make(c, &tdy, &p, &bl) < 0 || io_make(c, &tdx, &p, &bl) < 0 ||
	    cpu_ctx_finalize(c) < 0)
		goto out;
	if (io_in(c, &tx, x) < 0 ||
	    cpu_bn_forward_train_exec(c, &l, gamma, beta, tx.blk, ty.blk) < 0 ||
	    io_out(c, &ty, y) < 0 || io_in(c, &tdy, dy) < 0 ||
	    cpu_bn_backward_exec(c, &l, gamma, dgamma, dbeta, tx.blk, tdy.blk, tdx.blk) < 0 ||
	    io_out(c, &tdx, dx) < 0)
		goto out;
	memcpy(mean, cpu_handle(l.mean), sizeof(float) * ch);
	memcpy(var, cpu_handle(l.var), sizeof(float) * ch);
	rv = 0;
out:
	return finish(c, rv, err, errlen);
}

int cpu_bn_train(const float *x, const float *gamma, const float *beta, const float *dy,
		 float *y, float *mean, float *var, float *dx, float *dgamma, float *dbeta, int n,
		 int ch, int h, int w, int relu, float eps, char *err, size_t errlen)
{
	return bn_train_run(x, gamma, beta, dy, y, mean, var, dx, dgamma, dbeta, n, ch, h, w, relu,
			    eps, 0, err, errlen);
}

int cpu_bn_train_bf16(const float *x, const float *gamma, const float *beta, const float *dy,
		      float *y, float *mean, float *var, float *dx, float *dgamma, float *dbeta,
		      int n, int ch, int h, int w, int relu, float eps, char *err, size_t errlen)
{
	return bn_train_run(x, gamma, beta, dy, y, mean, var, dx, dgamma, dbeta, n, ch, h, w, relu,
			    eps, 1, err, errlen);
}

int cpu_bn_eval(const float *x, const float *gamma, const float *beta, const float *mean,
		const float *var, float *y, int n, int ch, int h, int w, int relu, float eps,
		char *err, size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_bn l;
	struct io tx, ty;
	dnnl_memory_desc_t p, bl;
	int rv = -1;
	if (cpu_ctx_init(c) < 0 || cpu_md4(c, &p, n, ch, h, w, dnnl_nchw) < 0 ||
	    blocked(c, &bl, n, ch, h, w) < 0 || cpu_bn_init(c, &l, &bl, ch, relu, eps) < 0 ||
	    io_make(c, &tx, &p, &bl) < 0 || io_make(c, &ty, &p, &bl) < 0 ||
	    cpu_ctx_finalize(c) < 0)
		goto out;
	if (io_in(c, &tx, x) < 0 ||
	    cpu_bn_forward_eval_exec(c, &l, gamma, beta, mean, var, tx.blk, ty.blk) < 0 ||
	    io_out(c, &ty, y) < 0)
		goto out;
	rv = 0;
out:
	return finish(c, rv, err, errlen);
}

int cpu_bn_own_kernels(int n, int ch, int h, int w)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_bn l;
	dnnl_memory_desc_t bl;
	int rv = -1;
	if (cpu_ctx_init(c) < 0 || blocked(c, &bl, n, ch, h, w) < 0 ||
	    cpu_bn_init(c, &l, &bl, ch, 0, 1e-5f) < 0)
		goto out;
	rv = l.blk;
out:
	cpu_ctx_destroy(c);
	return rv;
}

int cpu_bn_add(const float *x, const float *gamma, const float *beta, const float *s,
	       const float *run_mean, const float *run_var, float *z, float *mean, float *var,
	       int n, int ch, int h, int w, int relu, float eps, char *err, size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_bn l;
	struct io tx, ts, tz;
	dnnl_memory_desc_t p, bl;
	int rv = -1;
	if (cpu_ctx_init(c) < 0 || cpu_md4(c, &p, n, ch, h, w, dnnl_nchw) < 0 ||
	    blocked(c, &bl, n, ch, h, w) < 0 || cpu_bn_init(c, &l, &bl, ch, 0, eps) < 0 ||
	    io_make(c, &tx, &p, &bl) < 0 || io_make(c, &ts, &p, &bl) < 0 ||
	    io_make(c, &tz, &p, &bl) < 0 || cpu_ctx_finalize(c) < 0)
		goto out;
	CHECK(l.blk, "cpu_bn_add: n%d c%d %dx%d does not run the own batch norm kernels", n, ch,
	      h, w);
	if (io_in(c, &tx, x) < 0 || io_in(c, &ts, s) < 0 ||
	    cpu_bn_blk_prepare(c, &l, gamma, beta, run_mean, run_var, tx.blk) < 0 ||
	    cpu_bn_blk_apply(c, &l, tx.blk, ts.blk, NULL, tz.blk, relu, NULL) < 0 || io_out(c, &tz, z) < 0)
		goto out;
	if (!run_mean) {
		memcpy(mean, cpu_handle(l.mean), sizeof(float) * ch);
		memcpy(var, cpu_handle(l.var), sizeof(float) * ch);
	}
	rv = 0;
out:
fail:
	return finish(c, rv, err, errlen);
}

int cpu_relu(const float *x, const float *dy, float *y, float *dx, int n, int ch, int h, int w,
	     char *err, size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_relu l;
	struct io tx, ty, tdy, tdx;
	dnnl_memory_desc_t p, bl;
	int rv = -1;
	if (cpu_ctx_init(c) < 0 || cpu_md4(c, &p, n, ch, h, w, dnnl_nchw) < 0 ||
	    blocked(c, &bl, n, ch, h, w) < 0 || cpu_relu_init(c, &l, &bl) < 0 ||
	    io_make(c, &tx, &p, &bl) < 0 || io_make(c, &ty, &p, &bl) < 0 ||
	    io_make(c, &tdy, &p, &bl) < 0 || io_make(c, &tdx, &p, &bl) < 0 ||
	    cpu_ctx_finalize(c) < 0)
		goto out;
	if (io_in(c, &tx, x) < 0 || cpu_relu_forward_exec(c, &l, tx.blk, ty.blk) < 0 ||
	    io_out(c, &ty, y) < 0 || io_in(c, &tdy, dy) < 0 ||
	    cpu_relu_backward_exec(c, &l, ty.blk, tdy.blk, tdx.blk) < 0 || io_out(c, &tdx, dx) < 0)
		goto out;
	rv = 0;
out:
	return finish(c, rv, err, errlen);
}

int cpu_add(const float *a, const float *b, const float *dy, float *y, float *dsum, int n,
	    int ch, int h, int w, int relu, char *err, size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_add l;
	struct io ta, tb, ty, tdy;
	dnnl_memory_desc_t p, bl;
	int rv = -1;
	if (cpu_ctx_init(c) < 0 || cpu_md4(c, &p, n, ch, h, w, dnnl_nchw) < 0 ||
	    blocked(c, &bl, n, ch, h, w) < 0 || cpu_add_init(c, &l, &bl, &bl, relu) < 0 ||
	    io_make(c, &ta, &p, &bl) < 0 || io_make(c, &tb, &p, &bl) < 0 ||
	    io_make(c, &ty, &p, &bl) < 0 || io_make(c, &tdy, &p, &bl) < 0 ||
	    cpu_ctx_finalize(c) < 0)
		goto out;
	if (io_in(c, &ta, a) < 0 || io_in(c, &tb, b) < 0 ||
	    cpu_add_forward_exec(c, &l, ta.blk, tb.blk, ty.blk) < 0 || io_out(c, &ty, y) < 0 ||
	    io_in(c, &tdy, dy) < 0)
		goto out;
	/* As in the network: the fused ReLU's backward runs in place on dy. */
	if (relu && cpu_relu_backward_exec(c, &l.relu_l, ty.blk, tdy.blk, tdy.blk) < 0)
		goto out;
	if (io_out(c, &tdy, dsum) < 0)
		goto out;
	rv = 0;
out:
	return finish(c, rv, err, errlen);
}

static int pool_run(const float *x, const float *dy, float *y, float *dx, int n, int ch, int h,
		    int w, int k, int stride, int pad, char *err, size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_pool l;
	struct io tx, ty, tdy, tdx;
	dnnl_memory_desc_t p, bl, yp;
	int gap = k == 0;
	int ho = gap ? 1 : (h + 2 * pad - k) / stride + 1, wo = gap ? 1 : (w + 2 * pad - k) / stride + 1;
	int rv = -1;
	if (cpu_ctx_init(c) < 0 || cpu_md4(c, &p, n, ch, h, w, dnnl_nchw) < 0 ||
	    cpu_md4(c, &yp, n, ch, ho, wo, dnnl_nchw) < 0 || blocked(c, &bl, n, ch, h, w) < 0 ||
	    cpu_pool_init(c, &l, &bl, n, ch, h, w, k, stride, pad) < 0 ||
	    io_make(c, &tx, &p, &bl) < 0 || io_make(c, &ty, &yp, &l.dst_md) < 0 ||
	    io_make(c, &tdy, &yp, &l.dst_md) < 0 || io_make(c, &tdx, &p, &bl) < 0 ||
	    cpu_ctx_finalize(c) < 0)
		goto out;
	if (io_in(c, &tx, x) < 0 || cpu_pool_forward_exec(c, &l, tx.blk, ty.blk) < 0 ||
	    io_out(c, &ty, y) < 0 || io_in(c, &tdy, dy) < 0 ||
	    cpu_pool_backward_exec(c, &l, tdy.blk, tdx.blk) < 0 || io_out(c, &tdx, dx) < 0)
		goto out;
	rv = 0;
out:
	return finish(c, rv, err, errlen);
}

int cpu_maxpool(const float *x, const float *dy, float *y, float *dx, int n, int ch, int h, int w,
		int k, int stride, int pad, char *err, size_t errlen)
{
	if (k < 1) {
		dl_errf(err, errlen, "cpu_maxpool: kernel %d must be >= 1", k);
		return -1;
	}
	return pool_run(x, dy, y, dx, n, ch, h, w, k, stride, pad, err, errlen);
}

int cpu_gap(const float *x, const float *dy, float *y, float *dx, int n, int ch, int h, int w,
	    char *err, size_t errlen)
{
	return pool_run(x, dy, y, dx, n, ch, h, w, 0, 1, 0, err, errlen);
}

int cpu_fc(const float *x, const float *w, const float *b, const float *dy, float *y, float *dx,
	   float *dw, float *db, int n, int ch, int k, char *err, size_t errlen)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_fc l;
	struct io tx, tdx;
	dnnl_memory_desc_t p, bl;
	dnnl_memory_t ym = NULL, dym = NULL;
	int rv = -1;
	/* The network feeds FC from a (N,C,1,1) blocked pooled tensor. */
	if (cpu_ctx_init(c) < 0 || cpu_md4(c, &p, n, ch, 1, 1, dnnl_nchw) < 0 ||
	    blocked(c, &bl, n, ch, 1, 1) < 0 || cpu_fc_init(c, &l, &bl, n, ch, 1, 1, k, 1, 1) < 0 ||
	    io_make(c, &tx, &p, &bl) < 0 || io_make(c, &tdx, &p, &bl) < 0 ||
	    cpu_weights_finish(c, &l.wt, 0, 0) < 0 || !(ym = cpu_view(c, &l.dst_md)) ||
	    !(dym = cpu_view(c, &l.dst_md)) || cpu_ctx_finalize(c) < 0)
		goto out;
	if (cpu_set_handle(c, ym, y) < 0 || cpu_set_handle(c, dym, dy) < 0 || io_in(c, &tx, x) < 0 ||
	    cpu_fc_forward_exec(c, &l, w, b, tx.blk, ym) < 0 ||
	    cpu_fc_backward_exec(c, &l, w, dw, db, tx.blk, dym, tdx.blk) < 0 ||
	    io_out(c, &tdx, dx) < 0)
		goto out;
	rv = 0;
out:
	return finish(c, rv, err, errlen);
}
