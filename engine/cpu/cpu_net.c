#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <time.h>

#include "common/err.h"
#include "engine/comm_async.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_layers.h"
#include "engine/loss.h"

/* Where the gradient of one node input goes: straight into the value's diff
 * when this node is the last reader in forward order (the first in backward),
 * else into the shared temporary, then added to the value's diff. */
struct grad_sink {
	int direct;           /* also set where the producer adds into the diff itself (conv acc) */
	int alias;            /* ADD only: the diff is the add output's diff buffer, nothing to do */
	dnnl_memory_t tmp;
	struct cpu_prim acc;  /* dval[v] += tmp */
	struct cpu_prim copy; /* ADD only: dval[out] -> target (layouts may differ) */
};

struct cpu_node {
	struct cpu_conv conv;
	struct cpu_bn bn;
	struct cpu_relu relu;
	struct cpu_add add;
	struct cpu_pool pool;
	struct cpu_fc fc;
	struct grad_sink sink[2];
	/* BN + residual add fusion: bn_in_add on the BN node (forward only
	 * folds the statistics, the ADD node writes relu(bn(x) + s) in one
	 * pass, so the BN output is never stored); add_bn on the ADD node: the
	 * BN node's index + 1 (0: none), add_bn_j the input it feeds; add_bn2:
	 * the same for a BN on the other input (a downsampling block's
	 * shortcut), normalized in the same pass, its output never stored
	 * either. */
	int bn_in_add;
	int add_bn, add_bn_j, add_bn2;
	/* The residual ReLU's mask (ADD node with add_bn and a ReLU): written
	 * by the training forward, one bit per value, and applied by the BN
	 * node just before the ADD in the graph in its backward's sums pass,
	 * on the add's gradient buffer that both add inputs share, instead of
	 * a ReLU backward pass reading the add's output (relu_mask_ok). */
	uint16_t *relu_mask;
};

struct dl_backend {
	struct dl_graph *g;
	int n;
	struct cpu_ctx c;
	dnnl_memory_desc_t *vmd; /* per value, the layout it lives in */
	int *vmd_set;
	dnnl_memory_t *val, *dval;
	/* Diffs live only from their first gradient (the last reader's
	 * backward) to their producer's backward, so they share a pool of
	 * buffers: about half the memory of one buffer per value. */
	void **pool;
	size_t *pool_size;
	int *pool_busy, n_pool; /* pool_busy: how many live diffs use the buffer */
	int *dval_zero;          /* values nobody reads: their diff is zero */
	struct cpu_node *nodes;
	int *param_used; /* per param, how many nodes read it */
	/* Resident weights (cpu_weights_finish): per param, the weights in
	 * the layer's blocked layout res_md (wres NULL: plain, g's array), how
	 * many floats that layout holds, and views + reorders between it and
	 * torchvision's plain layout for the boundaries (state in/out, tests). */
	float **wres;
	dnnl_memory_desc_t *res_md;
	size_t *res_count;
	dnnl_memory_t *res_plain, *res_blk;
	struct cpu_prim *res_in, *res_out;
	dnnl_memory_t in_user;   /* the caller's plain (N,C,H,W) image batch */
	struct cpu_prim in_reorder;
	int trained;
	/* Training state besides g's float32 params and BN buffers (the
	 * master copies): gradients in the reducer's flat buffer (written
	 * there by backward, reduced across ranks from it), momentum per
	 * param, steps taken. */
	struct dl_backend_opts o;
	struct dl_reducer *red;
	int *order;            /* params in backward order */
	float **mom;
	struct dl_sgd_param *sgd;
	float *dlogits;        /* (N,K) */
	long steps;
	char err[256];
};

static size_t value_count(const struct dl_backend *b, int v)
{
	const struct dl_shape *s = &b->g->values[v];
	return (size_t)b->n * s->c * s->h * s->w;
}

/* Param p's weights as the layers take them: resident or g's plain array. */
static float *wdata(struct dl_backend *b, int p)
{
	return b->wres[p] ? b->wres[p] : b->g->params[p].data;
}

/* Param p (resident) between its blocked layout at blk and plain at plain,
 * either way (to_plain). */
static int res_copy(struct dl_backend *b, int p, void *blk, void *plain, int to_plain)
{
	struct cpu_ctx *c = &b->c;
	if (cpu_set_handle(c, b->res_blk[p], blk) < 0 || cpu_set_handle(c, b->res_plain[p], plain) < 0)
		return -1;
	if (to_plain)
		return cpu_reorder(c, &b->res_out[p], b->res_blk[p], b->res_plain[p]);
	return cpu_reorder(c, &b->res_in[p], b->res_plain[p], b->res_blk[p]);
}

static void cpu_destroy(struct dl_backend *b)
{
	if (!b)
		return;
	cpu_ctx_destroy(&b->c);
	free(b->vmd);
	free(b->vmd_set);
	free(b->val);
	free(b->dval);
	for (int i = 0; i < b->n_pool; i++)
		free(b->pool[i]);
	free(b->pool);
	free(b->pool_size);
	free(b->pool_busy);
	free(b->dval_zero);
	free(b->nodes);
	free(b->param_used);
	free(b->wres); /* the buffers are the ctx's (cpu_alloc) */
	free(b->res_md);
	free(b->res_count);
	free(b->res_plain);
	free(b->res_blk);
	free(b->res_in);
	free(b->res_out);
	for (int i = 0; b->mom && i < b->g->n_params; i++)
		free(b->mom[i]);
	free(b->mom);
	free(b->sgd);
	free(b->order);
	free(b->dlogits);
	dl_reducer_destroy(b->red);
	free(b);
}

static int sink_init(struct dl_backend *b, struct grad_sink *s, int v, int direct,
		     const dnnl_memory_desc_t *from_md)
{
	struct cpu_ctx *c = &b->c;
	const dnnl_memory_desc_t *md = &b->vmd[v];
	s->direct = direct;
	if (!direct) {
		dnnl_binary_desc_t bd;
		dnnl_primitive_desc_t pd;
		if (!(s->tmp = cpu_tmp_mem(c, md, CPU_TMP_DIFF)))
			goto fail;
		DN(dnnl_binary_desc_init(&bd, dnnl_binary_add, md, md, md));
		if (!(pd = cpu_pd(c, &bd, NULL, NULL)) || cpu_prim_make(c, &s->acc, pd) < 0)
			goto fail;
	}
	if (from_md && cpu_reorder_make(c, &s->copy, from_md, md) < 0)
		goto fail;
	return 0;
fail:
	return -1;
}

static dnnl_memory_t sink_target(struct dl_backend *b, struct grad_sink *s, int v)
{
	return s->direct ? b->dval[v] : s->tmp;
}

static int sink_finish(struct dl_backend *b, struct grad_sink *s, int v)
{
	if (s->direct)
		return 0;
	dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC_0, b->dval[v] }, { DNNL_ARG_SRC_1, s->tmp },
				{ DNNL_ARG_DST, b->dval[v] } };
	return cpu_exec(&b->c, &s->acc, 3, a);
}

/* Layout of value v for a reader that cannot choose: plain NCHW if nobody
 * has fixed it yet (only the graph input can be unset here). */
static int need_md(struct dl_backend *b, int v)
{
	struct cpu_ctx *c = &b->c;
	const struct dl_shape *s = &b->g->values[v];
	if (b->vmd_set[v])
		return 0;
	if (cpu_md4(c, &b->vmd[v], b->n, s->c, s->h, s->w, dnnl_nchw) < 0)
		return -1;
	b->vmd_set[v] = 1;
	return 0;
}

/* An add's backward hands its output diff to both inputs unchanged.  Input
 * j may take over that buffer instead of a copy when it gets its first
 * gradient here in the same layout (the output diff is dead once the add's
 * backward ran).  Both inputs may share it when, in backward order, every
 * use of the one whose producer runs first (hi) is a read that ends with
 * that producer: hi has no other reader to add gradients into it and its
 * producer does not rewrite its dy in place (an ADD's fused ReLU does);
 * and nothing adds into the other one (lo) before that, i.e. lo's other
 * readers all come before hi's producer in forward order.  ResNet's blocks
 * qualify: bn3 (or the downsample BN) and the block input. */
static int add_alias_ok(const struct dl_graph *g, int i, int j, const int *seen)
{
	const struct dl_node *d = &g->nodes[i];
	int v = d->in[j], o = d->in[1 - j];
	if (v == g->input || seen[v] || v == o)
		return 0;
	if (o == g->input || seen[o])
		return 1; /* only v takes the buffer */
	int pv = -1, po = -1;
	for (int k = 0; k < i; k++) {
		if (g->nodes[k].out == v)
			pv = k;
		if (g->nodes[k].out == o)
			po = k;
	}
	if (pv < 0 || po < 0)
		return 0;
	int hi = pv > po ? v : o, lo = pv > po ? o : v, phi = pv > po ? pv : po;
	if (g->nodes[phi].kind == DL_NODE_ADD)
		return 0;
	for (int k = 0; k < g->n_nodes; k++) {
		const struct dl_node *e = &g->nodes[k];
		int nin = e->kind == DL_NODE_ADD ? 2 : 1;
		for (int m = 0; m < nin; m++) {
			if (k == i)
				continue;
			if (e->in[m] == hi || (e->in[m] == lo && k > phi))
				return 0;
		}
	}
	return 1;
}

/* Gives value v's diff a pool buffer (best fit among free ones, else a new
 * one); slot[v] remembers which. */
static int pool_acquire(struct dl_backend *b, int v, int *slot)
{
	struct cpu_ctx *c = &b->c;
	size_t need = dnnl_memory_desc_get_size(&b->vmd[v]);
	int best = -1;
	for (int i = 0; i < b->n_pool; i++)
		if (!b->pool_busy[i] && b->pool_size[i] >= need &&
		    (best < 0 || b->pool_size[i] < b->pool_size[best]))
			best = i;
	if (best < 0) {
		best = b->n_pool++;
		void *buf = cpu_aligned_alloc(need);
		CHECK(buf, "cpu backend: out of memory for a %zu-byte gradient buffer", need);
		memset(buf, 0, need); /* blocked layouts expect zero channel padding */
		b->pool[best] = buf;
		b->pool_size[best] = need;
	}
	b->pool_busy[best]++;
	slot[v] = best;
	CHECK(b->dval[v] = cpu_mem(c, &b->vmd[v], b->pool[best]), "%s", c->err);
	return 0;
fail:
	return -1;
}

/* Can ADD node i take over the normalization of the BN producing its
 * input j?  The BN must run the own kernels without a ReLU of its own, the
 * ADD must be its output's only reader, and both add inputs and the output
 * must share one layout (the kernel walks them with one offset). */
static int add_bn_fusable(struct dl_backend *b, int i, int j)
{
	const struct dl_graph *g = b->g;
	const struct dl_node *d = &g->nodes[i];
	int v = d->in[j], o = d->in[1 - j], p = -1, readers = 0;
	if (v == g->input || v == g->output || v == o)
		return 0;
	for (int k = 0; k < g->n_nodes; k++) {
		const struct dl_node *e = &g->nodes[k];
		if (e->out == v)
			p = k;
		for (int m = 0; m < (e->kind == DL_NODE_ADD ? 2 : 1); m++)
			readers += e->in[m] == v;
	}
	if (p < 0 || readers != 1 || g->nodes[p].kind != DL_NODE_BN || g->nodes[p].relu ||
	    !b->nodes[p].bn.blk || b->nodes[p].bn_in_add)
		return 0;
	return cpu_md_eq(&b->vmd[v], &b->vmd[o]) && cpu_md_eq(&b->vmd[v], &b->vmd[d->out]) ? p + 1 :
											     0;
}

/* Can the BN node just before ADD node i apply the add's ReLU mask in its
 * backward?  Then it is the first node whose backward reads the add's
 * gradient: its output feeds the add and takes over the add's gradient
 * buffer (alias), the add's other input shares that buffer too or is the
 * image (no copy of the unmasked gradient is ever made), it has no ReLU of
 * its own, runs the own kernels, and computes a dx (into another buffer). */
static int relu_mask_ok(const struct dl_backend *b, int i)
{
	const struct dl_graph *g = b->g;
	const struct dl_node *d = &g->nodes[i], *p = i > 0 ? &g->nodes[i - 1] : NULL;
	const struct cpu_node *cn = &b->nodes[i];
	int j;
	if (!d->relu || !cn->add_bn || !p || p->kind != DL_NODE_BN || p->relu || !b->nodes[i - 1].bn.blk ||
	    p->in[0] == g->input)
		return 0;
	for (j = 0; j < 2 && d->in[j] != p->out; j++)
		;
	if (j == 2 || d->in[0] == d->in[1] || !cn->sink[j].alias)
		return 0;
	return d->in[1 - j] == g->input || cn->sink[1 - j].alias;
}

static int build_node(struct dl_backend *b, int i)
{
	struct cpu_ctx *c = &b->c;
	struct dl_graph *g = b->g;
	const struct dl_node *d = &g->nodes[i];
	struct cpu_node *cn = &b->nodes[i];
	const struct dl_shape *xs = &g->values[d->in[0]], *ys = &g->values[d->out];
	int v0 = d->in[0], vo = d->out, n = b->n;
	int bwd_data = v0 != g->input;

	switch (d->kind) {
	case DL_NODE_CONV:
		if (cpu_conv_init(c, &cn->conv, b->vmd_set[v0] ? &b->vmd[v0] : NULL, n, xs->c, xs->h,
				  xs->w, ys->c, d->kernel, d->stride, d->pad, bwd_data) < 0)
			return -1;
		b->vmd[v0] = cn->conv.src_md;
		b->vmd_set[v0] = 1;
		b->vmd[vo] = cn->conv.dst_md;
		break;
	case DL_NODE_BN:
		if (need_md(b, v0) < 0 ||
		    cpu_bn_init(c, &cn->bn, &b->vmd[v0], xs->c, d->relu, g->bn_eps) < 0)
			return -1;
		b->vmd[vo] = b->vmd[v0];
		break;
	case DL_NODE_RELU:
		if (need_md(b, v0) < 0 || cpu_relu_init(c, &cn->relu, &b->vmd[v0]) < 0)
			return -1;
		b->vmd[vo] = b->vmd[v0];
		break;
	case DL_NODE_ADD:
		if (need_md(b, v0) < 0 || need_md(b, d->in[1]) < 0 ||
		    cpu_add_init(c, &cn->add, &b->vmd[v0], &b->vmd[d->in[1]], d->relu) < 0)
			return -1;
		b->vmd[vo] = b->vmd[v0];
		break;
	case DL_NODE_MAXPOOL:
	case DL_NODE_GAP:
		if (need_md(b, v0) < 0 ||
		    cpu_pool_init(c, &cn->pool, &b->vmd[v0], n, xs->c, xs->h, xs->w,
				  d->kind == DL_NODE_GAP ? 0 : d->kernel, d->stride, d->pad) < 0)
			return -1;
		b->vmd[vo] = cn->pool.dst_md;
		break;
	case DL_NODE_FC:
		if (need_md(b, v0) < 0 ||
		    cpu_fc_init(c, &cn->fc, &b->vmd[v0], n, xs->c, xs->h, xs->w, ys->c,
				d->param[1] >= 0, bwd_data) < 0)
			return -1;
		b->vmd[vo] = cn->fc.dst_md;
		break;
	default:
		dl_errf(c->err, sizeof(c->err), "cpu backend: node %d has unknown kind %d", i, (int)d->kind);
		return -1;
	}
	b->vmd_set[vo] = 1;
	return 0;
}

static struct dl_backend *cpu_build(struct dl_graph *g, int n, const struct dl_backend_opts *o, char *err,
				    size_t errlen)
{
	struct dl_backend *b = calloc(1, sizeof(*b));
	struct cpu_ctx *c = NULL;
	int *seen = NULL, *slot = NULL;
	if (!b) {
		dl_errf(err, errlen, "cpu backend: out of memory");
		return NULL;
	}
	b->g = g;
	b->n = n;
	if (cpu_ctx_init(&b->c) < 0) {
		dl_errf(err, errlen, "%s", b->c.err);
		cpu_destroy(b);
		return NULL;
	}
	c = &b->c;
	if (o && o->precision == DL_BF16)
		c->act_dt = dnnl_bf16;
	if (o)
		c->conv_algo = o->conv_algo;
	CHECK(o == NULL || (o->conv_algo >= DL_CONV_AUTO && o->conv_algo <= DL_CONV_WINOGRAD),
	      "cpu backend: unknown convolution algorithm %d", o ? o->conv_algo : 0);
	CHECK(n >= 1, "cpu backend: batch size %d must be >= 1", n);
	CHECK(g->n_nodes >= 1 && g->output >= 0 && g->output < g->n_values,
	      "cpu backend: graph has no nodes or a bad output value %d", g->output);
	CHECK(g->nodes[g->n_nodes - 1].kind == DL_NODE_FC && g->nodes[g->n_nodes - 1].out == g->output,
	      "cpu backend: the logits must be the output of the last node, an FC");
	b->vmd = calloc(g->n_values, sizeof(*b->vmd));
	b->vmd_set = calloc(g->n_values, sizeof(int));
	b->val = calloc(g->n_values, sizeof(dnnl_memory_t));
	b->dval = calloc(g->n_values, sizeof(dnnl_memory_t));
	b->nodes = calloc(g->n_nodes, sizeof(*b->nodes));
	b->param_used = calloc(g->n_params + 1, sizeof(int));
	b->wres = calloc(g->n_params + 1, sizeof(float *));
	b->res_count = calloc(g->n_params + 1, sizeof(size_t));
	b->res_md = calloc(g->n_params + 1, sizeof(*b->res_md));
	b->res_plain = calloc(g->n_params + 1, sizeof(dnnl_memory_t));
	b->res_blk = calloc(g->n_params + 1, sizeof(dnnl_memory_t));
	b->res_in = calloc(g->n_params + 1, sizeof(struct cpu_prim));
	b->res_out = calloc(g->n_params + 1, sizeof(struct cpu_prim));
	seen = calloc(g->n_values, sizeof(int));
	slot = calloc(g->n_values, sizeof(int));
	b->pool = calloc(g->n_values, sizeof(void *));
	b->pool_size = calloc(g->n_values, sizeof(size_t));
	b->pool_busy = calloc(g->n_values, sizeof(int));
	b->dval_zero = calloc(g->n_values, sizeof(int));
	CHECK(b->wres && b->res_md && b->res_count && b->res_plain && b->res_blk && b->res_in && b->res_out,
	      "cpu backend: out of memory");
	CHECK(b->vmd && b->vmd_set && b->val && b->dval && b->nodes && b->param_used && seen &&
		      slot && b->pool && b->pool_size && b->pool_busy && b->dval_zero,
	      "cpu backend: out of memory");

	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int nin = d->kind == DL_NODE_ADD ? 2 : 1;
		for (int j = 0; j < nin; j++)
			CHECK(d->in[j] >= 0 && d->in[j] < g->n_values &&
				      (b->vmd_set[d->in[j]] || d->in[j] == g->input),
			      "cpu backend: node %d reads value %d before it is produced", i,
			      d->in[j]);
		CHECK(d->out >= 0 && d->out < g->n_values && !b->vmd_set[d->out],
		      "cpu backend: node %d writes bad or already produced value %d", i, d->out);
		for (int j = 0; j < 2; j++)
			if ((d->kind == DL_NODE_CONV && j == 0) || d->kind == DL_NODE_BN ||
			    (d->kind == DL_NODE_FC && d->param[j] >= 0)) {
				CHECK(d->param[j] >= 0 && d->param[j] < g->n_params,
				      "cpu backend: node %d has bad param index %d", i, d->param[j]);
				b->param_used[d->param[j]]++;
			}
		if (d->kind == DL_NODE_BN)
			CHECK(d->buffer[0] >= 0 && d->buffer[0] < g->n_buffers && d->buffer[1] >= 0 &&
				      d->buffer[1] < g->n_buffers,
			      "cpu backend: node %d has bad buffer indices", i);
		if (build_node(b, i) < 0)
			goto fail;
	}

	/* Residual adds that normalize their BN input themselves. */
	for (int i = 0; i < g->n_nodes; i++) {
		struct cpu_node *cn = &b->nodes[i];
		if (g->nodes[i].kind != DL_NODE_ADD)
			continue;
		for (int j = 0; j < 2 && !cn->add_bn; j++)
			if ((cn->add_bn = add_bn_fusable(b, i, j))) {
				cn->add_bn_j = j;
				b->nodes[cn->add_bn - 1].bn_in_add = 1;
				if ((cn->add_bn2 = add_bn_fusable(b, i, 1 - j)))
					b->nodes[cn->add_bn2 - 1].bn_in_add = 1;
			}
	}

	/* Activations and their diffs, each in its producer's layout (a fused
	 * BN's output is never stored). */
	for (int v = 0; v < g->n_values; v++) {
		if (!b->vmd_set[v])
			continue;
		if (v == g->input)
			continue;
		if (v != g->output) {
			int p = 0;
			while (g->nodes[p].out != v)
				p++;
			if (b->nodes[p].bn_in_add)
				continue;
		}
		CHECK(b->val[v] = cpu_mem(c, &b->vmd[v], NULL), "%s", c->err);
	}
	{
		const struct dl_shape *s = &g->values[g->input];
		dnnl_memory_desc_t plain;
		CHECK(b->vmd_set[g->input], "cpu backend: nothing reads the input");
		if (cpu_md4(c, &plain, n, s->c, s->h, s->w, dnnl_nchw) < 0)
			goto fail;
		if (!(b->in_user = cpu_view(c, &plain)))
			goto fail;
		/* Always our own copy (a plain copy when the stem reads NCHW):
		 * backward reads the image again, and the caller may reuse its
		 * batch buffer once forward has returned. */
		CHECK(b->val[g->input] = cpu_mem(c, &b->vmd[g->input], NULL), "%s", c->err);
		if (cpu_reorder_make(c, &b->in_reorder, &plain, &b->vmd[g->input]) < 0)
			goto fail;
	}

	/* Gradient sinks and diff buffers, walking backward order: a value's
	 * first gradient writes it directly (and takes a pool buffer), later
	 * ones accumulate; the buffer is free again once its producer ran. */
	seen[g->output] = 1;
	if (pool_acquire(b, g->output, slot) < 0)
		goto fail;
	for (int i = g->n_nodes - 1; i >= 0; i--) {
		const struct dl_node *d = &g->nodes[i];
		int nin = d->kind == DL_NODE_ADD ? 2 : 1;
		if (!seen[d->out]) { /* nobody reads it: zero diff */
			seen[d->out] = 1;
			b->dval_zero[d->out] = 1;
			if (pool_acquire(b, d->out, slot) < 0)
				goto fail;
		}
		/* Decided for both inputs before either is marked seen. */
		int alias[2] = { 0, 0 };
		for (int j = 0; j < nin && d->kind == DL_NODE_ADD; j++)
			alias[j] = add_alias_ok(g, i, j, seen) &&
				   cpu_md_eq(&b->vmd[d->in[j]], &b->vmd[d->out]);
		for (int j = 0; j < nin; j++) {
			int v = d->in[j];
			if (v == g->input)
				continue;
			if (alias[j]) {
				b->nodes[i].sink[j].direct = 1;
				b->nodes[i].sink[j].alias = 1;
				slot[v] = slot[d->out];
				b->pool_busy[slot[v]]++;
				CHECK(b->dval[v] = cpu_mem(c, &b->vmd[v], b->pool[slot[v]]), "%s",
				      c->err);
			} else {
				/* A stride-1 conv can add its dx into the diff itself
				 * (seen: another reader's gradient is already there). */
				const struct dl_shape *xs = &g->values[v], *ys = &g->values[d->out];
				int acc = 0;
				if (d->kind == DL_NODE_CONV &&
				    (acc = cpu_conv_acc_init(c, &b->nodes[i].conv, xs->c, ys->c,
							     d->kernel, d->stride, d->pad, seen[v])) < 0)
					goto fail;
				if (acc)
					b->nodes[i].sink[j].direct = 1;
				else if (sink_init(b, &b->nodes[i].sink[j], v, !seen[v],
					      d->kind == DL_NODE_ADD ? &b->vmd[d->out] : NULL) < 0)
					goto fail;
				if (!seen[v] && pool_acquire(b, v, slot) < 0)
					goto fail;
			}
			seen[v] = 1;
		}
		b->pool_busy[slot[d->out]]--;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		struct cpu_node *cn = &b->nodes[i];
		if (g->nodes[i].kind != DL_NODE_ADD || !relu_mask_ok(b, i))
			continue;
		const struct dl_shape *s = &g->values[g->nodes[i].out];
		if (!(cn->relu_mask = cpu_alloc(c, (size_t)n * s->c / 16 * s->h * s->w * sizeof(uint16_t))))
			goto fail;
	}
	/* Weights that can stay in their forward's blocked layout between
	 * steps (f32 convolutions and the FC), with their gradient and momentum
	 * in it too; the layers' weight memories. */
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		struct cpu_weights *wt = d->kind == DL_NODE_FC ? &b->nodes[i].fc.wt : &b->nodes[i].conv.wt;
		int r = d->kind == DL_NODE_CONV ? cpu_conv_finish(c, &b->nodes[i].conv, 1) :
			d->kind == DL_NODE_FC	? cpu_weights_finish(c, wt, 1, 0) :
						  0;
		if (r < 0)
			goto fail;
		if (r == 0)
			continue;
		int p = d->param[0];
		struct dl_tensor_f32 *t = &g->params[p];
		dnnl_memory_desc_t plain;
		CHECK(b->param_used[p] == 1,
		      "cpu backend: weight %s is read by %d layers, so it cannot live in one layer's layout",
		      t->name, b->param_used[p]);
		CHECK(dnnl_memory_desc_get_size(&wt->plain_md) == t->count * sizeof(float),
		      "%s:%d: weight %s: %zu floats, the layer takes %zu", __FILE__, __LINE__, t->name, t->count,
		      dnnl_memory_desc_get_size(&wt->plain_md) / sizeof(float));
		plain = wt->plain_md;
		b->res_count[p] = dnnl_memory_desc_get_size(&wt->res_md) / sizeof(float);
		b->res_md[p] = wt->res_md;
		/* The master copy, in the layer's layout (zero padding included). */
		if (!(b->wres[p] = cpu_alloc(c, b->res_count[p] * sizeof(float))) ||
		    !(b->res_plain[p] = cpu_view(c, &plain)) || !(b->res_blk[p] = cpu_view(c, &wt->res_md)) ||
		    cpu_reorder_make(c, &b->res_in[p], &plain, &wt->res_md) < 0 ||
		    cpu_reorder_make(c, &b->res_out[p], &wt->res_md, &plain) < 0)
			goto fail;
	}
	if (cpu_ctx_finalize(c) < 0)
		goto fail;
	free(seen);
	free(slot);
	return b;
fail:
	dl_errf(err, errlen, "%s", c->err);
	free(seen);
	free(slot);
	cpu_destroy(b);
	return NULL;
}

/* The resident weights from g's plain params, and (st non-NULL) the
 * momentum from st, each into its layout. */
static int res_load(struct dl_backend *b, const struct dl_optim_state *st)
{
	for (int p = 0; p < b->g->n_params; p++) {
		if (!b->wres[p])
			continue;
		if (res_copy(b, p, b->wres[p], b->g->params[p].data, 0) < 0 ||
		    (st && b->mom[p] && (size_t)p < st->n && res_copy(b, p, b->mom[p], st->mom[p].data, 0) < 0)) {
			dl_errf(b->err, sizeof(b->err), "%s", b->c.err);
			return -1;
		}
	}
	return 0;
}

/* Ranks sum resident gradients element by element, so all must have chosen
 * the same blocked layouts (oneDNN picks them per CPU: a job over mixed CPU
 * types could differ).  A 20-bit hash of every resident layout; all ranks
 * agree iff the sums of h and h^2 over ranks are size*h and size*h^2. */
static int same_layouts(struct dl_backend *b, struct dl_comm *comm)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	int any = 0;
	if (!comm || comm->size < 2)
		return 0;
#define MIX(x)                                             \
	do {                                               \
		h ^= (uint64_t)(x);                        \
		h *= 1099511628211ULL;                     \
	} while (0)
	for (int p = 0; p < b->g->n_params; p++) {
		if (!b->wres[p])
			continue;
		const dnnl_memory_desc_t *md = &b->res_md[p];
		const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
		any = 1;
		MIX(p);
		MIX(md->format_kind);
		for (int d = 0; d < md->ndims; d++) {
			MIX(bd->strides[d]);
			MIX(md->padded_dims[d]);
		}
		MIX(bd->inner_nblks);
		for (int k = 0; k < bd->inner_nblks; k++) {
			MIX(bd->inner_blks[k]);
			MIX(bd->inner_idxs[k]);
		}
	}
#undef MIX
	double me = (double)(h & 0xfffff), v[3] = {me, me * me, any};
	if (comm->allreduce_sum_f64(comm, v, 3, b->err, sizeof(b->err)) < 0)
		return -1;
	if (v[0] != me * comm->size || v[1] != me * me * comm->size) {
		dl_errf(b->err, sizeof(b->err), "cpu backend: the ranks chose different oneDNN weight layouts "
			"(different CPU types?), so their gradients cannot be summed");
		return -1;
	}
	return 0;
}

struct dl_backend *dl_cpu_create(struct dl_graph *g, int n, const struct dl_backend_opts *o, char *err,
				  size_t errlen)
{
	struct dl_backend_opts def = {0};
	struct dl_backend *b;
	size_t *count = NULL;
	if (!o)
		o = &def;
	if (o->precision != DL_FP32 && o->precision != DL_BF16) {
		dl_errf(err, errlen, "--precision %s is not supported by the cpu backend (fp32 or bf16)",
			 dl_precision_name(o->precision));
		return NULL;
	}
	if (o->device) {
		dl_errf(err, errlen, "--gpu %s is not supported by the cpu backend", o->device);
		return NULL;
	}
	if (dl_optim_config_check(&o->optim, err, errlen) < 0)
		return NULL;
	if (!(b = cpu_build(g, n, o, err, errlen)))
		return NULL;
	b->o = *o;
	count = calloc((size_t)g->n_params + 1, sizeof(size_t));
	b->order = calloc((size_t)g->n_params + 1, sizeof(int));
	b->mom = calloc((size_t)g->n_params + 1, sizeof(float *));
	b->sgd = calloc((size_t)g->n_params + 1, sizeof(*b->sgd));
	b->dlogits = calloc(value_count(b, g->output), sizeof(float));
	if (!count || !b->order || !b->mom || !b->sgd || !b->dlogits)
		goto oom;
	/* Resident params have gradient and momentum in their blocked layout
	 * (zero padding included), the others in torchvision's. */
	for (int i = 0; i < g->n_params; i++) {
		count[i] = b->wres[i] ? b->res_count[i] : g->params[i].count;
		if (o->optim.momentum > 0 && !(b->mom[i] = calloc(count[i] + 1, sizeof(float))))
			goto oom;
	}
	dl_reducer_graph_order(g, b->order);
	b->red = dl_reducer_create(o->comm, count, b->order, g->n_params, o->bucket_bytes, err, errlen);
	if (!b->red)
		goto fail;
	for (int i = 0; i < g->n_params; i++)
		b->sgd[i] = (struct dl_sgd_param){.w = wdata(b, i), .g = dl_reducer_grad(b->red, i),
						  .buf = b->mom[i], .count = count[i],
						  .no_decay = g->params[i].no_decay};
	free(count);
	count = NULL;
	if (res_load(b, NULL) < 0 || same_layouts(b, o->comm) < 0) {
		dl_errf(err, errlen, "%s", b->err);
		goto fail;
	}
	return b;
oom:
	dl_errf(err, errlen, "cpu backend: out of memory for the training state");
fail:
	free(count);
	cpu_destroy(b);
	return NULL;
}

int dl_cpu_forward(struct dl_backend *b, const float *x, int train)
{
	struct dl_graph *g = b->g;
	struct cpu_ctx *c = &b->c;
	int n = b->n;
	if (cpu_set_handle(c, b->in_user, x) < 0)
		goto fail;
	if (cpu_reorder(c, &b->in_reorder, b->in_user, b->val[g->input]) < 0)
		goto fail;
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		struct cpu_node *cn = &b->nodes[i];
		dnnl_memory_t in = b->val[d->in[0]], out = b->val[d->out];
		int rc = 0;
		switch (d->kind) {
		case DL_NODE_CONV:
			rc = cpu_conv_forward_exec(c, &cn->conv, wdata(b, d->param[0]), in, out);
			break;
		case DL_NODE_BN:
			if (cn->bn_in_add) /* the statistics; the ADD applies them */
				rc = cpu_bn_blk_prepare(
					c, &cn->bn, wdata(b, d->param[0]), wdata(b, d->param[1]),
					train ? NULL : g->buffers[d->buffer[0]].data,
					train ? NULL : g->buffers[d->buffer[1]].data, in);
			else if (train)
				rc = cpu_bn_forward_train_exec(c, &cn->bn, wdata(b, d->param[0]),
							       wdata(b, d->param[1]), in, out);
			else
				rc = cpu_bn_forward_eval_exec(
					c, &cn->bn, wdata(b, d->param[0]), wdata(b, d->param[1]),
					g->buffers[d->buffer[0]].data, g->buffers[d->buffer[1]].data,
					in, out);
			break;
		case DL_NODE_RELU:
			rc = cpu_relu_forward_exec(c, &cn->relu, in, out);
			break;
		case DL_NODE_ADD:
			if (cn->add_bn) {
				const struct dl_node *bd = &g->nodes[cn->add_bn - 1];
				const struct cpu_bn *bn2 = cn->add_bn2 ? &b->nodes[cn->add_bn2 - 1].bn : NULL;
				dnnl_memory_t res = cn->add_bn2 ? b->val[g->nodes[cn->add_bn2 - 1].in[0]] :
								  b->val[d->in[1 - cn->add_bn_j]];
				rc = cpu_bn_blk_apply(c, &b->nodes[cn->add_bn - 1].bn, b->val[bd->in[0]], res, bn2,
						      out, d->relu, train ? cn->relu_mask : NULL);
			} else {
				rc = cpu_add_forward_exec(c, &cn->add, in, b->val[d->in[1]], out);
			}
			break;
		case DL_NODE_MAXPOOL:
		case DL_NODE_GAP:
			rc = cpu_pool_forward_exec(c, &cn->pool, in, out);
			break;
		case DL_NODE_FC:
			rc = cpu_fc_forward_exec(c, &cn->fc, wdata(b, d->param[0]),
						 d->param[1] >= 0 ? wdata(b, d->param[1]) : NULL, in,
						 out);
			break;
		}
		if (rc < 0)
			goto fail;
		/* torch's running update: momentum and the unbiased variance. */
		if (train && d->kind == DL_NODE_BN) {
			const struct dl_shape *s = &g->values[d->in[0]];
			size_t cnt = (size_t)n * s->h * s->w;
			float unbias = cnt > 1 ? (float)cnt / (float)(cnt - 1) : 1.f;
			float m = g->bn_momentum;
			const float *mean = cpu_handle(cn->bn.mean), *var = cpu_handle(cn->bn.var);
			float *rm = g->buffers[d->buffer[0]].data, *rv = g->buffers[d->buffer[1]].data;
			for (int ch = 0; ch < s->c; ch++) {
				rm[ch] = (1 - m) * rm[ch] + m * mean[ch];
				rv[ch] = (1 - m) * rv[ch] + m * var[ch] * unbias;
			}
		}
	}
	if (train)
		g->bn_batches_tracked++;
	b->trained = train;
	return 0;
fail:
	dl_errf(b->err, sizeof(b->err), "%s", c->err);
	return -1;
}

const float *dl_cpu_logits(struct dl_backend *b)
{
	return cpu_handle(b->val[b->g->output]);
}

int dl_cpu_resident(const struct dl_backend *b, int p)
{
	return b->wres[p] != NULL;
}

void dl_cpu_weight_reorders(const struct dl_backend *b, long out[3])
{
	for (int i = 0; i < 3; i++)
		out[i] = b->c.wreorders[i];
}

int dl_cpu_grad(struct dl_backend *b, int p, float *out)
{
	if (!b->wres[p]) {
		memcpy(out, dl_reducer_grad(b->red, p), b->g->params[p].count * sizeof(float));
		return 0;
	}
	if (res_copy(b, p, dl_reducer_grad(b->red, p), out, 1) < 0) {
		dl_errf(b->err, sizeof(b->err), "%s", b->c.err);
		return -1;
	}
	return 0;
}

/* Backward from dlogits; with reduce, every param whose gradient is final
 * is handed to the reducer as soon as its node is done. */
static int backward(struct dl_backend *b, const float *dlogits, int reduce)
{
	struct dl_graph *g = b->g;
	struct cpu_ctx *c = &b->c;
#define GRAD(p) dl_reducer_grad(b->red, (p))
	CHECK(b->trained, "cpu backend: backward without a train forward");
	memcpy(cpu_handle(b->dval[g->output]), dlogits, value_count(b, g->output) * sizeof(float));
	for (int p = 0; p < g->n_params; p++) {
		if (b->param_used[p])
			continue;
		memset(GRAD(p), 0, (b->wres[p] ? b->res_count[p] : g->params[p].count) * sizeof(float));
		if (reduce && dl_reducer_ready(b->red, p, b->err, sizeof(b->err)) < 0)
			return -1;
	}
	for (int v = 0; v < g->n_values; v++)
		if (b->dval_zero[v])
			memset(cpu_handle(b->dval[v]), 0, dnnl_memory_desc_get_size(&b->vmd[v]));
	for (int i = g->n_nodes - 1; i >= 0; i--) {
		const struct dl_node *d = &g->nodes[i];
		struct cpu_node *cn = &b->nodes[i];
		int v0 = d->in[0], has_dx = v0 != g->input;
		/* the next node's residual ReLU mask, which this BN applies */
		const uint16_t *relu_mask = i + 1 < g->n_nodes ? b->nodes[i + 1].relu_mask : NULL;
		dnnl_memory_t in = b->val[v0], dy = b->dval[d->out];
		dnnl_memory_t dx = has_dx ? sink_target(b, &cn->sink[0], v0) : NULL;
		int rc = 0;
		switch (d->kind) {
		case DL_NODE_CONV:
			rc = cpu_conv_backward_exec(c, &cn->conv, wdata(b, d->param[0]),
						    GRAD(d->param[0]), in, dy, dx);
			break;
		case DL_NODE_BN:
			if (has_dx && relu_mask)
				rc = cpu_bn_blk_backward(c, &cn->bn, wdata(b, d->param[0]), GRAD(d->param[0]),
							 GRAD(d->param[1]), in, dy, dx, relu_mask);
			else if (has_dx)
				rc = cpu_bn_backward_exec(c, &cn->bn, wdata(b, d->param[0]),
							  GRAD(d->param[0]),
							  GRAD(d->param[1]), in, dy, dx);
			else /* BN straight on the input image: still need dgamma/dbeta */
				rc = -1, dl_errf(c->err, sizeof(c->err),
					"cpu backend: BN on the graph input is not supported");
			break;
		case DL_NODE_RELU:
			if (has_dx)
				rc = cpu_relu_backward_exec(c, &cn->relu, b->val[d->out], dy, dx);
			break;
		case DL_NODE_ADD:
			if (d->relu && !cn->relu_mask) /* else the BN before applies the mask */
				rc = cpu_relu_backward_exec(c, &cn->add.relu_l, b->val[d->out], dy, dy);
			for (int j = 0; j < 2 && rc == 0; j++) {
				int v = d->in[j];
				if (v == g->input || cn->sink[j].alias)
					continue;
				/* Same layout: a memcpy beats oneDNN's generic reorder. */
				if (cn->sink[j].direct && cpu_md_eq(&b->vmd[v], &b->vmd[d->out]))
					memcpy(cpu_handle(b->dval[v]), cpu_handle(dy),
					       dnnl_memory_desc_get_size(&b->vmd[v]));
				else
					rc = cpu_reorder(c, &cn->sink[j].copy, dy,
							 sink_target(b, &cn->sink[j], v));
				if (rc == 0)
					rc = sink_finish(b, &cn->sink[j], v);
			}
			break;
		case DL_NODE_MAXPOOL:
		case DL_NODE_GAP:
			if (has_dx)
				rc = cpu_pool_backward_exec(c, &cn->pool, dy, dx);
			break;
		case DL_NODE_FC:
			rc = cpu_fc_backward_exec(c, &cn->fc, wdata(b, d->param[0]),
						  GRAD(d->param[0]),
						  d->param[1] >= 0 ? GRAD(d->param[1]) : NULL,
						  in, dy, dx);
			break;
		}
		if (rc < 0)
			goto fail;
		/* This node's param gradients are final: let them travel while
		 * the rest of backward runs. */
		int has_params = d->kind == DL_NODE_CONV || d->kind == DL_NODE_BN || d->kind == DL_NODE_FC;
		for (int j = 0; reduce && has_params && j < 2; j++)
			if (d->param[j] >= 0 && dl_reducer_ready(b->red, d->param[j], b->err, sizeof(b->err)) < 0)
				return -1;
		if (has_dx && d->kind != DL_NODE_ADD && sink_finish(b, &cn->sink[0], v0) < 0)
			goto fail;
	}
#undef GRAD
	return 0;
fail:
	dl_errf(b->err, sizeof(b->err), "%s", c->err);
	return -1;
}

int dl_cpu_backward(struct dl_backend *b, const float *dlogits)
{
	return backward(b, dlogits, 0);
}

static int check_batch(struct dl_backend *b, const struct dl_batch *in, int n)
{
	if (!in || !in->x || in->x_u8 || !in->labels) {
		dl_errf(b->err, sizeof(b->err), "cpu backend: a batch needs x (float32 NCHW) and labels%s",
			in && in->x_u8 ? " (uint8 batches are not taken)" : "");
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (in->labels[i] < 0 || in->labels[i] >= b->g->num_classes) {
			dl_errf(b->err, sizeof(b->err), "cpu backend: label %d of row %d is not in [0, %d)",
				in->labels[i], i, b->g->num_classes);
			return -1;
		}
	return 0;
}

static int cpu_train_step(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
			  struct dl_step_result *res)
{
	struct dl_graph *g = b->g;
	double t0 = dl_now_s();
	memset(res, 0, sizeof(*res));
	if (check_batch(b, in, b->n) < 0 || dl_cpu_forward(b, in->x, 1) < 0)
		return -1;
	double l = dl_softmax_xent(dl_cpu_logits(b), in->labels, b->n, g->num_classes,
				   (float)b->o.label_smoothing, b->dlogits, NULL, NULL);
	dl_reducer_begin(b->red, (float)l, stop_request);
	if (backward(b, b->dlogits, 1) < 0)
		return -1;
	return dl_reducer_finish_step(b->red, &b->o.optim, b->sgd, g->n_params, lr, &b->steps, t0, res, b->err,
				      sizeof(b->err));
}

static int cpu_eval_step(struct dl_backend *b, const struct dl_batch *in, int n_valid, int *pred,
			 struct dl_eval_result *res)
{
	memset(res, 0, sizeof(*res));
	if (n_valid < 0 || n_valid > b->n) {
		dl_errf(b->err, sizeof(b->err), "cpu backend: eval of %d rows in a batch of %d", n_valid, b->n);
		return -1;
	}
	if (check_batch(b, in, n_valid) < 0 || dl_cpu_forward(b, in->x, 0) < 0)
		return -1;
	res->loss_sum = dl_softmax_xent(dl_cpu_logits(b), in->labels, n_valid, b->g->num_classes, 0.0f, NULL,
					&res->top1, &res->top5) * n_valid;
	if (pred)
		dl_argmax_rows(dl_cpu_logits(b), n_valid, b->g->num_classes, pred);
	return 0;
}

static int cpu_state_out(struct dl_backend *b, struct dl_optim_state *st)
{
	struct dl_graph *g = b->g;
	for (int p = 0; p < g->n_params; p++) {
		int mom = st && b->o.optim.momentum > 0 && (size_t)p < st->n;
		if (b->wres[p] ? res_copy(b, p, b->wres[p], g->params[p].data, 1) < 0 ||
					 (mom && res_copy(b, p, b->mom[p], st->mom[p].data, 1) < 0)
			       : 0) {
			dl_errf(b->err, sizeof(b->err), "%s", b->c.err);
			return -1;
		}
		if (!b->wres[p] && mom)
			memcpy(st->mom[p].data, b->mom[p], st->mom[p].count * sizeof(float));
	}
	if (st) {
		st->steps = b->steps;
		st->loss_scale = 0; /* no dynamic loss scaling here */
		st->loss_scale_good = 0;
	}
	return 0;
}

static int cpu_state_in(struct dl_backend *b, const struct dl_optim_state *st)
{
	struct dl_graph *g = b->g;
	for (int i = 0; i < g->n_params && b->o.optim.momentum > 0; i++) {
		size_t cnt = b->wres[i] ? b->res_count[i] : g->params[i].count;
		if (st && (size_t)i < st->n && !b->wres[i])
			memcpy(b->mom[i], st->mom[i].data, cnt * sizeof(float));
		else if (!st || (size_t)i >= st->n)
			memset(b->mom[i], 0, cnt * sizeof(float));
	}
	b->steps = st ? st->steps : 0;
	return res_load(b, st);
}

static int cpu_last_step_out(struct dl_backend *b, float *logits)
{
	struct dl_graph *g = b->g;
	if (logits)
		memcpy(logits, dl_cpu_logits(b), value_count(b, g->output) * sizeof(float));
	for (int i = 0; i < g->n_params; i++)
		if (g->params[i].grad && dl_cpu_grad(b, i, g->params[i].grad) < 0)
			return -1;
	return 0;
}

static const char *cpu_error(struct dl_backend *b)
{
	return b->err;
}

const struct dl_backend_ops dl_backend_cpu = {
	.name = "cpu",
	.create = dl_cpu_create,
	.train_step = cpu_train_step,
	.eval_step = cpu_eval_step,
	.state_out = cpu_state_out,
	.state_in = cpu_state_in,
	.last_step_out = cpu_last_step_out,
	.destroy = cpu_destroy,
	.error = cpu_error,
};
