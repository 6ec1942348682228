#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <time.h>

#include "common/err.h"
#include "engine/comm_async.h"
#include "engine/loss.h"
#include "engine/memplan.h"
#include "engine/ref/ref_backend.h"
#include "engine/ref/ref_ops.h"

struct dl_backend {
	struct dl_graph *g;
	int n;             /* batch size */
	double **val;      /* per value: (N,C,H,W) activations of the last forward */
	double **dval;     /* per value: d(loss)/d(value) during backward */
	double **param;    /* per param: double copy of g->params[i].data */
	double **grad;     /* per param: gradient */
	double **buf;      /* per buffer: double copy of running stats */
	double **bn_mean;  /* per node (BN only): batch mean of the last train forward */
	double **bn_var;   /* per node (BN only): biased batch variance */
	double *scratch;   /* largest value size, for backward results before accumulating */
	double *io;        /* largest of input/logits, for float32 <-> double conversion */
	float *logits32;   /* (N,K) */
	float *dlogits32;  /* (N,K): d(mean loss)/d(logits) of the last train step */
	int trained;       /* last forward was train=1: backward is allowed */
	double margin;     /* dl_ref_margin: the smallest since create */
	/* Training state besides g's float32 params and buffers (which are the
	 * master copy here): momentum per param, steps taken, the reducer
	 * whose flat buffer holds the float32 gradients. */
	struct dl_backend_opts o;
	struct dl_reducer *red;
	int *order;        /* params in backward order */
	float **mom;       /* per param, NULL entries when momentum is 0 */
	struct dl_sgd_param *sgd;
	long steps;
	char err[256];
	/* memory by lifetime (dl_ref_use_plan): val and dval point into arena */
	int *zero_by;      /* per value: the node whose backward writes its gradient first (-1: the logits) */
	char *arena;
	struct dl_mp mp;   /* the plan in use (assigned), or empty */
	int poison;        /* fill each buffer with NaN once it is dead */
	/* the fused layout (memplan.h relu_prologue), when the plan in use
	 * has it: per node, the conv's prologue buffers for its forward and
	 * backward step (NULL: none) and the BN node whose output they hold */
	double **pro_f, **pro_b;
	int *pro_bn;
};

#define REF_VAL 0
#define REF_DVAL 1
#define REF_PRO_F 2 /* idx: a conv node; its input, computed in its forward step */
#define REF_PRO_B 3 /* the same, recomputed in its backward step */

static size_t value_count(const struct dl_backend *b, int v)
{
	const struct dl_shape *s = &b->g->values[v];
	return (size_t)b->n * s->c * s->h * s->w;
}

static void ref_destroy(struct dl_backend *b)
{
	if (!b)
		return;
	struct dl_graph *g = b->g;
	for (int i = 0; !b->arena && b->val && i < g->n_values; i++)
		free(b->val[i]);
	for (int i = 0; !b->arena && b->dval && i < g->n_values; i++)
		free(b->dval[i]);
	free(b->arena);
	dl_mp_free(&b->mp);
	free(b->zero_by);
	free(b->pro_f);
	free(b->pro_b);
	free(b->pro_bn);
	for (int i = 0; b->param && i < g->n_params; i++)
		free(b->param[i]);
	for (int i = 0; b->grad && i < g->n_params; i++)
		free(b->grad[i]);
	for (int i = 0; b->buf && i < g->n_buffers; i++)
		free(b->buf[i]);
	for (int i = 0; b->bn_mean && i < g->n_nodes; i++)
		free(b->bn_mean[i]);
	for (int i = 0; b->bn_var && i < g->n_nodes; i++)
		free(b->bn_var[i]);
	free(b->val);
	free(b->dval);
	free(b->param);
	free(b->grad);
	free(b->buf);
	free(b->bn_mean);
	free(b->bn_var);
	free(b->scratch);
	free(b->io);
	free(b->logits32);
	free(b->dlogits32);
	for (int i = 0; b->mom && i < g->n_params; i++)
		free(b->mom[i]);
	free(b->mom);
	free(b->sgd);
	free(b->order);
	dl_reducer_destroy(b->red);
	free(b);
}

static int param_ok(const struct dl_graph *g, int p, size_t count)
{
	return p >= 0 && p < g->n_params && g->params[p].count == count;
}

static int buffer_ok(const struct dl_graph *g, int p, size_t count)
{
	return p >= 0 && p < g->n_buffers && g->buffers[p].count == count;
}

/* Check that every node's shapes and param sizes agree, so that the op
 * loops can trust them. */
static int check_graph(const struct dl_graph *g, char *err, size_t errlen)
{
	if (g->n_values < 1 || g->output < 0 || g->output >= g->n_values) {
		dl_errf(err, errlen, "graph: bad value count %d or output %d", g->n_values, g->output);
		return -1;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int nin = d->kind == DL_NODE_ADD ? 2 : 1;
		for (int j = 0; j < nin; j++)
			if (d->in[j] < 0 || d->in[j] >= g->n_values) {
				dl_errf(err, errlen, "graph node %d: bad input value %d", i, d->in[j]);
				return -1;
			}
		if (d->out < 0 || d->out >= g->n_values) {
			dl_errf(err, errlen, "graph node %d: bad output value %d", i, d->out);
			return -1;
		}
		const struct dl_shape *x = &g->values[d->in[0]], *y = &g->values[d->out];
		int ok = 1;
		switch (d->kind) {
		case DL_NODE_CONV:
			ok = d->kernel > 0 && d->stride > 0 && d->pad >= 0 &&
			     y->h == ref_out_side(x->h, d->kernel, d->stride, d->pad) &&
			     y->w == ref_out_side(x->w, d->kernel, d->stride, d->pad) &&
			     param_ok(g, d->param[0], (size_t)y->c * x->c * d->kernel * d->kernel);
			break;
		case DL_NODE_MAXPOOL:
			ok = d->kernel > 0 && d->stride > 0 && d->pad >= 0 && d->pad <= d->kernel / 2 &&
			     y->c == x->c &&
			     y->h == ref_out_side(x->h, d->kernel, d->stride, d->pad) &&
			     y->w == ref_out_side(x->w, d->kernel, d->stride, d->pad);
			break;
		case DL_NODE_BN:
			ok = y->c == x->c && y->h == x->h && y->w == x->w &&
			     param_ok(g, d->param[0], x->c) && param_ok(g, d->param[1], x->c) &&
			     buffer_ok(g, d->buffer[0], x->c) && buffer_ok(g, d->buffer[1], x->c);
			break;
		case DL_NODE_RELU:
			ok = y->c == x->c && y->h == x->h && y->w == x->w;
			break;
		case DL_NODE_ADD: {
			const struct dl_shape *x1 = &g->values[d->in[1]];
			ok = y->c == x->c && y->h == x->h && y->w == x->w && x1->c == x->c &&
			     x1->h == x->h && x1->w == x->w;
			break;
		}
		case DL_NODE_GAP:
			ok = y->c == x->c && y->h == 1 && y->w == 1;
			break;
		case DL_NODE_FC:
			ok = y->h == 1 && y->w == 1 &&
			     param_ok(g, d->param[0], (size_t)y->c * x->c * x->h * x->w) &&
			     (d->param[1] < 0 || param_ok(g, d->param[1], y->c));
			break;
		default:
			ok = 0;
		}
		if (!ok) {
			dl_errf(err, errlen, "graph node %d (kind %d): shapes or params do not agree", i,
				(int)d->kind);
			return -1;
		}
	}
	return 0;
}

/* How this backend reads its arrays (memplan.h): BN with ReLU and ADD with
 * ReLU take the mask from their output, max-pool backward re-reads its
 * input, the logits stay readable after a step (dl_ref_logits_f64), and
 * the image gets a (never read) gradient array.  fused: the fused layout
 * (relu_prologue), run when the plan in use has it. */
static void ref_rules(struct dl_mp_rules *r, int fused)
{
	memset(r, 0, sizeof *r);
	r->bn_relu_reads_out = 1;
	r->pool_reads_in = 1;
	r->output_stored = 1;
	r->input_grad = 1;
	r->relu_prologue = fused;
}

struct dl_backend *dl_ref_create(struct dl_graph *g, int n, char *err, size_t errlen)
{
	struct dl_backend *b = NULL;
	if (n < 1) {
		dl_errf(err, errlen, "ref backend: batch size %d must be >= 1", n);
		return NULL;
	}
	if (check_graph(g, err, errlen) < 0)
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		goto oom;
	b->g = g;
	b->n = n;
	b->margin = INFINITY;
	b->val = calloc(g->n_values, sizeof(double *));
	b->dval = calloc(g->n_values, sizeof(double *));
	b->param = calloc(g->n_params + 1, sizeof(double *));
	b->grad = calloc(g->n_params + 1, sizeof(double *));
	b->buf = calloc(g->n_buffers + 1, sizeof(double *));
	b->bn_mean = calloc(g->n_nodes + 1, sizeof(double *));
	b->bn_var = calloc(g->n_nodes + 1, sizeof(double *));
	if (!b->val || !b->dval || !b->param || !b->grad || !b->buf || !b->bn_mean || !b->bn_var)
		goto oom;
	size_t maxv = 0;
	for (int i = 0; i < g->n_values; i++) {
		size_t c = value_count(b, i);
		maxv = c > maxv ? c : maxv;
		b->val[i] = calloc(c, sizeof(double));
		b->dval[i] = calloc(c, sizeof(double));
		if (!b->val[i] || !b->dval[i])
			goto oom;
	}
	for (int i = 0; i < g->n_params; i++) {
		b->param[i] = calloc(g->params[i].count, sizeof(double));
		b->grad[i] = calloc(g->params[i].count, sizeof(double));
		if (!b->param[i] || !b->grad[i])
			goto oom;
	}
	for (int i = 0; i < g->n_buffers; i++)
		if (!(b->buf[i] = calloc(g->buffers[i].count, sizeof(double))))
			goto oom;
	for (int i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].kind == DL_NODE_BN) {
			int c = g->values[g->nodes[i].in[0]].c;
			b->bn_mean[i] = calloc(c, sizeof(double));
			b->bn_var[i] = calloc(c, sizeof(double));
			if (!b->bn_mean[i] || !b->bn_var[i])
				goto oom;
		}
	b->scratch = calloc(maxv, sizeof(double));
	b->io = calloc(maxv, sizeof(double));
	b->logits32 = calloc(value_count(b, g->output), sizeof(float));
	b->dlogits32 = calloc(value_count(b, g->output), sizeof(float));
	if (!b->scratch || !b->io || !b->logits32 || !b->dlogits32)
		goto oom;
	{
		struct dl_mp_life *life = malloc(((size_t)g->n_values + 1) * sizeof *life);
		struct dl_mp_rules rules;
		b->zero_by = malloc(((size_t)g->n_values + 1) * sizeof *b->zero_by);
		if (!life || !b->zero_by) {
			free(life);
			goto oom;
		}
		ref_rules(&rules, 0);
		if (dl_mp_value_lives(g, &rules, life, err, errlen)) {
			free(life);
			ref_destroy(b);
			return NULL;
		}
		for (int i = 0; i < g->n_values; i++)
			b->zero_by[i] = life[i].zero_by;
		free(life);
	}
	dl_ref_load_graph(b);
	return b;
oom:
	dl_errf(err, errlen, "ref backend: out of memory for batch %d", n);
	ref_destroy(b);
	return NULL;
}

void dl_ref_load_graph(struct dl_backend *b)
{
	struct dl_graph *g = b->g;
	for (int i = 0; i < g->n_params; i++)
		for (size_t j = 0; j < g->params[i].count; j++)
			b->param[i][j] = g->params[i].data[j];
	for (int i = 0; i < g->n_buffers; i++)
		for (size_t j = 0; j < g->buffers[i].count; j++)
			b->buf[i][j] = g->buffers[i].data[j];
}

double *dl_ref_param_f64(struct dl_backend *b, int i)
{
	return b->param[i];
}

const double *dl_ref_grad_f64(struct dl_backend *b, int i)
{
	return b->grad[i];
}

double *dl_ref_buffer_f64(struct dl_backend *b, int i)
{
	return b->buf[i];
}

double dl_ref_margin(const struct dl_backend *b)
{
	return b->margin;
}

const double *dl_ref_logits_f64(struct dl_backend *b)
{
	return b->val[b->g->output];
}

/* dl_ref_use_plan with poison: NaN into every buffer at the start of a
 * forward, and into each one after its last step, so a read outside its
 * planned lifetime shows in the results. */
static void fill_nan(double *p, size_t count)
{
	for (size_t i = 0; i < count; i++)
		p[i] = NAN;
}

static void poison_all(struct dl_backend *b)
{
	fill_nan((double *)(void *)b->arena, b->mp.total / sizeof(double));
}

static void poison_dead(struct dl_backend *b, int step)
{
	if (!b->arena || !b->poison)
		return;
	for (int k = 0; k < b->mp.n; k++)
		if (b->mp.b[k].last == step)
			fill_nan((double *)(void *)(b->arena + b->mp.b[k].off), b->mp.b[k].bytes / sizeof(double));
}

int dl_ref_plan(struct dl_backend *b, struct dl_mp *mp, int fused, char *err, size_t errlen)
{
	struct dl_graph *g = b->g;
	struct dl_mp_life *life = malloc(((size_t)g->n_values + 1) * sizeof *life);
	struct dl_mp_rules rules;
	ref_rules(&rules, fused);
	if (!life) {
		dl_errf(err, errlen, "ref backend: out of memory planning");
		return -1;
	}
	if (dl_mp_value_lives(g, &rules, life, err, errlen) || dl_mp_init(mp, dl_mp_end(g) + 1, 64, err, errlen)) {
		free(life);
		return -1;
	}
	for (int v = 0; v < g->n_values; v++) {
		size_t bytes = value_count(b, v) * sizeof(double);
		if ((life[v].act_first >= 0 &&
		     dl_mp_add(mp, bytes, life[v].act_first, life[v].act_last, DL_MP_ACT, REF_VAL, v, err, errlen) < 0) ||
		    (life[v].grad_first >= 0 &&
		     dl_mp_add(mp, bytes, life[v].grad_first, life[v].grad_last, DL_MP_ACT, REF_DVAL, v, err, errlen) < 0)) {
			free(life);
			dl_mp_free(mp);
			return -1;
		}
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		size_t bytes = value_count(b, d->in[0]) * sizeof(double);
		if (d->kind == DL_NODE_CONV && life[d->in[0]].prologue &&
		    (dl_mp_add(mp, bytes, dl_mp_fwd(g, i), dl_mp_fwd(g, i), DL_MP_ACT, REF_PRO_F, i, err, errlen) < 0 ||
		     dl_mp_add(mp, bytes, dl_mp_bwd(g, i), dl_mp_bwd(g, i), DL_MP_ACT, REF_PRO_B, i, err, errlen) < 0)) {
			free(life);
			dl_mp_free(mp);
			return -1;
		}
	}
	free(life);
	return 0;
}

/* The BN node whose output conv node i reads, when that BN qualifies for
 * the fused layout (dl_mp_bn_prologue); else -1. */
static int prologue_bn(const struct dl_graph *g, int i)
{
	if (i < 0 || i >= g->n_nodes || g->nodes[i].kind != DL_NODE_CONV)
		return -1;
	for (int j = 0; j < i; j++)
		if (g->nodes[j].out == g->nodes[i].in[0])
			return dl_mp_bn_prologue(g, j) ? j : -1;
	return -1;
}

int dl_ref_use_plan(struct dl_backend *b, const struct dl_mp *mp, int poison, char *err, size_t errlen)
{
	struct dl_graph *g = b->g;
	if (b->arena) {
		dl_errf(err, errlen, "ref backend: a plan is already in use");
		return -1;
	}
	/* have: per value its activation and gradient, per node its two
	 * prologue buffers; pro: per value, computed by its readers */
	char *have = calloc(2 * (size_t)g->n_values + 2 * (size_t)g->n_nodes + 1, 1);
	char *pro = calloc((size_t)g->n_values + 1, 1);
	double **pf = calloc((size_t)g->n_nodes + 1, sizeof *pf), **pb = calloc((size_t)g->n_nodes + 1, sizeof *pb);
	int *pbn = malloc(((size_t)g->n_nodes + 1) * sizeof *pbn);
	int rc = -1;
	if (!have || !pro || !pf || !pb || !pbn) {
		dl_errf(err, errlen, "ref backend: out of memory");
		goto out;
	}
	for (int i = 0; i < g->n_nodes; i++)
		pbn[i] = prologue_bn(g, i);
	for (int k = 0; k < mp->n; k++) {
		const struct dl_mp_buf *x = &mp->b[k];
		int val = x->what == REF_VAL || x->what == REF_DVAL, node = x->what == REF_PRO_F || x->what == REF_PRO_B;
		size_t slot = val ? 2 * (size_t)x->idx + (size_t)x->what
				  : 2 * (size_t)g->n_values + 2 * (size_t)x->idx + (size_t)(x->what - REF_PRO_F);
		if ((!val && !node) || x->idx < 0 || x->idx >= (val ? g->n_values : g->n_nodes) ||
		    (node && pbn[x->idx] < 0) || have[slot] ||
		    x->bytes != value_count(b, val ? x->idx : g->nodes[x->idx].in[0]) * sizeof(double) ||
		    x->off % sizeof(double) || x->off > mp->total || x->bytes > mp->total - x->off) {
			dl_errf(err, errlen, "ref backend: plan buffer %d (%d.%d) is not one of its arrays", k, x->what,
				 x->idx);
			goto out;
		}
		have[slot] = 1;
		if (node)
			pro[g->nodes[x->idx].in[0]] = 1;
	}
	/* a value is either stored or computed by every conv that reads it
	 * (dl_mp_bn_prologue: only convs read it), in both its steps */
	for (int i = 0; i < g->n_nodes; i++) {
		const char *h = have + 2 * (size_t)g->n_values + 2 * (size_t)i;
		if (pbn[i] >= 0 && pro[g->nodes[i].in[0]] && (!h[0] || !h[1])) {
			dl_errf(err, errlen, "ref backend: the plan has no %s prologue buffer for conv node %d",
				 h[0] ? "backward" : "forward", i);
			goto out;
		}
	}
	for (int v = 0; v < g->n_values; v++)
		if ((!have[2 * v] && !pro[v]) || (have[2 * v] && pro[v]) || !have[2 * v + 1]) {
			dl_errf(err, errlen, "ref backend: the plan has %s array for value %d",
				 !have[2 * v + 1] ? "no gradient" : pro[v] ? "both prologue buffers and an activation"
									 : "no activation",
				 v);
			goto out;
		}
	b->arena = malloc(mp->total + sizeof(double));
	b->mp = *mp;
	b->mp.b = malloc(((size_t)mp->n + 1) * sizeof *mp->b);
	if (!b->arena || !b->mp.b) {
		free(b->arena);
		free(b->mp.b);
		b->arena = NULL;
		memset(&b->mp, 0, sizeof b->mp);
		dl_errf(err, errlen, "ref backend: out of memory for a %zu-byte arena", mp->total);
		goto out;
	}
	memcpy(b->mp.b, mp->b, (size_t)mp->n * sizeof *mp->b);
	for (int v = 0; v < g->n_values; v++) {
		free(b->val[v]);
		free(b->dval[v]);
	}
	for (int v = 0; v < g->n_values; v++)
		b->val[v] = NULL; /* prologue values keep none */
	for (int i = 0; i < g->n_nodes; i++)
		if (!pro[g->nodes[i].in[0]])
			pbn[i] = -1;
	for (int k = 0; k < mp->n; k++) {
		double *at = (double *)(void *)(b->arena + mp->b[k].off);
		int what = mp->b[k].what, idx = mp->b[k].idx;
		if (what == REF_VAL)
			b->val[idx] = at;
		else if (what == REF_DVAL)
			b->dval[idx] = at;
		else
			(what == REF_PRO_F ? pf : pb)[idx] = at;
	}
	memset(b->arena, 0, mp->total);
	b->poison = poison;
	b->pro_f = pf, b->pro_b = pb, b->pro_bn = pbn;
	pf = pb = NULL, pbn = NULL;
	rc = 0;
out:
	free(have);
	free(pro);
	free(pf);
	free(pb);
	free(pbn);
	return rc;
}

/* The fused layout: y = relu(BN(x)) of BN node j into y, from its input
 * and the batch statistics of the last train forward (train) or the
 * running ones -- the bits the BN itself would have stored. */
static void prologue(struct dl_backend *b, int j, double *y, int train)
{
	struct dl_graph *g = b->g;
	const struct dl_node *d = &g->nodes[j];
	const struct dl_shape *xs = &g->values[d->in[0]];
	size_t count = value_count(b, d->out);
	ref_bn_forward_eval(b->val[d->in[0]], b->param[d->param[0]], b->param[d->param[1]],
			    train ? b->bn_mean[j] : b->buf[d->buffer[0]], train ? b->bn_var[j] : b->buf[d->buffer[1]],
			    y, b->n, xs->c, xs->h * xs->w, g->bn_eps);
	b->margin = fmin(b->margin, ref_relu_margin(y, count));
	ref_relu_forward(y, y, count);
}

/* Whether node i's output is computed by its readers (the fused layout). */
static int is_prologue_out(const struct dl_backend *b, int i)
{
	const struct dl_graph *g = b->g;
	if (!b->pro_bn)
		return 0;
	for (int j = i + 1; j < g->n_nodes; j++)
		if (b->pro_bn[j] == i)
			return 1;
	return 0;
}

int dl_ref_forward_f64(struct dl_backend *b, const double *x, int train)
{
	struct dl_graph *g = b->g;
	int n = b->n;
	if (b->arena && b->poison)
		poison_all(b);
	memcpy(b->val[g->input], x, value_count(b, g->input) * sizeof(double));
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		const struct dl_shape *xs = &g->values[d->in[0]], *ys = &g->values[d->out];
		const double *in = b->val[d->in[0]];
		double *out = b->val[d->out];
		int hw = xs->h * xs->w, pro_out = d->kind == DL_NODE_BN && is_prologue_out(b, i);
		if (b->pro_bn && b->pro_bn[i] >= 0) {
			/* the fused layout: the input computed here, for this conv */
			prologue(b, b->pro_bn[i], b->pro_f[i], train);
			in = b->pro_f[i];
		}
		switch (d->kind) {
		case DL_NODE_CONV:
			ref_conv_forward(in, b->param[d->param[0]], out, n, xs->c, xs->h, xs->w, ys->c,
					 d->kernel, d->stride, d->pad);
			break;
		case DL_NODE_BN: {
			const double *gam = b->param[d->param[0]], *bet = b->param[d->param[1]];
			if (pro_out) {
				/* the fused layout: statistics only, y where it is read */
				if (train) {
					ref_bn_stats(in, b->bn_mean[i], b->bn_var[i], n, xs->c, hw);
					ref_bn_update_running(b->buf[d->buffer[0]], b->buf[d->buffer[1]],
							      b->bn_mean[i], b->bn_var[i], xs->c,
							      (size_t)n * hw, g->bn_momentum);
				}
			} else if (train) {
				ref_bn_forward_train(in, gam, bet, out, b->bn_mean[i], b->bn_var[i], n,
						     xs->c, hw, g->bn_eps);
				ref_bn_update_running(b->buf[d->buffer[0]], b->buf[d->buffer[1]],
						      b->bn_mean[i], b->bn_var[i], xs->c,
						      (size_t)n * hw, g->bn_momentum);
			} else {
				ref_bn_forward_eval(in, gam, bet, b->buf[d->buffer[0]],
						    b->buf[d->buffer[1]], out, n, xs->c, hw, g->bn_eps);
			}
			break;
		}
		case DL_NODE_RELU:
			b->margin = fmin(b->margin, ref_relu_margin(in, value_count(b, d->out)));
			ref_relu_forward(in, out, value_count(b, d->out));
			break;
		case DL_NODE_ADD:
			ref_add_forward(in, b->val[d->in[1]], out, value_count(b, d->out));
			break;
		case DL_NODE_MAXPOOL:
			b->margin = fmin(b->margin, ref_maxpool_margin(in, n, xs->c, xs->h, xs->w, d->kernel,
								       d->stride, d->pad));
			ref_maxpool_forward(in, out, n, xs->c, xs->h, xs->w, d->kernel, d->stride,
					    d->pad);
			break;
		case DL_NODE_GAP:
			ref_gap_forward(in, out, n, xs->c, hw);
			break;
		case DL_NODE_FC:
			ref_fc_forward(in, b->param[d->param[0]],
				       d->param[1] >= 0 ? b->param[d->param[1]] : NULL, out, n,
				       xs->c * hw, ys->c);
			break;
		}
		if (d->relu && (d->kind == DL_NODE_BN || d->kind == DL_NODE_ADD) && !pro_out) {
			b->margin = fmin(b->margin, ref_relu_margin(out, value_count(b, d->out)));
			ref_relu_forward(out, out, value_count(b, d->out));
		}
		poison_dead(b, dl_mp_fwd(g, i));
	}
	b->trained = train;
	return 0;
}

static void accumulate(double *dst, const double *src, size_t count)
{
	for (size_t i = 0; i < count; i++)
		dst[i] += src[i];
}

int dl_ref_backward_f64(struct dl_backend *b, const double *dlogits)
{
	struct dl_graph *g = b->g;
	int n = b->n;
	if (!b->trained) {
		dl_errf(b->err, sizeof(b->err), "ref backend: backward without a train forward");
		return -1;
	}
	/* A value read by several nodes (a block input feeds both the residual
	 * branch and the shortcut) sums the gradients from each reader: its
	 * array is zeroed by the first of them in backward (zero_by), when
	 * its lifetime starts. */
	for (int i = 0; i < g->n_params; i++)
		memset(b->grad[i], 0, g->params[i].count * sizeof(double));
	memcpy(b->dval[g->output], dlogits, value_count(b, g->output) * sizeof(double));
	double *tmp = b->scratch;
	for (int i = g->n_nodes - 1; i >= 0; i--) {
		const struct dl_node *d = &g->nodes[i];
		const struct dl_shape *xs = &g->values[d->in[0]], *ys = &g->values[d->out];
		const double *in = b->val[d->in[0]];
		double *dy = b->dval[d->out];
		size_t cin = value_count(b, d->in[0]);
		int hw = xs->h * xs->w;
		int touch[3] = { d->out, d->in[0], d->in[1] };
		for (int k = 0; k < 3; k++)
			if (touch[k] >= 0 && b->zero_by[touch[k]] == i)
				memset(b->dval[touch[k]], 0, value_count(b, touch[k]) * sizeof(double));
		if (b->pro_bn && b->pro_bn[i] >= 0) {
			/* the fused layout: the input recomputed for the weight gradient */
			prologue(b, b->pro_bn[i], b->pro_b[i], 1);
			in = b->pro_b[i];
		}
		if (d->kind == DL_NODE_BN && d->relu && is_prologue_out(b, i))
			ref_bn_relu_mask(in, b->param[d->param[0]], b->param[d->param[1]], b->bn_mean[i], b->bn_var[i],
					 dy, n, xs->c, hw, g->bn_eps);
		else if (d->relu && (d->kind == DL_NODE_BN || d->kind == DL_NODE_ADD))
			ref_relu_backward(b->val[d->out], dy, dy, value_count(b, d->out));
		switch (d->kind) {
		case DL_NODE_CONV:
			ref_conv_backward_weights(in, dy, b->grad[d->param[0]], n, xs->c, xs->h, xs->w,
						  ys->c, d->kernel, d->stride, d->pad);
			ref_conv_backward_data(dy, b->param[d->param[0]], tmp, n, xs->c, xs->h, xs->w,
					       ys->c, d->kernel, d->stride, d->pad);
			break;
		case DL_NODE_BN:
			ref_bn_backward(in, dy, b->param[d->param[0]], b->bn_mean[i], b->bn_var[i], tmp,
					b->grad[d->param[0]], b->grad[d->param[1]], n, xs->c, hw,
					g->bn_eps);
			break;
		case DL_NODE_RELU:
			ref_relu_backward(b->val[d->out], dy, tmp, cin);
			break;
		case DL_NODE_ADD:
			accumulate(b->dval[d->in[1]], dy, cin);
			memcpy(tmp, dy, cin * sizeof(double));
			break;
		case DL_NODE_MAXPOOL:
			ref_maxpool_backward(in, dy, tmp, n, xs->c, xs->h, xs->w, d->kernel, d->stride,
					     d->pad);
			break;
		case DL_NODE_GAP:
			ref_gap_backward(dy, tmp, n, xs->c, hw);
			break;
		case DL_NODE_FC:
			ref_fc_backward_weights(in, dy, b->grad[d->param[0]],
						d->param[1] >= 0 ? b->grad[d->param[1]] : NULL, n,
						xs->c * hw, ys->c);
			ref_fc_backward_data(dy, b->param[d->param[0]], tmp, n, xs->c * hw, ys->c);
			break;
		}
		if (d->in[0] != g->input)
			accumulate(b->dval[d->in[0]], tmp, cin);
		poison_dead(b, dl_mp_bwd(g, i));
	}
	return 0;
}

/* The forward pass from the input already in b->io. */
static int forward_io(struct dl_backend *b, int train)
{
	struct dl_graph *g = b->g;
	if (dl_ref_forward_f64(b, b->io, train) < 0)
		return -1;
	if (train) {
		for (int i = 0; i < g->n_buffers; i++)
			for (size_t j = 0; j < g->buffers[i].count; j++)
				g->buffers[i].data[j] = (float)b->buf[i][j];
		g->bn_batches_tracked++;
	}
	const double *l = b->val[g->output];
	for (size_t i = 0; i < value_count(b, g->output); i++)
		b->logits32[i] = (float)l[i];
	return 0;
}

/* The batch into b->io as (N,C,H,W) doubles; uint8 (N,H,W,C) batches are
 * normalized here, in double, so the trainer's uint8 feed (the one the
 * CUDA backend uses) runs, and is checked, on machines without a GPU. */
static int load_input(struct dl_backend *b, const struct dl_batch *in)
{
	const struct dl_shape *s = &b->g->values[b->g->input];
	size_t hw = (size_t)s->h * s->w, cx = value_count(b, b->g->input);
	if (!in || !in->labels || !!in->x == !!in->x_u8) {
		dl_errf(b->err, sizeof(b->err), "ref backend: a batch needs labels and exactly one of x, x_u8");
		return -1;
	}
	if (in->x) {
		for (size_t i = 0; i < cx; i++)
			b->io[i] = in->x[i];
		return 0;
	}
	for (int c = 0; c < s->c; c++)
		if (!in->mean || !in->std || !(in->std[c] > 0)) {
			dl_errf(b->err, sizeof(b->err), "ref backend: uint8 batch: std[%d] is missing or not positive",
				c);
			return -1;
		}
	// io is (N,C,H,W); x_u8 is (N,H,W,C)
	for (int n = 0; n < b->n; n++)
		for (size_t p = 0; p < hw; p++)
			for (int c = 0; c < s->c; c++)
				b->io[((size_t)n * s->c + c) * hw + p] =
					(in->x_u8[((size_t)n * hw + p) * s->c + c] / 255.0 - in->mean[c]) / in->std[c];
	return 0;
}

static int check_labels(struct dl_backend *b, const int *labels, int n)
{
	for (int i = 0; i < n; i++)
		if (labels[i] < 0 || labels[i] >= b->g->num_classes) {
			dl_errf(b->err, sizeof(b->err), "ref backend: label %d of row %d is not in [0, %d)", labels[i],
				i, b->g->num_classes);
			return -1;
		}
	return 0;
}

int dl_ref_forward(struct dl_backend *b, const float *x, int train)
{
	struct dl_batch in = {.x = x, .labels = (const int[]){0}};
	dl_ref_load_graph(b);
	return load_input(b, &in) < 0 ? -1 : forward_io(b, train);
}

const float *dl_ref_logits(struct dl_backend *b)
{
	return b->logits32;
}

int dl_ref_backward(struct dl_backend *b, const float *dlogits)
{
	struct dl_graph *g = b->g;
	for (size_t i = 0; i < value_count(b, g->output); i++)
		b->io[i] = dlogits[i];
	return dl_ref_backward_f64(b, b->io);
}

static struct dl_backend *ref_create(struct dl_graph *g, int n, const struct dl_backend_opts *o, char *err,
				     size_t errlen)
{
	struct dl_backend_opts def = {0};
	if (!o)
		o = &def;
	if (o->precision != DL_FP32) {
		dl_errf(err, errlen, "--precision %s is not supported by the ref backend (fp32 only)",
			dl_precision_name(o->precision));
		return NULL;
	}
	if (o->conv_algo != DL_CONV_AUTO) {
		static const char *const names[] = {"auto", "direct", "winograd"};
		dl_errf(err, errlen, "--conv-algo %s is not supported by the ref backend",
			o->conv_algo > 0 && o->conv_algo <= DL_CONV_WINOGRAD ? names[o->conv_algo] : "?");
		return NULL;
	}
	if (o->device) {
		dl_errf(err, errlen, "--gpu %s is not supported by the ref backend (it runs on the CPU)", o->device);
		return NULL;
	}
	if (dl_optim_config_check(&o->optim, err, errlen) < 0)
		return NULL;
	struct dl_backend *b = dl_ref_create(g, n, err, errlen);
	if (!b)
		return NULL;
	b->o = *o;
	size_t *count = calloc((size_t)g->n_params + 1, sizeof(size_t));
	b->order = calloc((size_t)g->n_params + 1, sizeof(int));
	b->mom = calloc((size_t)g->n_params + 1, sizeof(float *));
	b->sgd = calloc((size_t)g->n_params + 1, sizeof(*b->sgd));
	if (!count || !b->order || !b->mom || !b->sgd)
		goto oom;
	for (int i = 0; i < g->n_params; i++) {
		count[i] = g->params[i].count;
		if (o->optim.momentum > 0 && !(b->mom[i] = calloc(count[i] + 1, sizeof(float))))
			goto oom;
	}
	dl_reducer_graph_order(g, b->order);
	b->red = dl_reducer_create(o->comm, count, b->order, g->n_params, o->bucket_bytes, err, errlen);
	free(count);
	count = NULL;
	if (!b->red) {
		ref_destroy(b);
		return NULL;
	}
	for (int i = 0; i < g->n_params; i++)
		b->sgd[i] = (struct dl_sgd_param){.w = g->params[i].data, .g = dl_reducer_grad(b->red, i),
						  .buf = b->mom[i], .count = g->params[i].count,
						  .no_decay = g->params[i].no_decay};
	return b;
oom:
	free(count);
	dl_errf(err, errlen, "ref backend: out of memory for the training state");
	ref_destroy(b);
	return NULL;
}

static int ref_train_step(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
			  struct dl_step_result *res)
{
	struct dl_graph *g = b->g;
	int k = g->num_classes;
	double t0 = dl_now_s();
	memset(res, 0, sizeof(*res));
	if (load_input(b, in) < 0 || check_labels(b, in->labels, b->n) < 0)
		return -1;
	dl_ref_load_graph(b);
	if (forward_io(b, 1) < 0)
		return -1;
	double l = dl_softmax_xent(b->logits32, in->labels, b->n, k, (float)b->o.label_smoothing, b->dlogits32,
				   NULL, NULL);
	dl_reducer_begin(b->red, (float)l, stop_request);
	if (dl_ref_backward(b, b->dlogits32) < 0)
		return -1;
	/* The float32 gradients, param by param in backward order. */
	for (int q = 0; q < g->n_params; q++) {
		int i = b->order[q];
		float *dst = dl_reducer_grad(b->red, i);
		for (size_t j = 0; j < g->params[i].count; j++)
			dst[j] = (float)b->grad[i][j];
		if (dl_reducer_ready(b->red, i, b->err, sizeof(b->err)) < 0)
			return -1;
	}
	return dl_reducer_finish_step(b->red, &b->o.optim, b->sgd, g->n_params, lr, &b->steps, t0, res, b->err,
				      sizeof(b->err));
}

static int ref_eval_step(struct dl_backend *b, const struct dl_batch *in, int n_valid, int *pred,
			 struct dl_eval_result *res)
{
	memset(res, 0, sizeof(*res));
	if (n_valid < 0 || n_valid > b->n) {
		dl_errf(b->err, sizeof(b->err), "ref backend: eval of %d rows in a batch of %d", n_valid, b->n);
		return -1;
	}
	if (load_input(b, in) < 0 || check_labels(b, in->labels, n_valid) < 0)
		return -1;
	dl_ref_load_graph(b);
	if (forward_io(b, 0) < 0)
		return -1;
	res->loss_sum = dl_softmax_xent(b->logits32, in->labels, n_valid, b->g->num_classes, 0.0f, NULL,
					&res->top1, &res->top5) * n_valid;
	if (pred)
		dl_argmax_rows(b->logits32, n_valid, b->g->num_classes, pred);
	return 0;
}

/* g's float32 params and buffers are this backend's state: only the
 * momentum and the step count live here. */
static int ref_state_out(struct dl_backend *b, struct dl_optim_state *st)
{
	if (!st)
		return 0;
	for (size_t i = 0; i < st->n && b->o.optim.momentum > 0; i++)
		memcpy(st->mom[i].data, b->mom[i], st->mom[i].count * sizeof(float));
	st->steps = b->steps;
	st->loss_scale = 0; /* no dynamic loss scaling here */
	st->loss_scale_good = 0;
	return 0;
}

static int ref_state_in(struct dl_backend *b, const struct dl_optim_state *st)
{
	struct dl_graph *g = b->g;
	for (int i = 0; i < g->n_params && b->o.optim.momentum > 0; i++) {
		if (st && (size_t)i < st->n)
			memcpy(b->mom[i], st->mom[i].data, g->params[i].count * sizeof(float));
		else
			memset(b->mom[i], 0, g->params[i].count * sizeof(float));
	}
	b->steps = st ? st->steps : 0;
	dl_ref_load_graph(b);
	return 0;
}

static int ref_last_step_out(struct dl_backend *b, float *logits)
{
	struct dl_graph *g = b->g;
	if (logits)
		memcpy(logits, b->logits32, value_count(b, g->output) * sizeof(float));
	for (int i = 0; i < g->n_params; i++)
		if (g->params[i].grad)
			memcpy(g->params[i].grad, dl_reducer_grad(b->red, i), g->params[i].count * sizeof(float));
	return 0;
}

static const char *ref_error(struct dl_backend *b)
{
	return b->err;
}

const struct dl_backend_ops dl_backend_ref = {
	.name = "ref",
	.takes_u8 = 1,
	.create = ref_create,
	.train_step = ref_train_step,
	.eval_step = ref_eval_step,
	.state_out = ref_state_out,
	.state_in = ref_state_in,
	.last_step_out = ref_last_step_out,
	.destroy = ref_destroy,
	.error = ref_error,
};
