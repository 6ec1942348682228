/* The whole "cpu" backend against "ref" on a tiny ResNet built by hand
 * (conv-bn-relu stem, max-pool, one basic block with a 1x1 downsample
 * shortcut, GAP, FC): logits, every param grad, the updated running
 * buffers, eval-mode logits (per pass, through the backends' test entry
 * points); then whole training steps through dl_backend_ops (loss, the
 * weights and momentum after SGD with Nesterov and weight decay, eval
 * counts).  Then the reference itself against central finite differences
 * in float64. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/optim.h"
#include "engine/ref/ref_backend.h"
#include "engine/test/test_ops_util.h"

#define N 4
#define K 10
/* engine/test/test_bf16_net.c builds this file again with NET_BF16 1: the cpu
 * backend in bf16 mixed precision, held to bf16's 8 mantissa bits. */
#ifndef NET_BF16
#define NET_BF16 0
#endif
/* The stem's and the blocks' channels: 8 and 24 run oneDNN's batch norm
 * (not multiples of 16; oneDNN then picks nhwc for the blocks);
 * engine/test/test_net_blk.c builds this file again with 16 and 32, which
 * keep nChw16c and run the own batch-norm kernels and their fusions with
 * the residual add (its ReLU mask applied in the BN backward, the
 * shortcut BN in the add). */
#ifndef NET_CH
#define NET_STEM 8
#define NET_CH 24
#endif
#if NET_BF16
/* Forward values and BN statistics to bf16's rounding.  Gradients looser:
 * a ReLU mask or max-pool argmax decided by a value within bf16 rounding of
 * its threshold flips, and each flip moves a whole dy element, so the error
 * grows like the square root of the flip fraction, layer after layer back
 * to the stem (0.05-0.45 seen here at N=4, worst before the max pool,
 * whose argmax ties are frequent in bf16; one BN+ReLU alone, against
 * float64's mask, reached 0.13 in a run of test_bf16_ops, which now takes
 * bf16's own mask instead).  The worst are the stem BN's 16 values after
 * three steps of momentum: over 1,300 random runs the largest error of any
 * gradient was 0.76, and 0.6 was passed in 0.6 % of the runs.  A broken
 * conversion is off by O(1): zeros give 1, unrelated values ~1.4. */
#define TOL 2e-2
#define TOL_GRAD 0.9
/* ...while the typical gradient is much closer (the median of a run's
 * gradients: 0.067 over 1,000 random runs, the largest 0.13). */
#define TOL_GRAD_MEDIAN 0.2
/* Weights after three SGD steps carry three gradients' error times lr:
 * the stem's conv1, whose gradient is the worst (see above), lands at
 * 0.015-0.027 over 300 random runs, the other weights well under TOL. */
#define TOL_STEPPED 5e-2
#else
#define TOL 1e-4
#define TOL_GRAD TOL
#define TOL_GRAD_MEDIAN TOL
#define TOL_STEPPED TOL
#endif

enum { V_IN, V_C1, V_B1, V_MP, V_L1C1, V_L1B1, V_L1R1, V_L1C2, V_L1B2, V_DSC, V_DSB, V_ADD,
       V_L2C1, V_L2B1, V_L2C2, V_L2B2, V_ADD2, V_GAP, V_FC, N_VALUES };
#define N_CONV 6

static void add_tensor(struct dl_tensor_f32 *t, const char *name, int ndim, const int *dims,
		       int is_param)
{
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->ndim = ndim;
	t->count = 1;
	for (int i = 0; i < ndim; i++) {
		t->dims[i] = dims[i];
		t->count *= dims[i];
	}
	t->data = test_alloc(t->count * sizeof(float));
	t->grad = is_param ? test_alloc(t->count * sizeof(float)) : NULL;
}

/* Builds the graph with random params (same RNG stream -> same graph). */
static void build(struct dl_graph *g)
{
	static const struct dl_shape shapes[N_VALUES] = {
		[V_IN] = { 3, 20, 20 },	 [V_C1] = { NET_STEM, 10, 10 },   [V_B1] = { NET_STEM, 10, 10 },
		[V_MP] = { NET_STEM, 5, 5 },	 [V_L1C1] = { NET_CH, 3, 3 },  [V_L1B1] = { NET_CH, 3, 3 },
		[V_L1R1] = { NET_CH, 3, 3 }, [V_L1C2] = { NET_CH, 3, 3 },  [V_L1B2] = { NET_CH, 3, 3 },
		[V_DSC] = { NET_CH, 3, 3 },	 [V_DSB] = { NET_CH, 3, 3 },   [V_ADD] = { NET_CH, 3, 3 },
		[V_L2C1] = { NET_CH, 3, 3 }, [V_L2B1] = { NET_CH, 3, 3 },  [V_L2C2] = { NET_CH, 3, 3 },
		[V_L2B2] = { NET_CH, 3, 3 }, [V_ADD2] = { NET_CH, 3, 3 },
		[V_GAP] = { NET_CH, 1, 1 },	 [V_FC] = { K, 1, 1 },
	};
	memset(g, 0, sizeof(*g));
	snprintf(g->model, sizeof(g->model), "tinyresnet");
	g->n_values = N_VALUES;
	g->values = test_alloc(sizeof(shapes));
	memcpy(g->values, shapes, sizeof(shapes));
	g->input = V_IN;
	g->output = V_FC;
	g->num_classes = K;
	g->bn_momentum = 0.1f;
	g->bn_eps = 1e-5f;
	g->params = test_alloc((3 * N_CONV + 2) * sizeof(*g->params));
	g->buffers = test_alloc(2 * N_CONV * sizeof(*g->buffers));
	g->nodes = test_alloc(32 * sizeof(*g->nodes));

	struct {
		const char *name;
		int co, ci, k;
	} convs[N_CONV] = { { "conv1", NET_STEM, 3, 7 },
			    { "layer1.0.conv1", NET_CH, NET_STEM, 3 },
			    { "layer1.0.conv2", NET_CH, NET_CH, 3 },
			    { "layer1.0.downsample.0", NET_CH, NET_STEM, 1 },
			    { "layer1.1.conv1", NET_CH, NET_CH, 3 },
			    { "layer1.1.conv2", NET_CH, NET_CH, 3 } };
	const char *bns[N_CONV] = { "bn1",	    "layer1.0.bn1", "layer1.0.bn2", "layer1.0.downsample.1",
				    "layer1.1.bn1", "layer1.1.bn2" };
	int conv_p[N_CONV], bn_p[N_CONV], bn_b[N_CONV];
	char name[96];
	for (int i = 0; i < N_CONV; i++) {
		int d[4] = { convs[i].co, convs[i].ci, convs[i].k, convs[i].k }, c[1] = { convs[i].co };
		struct dl_tensor_f32 *t;
		conv_p[i] = g->n_params;
		snprintf(name, sizeof name, "%s.weight", convs[i].name);
		t = &g->params[g->n_params++];
		add_tensor(t, name, 4, d, 1);
		/* Kaiming-like uniform keeps activations O(1). */
		double a = sqrt(6.0 / (convs[i].ci * convs[i].k * convs[i].k));
		test_fill(t->data, t->count, -a, a);
		bn_p[i] = g->n_params;
		snprintf(name, sizeof name, "%s.weight", bns[i]);
		t = &g->params[g->n_params++];
		add_tensor(t, name, 1, c, 1);
		test_fill(t->data, t->count, 0.5, 1.5);
		t->no_decay = 1;
		snprintf(name, sizeof name, "%s.bias", bns[i]);
		t = &g->params[g->n_params++];
		add_tensor(t, name, 1, c, 1);
		test_fill(t->data, t->count, -0.5, 0.5);
		t->no_decay = 1;
		bn_b[i] = g->n_buffers;
		snprintf(name, sizeof name, "%s.running_mean", bns[i]);
		t = &g->buffers[g->n_buffers++];
		add_tensor(t, name, 1, c, 0);
		test_fill(t->data, t->count, -0.1, 0.1);
		snprintf(name, sizeof name, "%s.running_var", bns[i]);
		t = &g->buffers[g->n_buffers++];
		add_tensor(t, name, 1, c, 0);
		test_fill(t->data, t->count, 0.5, 1.5);
	}
	int fcw[2] = { K, NET_CH }, fcb[1] = { K };
	int fc_p = g->n_params;
	add_tensor(&g->params[g->n_params++], "fc.weight", 2, fcw, 1);
	test_fill(g->params[fc_p].data, g->params[fc_p].count, -0.3, 0.3);
	add_tensor(&g->params[g->n_params++], "fc.bias", 1, fcb, 1);
	test_fill(g->params[fc_p + 1].data, K, -0.1, 0.1);
	g->params[fc_p + 1].no_decay = 1;

#define CONV(i, a, b, k, s, p)                                                                 \
	(struct dl_node){ DL_NODE_CONV, { a, -1 }, b, 0, k, s, p, { conv_p[i], -1 }, { -1, -1 } }
#define BN(i, a, b, r)                                                                         \
	(struct dl_node){ DL_NODE_BN,                                                          \
			  { a, -1 },                                                           \
			  b,                                                                   \
			  r,                                                                   \
			  0,                                                                   \
			  0,                                                                   \
			  0,                                                                   \
			  { bn_p[i], bn_p[i] + 1 },                                            \
			  { bn_b[i], bn_b[i] + 1 } }
	struct dl_node *nd = g->nodes;
	int n = 0;
	nd[n++] = CONV(0, V_IN, V_C1, 7, 2, 3);
	nd[n++] = BN(0, V_C1, V_B1, 1);
	/* bf16: a 1x1 max pool (same output shape).  In a 3x3 window two values
	 * often round to the same bf16, and the tie sends the whole gradient to
	 * another position than float64 does: right for the rounded values, but
	 * not comparable with the reference (test_bf16_ops covers the rest). */
	nd[n++] = (struct dl_node){ DL_NODE_MAXPOOL, { V_B1, -1 }, V_MP, 0, NET_BF16 ? 1 : 3, 2,
				    NET_BF16 ? 0 : 1, { -1, -1 }, { -1, -1 } };
	nd[n++] = CONV(1, V_MP, V_L1C1, 3, 2, 1);
	nd[n++] = BN(1, V_L1C1, V_L1B1, 0); /* unfused BN then a RELU node */
	nd[n++] = (struct dl_node){ DL_NODE_RELU, { V_L1B1, -1 }, V_L1R1, 0, 0, 0, 0, { -1, -1 }, { -1, -1 } };
	nd[n++] = CONV(2, V_L1R1, V_L1C2, 3, 1, 1);
	nd[n++] = BN(2, V_L1C2, V_L1B2, 0);
	nd[n++] = CONV(3, V_MP, V_DSC, 1, 2, 0);
	nd[n++] = BN(3, V_DSC, V_DSB, 0);
	nd[n++] = (struct dl_node){ DL_NODE_ADD, { V_L1B2, V_DSB }, V_ADD, 1, 0, 0, 0, { -1, -1 }, { -1, -1 } };
	/* Second block: identity shortcut, so V_ADD feeds a conv and an ADD
	 * and its gradient is the sum of both. */
	nd[n++] = CONV(4, V_ADD, V_L2C1, 3, 1, 1);
	nd[n++] = BN(4, V_L2C1, V_L2B1, 1);
	nd[n++] = CONV(5, V_L2B1, V_L2C2, 3, 1, 1);
	nd[n++] = BN(5, V_L2C2, V_L2B2, 0);
	nd[n++] = (struct dl_node){ DL_NODE_ADD, { V_L2B2, V_ADD }, V_ADD2, 1, 0, 0, 0, { -1, -1 }, { -1, -1 } };
	nd[n++] = (struct dl_node){ DL_NODE_GAP, { V_ADD2, -1 }, V_GAP, 0, 0, 0, 0, { -1, -1 }, { -1, -1 } };
	nd[n++] = (struct dl_node){ DL_NODE_FC, { V_GAP, -1 }, V_FC, 0, 0, 0, 0, { fc_p, fc_p + 1 }, { -1, -1 } };
	g->n_nodes = n;
}

static void copy_graph(struct dl_graph *dst, const struct dl_graph *src)
{
	for (int i = 0; i < src->n_params; i++)
		memcpy(dst->params[i].data, src->params[i].data, src->params[i].count * 4);
	for (int i = 0; i < src->n_buffers; i++)
		memcpy(dst->buffers[i].data, src->buffers[i].data, src->buffers[i].count * 4);
}

static void free_graph(struct dl_graph *g)
{
	for (int i = 0; i < g->n_params; i++)
		free(g->params[i].data), free(g->params[i].grad);
	for (int i = 0; i < g->n_buffers; i++)
		free(g->buffers[i].data);
	free(g->params), free(g->buffers), free(g->nodes), free(g->values);
}

static int failures;
static double grad_err[256];
static int n_grad_err;
/* The smallest decision margin of every reference backend of a run
 * (dl_ref_margin).  Near 0 float32's rounding may take another ReLU mask or
 * max-pool argmax than float64 (or a finite difference step cross a kink),
 * and a whole gradient element moves: 4 of 800 random runs of test_net and
 * test_net_blk failed so (relerr 1e-4 to 0.16), with margins of 2e-8 to
 * 4.3e-7, where passing runs have 1e-7 to 1e-4 (median 1.2e-5).  A run
 * that fails with a margin under MARGIN_MIN is inconclusive and runs again
 * on new random inputs; one with every decision clear of it fails, and so
 * does the last run: a fault that fails every run is never passed over. */
static double margin;
#define MARGIN_MIN 1e-5
#define MAX_RUNS 3

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void check(const char *what, const float *a, const float *b, size_t n)
{
	double *b64 = test_to_f64(b, n);
	double e = test_relerr(a, b64, n);
	int is_grad = strstr(what, " grad ") != NULL;
	int stepped = !is_grad && strncmp(what, "after ", 6) == 0;
	int ok = e < (is_grad ? TOL_GRAD : stepped ? TOL_STEPPED : TOL);
	if (is_grad && n_grad_err < 256)
		grad_err[n_grad_err++] = e;
	printf("%-4s cpu%s vs ref %-40s relerr %.3g\n", ok ? "ok" : "FAIL", NET_BF16 ? " bf16" : "",
	       what, e);
	failures += !ok;
	free(b64);
}

/* Central differences of L = sum(logits * r) in float64 on the ref backend. */
static void finite_diff(struct dl_graph *g, const float *x, const float *r)
{
	char err[256];
	const struct dl_backend_ops *ref = dl_backend_find("ref", NULL, 0);
	struct dl_backend *b = dl_ref_create(g, N, err, sizeof err);
	if (!b) {
		printf("FAIL ref create: %s\n", err);
		failures++;
		return;
	}
	size_t nx = (size_t)N * 3 * 20 * 20;
	double *x64 = test_to_f64(x, nx), *r64 = test_to_f64(r, N * K);
	dl_ref_load_graph(b);
	dl_ref_forward_f64(b, x64, 1);
	dl_ref_backward_f64(b, r64);
	/* param index, element: stem conv, a BN gamma and beta, the 3x3 and
	 * shortcut convs, FC weight and bias. */
	static const int probes[][2] = { { 0, 17 }, { 0, 300 }, { 4, 5 },   { 5, 11 },
					 { 6, 100 }, { 8, 3 },	 { 9, 40 },  { 10, 7 },
					 { 12, 200 }, { 14, 9 }, { 15, 1000 }, { 18, 33 },
					 { 19, 2 } };
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		int p = probes[i][0], j = probes[i][1];
		double an = dl_ref_grad_f64(b, p)[j];
		double *w = dl_ref_param_f64(b, p), w0 = w[j], fd = 0, e = INFINITY;
		/* A step that moves a ReLU or max-pool input across its kink gives a
		 * wrong difference quotient; a correct gradient agrees at one of two
		 * small steps, a wrong one at neither. */
		static const double steps[2] = { 1e-6, 2e-7 };
		for (int s = 0; s < 2 && !(e < 1e-5); s++) {
			double h = steps[s], lp = 0, lm = 0;
			w[j] = w0 + h;
			dl_ref_forward_f64(b, x64, 1);
			for (int k = 0; k < N * K; k++)
				lp += dl_ref_logits_f64(b)[k] * r64[k];
			w[j] = w0 - h;
			dl_ref_forward_f64(b, x64, 1);
			for (int k = 0; k < N * K; k++)
				lm += dl_ref_logits_f64(b)[k] * r64[k];
			w[j] = w0;
			fd = (lp - lm) / (2 * h);
			e = fabs(fd - an) / fmax(fabs(an), 1e-3);
		}
		int ok = e < 1e-5;
		printf("%-4s ref finite diff %-28s[%3d] analytic % .9f numeric % .9f relerr %.2g\n",
		       ok ? "ok" : "FAIL", g->params[p].name, j, an, fd, e);
		failures += !ok;
	}
	free(x64);
	free(r64);
	margin = fmin(margin, dl_ref_margin(b));
	ref->destroy(b);
}

/* Three whole steps through dl_backend_ops on both backends from the same
 * state: the losses, then the weights, momentum and running buffers copied
 * out (state_out), then an eval step's counts. */
static void train_steps(struct dl_graph *gr, struct dl_graph *gc, const float *x)
{
	char err[256], what[128];
	const struct dl_backend_ops *ref = dl_backend_find("ref", NULL, 0), *cpu = dl_backend_find("cpu", NULL, 0);
	struct dl_backend_opts o = {
		.precision = NET_BF16 ? DL_BF16 : DL_FP32,
		.optim = {.momentum = 0.9, .weight_decay = 1e-2, .nesterov = 1},
		.label_smoothing = 0.1,
	};
	struct dl_optim_state sr, sc;
	copy_graph(gc, gr);
	struct dl_backend_opts o64 = o;
	o64.precision = DL_FP32; /* the reference is always float64 inside */
	struct dl_backend *br = ref->create(gr, N, &o64, err, sizeof err);
	struct dl_backend *bc = br ? cpu->create(gc, N, &o, err, sizeof err) : NULL;
	if (!br || !bc || dl_optim_state_init(&sr, gr, 0.9, err, sizeof err) < 0 ||
	    dl_optim_state_init(&sc, gc, 0.9, err, sizeof err) < 0) {
		printf("FAIL train-step setup: %s\n", err);
		failures++;
		return;
	}
	int y[N];
	for (int i = 0; i < N; i++)
		y[i] = (i * 7 + 3) % K;
	struct dl_batch in = {.x = x, .labels = y};
	for (int step = 0; step < 3; step++) {
		struct dl_step_result rr, rc;
		if (ref->train_step(br, &in, 0.05, 0, &rr) < 0 || cpu->train_step(bc, &in, 0.05, 0, &rc) < 0) {
			printf("FAIL train_step: ref: %s cpu: %s\n", ref->error(br), cpu->error(bc));
			failures++;
			goto out;
		}
		float lr32 = (float)rr.loss, lc32 = (float)rc.loss;
		snprintf(what, sizeof what, "train_step %d loss", step);
		check(what, &lc32, &lr32, 1);
		if (rr.nonfinite || rc.nonfinite || rr.stop || rc.stop || rr.n_buckets != 0 || rc.n_buckets != 0) {
			printf("FAIL train_step %d: nonfinite %d/%d stop %d/%d buckets %d/%d (one rank: none)\n", step,
			       rr.nonfinite, rc.nonfinite, rr.stop, rc.stop, rr.n_buckets, rc.n_buckets);
			failures++;
		}
	}
	if (ref->state_out(br, &sr) < 0 || cpu->state_out(bc, &sc) < 0 || sr.steps != 3 || sc.steps != 3) {
		printf("FAIL state_out: steps %ld %ld\n", sr.steps, sc.steps);
		failures++;
		goto out;
	}
	for (int p = 0; p < gr->n_params; p++) {
		snprintf(what, sizeof what, "after 3 steps %s", gr->params[p].name);
		check(what, gc->params[p].data, gr->params[p].data, gr->params[p].count);
		/* A momentum buffer is a sum of gradients: gradient tolerance. */
		snprintf(what, sizeof what, "after 3 steps grad %s", sr.mom[p].name);
		check(what, sc.mom[p].data, sr.mom[p].data, sr.mom[p].count);
	}
	for (int p = 0; p < gr->n_buffers; p++) {
		snprintf(what, sizeof what, "after 3 steps %s", gr->buffers[p].name);
		check(what, gc->buffers[p].data, gr->buffers[p].data, gr->buffers[p].count);
	}
	struct dl_eval_result er, ec;
	int pr[N], pc[N];
	if (ref->eval_step(br, &in, N - 1, pr, &er) < 0 || cpu->eval_step(bc, &in, N - 1, pc, &ec) < 0) {
		printf("FAIL eval_step: ref: %s cpu: %s\n", ref->error(br), cpu->error(bc));
		failures++;
		goto out;
	}
	/* On the weights of three steps: the stepped tolerance (bf16: 30 random
	 * runs gave up to 0.022, one seed 0.036; held to TOL, 1 run in ~20
	 * failed). */
	float el = (float)er.loss_sum, ec32 = (float)ec.loss_sum;
	check("after 3 steps eval_step loss sum", &ec32, &el, 1);
	printf("%-4s eval_step top1 %d/%d top5 %d/%d\n", er.top1 == ec.top1 || NET_BF16 ? "ok" : "FAIL", ec.top1,
	       er.top1, ec.top5, er.top5);
	failures += !(er.top1 == ec.top1 || NET_BF16);
	/* the predicted classes (dljob eval's confusion matrix) agree with
	 * each other and with the top-1 count */
	int same_pred = 1, hits = 0;
	for (int i = 0; i < N - 1; i++) {
		same_pred &= pr[i] == pc[i];
		hits += pr[i] == y[i];
	}
	printf("%-4s eval_step predictions (%d hits, top1 %d)\n", (same_pred || NET_BF16) && hits == er.top1 ? "ok" : "FAIL",
	       hits, er.top1);
	failures += !((same_pred || NET_BF16) && hits == er.top1);
out:
	dl_optim_state_free(&sr);
	dl_optim_state_free(&sc);
	if (br)
		margin = fmin(margin, dl_ref_margin(br));
	ref->destroy(br);
	if (bc)
		cpu->destroy(bc);
}

/* One run on random inputs drawn from test_rng_state; the number of
 * failed checks. */
static int run(void)
{
	struct dl_graph gr, gc;
	char err[256];
	failures = 0;
	n_grad_err = 0;
	margin = INFINITY;
	uint64_t st = test_rng_state;
	build(&gr);
	test_rng_state = st;
	build(&gc);
	copy_graph(&gc, &gr);

	const struct dl_backend_ops *ref = dl_backend_find("ref", NULL, 0), *cpu = dl_backend_find("cpu", NULL, 0);
	if (!ref || !cpu || dl_backend_find("nope", NULL, 0) || strcmp(ref->name, "ref") || strcmp(cpu->name, "cpu")) {
		printf("FAIL dl_backend_find\n");
		return 1;
	}
	struct dl_backend *br = dl_ref_create(&gr, N, err, sizeof err);
	if (!br) {
		printf("FAIL ref create: %s\n", err);
		return 1;
	}
	struct dl_backend_opts bo = { .precision = NET_BF16 ? DL_BF16 : DL_FP32 };
	struct dl_backend *bc = dl_cpu_create(&gc, N, &bo, err, sizeof err);
	if (!bc) {
		printf("FAIL cpu create: %s\n", err);
		return 1;
	}
	/* fp32: the weights whose forward takes a blocked layout stay in it
	 * between steps (their gradients and the updates below go through that
	 * layout); here the stem's and the FC's (oneDNN runs the 24-channel
	 * layers on plain weights).  bf16: the conv weights are converted every
	 * step, only the f32 FC can stay. */
	int n_res = 0, n_res_conv = 0;
	for (int p = 0; p < gc.n_params; p++)
		if (dl_cpu_resident(bc, p)) {
			printf("     resident weights: %s\n", gc.params[p].name);
			n_res++;
			n_res_conv += gc.params[p].ndim == 4;
		}
	int res_ok = NET_BF16 ? n_res_conv == 0 : n_res_conv > 0 && n_res > n_res_conv;
	printf("%-4s %d resident weights, %d of convolutions (%s)\n", res_ok ? "ok" : "FAIL", n_res,
	       n_res_conv, NET_BF16 ? "bf16: no conv expected" : "fp32: conv and FC expected");
	failures += !res_ok;
	size_t nx = (size_t)N * 3 * 20 * 20;
	float *x = test_alloc(nx * 4), *dl = test_alloc(N * K * 4);
	char what[128];
	/* Two steps: primitives and memories are reused, the running buffers
	 * accumulate. */
	for (int step = 0; step < 2; step++) {
		test_fill(x, nx, -1, 1);
		test_fill(dl, N * K, -1, 1);
		if (dl_ref_forward(br, x, 1) < 0 || dl_cpu_forward(bc, x, 1) < 0) {
			printf("FAIL forward: ref: %s cpu: %s\n", ref->error(br), cpu->error(bc));
			return 1;
		}
		snprintf(what, sizeof what, "step %d train logits", step);
		check(what, dl_cpu_logits(bc), dl_ref_logits(br), N * K);
		if (NET_BF16) {
			/* bf16 must really be in effect: f32 kernels agree to ~1e-6. */
			double *l64 = test_to_f64(dl_ref_logits(br), N * K);
			double e = test_relerr(dl_cpu_logits(bc), l64, N * K);
			free(l64);
			printf("%-4s bf16 logits differ from f32 (relerr %.3g > 1e-4)\n",
			       e > 1e-4 ? "ok" : "FAIL", e);
			failures += !(e > 1e-4);
		}
		/* The caller may reuse its batch buffer once forward returned. */
		test_fill(x, nx, -5, 5);
		if (dl_ref_backward(br, dl) < 0 || dl_cpu_backward(bc, dl) < 0) {
			printf("FAIL backward: ref: %s cpu: %s\n", ref->error(br), cpu->error(bc));
			return 1;
		}
		for (int p = 0; p < gr.n_params; p++) {
			snprintf(what, sizeof what, "step %d grad %s", step, gr.params[p].name);
			/* The reference's gradient rounded to float32, as its step uses it. */
			for (size_t j = 0; j < gr.params[p].count; j++)
				gr.params[p].grad[j] = (float)dl_ref_grad_f64(br, p)[j];
			if (dl_cpu_grad(bc, p, gc.params[p].grad) < 0) {
				printf("FAIL dl_cpu_grad: %s\n", cpu->error(bc));
				return 1;
			}
			check(what, gc.params[p].grad, gr.params[p].grad, gr.params[p].count);
		}
		for (int p = 0; p < gr.n_buffers; p++) {
			snprintf(what, sizeof what, "step %d %s", step, gr.buffers[p].name);
			check(what, gc.buffers[p].data, gr.buffers[p].data, gr.buffers[p].count);
		}
	}
	/* No weight reorder into a forward layout in fp32: every layer reads
	 * its resident weights or plain ones.  bf16 converts each conv's. */
	long wr[3];
	dl_cpu_weight_reorders(bc, wr);
	int wr_ok = NET_BF16 ? wr[0] >= 2 * N_CONV : wr[0] == 0;
	printf("%-4s weight reorders over 2 steps: %ld forward (%s), %ld backward-data, %ld gradient\n",
	       wr_ok ? "ok" : "FAIL", wr[0], NET_BF16 ? "bf16: 2 per conv" : "fp32: none", wr[1], wr[2]);
	failures += !wr_ok;
	if (gr.bn_batches_tracked != 2 || gc.bn_batches_tracked != 2) {
		printf("FAIL bn_batches_tracked ref %lld cpu %lld, want 2\n",
		       (long long)gr.bn_batches_tracked, (long long)gc.bn_batches_tracked);
		failures++;
	}
	test_fill(x, nx, -1, 1);
	if (dl_ref_forward(br, x, 0) < 0 || dl_cpu_forward(bc, x, 0) < 0) {
		printf("FAIL eval forward: ref: %s cpu: %s\n", ref->error(br), cpu->error(bc));
		return 1;
	}
	check("eval logits", dl_cpu_logits(bc), dl_ref_logits(br), N * K);
	margin = fmin(margin, dl_ref_margin(br));
	ref->destroy(br);
	cpu->destroy(bc);
	train_steps(&gr, &gc, x);
	/* The reference's own gradients, on its graph as it is now. */
	if (!NET_BF16)
		finite_diff(&gr, x, dl);
	if (NET_BF16 && n_grad_err > 0) {
		qsort(grad_err, n_grad_err, sizeof(double), cmp_double);
		double med = grad_err[n_grad_err / 2];
		printf("%-4s bf16 median gradient relerr %.3g (want < %g)\n",
		       med < TOL_GRAD_MEDIAN ? "ok" : "FAIL", med, (double)TOL_GRAD_MEDIAN);
		failures += !(med < TOL_GRAD_MEDIAN);
	}
	free_graph(&gr);
	free_graph(&gc);
	free(x);
	free(dl);
	return failures;
}

int main(void)
{
	test_seed();
	for (int r = 1;; r++) {
		int f = run();
		printf("     the reference's smallest ReLU/max-pool decision margin: %.3g\n", margin);
		if (!f)
			return 0;
		if (margin >= MARGIN_MIN || r == MAX_RUNS) {
			printf("%d check(s) failed\n", f);
			return 1;
		}
		printf("note: %d check(s) failed with a decision of the reference within %.3g of its "
		       "threshold (< %g), where float32 may decide the other way: inconclusive, run %d "
		       "of %d on new random inputs\n", f, margin, MARGIN_MIN, r + 1, MAX_RUNS);
	}
}
