#include "config.h"

/* ResNet graphs.  ImageNet nets follow torchvision.models.resnet (v1.5: the
 * stride of a bottleneck sits on its 3x3 conv); CIFAR nets follow He et al.
 * 2015 section 4.2 with option-B (1x1 conv + BN) shortcuts.  Params and
 * buffers are created in torchvision's state_dict order with its names.
 * "convnet" is a small plain CNN without batch norm: with no batch
 * statistics, N ranks x batch B compute exactly what 1 rank x batch N*B
 * does, which is how the data-parallel tests check gradient averaging. */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/models.h"
#include "engine/model.h"

/* One row per model of common/models.h, in its order. */
struct arch {
	const char *name;
	int bottleneck;    /* 0: BasicBlock (expansion 1), 1: Bottleneck (expansion 4) */
	int cifar;         /* 3x3 stem, no max-pool, three stages 16/32/64 */
	int blocks[4];
	int plain;         /* no residual blocks, no BN: conv-ReLU stages only */
};

static const struct arch archs[] = {
	{"resnet18", 0, 0, {2, 2, 2, 2}, 0},
	{"resnet34", 0, 0, {3, 4, 6, 3}, 0},
	{"resnet50", 1, 0, {3, 4, 6, 3}, 0},
	{"resnet101", 1, 0, {3, 4, 23, 3}, 0},
	{"resnet152", 1, 0, {3, 8, 36, 3}, 0},
	{"resnet20", 0, 1, {3, 3, 3, 0}, 0},
	{"resnet32", 0, 1, {5, 5, 5, 0}, 0},
	{"resnet56", 0, 1, {9, 9, 9, 0}, 0},
	{"convnet", 0, 0, {0, 0, 0, 0}, 1},
};
_Static_assert(sizeof(archs) / sizeof(archs[0]) == DL_MODEL_COUNT, "one architecture per common/models.h entry");

static const struct arch *arch_find(const char *name)
{
	/* archs[i] is the architecture of dl_model_list[i] only if its name
	 * says so (engine/test/test_model.c checks that every listed model
	 * is found). */
	for (size_t i = 0; i < DL_MODEL_COUNT; i++)
		if (name && strcmp(dl_model_list[i].name, name) == 0 && strcmp(archs[i].name, name) == 0)
			return &archs[i];
	return NULL;
}

int dl_model_known(const char *model)
{
	return arch_find(model) != NULL;
}

const char *dl_model_names(void)
{
	return &DL_MODEL_NAMES[1];
}

size_t dl_model_n_weights(const struct dl_graph *g)
{
	size_t n = 0;
	for (int i = 0; i < g->n_params; i++)
		n += g->params[i].count;
	return n;
}

/* splitmix64 seeds xoshiro256**; normals by Box-Muller.  Own PRNG so the
 * weights do not depend on libc. */
struct rng {
	uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* uniform in (0,1): never 0, so log() below is finite */
static double rng_uniform(struct rng *r)
{
	return ((double)(rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double rng_normal(struct rng *r)
{
	double u1 = rng_uniform(r), u2 = rng_uniform(r);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Builder state: arrays grown as the net is described. */
struct builder {
	struct dl_graph *g;
	int cap_nodes, cap_values, cap_params, cap_buffers;
	struct rng rng;
	char *err;
	size_t errlen;
	int failed;
};

static void fail(struct builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct builder *b, const char *fmt, ...)
{
	if (b->failed)
		return;
	b->failed = 1;
	va_list ap;
	va_start(ap, fmt);
	dl_verrf(b->err, b->errlen, fmt, ap);
	va_end(ap);
}

static int grow(struct builder *b, void **arr, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	int ncap = *cap ? *cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	void *p = realloc(*arr, (size_t)ncap * elem);
	if (!p) {
		fail(b, "out of memory building the model graph");
		return -1;
	}
	memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
	*arr = p;
	*cap = ncap;
	return 0;
}

static int add_value(struct builder *b, int c, int h, int w)
{
	struct dl_graph *g = b->g;
	if (b->failed || grow(b, (void **)&g->values, &b->cap_values, g->n_values + 1, sizeof(*g->values)))
		return -1;
	if (c < 1 || h < 1 || w < 1) {
		fail(b, "%s: input too small, an intermediate activation would be %dx%dx%d", g->model, c, h, w);
		return -1;
	}
	g->values[g->n_values] = (struct dl_shape){c, h, w};
	return g->n_values++;
}

/* name is "prefix" + "suffix"; dims as given (ndim <= 4) */
static int add_tensor(struct builder *b, struct dl_tensor_f32 **arr, int *n, int *cap, int is_param,
                      const char *prefix, const char *suffix, int ndim, const int *dims)
{
	if (b->failed || grow(b, (void **)arr, cap, *n + 1, sizeof(**arr)))
		return -1;
	struct dl_tensor_f32 *t = &(*arr)[*n];
	memset(t, 0, sizeof(*t));
	int len = snprintf(t->name, sizeof(t->name), "%s%s", prefix, suffix);
	if (len < 0 || (size_t)len >= sizeof(t->name)) {
		fail(b, "%s:%d: tensor name %s%s too long", __FILE__, __LINE__, prefix, suffix);
		return -1;
	}
	t->ndim = ndim;
	t->count = 1;
	for (int i = 0; i < ndim; i++) {
		t->dims[i] = dims[i];
		t->count *= (size_t)dims[i];
	}
	t->data = calloc(t->count, sizeof(float));
	if (is_param)
		t->grad = calloc(t->count, sizeof(float));
	if (!t->data || (is_param && !t->grad)) {
		free(t->data);
		free(t->grad);
		fail(b, "out of memory for tensor %s", t->name);
		return -1;
	}
	return (*n)++;
}

static int add_param(struct builder *b, const char *prefix, const char *suffix, int ndim, const int *dims)
{
	return add_tensor(b, &b->g->params, &b->g->n_params, &b->cap_params, 1, prefix, suffix, ndim, dims);
}

static int add_buffer(struct builder *b, const char *prefix, const char *suffix, int ndim, const int *dims)
{
	return add_tensor(b, &b->g->buffers, &b->g->n_buffers, &b->cap_buffers, 0, prefix, suffix, ndim, dims);
}

static struct dl_node *add_node(struct builder *b, enum dl_node_kind kind, int in0)
{
	struct dl_graph *g = b->g;
	if (b->failed || in0 < 0 || grow(b, (void **)&g->nodes, &b->cap_nodes, g->n_nodes + 1, sizeof(*g->nodes)))
		return NULL;
	struct dl_node *nd = &g->nodes[g->n_nodes++];
	memset(nd, 0, sizeof(*nd));
	nd->kind = kind;
	nd->in[0] = in0;
	nd->in[1] = -1;
	nd->out = -1;
	nd->param[0] = nd->param[1] = -1;
	nd->buffer[0] = nd->buffer[1] = -1;
	return nd;
}

/* conv `name`.weight (co,ci,k,k), kaiming_normal_(mode='fan_out', relu):
 * std = sqrt(2 / (co*k*k)).  Returns the output value id. */
static int conv(struct builder *b, int in, const char *name, int co, int k, int stride, int pad)
{
	if (b->failed || in < 0)
		return -1;
	struct dl_shape s = b->g->values[in];
	int dims[4] = {co, s.c, k, k};
	int p = add_param(b, name, ".weight", 4, dims);
	if (p < 0)
		return -1;
	struct dl_tensor_f32 *w = &b->g->params[p];
	double std = sqrt(2.0 / ((double)co * k * k));
	for (size_t i = 0; i < w->count; i++)
		w->data[i] = (float)(std * rng_normal(&b->rng));
	int out = add_value(b, co, (s.h + 2 * pad - k) / stride + 1, (s.w + 2 * pad - k) / stride + 1);
	struct dl_node *nd = add_node(b, DL_NODE_CONV, in);
	if (!nd || out < 0)
		return -1;
	nd->out = out;
	nd->kernel = k;
	nd->stride = stride;
	nd->pad = pad;
	nd->param[0] = p;
	return out;
}

/* BN `name` (gamma=1 or 0, beta=0, running mean 0, var 1), optional ReLU. */
static int bn(struct builder *b, int in, const char *name, int relu, int zero_gamma)
{
	if (b->failed || in < 0)
		return -1;
	struct dl_shape s = b->g->values[in];
	int dims[1] = {s.c};
	int pg = add_param(b, name, ".weight", 1, dims);
	int pb = add_param(b, name, ".bias", 1, dims);
	int bm = add_buffer(b, name, ".running_mean", 1, dims);
	int bv = add_buffer(b, name, ".running_var", 1, dims);
	if (pg < 0 || pb < 0 || bm < 0 || bv < 0)
		return -1;
	struct dl_graph *g = b->g;
	g->params[pg].no_decay = 1;
	g->params[pb].no_decay = 1;
	for (int i = 0; i < s.c; i++) {
		g->params[pg].data[i] = zero_gamma ? 0.0f : 1.0f;
		g->buffers[bv].data[i] = 1.0f;
	}
	int out = add_value(b, s.c, s.h, s.w);
	struct dl_node *nd = add_node(b, DL_NODE_BN, in);
	if (!nd || out < 0)
		return -1;
	nd->out = out;
	nd->relu = relu;
	nd->param[0] = pg;
	nd->param[1] = pb;
	nd->buffer[0] = bm;
	nd->buffer[1] = bv;
	return out;
}

static int relu(struct builder *b, int in)
{
	if (b->failed || in < 0)
		return -1;
	struct dl_shape s = b->g->values[in];
	int out = add_value(b, s.c, s.h, s.w);
	struct dl_node *nd = add_node(b, DL_NODE_RELU, in);
	if (!nd || out < 0)
		return -1;
	nd->out = out;
	return out;
}

static int residual_add(struct builder *b, int in0, int in1)
{
	if (b->failed || in0 < 0 || in1 < 0)
		return -1;
	struct dl_shape s0 = b->g->values[in0], s1 = b->g->values[in1];
	if (s0.c != s1.c || s0.h != s1.h || s0.w != s1.w) {
		fail(b, "%s:%d: residual shapes differ", __FILE__, __LINE__);
		return -1;
	}
	int out = add_value(b, s0.c, s0.h, s0.w);
	struct dl_node *nd = add_node(b, DL_NODE_ADD, in0);
	if (!nd || out < 0)
		return -1;
	nd->in[1] = in1;
	nd->out = out;
	nd->relu = 1;
	return out;
}

/* One residual block `prefix` (e.g. "layer2.0"), torchvision's BasicBlock or
 * Bottleneck.  The downsample branch is built after the main path so the
 * params come in state_dict order. */
static int block(struct builder *b, int in, const char *prefix, int bottleneck, int planes, int stride,
                 int zero_init_residual)
{
	if (b->failed || in < 0)
		return -1;
	char name[64];
	int inplanes = b->g->values[in].c;
	int outplanes = bottleneck ? planes * 4 : planes;
	int x = in;
	if (bottleneck) {
		snprintf(name, sizeof(name), "%s.conv1", prefix);
		x = conv(b, x, name, planes, 1, 1, 0);
		snprintf(name, sizeof(name), "%s.bn1", prefix);
		x = bn(b, x, name, 1, 0);
		snprintf(name, sizeof(name), "%s.conv2", prefix);
		x = conv(b, x, name, planes, 3, stride, 1);
		snprintf(name, sizeof(name), "%s.bn2", prefix);
		x = bn(b, x, name, 1, 0);
		snprintf(name, sizeof(name), "%s.conv3", prefix);
		x = conv(b, x, name, outplanes, 1, 1, 0);
		snprintf(name, sizeof(name), "%s.bn3", prefix);
		x = bn(b, x, name, 0, zero_init_residual);
	} else {
		snprintf(name, sizeof(name), "%s.conv1", prefix);
		x = conv(b, x, name, planes, 3, stride, 1);
		snprintf(name, sizeof(name), "%s.bn1", prefix);
		x = bn(b, x, name, 1, 0);
		snprintf(name, sizeof(name), "%s.conv2", prefix);
		x = conv(b, x, name, planes, 3, 1, 1);
		snprintf(name, sizeof(name), "%s.bn2", prefix);
		x = bn(b, x, name, 0, zero_init_residual);
	}
	int identity = in;
	if (stride != 1 || inplanes != outplanes) {
		snprintf(name, sizeof(name), "%s.downsample.0", prefix);
		identity = conv(b, in, name, outplanes, 1, stride, 0);
		snprintf(name, sizeof(name), "%s.downsample.1", prefix);
		identity = bn(b, identity, name, 0, 0);
	}
	return residual_add(b, x, identity);
}

/* fc: nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
 * weight and bias (kaiming_uniform_ with a=sqrt(5) works out to that). */
static int fc(struct builder *b, int in, int k)
{
	if (b->failed || in < 0)
		return -1;
	int c = b->g->values[in].c;
	int wd[2] = {k, c}, bd[1] = {k};
	int pw = add_param(b, "fc", ".weight", 2, wd);
	int pb = add_param(b, "fc", ".bias", 1, bd);
	if (pw < 0 || pb < 0)
		return -1;
	struct dl_graph *g = b->g;
	g->params[pb].no_decay = 1;
	double bound = 1.0 / sqrt((double)c);
	for (size_t i = 0; i < g->params[pw].count; i++)
		g->params[pw].data[i] = (float)(bound * (2.0 * rng_uniform(&b->rng) - 1.0));
	for (size_t i = 0; i < g->params[pb].count; i++)
		g->params[pb].data[i] = (float)(bound * (2.0 * rng_uniform(&b->rng) - 1.0));
	int out = add_value(b, k, 1, 1);
	struct dl_node *nd = add_node(b, DL_NODE_FC, in);
	if (!nd || out < 0)
		return -1;
	nd->out = out;
	nd->param[0] = pw;
	nd->param[1] = pb;
	return out;
}

void dl_model_free(struct dl_graph *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n_params; i++) {
		free(g->params[i].data);
		free(g->params[i].grad);
	}
	for (int i = 0; i < g->n_buffers; i++)
		free(g->buffers[i].data);
	free(g->params);
	free(g->buffers);
	free(g->nodes);
	free(g->values);
	memset(g, 0, sizeof(*g));
}

int dl_model_build(struct dl_graph *g, const char *model, int in_channels, int in_h, int in_w,
                   int num_classes, int zero_init_residual, uint64_t seed, char *err, size_t errlen)
{
	memset(g, 0, sizeof(*g));
	const struct arch *a = arch_find(model);
	if (!a) {
		dl_errf(err, errlen, "unknown model '%s' (known: %s)", model ? model : "(null)", dl_model_names());
		return -1;
	}
	if (in_channels < 1 || in_h < 1 || in_w < 1 || num_classes < 1) {
		dl_errf(err, errlen, "%s: bad input shape %dx%dx%d or class count %d", model, in_channels, in_h,
		         in_w, num_classes);
		return -1;
	}
	snprintf(g->model, sizeof(g->model), "%s", a->name);
	g->num_classes = num_classes;
	g->bn_momentum = 0.1f;
	g->bn_eps = 1e-5f;
	struct builder b = {.g = g, .err = err, .errlen = errlen};
	uint64_t sm = seed;
	for (int i = 0; i < 4; i++)
		b.rng.s[i] = splitmix64(&sm);

	int x = add_value(&b, in_channels, in_h, in_w);
	g->input = x;
	if (a->plain) {
		// convnet: 3x3 convs of 16/32/64 channels, strides 1/2/2, each + ReLU
		x = relu(&b, conv(&b, x, "conv1", 16, 3, 1, 1));
		x = relu(&b, conv(&b, x, "conv2", 32, 3, 2, 1));
		x = relu(&b, conv(&b, x, "conv3", 64, 3, 2, 1));
	} else if (a->cifar) {
		// stem: 3x3 conv, 16 channels, stride 1; no max-pool
		x = conv(&b, x, "conv1", 16, 3, 1, 1);
		x = bn(&b, x, "bn1", 1, 0);
	} else {
		// stem: 7x7/2 conv, 64 channels, then 3x3/2 max-pool
		x = conv(&b, x, "conv1", 64, 7, 2, 3);
		x = bn(&b, x, "bn1", 1, 0);
		if (!b.failed) {
			struct dl_shape s = g->values[x];
			int out = add_value(&b, s.c, (s.h + 2 - 3) / 2 + 1, (s.w + 2 - 3) / 2 + 1);
			struct dl_node *nd = add_node(&b, DL_NODE_MAXPOOL, x);
			if (nd) {
				nd->out = out;
				nd->kernel = 3;
				nd->stride = 2;
				nd->pad = 1;
			}
			x = out;
		}
	}
	int n_stages = a->plain ? 0 : a->cifar ? 3 : 4;
	for (int st = 0; st < n_stages; st++) {
		int planes = (a->cifar ? 16 : 64) << st;
		for (int i = 0; i < a->blocks[st]; i++) {
			char prefix[32];
			snprintf(prefix, sizeof(prefix), "layer%d.%d", st + 1, i);
			x = block(&b, x, prefix, a->bottleneck, planes, (i == 0 && st > 0) ? 2 : 1, zero_init_residual);
		}
	}
	if (!b.failed) {
		struct dl_shape s = g->values[x];
		int out = add_value(&b, s.c, 1, 1);
		struct dl_node *nd = add_node(&b, DL_NODE_GAP, x);
		if (nd)
			nd->out = out;
		x = out;
	}
	x = fc(&b, x, num_classes);
	if (b.failed || x < 0) {
		if (!b.failed)
			dl_errf(err, errlen, "%s:%d: model graph incomplete", __FILE__, __LINE__);
		dl_model_free(g);
		return -1;
	}
	g->output = x;
	return 0;
}
