#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	int trained;       /* last forward was train=1: backward is allowed */
	char err[256];
};

static void set_err(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

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
	for (int i = 0; b->val && i < g->n_values; i++)
		free(b->val[i]);
	for (int i = 0; b->dval && i < g->n_values; i++)
		free(b->dval[i]);
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
		set_err(err, errlen, "graph: bad value count %d or output %d", g->n_values, g->output);
		return -1;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int nin = d->kind == DL_NODE_ADD ? 2 : 1;
		for (int j = 0; j < nin; j++)
			if (d->in[j] < 0 || d->in[j] >= g->n_values) {
				set_err(err, errlen, "graph node %d: bad input value %d", i, d->in[j]);
				return -1;
			}
		if (d->out < 0 || d->out >= g->n_values) {
			set_err(err, errlen, "graph node %d: bad output value %d", i, d->out);
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
			set_err(err, errlen, "graph node %d (kind %d): shapes or params do not agree", i,
				(int)d->kind);
			return -1;
		}
	}
	return 0;
}

static struct dl_backend *ref_create(struct dl_graph *g, int n, char *err, size_t errlen)
{
	struct dl_backend *b = NULL;
	if (n < 1) {
		set_err(err, errlen, "ref backend: batch size %d must be >= 1", n);
		return NULL;
	}
	if (check_graph(g, err, errlen) < 0)
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		goto oom;
	b->g = g;
	b->n = n;
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
	if (!b->scratch || !b->io || !b->logits32)
		goto oom;
	dl_ref_load_graph(b);
	return b;
oom:
	set_err(err, errlen, "ref backend: out of memory for batch %d", n);
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

const double *dl_ref_logits_f64(struct dl_backend *b)
{
	return b->val[b->g->output];
}

int dl_ref_forward_f64(struct dl_backend *b, const double *x, int train)
{
	struct dl_graph *g = b->g;
	int n = b->n;
	memcpy(b->val[g->input], x, value_count(b, g->input) * sizeof(double));
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		const struct dl_shape *xs = &g->values[d->in[0]], *ys = &g->values[d->out];
		const double *in = b->val[d->in[0]];
		double *out = b->val[d->out];
		int hw = xs->h * xs->w;
		switch (d->kind) {
		case DL_NODE_CONV:
			ref_conv_forward(in, b->param[d->param[0]], out, n, xs->c, xs->h, xs->w, ys->c,
					 d->kernel, d->stride, d->pad);
			break;
		case DL_NODE_BN: {
			const double *gam = b->param[d->param[0]], *bet = b->param[d->param[1]];
			if (train) {
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
			ref_relu_forward(in, out, value_count(b, d->out));
			break;
		case DL_NODE_ADD:
			ref_add_forward(in, b->val[d->in[1]], out, value_count(b, d->out));
			break;
		case DL_NODE_MAXPOOL:
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
		if (d->relu && (d->kind == DL_NODE_BN || d->kind == DL_NODE_ADD))
			ref_relu_forward(out, out, value_count(b, d->out));
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
		set_err(b->err, sizeof(b->err), "ref backend: backward without a train forward");
		return -1;
	}
	/* A value read by several nodes (a block input feeds both the residual
	 * branch and the shortcut) sums the gradients from each reader. */
	for (int i = 0; i < g->n_values; i++)
		memset(b->dval[i], 0, value_count(b, i) * sizeof(double));
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
		if (d->relu && (d->kind == DL_NODE_BN || d->kind == DL_NODE_ADD))
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

static int ref_forward(struct dl_backend *b, const float *x, int train)
{
	size_t cx = value_count(b, b->g->input);
	dl_ref_load_graph(b);
	for (size_t i = 0; i < cx; i++)
		b->io[i] = x[i];
	return forward_io(b, train);
}

/* uint8 (N,H,W,C) batches normalized here, in double: the reference has
 * this entry so that the trainer's uint8 feed (the one the CUDA backend
 * uses) runs, and is checked, on machines without a GPU. */
static int ref_forward_u8(struct dl_backend *b, const uint8_t *nhwc, const float mean[],
			  const float std[], int train)
{
	const struct dl_shape *s = &b->g->values[b->g->input];
	size_t hw = (size_t)s->h * s->w;
	for (int c = 0; c < s->c; c++)
		if (!(std[c] > 0)) {
			set_err(b->err, sizeof(b->err), "ref backend: forward_u8: std[%d] = %g is not positive",
				c, (double)std[c]);
			return -1;
		}
	dl_ref_load_graph(b);
	// io is (N,C,H,W); nhwc is (N,H,W,C)
	for (int n = 0; n < b->n; n++)
		for (size_t p = 0; p < hw; p++)
			for (int c = 0; c < s->c; c++)
				b->io[((size_t)n * s->c + c) * hw + p] =
					(nhwc[((size_t)n * hw + p) * s->c + c] / 255.0 - mean[c]) / std[c];
	return forward_io(b, train);
}

static const float *ref_logits(struct dl_backend *b)
{
	return b->logits32;
}

static int ref_backward(struct dl_backend *b, const float *dlogits)
{
	struct dl_graph *g = b->g;
	for (size_t i = 0; i < value_count(b, g->output); i++)
		b->io[i] = dlogits[i];
	if (dl_ref_backward_f64(b, b->io) < 0)
		return -1;
	for (int i = 0; i < g->n_params; i++) {
		if (!g->params[i].grad) {
			set_err(b->err, sizeof(b->err), "ref backend: param %s has no grad array",
				g->params[i].name);
			return -1;
		}
		for (size_t j = 0; j < g->params[i].count; j++)
			g->params[i].grad[j] = (float)b->grad[i][j];
	}
	return 0;
}

static const char *ref_error(struct dl_backend *b)
{
	return b->err;
}

const struct dl_backend_ops dl_backend_ref = {
	.name = "ref",
	.create = ref_create,
	.forward = ref_forward,
	.forward_u8 = ref_forward_u8,
	.logits = ref_logits,
	.backward = ref_backward,
	.destroy = ref_destroy,
	.error = ref_error,
};
