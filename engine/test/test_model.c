#include "config.h"

/* Unit tests: model graphs (sizes, names, init), loss, SGD/LARS, LR
 * schedules, safetensors round trips and error reporting. */

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/models.h"
#include "engine/loss.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "engine/safetensors.h"
#include "engine/schedule.h"

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                     \
		if (!(cond)) {                                                       \
			failures++;                                                      \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                    \
			fprintf(stderr, "\n");                                           \
		}                                                                    \
	} while (0)

static int close_to(double a, double b, double rel)
{
	return fabs(a - b) <= rel * fmax(fabs(b), 1e-300);
}

static int find_param(const struct dl_graph *g, const char *name)
{
	for (int i = 0; i < g->n_params; i++)
		if (strcmp(g->params[i].name, name) == 0)
			return i;
	return -1;
}

static int find_buffer(const struct dl_graph *g, const char *name)
{
	for (int i = 0; i < g->n_buffers; i++)
		if (strcmp(g->buffers[i].name, name) == 0)
			return i;
	return -1;
}

static void test_models(void)
{
	/* torchvision's parameter counts and tensor counts (1000 classes, 3
	 * channels); CIFAR nets counted from the same definition in torch
	 * (engine/test/test_torchvision.py) with 10 classes. */
	static const struct {
		const char *name;
		int c, h, k;
		size_t weights;
		int n_params, n_buffers;
	} want[] = {
		{"resnet18", 3, 224, 1000, 11689512, 62, 40},   {"resnet34", 3, 224, 1000, 21797672, 110, 72},
		{"resnet50", 3, 224, 1000, 25557032, 161, 106}, {"resnet101", 3, 224, 1000, 44549160, 314, 208},
		{"resnet152", 3, 224, 1000, 60192808, 467, 310}, {"resnet20", 3, 32, 10, 272474, 65, 42},
		{"resnet32", 3, 32, 10, 466906, 101, 66},       {"resnet56", 3, 32, 10, 855770, 173, 114},
		{"resnet20", 1, 28, 10, 272186, 65, 42},
	};
	char err[256];
	for (size_t t = 0; t < sizeof(want) / sizeof(want[0]); t++) {
		struct dl_graph g;
		int r = dl_model_build(&g, want[t].name, want[t].c, want[t].h, want[t].h, want[t].k, 0, 1, err, sizeof(err));
		CHECK(r == 0, "%s: %s", want[t].name, err);
		if (r)
			continue;
		CHECK(dl_model_n_weights(&g) == want[t].weights, "%s: %zu weights, want %zu", want[t].name,
		      dl_model_n_weights(&g), want[t].weights);
		CHECK(g.n_params == want[t].n_params && g.n_buffers == want[t].n_buffers, "%s: %d params %d buffers",
		      want[t].name, g.n_params, g.n_buffers);
		CHECK(strcmp(g.params[0].name, "conv1.weight") == 0, "%s: first param %s", want[t].name, g.params[0].name);
		CHECK(strcmp(g.params[g.n_params - 1].name, "fc.bias") == 0, "%s: last param %s", want[t].name,
		      g.params[g.n_params - 1].name);
		struct dl_shape o = g.values[g.output];
		CHECK(o.c == want[t].k && o.h == 1 && o.w == 1 && g.num_classes == want[t].k, "%s: output %dx%dx%d",
		      want[t].name, o.c, o.h, o.w);
		// every value is produced exactly once, after its inputs (topological order)
		int *made = calloc((size_t)g.n_values, sizeof(int));
		int topo = made != NULL;
		if (made)
			made[g.input] = 1;
		for (int i = 0; made && i < g.n_nodes; i++) {
			const struct dl_node *nd = &g.nodes[i];
			topo &= made[nd->in[0]] && (nd->in[1] < 0 || made[nd->in[1]]) && !made[nd->out];
			made[nd->out] = 1;
		}
		CHECK(topo, "%s: nodes not in topological order", want[t].name);
		free(made);
		// no_decay exactly on 1-d params (BN gamma/beta, fc bias)
		int nd_ok = 1;
		for (int i = 0; i < g.n_params; i++)
			nd_ok &= g.params[i].no_decay == (g.params[i].ndim == 1);
		CHECK(nd_ok, "%s: no_decay flags", want[t].name);
		dl_model_free(&g);
	}

	struct dl_graph a, b, c;
	CHECK(dl_model_build(&a, "resnet50", 3, 64, 64, 10, 0, 42, err, sizeof(err)) == 0, "%s", err);
	CHECK(dl_model_build(&b, "resnet50", 3, 64, 64, 10, 0, 42, err, sizeof(err)) == 0, "%s", err);
	CHECK(dl_model_build(&c, "resnet50", 3, 64, 64, 10, 1, 43, err, sizeof(err)) == 0, "%s", err);
	int same = 1, differ = 0;
	for (int i = 0; i < a.n_params; i++) {
		same &= memcmp(a.params[i].data, b.params[i].data, a.params[i].count * 4) == 0;
		differ |= a.params[i].ndim > 1 && memcmp(a.params[i].data, c.params[i].data, a.params[i].count * 4) != 0;
	}
	CHECK(same, "same seed gave different weights");
	CHECK(differ, "different seeds gave the same weights");
	// names in the v1.5 bottleneck: stride on conv2 (3x3), downsample conv+BN
	int p = find_param(&a, "layer2.0.conv2.weight");
	CHECK(p >= 0 && a.params[p].dims[2] == 3, "layer2.0.conv2 is not the 3x3");
	for (int i = 0; p >= 0 && i < a.n_nodes; i++)
		if (a.nodes[i].kind == DL_NODE_CONV && a.nodes[i].param[0] == p)
			CHECK(a.nodes[i].stride == 2, "resnet50 layer2.0 stride is not on the 3x3 conv");
	CHECK(find_param(&a, "layer1.0.downsample.0.weight") >= 0 && find_param(&a, "layer1.0.downsample.1.bias") >= 0,
	      "resnet50 layer1.0 downsample missing");
	CHECK(find_buffer(&a, "layer4.2.bn3.running_var") >= 0, "layer4.2.bn3.running_var missing");
	// kaiming_normal_(fan_out): layer4.0.conv2 (512,512,3,3) has std sqrt(2/4608)
	p = find_param(&a, "layer4.0.conv2.weight");
	if (p >= 0) {
		double s = 0, s2 = 0;
		size_t n = a.params[p].count;
		for (size_t j = 0; j < n; j++)
			s += a.params[p].data[j], s2 += (double)a.params[p].data[j] * a.params[p].data[j];
		double std = sqrt(s2 / n - (s / n) * (s / n)), want_std = sqrt(2.0 / 4608);
		CHECK(fabs(s / n) < 0.01 * want_std * 10 && close_to(std, want_std, 0.01), "conv init std %g want %g", std,
		      want_std);
	}
	p = find_param(&a, "fc.weight");
	if (p >= 0) {
		float mx = 0;
		for (size_t j = 0; j < a.params[p].count; j++)
			mx = fmaxf(mx, fabsf(a.params[p].data[j]));
		CHECK(mx <= 1 / sqrtf(2048) && mx > 0.9f / sqrtf(2048), "fc init max %g, bound %g", mx, 1 / sqrtf(2048));
	}
	p = find_param(&c, "layer3.1.bn3.weight");
	int q = find_param(&c, "layer3.1.bn2.weight"), r18 = find_param(&a, "layer3.1.bn3.weight");
	CHECK(p >= 0 && c.params[p].data[0] == 0 && c.params[p].data[5] == 0, "zero_init_residual: bn3 not zero");
	CHECK(q >= 0 && c.params[q].data[0] == 1, "zero_init_residual touched bn2");
	CHECK(r18 >= 0 && a.params[r18].data[0] == 1, "bn3 gamma not 1 without zero_init_residual");
	dl_model_free(&a);
	dl_model_free(&b);
	dl_model_free(&c);

	CHECK(dl_model_build(&a, "resnet19", 3, 32, 32, 10, 0, 1, err, sizeof(err)) == -1 && strstr(err, "resnet19"),
	      "unknown model: %s", err);
	CHECK(dl_model_known("resnet152") && dl_model_known("resnet56") && !dl_model_known("vgg16"), "dl_model_known");
	// the engine builds every model of common/models.h, the one list
	for (int i = 0; i < DL_MODEL_COUNT; i++)
		CHECK(dl_model_known(dl_model_list[i].name), "%s (common/models.h) unknown to the engine",
		      dl_model_list[i].name);
	CHECK(strncmp(dl_model_names(), "resnet18,", 9) == 0 && strstr(dl_model_names(), ",convnet") &&
	      dl_model_names()[strlen(dl_model_names()) - 1] != ',', "dl_model_names: %s", dl_model_names());
	// CIFAR nets: no max-pool, 3x3 stem, spatial 28 -> 28/14/7
	CHECK(dl_model_build(&a, "resnet20", 1, 28, 28, 10, 0, 1, err, sizeof(err)) == 0, "%s", err);
	int has_pool = 0;
	for (int i = 0; i < a.n_nodes; i++)
		has_pool |= a.nodes[i].kind == DL_NODE_MAXPOOL;
	CHECK(!has_pool && a.params[0].dims[2] == 3 && a.params[0].dims[0] == 16, "resnet20 stem");
	CHECK(a.values[a.nodes[a.n_nodes - 2].in[0]].h == 7, "resnet20 last stage is not 7x7 for 28x28 input");
	dl_model_free(&a);
}

static void test_loss(void)
{
	// uniform logits: loss = log k whatever the smoothing; dlogits = (1/k - target)/n
	float z[2 * 4] = {0}, d[8];
	int y[2] = {1, 3}, t1, t5;
	double l = dl_softmax_xent(z, y, 2, 4, 0.2f, d, &t1, &t5);
	CHECK(close_to(l, log(4.0), 1e-12), "uniform loss %g", l);
	CHECK(close_to(d[1], (0.25 - 0.05 - 0.8) / 2, 1e-6) && close_to(d[0], (0.25 - 0.05) / 2, 1e-6),
	      "uniform dlogits %g %g", d[1],
	      d[0]);
	CHECK(t1 == 0 && t5 == 2, "ties must count against the label: top1 %d top5 %d", t1, t5);

	// hand-computed: logits (1,2,3), label 0, eps 0.1
	float z2[3] = {1, 2, 3};
	int y2 = 0;
	double lse = log(exp(1.0) + exp(2.0) + exp(3.0));
	double eps = 0.1f; // the float the caller passes
	double want = (1 - eps) * (lse - 1) + eps * ((lse - 1) + (lse - 2) + (lse - 3)) / 3;
	float d2[3];
	l = dl_softmax_xent(z2, &y2, 1, 3, 0.1f, d2, &t1, &t5);
	CHECK(close_to(l, want, 1e-12), "smoothed loss %.10g want %.10g", l, want);
	double p2 = exp(3 - lse);
	CHECK(close_to(d2[2], p2 - eps / 3, 1e-6) && close_to(d2[0], exp(1 - lse) - (1 - eps) - eps / 3, 1e-6),
	      "smoothed dlogits");
	CHECK(t1 == 0 && t5 == 1, "top-k with k=3 classes: %d %d", t1, t5);
	// large logits must not overflow
	float z3[2] = {1000.0f, -1000.0f};
	int y3 = 1;
	l = dl_softmax_xent(z3, &y3, 1, 2, 0, NULL, &t1, NULL);
	CHECK(close_to(l, 2000.0, 1e-9) && t1 == 0, "large logits: %g", l);
	// top-5 of 10
	float z4[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
	int y4[1] = {4};
	dl_softmax_xent(z4, y4, 1, 10, 0, NULL, &t1, &t5);
	CHECK(t1 == 0 && t5 == 1, "label 5th: top1 %d top5 %d", t1, t5);
	y4[0] = 5;
	dl_softmax_xent(z4, y4, 1, 10, 0, NULL, &t1, &t5);
	CHECK(t5 == 0, "label 6th counted in top5");
	y4[0] = 10;
	CHECK(isnan(dl_softmax_xent(z4, y4, 1, 10, 0, NULL, NULL, NULL)), "label out of range not NaN");
}

/* A graph with two params, enough for the optimizer. */
static void tiny_graph(struct dl_graph *g, struct dl_tensor_f32 *p, float *w, float *gr, float *b, float *gb)
{
	memset(g, 0, sizeof(*g));
	memset(p, 0, 2 * sizeof(*p));
	snprintf(p[0].name, sizeof(p[0].name), "fc.weight");
	p[0].ndim = 2, p[0].dims[0] = 2, p[0].dims[1] = 2, p[0].count = 4, p[0].data = w, p[0].grad = gr;
	snprintf(p[1].name, sizeof(p[1].name), "fc.bias");
	p[1].ndim = 1, p[1].dims[0] = 2, p[1].count = 2, p[1].data = b, p[1].grad = gb, p[1].no_decay = 1;
	g->n_params = 2;
	g->params = p;
}

/* One step of dl_sgd_step over g's params as a backend runs it: refused
 * (-1, nothing changed) when a gradient is not finite. */
struct sgd_run {
	struct dl_optim_config c;
	float buf[2][4];
	long steps;
	double trust[2];
};

static int sgd(struct dl_graph *g, struct sgd_run *r, double lr)
{
	struct dl_sgd_param ps[2];
	for (int i = 0; i < g->n_params; i++) {
		if (!dl_all_finite(g->params[i].grad, g->params[i].count))
			return -1;
		ps[i] = (struct dl_sgd_param){.w = g->params[i].data, .g = g->params[i].grad,
		                              .buf = r->c.momentum > 0 ? r->buf[i] : NULL,
		                              .count = g->params[i].count, .no_decay = g->params[i].no_decay};
	}
	dl_sgd_step(&r->c, ps, g->n_params, lr, r->steps == 0, r->trust);
	r->steps++;
	return 0;
}

static void test_optim(void)
{
	struct dl_graph g;
	struct dl_tensor_f32 p[2];
	float w[4] = {1, -2, 3, 0.5f}, gr[4] = {0.1f, 0.2f, -0.3f, 0.4f}, b[2] = {1, 2}, gb[2] = {0.5f, -0.5f};
	double wr[4], br[2], bufw[4], bufb[2];
	for (int i = 0; i < 4; i++)
		wr[i] = w[i];
	for (int i = 0; i < 2; i++)
		br[i] = b[i];
	tiny_graph(&g, p, w, gr, b, gb);
	char err[256];
	// the host copy of the state: one buffer per param, named as torch names them
	struct dl_optim_state st;
	CHECK(dl_optim_state_init(&st, &g, 0.9, err, sizeof(err)) == 0, "%s", err);
	CHECK(st.n == 2 && strcmp(st.mom[0].name, "fc.weight.momentum_buffer") == 0 && st.mom[1].count == 2 &&
	      st.steps == 0, "momentum buffer naming");
	dl_optim_state_free(&st);
	CHECK(dl_optim_state_init(&st, &g, 0.0, err, sizeof(err)) == 0 && st.n == 0, "no state without momentum");
	// momentum 0.9, wd 0.01, nesterov, no decay on the bias: three steps against the formula
	struct sgd_run r = {.c = {.momentum = 0.9, .weight_decay = 0.01, .nesterov = 1}};
	CHECK(dl_optim_config_check(&r.c, err, sizeof(err)) == 0, "%s", err);
	for (int s = 0; s < 3; s++) {
		double lr = 0.1 * (s + 1);
		for (int i = 0; i < 4; i++) {
			double d = gr[i] + 0.01 * wr[i];
			bufw[i] = s == 0 ? d : 0.9 * bufw[i] + d;
			wr[i] -= lr * (d + 0.9 * bufw[i]);
		}
		for (int i = 0; i < 2; i++) {
			double d = gb[i];
			bufb[i] = s == 0 ? d : 0.9 * bufb[i] + d;
			br[i] -= lr * (d + 0.9 * bufb[i]);
		}
		CHECK(sgd(&g, &r, lr) == 0, "step");
	}
	for (int i = 0; i < 4; i++)
		CHECK(close_to(w[i], wr[i], 1e-5), "sgd w[%d] %g want %g", i, w[i], wr[i]);
	for (int i = 0; i < 2; i++)
		CHECK(close_to(b[i], br[i], 1e-5), "sgd b[%d] %g want %g", i, b[i], br[i]);
	CHECK(close_to(r.buf[0][2], bufw[2], 1e-5), "momentum buffer %g want %g", r.buf[0][2], bufw[2]);
	// a NaN gradient is refused, large finite ones are not
	float keep = w[0];
	gr[1] = NAN;
	CHECK(sgd(&g, &r, 0.1) == -1 && w[0] == keep, "NaN gradient was applied");
	gr[1] = -INFINITY;
	CHECK(sgd(&g, &r, 0.1) == -1 && w[0] == keep, "-inf gradient was applied");
	gr[1] = FLT_MAX; /* large but finite: applied */
	CHECK(sgd(&g, &r, 0.1) == 0, "FLT_MAX gradient was refused");
	gr[1] = 0.2f;

	// LARS: trust = eta*|w|/(|g|+wd*|w|) on the weight only, then plain momentum SGD (first step: buf = d)
	float w2[4] = {3, 4, 0, 0}, g2[4] = {0.6f, 0.8f, 0, 0}, b2[2] = {1, 1}, gb2[2] = {1, 1};
	tiny_graph(&g, p, w2, g2, b2, gb2);
	struct sgd_run rl = {.c = {.momentum = 0.9, .weight_decay = 0.1, .lars = 1, .lars_eta = 0.02}};
	CHECK(sgd(&g, &rl, 1.0) == 0, "lars step");
	double trust = 0.02 * 5 / (1 + 0.1 * 5); // |w| = 5, |g| = 1
	CHECK(close_to(rl.trust[0], trust, 1e-6), "trust %g want %g", rl.trust[0], trust);
	CHECK(rl.trust[1] == 1.0, "LARS applied to a no_decay param");
	CHECK(close_to(w2[0], 3 - trust * (0.6 + 0.1 * 3), 1e-6), "lars w %g", w2[0]);
	CHECK(close_to(b2[0], 0.0, 1e-6), "lars bias %g (plain step expected)", b2[0]);
	// zero-norm weight: plain step, not 0 or inf
	float w3[4] = {0, 0, 0, 0}, g3[4] = {1, 1, 1, 1};
	tiny_graph(&g, p, w3, g3, b2, gb2);
	struct sgd_run rz = {.c = rl.c};
	CHECK(sgd(&g, &rz, 0.5) == 0 && close_to(w3[0], -0.5, 1e-7), "zero-norm lars %g", w3[0]);
	struct dl_optim_config bad = {.momentum = 1.5};
	CHECK(dl_optim_config_check(&bad, err, sizeof(err)) == -1 && strstr(err, "momentum"), "bad momentum: %s", err);
}

static void test_schedule(void)
{
	struct dl_schedule s = {.base_lr = 0.1, .global_batch = 512, .warmup_epochs = 2, .kind = DL_SCHED_STEP,
	                        .step_gamma = 0.1, .step_every = 30, .epochs = 90, .steps_per_epoch = 100};
	CHECK(dl_schedule_lr(&s, 0) == 0.0, "warmup starts at 0");
	CHECK(close_to(dl_schedule_lr(&s, 50), 0.2 * 50 / 200, 1e-12), "warmup 50: %g", dl_schedule_lr(&s, 50));
	CHECK(close_to(dl_schedule_lr(&s, 200), 0.2, 1e-12), "peak after warmup: %g", dl_schedule_lr(&s, 200));
	CHECK(close_to(dl_schedule_lr(&s, 2999), 0.2, 1e-12) && close_to(dl_schedule_lr(&s, 3000), 0.02, 1e-12) &&
	          close_to(dl_schedule_lr(&s, 6000), 0.002, 1e-12),
	      "step decay: %g %g %g", dl_schedule_lr(&s, 2999), dl_schedule_lr(&s, 3000), dl_schedule_lr(&s, 6000));
	s.kind = DL_SCHED_COSINE;
	s.warmup_epochs = 0;
	CHECK(close_to(dl_schedule_lr(&s, 0), 0.2, 1e-12) && close_to(dl_schedule_lr(&s, 4500), 0.1, 1e-12) &&
	          fabs(dl_schedule_lr(&s, 9000)) < 1e-15,
	      "cosine: %g %g %g", dl_schedule_lr(&s, 0), dl_schedule_lr(&s, 4500), dl_schedule_lr(&s, 9000));
	CHECK(close_to(dl_schedule_lr(&s, 2250), 0.2 * (1 + cos(M_PI / 4)) / 2, 1e-12), "cosine quarter");
	s.warmup_epochs = 10; // cosine over the 80 epochs after warmup
	CHECK(close_to(dl_schedule_lr(&s, 1000 + 4000), 0.1, 1e-12), "cosine after warmup: %g",
	      dl_schedule_lr(&s, 5000));
	s.kind = DL_SCHED_POLY;
	s.poly_power = 2;
	s.warmup_epochs = 0;
	CHECK(close_to(dl_schedule_lr(&s, 4500), 0.2 * 0.25, 1e-12) && dl_schedule_lr(&s, 100000) == 0.0, "poly: %g",
	      dl_schedule_lr(&s, 4500));
	s.kind = DL_SCHED_CONSTANT;
	CHECK(close_to(dl_schedule_lr(&s, 12345), 0.2, 1e-12), "constant");
	CHECK(dl_schedule_kind_parse("cosine") == DL_SCHED_COSINE && dl_schedule_kind_parse("linear") == -1, "parse");
}

static void test_safetensors(const char *dir)
{
	char path[512], err[512];
	snprintf(path, sizeof(path), "%s/t.safetensors", dir);
	struct dl_graph g, h;
	CHECK(dl_model_build(&g, "resnet20", 1, 28, 28, 10, 0, 5, err, sizeof(err)) == 0, "%s", err);
	CHECK(dl_model_build(&h, "resnet20", 1, 28, 28, 10, 0, 6, err, sizeof(err)) == 0, "%s", err);
	g.bn_batches_tracked = 1234567890123LL;
	g.buffers[3].data[2] = 0.75f;
	struct dl_tensor_f32 extra;
	memset(&extra, 0, sizeof(extra));
	float ev[3] = {1, 2, 3};
	snprintf(extra.name, sizeof(extra.name), "extra \"quoted\"");
	extra.ndim = 1, extra.dims[0] = 3, extra.count = 3, extra.data = ev;
	struct dl_tensor_f32 *ep = &extra;
	CHECK(dl_model_state_write(path, &g, &ep, 1, "{\"epoch\":\"3\",\"note\":\"a\\\"b\"}", err, sizeof(err)) == 0,
	      "%s", err);
	struct dl_safetensors *st = dl_safetensors_open(path, err, sizeof(err));
	CHECK(st != NULL, "%s", err);
	if (st) {
		const char *ep3 = dl_safetensors_meta(st, "epoch"), *note = dl_safetensors_meta(st, "note");
		CHECK(ep3 && strcmp(ep3, "3") == 0 && note && strcmp(note, "a\"b") == 0, "metadata");
		const struct dl_st_entry *e = dl_safetensors_find(st, "layer2.0.bn1.num_batches_tracked");
		CHECK(e && e->dtype == DL_ST_I64 && e->ndim == 0 && e->count == 1, "num_batches_tracked entry");
		CHECK(dl_safetensors_count(st) == 65 + 42 + 21 + 1, "entry count %zu", dl_safetensors_count(st));
		float back[3] = {0};
		extra.data = back;
		CHECK(dl_model_state_load(st, &h, &ep, 1, err, sizeof(err)) == 0, "%s", err);
		CHECK(back[2] == 3 && h.bn_batches_tracked == g.bn_batches_tracked, "extra/num_batches_tracked round trip");
		int same = 1;
		for (int i = 0; i < g.n_params; i++)
			same &= memcmp(g.params[i].data, h.params[i].data, g.params[i].count * 4) == 0;
		for (int i = 0; i < g.n_buffers; i++)
			same &= memcmp(g.buffers[i].data, h.buffers[i].data, g.buffers[i].count * 4) == 0;
		CHECK(same, "state round trip changed values");
		dl_safetensors_close(st);
	}
	// a model of another shape: the error names the tensor and both shapes
	struct dl_graph k;
	CHECK(dl_model_build(&k, "resnet20", 3, 28, 28, 10, 0, 6, err, sizeof(err)) == 0, "%s", err);
	st = dl_safetensors_open(path, err, sizeof(err));
	if (st) {
		CHECK(dl_model_state_load(st, &k, NULL, 0, err, sizeof(err)) == -1 && strstr(err, "conv1.weight") &&
		          strstr(err, "[16,1,3,3]") && strstr(err, "[16,3,3,3]"),
		      "shape mismatch message: %s", err);
		dl_safetensors_close(st);
	}
	dl_model_free(&k);
	CHECK(dl_model_build(&k, "resnet32", 1, 28, 28, 10, 0, 6, err, sizeof(err)) == 0, "%s", err);
	st = dl_safetensors_open(path, err, sizeof(err));
	if (st) {
		CHECK(dl_model_state_load(st, &k, NULL, 0, err, sizeof(err)) == -1 && strstr(err, "layer1.3.conv1.weight") &&
		          strstr(err, "missing"),
		      "missing tensor message: %s", err);
		dl_safetensors_close(st);
	}
	dl_model_free(&k);
	// truncated file: clear error, no crash; no temp file left behind
	FILE *f = fopen(path, "r+");
	if (f) {
		CHECK(ftruncate(fileno(f), 5000) == 0, "truncate");
		fclose(f);
	}
	st = dl_safetensors_open(path, err, sizeof(err));
	CHECK(st == NULL && strstr(err, path), "truncated file accepted: %s", err);
	dl_safetensors_close(st);
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	CHECK(access(tmp, F_OK) != 0, "temp file left behind");
	unlink(path);
	snprintf(path, sizeof(path), "%s/no/such/dir/x.safetensors", dir);
	CHECK(dl_model_state_write(path, &g, NULL, 0, NULL, err, sizeof(err)) == -1 && strstr(err, "no/such"),
	      "write into a missing dir: %s", err);
	CHECK(dl_model_state_write(path, &g, NULL, 0, "{\"epoch\":3", err, sizeof(err)) == -1 && strstr(err, "header"),
	      "malformed metadata accepted: %s", err);
	dl_model_free(&g);
	dl_model_free(&h);

	// hand-made files: each must be refused with one line naming the file
	static const struct {
		const char *header;
		size_t data_len;
		const char *want;
	} bad[] = {
		{"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "data_offsets"},
		{"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 8, "data_offsets"},
		{"{\"a\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype"},
		{"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets"},
		{"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "header"},
		{"[1,2]", 0, "header"},
	};
	snprintf(path, sizeof(path), "%s/bad.safetensors", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *bf = fopen(path, "wb");
		if (!bf)
			continue;
		uint64_t hl = strlen(bad[i].header);
		char zeros[16] = {0};
		fwrite(&hl, 8, 1, bf);
		fwrite(bad[i].header, 1, hl, bf);
		fwrite(zeros, 1, bad[i].data_len, bf);
		fclose(bf);
		st = dl_safetensors_open(path, err, sizeof(err));
		CHECK(st == NULL && strstr(err, path) && strstr(err, bad[i].want), "bad file %zu: %s", i,
		      st ? "accepted" : err);
		dl_safetensors_close(st);
	}
	// a valid hand-made one, with an F64 tensor loaded into float32
	{
		const char *hdr = "{\"__metadata__\":{\"k\":\"v\"},\"w\":{\"dtype\":\"F64\",\"shape\":[2],"
		                  "\"data_offsets\":[0,16]}}";
		FILE *bf = fopen(path, "wb");
		double vals[2] = {1.5, -2.25};
		uint64_t hl = strlen(hdr);
		if (bf) {
			fwrite(&hl, 8, 1, bf);
			fwrite(hdr, 1, hl, bf);
			fwrite(vals, 8, 2, bf);
			fclose(bf);
		}
		st = dl_safetensors_open(path, err, sizeof(err));
		CHECK(st != NULL, "valid hand-made file: %s", err);
		if (st) {
			float buf[2] = {0};
			struct dl_tensor_f32 t = {.name = "w", .ndim = 1, .dims = {2}, .count = 2, .data = buf};
			struct dl_tensor_f32 *tp = &t;
			CHECK(dl_safetensors_load(st, &tp, 1, err, sizeof(err)) == 0 && buf[0] == 1.5f && buf[1] == -2.25f,
			      "F64 load: %s", err);
			dl_safetensors_close(st);
		}
	}
	unlink(path);
}

int main(void)
{
	char dir[] = "/tmp/dljob-test-model-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_models();
	test_loss();
	test_optim();
	test_schedule();
	test_safetensors(dir);
	rmdir(dir);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("test_model: all checks passed\n");
	return 0;
}
