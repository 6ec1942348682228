#include "config.h"

/* One training step through the engine, for comparing against torch:
 *
 *   engine_step --backend cpu --model resnet18 --weights W.safetensors \
 *               --input XY.safetensors --out OUT.safetensors [--state STATE.safetensors]
 *               [--lr 0.1] [--momentum 0.9] [--wd 1e-4] [--nesterov] [--no-decay-bn-bias]
 *               [--lars ETA] [--label-smoothing EPS] [--steps N] [--seed S]
 *
 * W holds a torchvision state_dict (params + buffers; num_batches_tracked
 * optional); XY holds "x" F32 (N,C,H,W) and "y" I64 (N).  The model's class
 * count is taken from fc.weight.  Runs the backend's train_step (forward,
 * loss, backward, SGD; repeated --steps times) and writes to OUT: "logits" (N,K),
 * "loss" (1), "dlogits" (N,K), "top1"/"top5" (I64), "grad.<param>" for every
 * param (grads of the last step), and every param and buffer after the
 * step.  --state writes the model state as a torchvision state_dict.
 * Without --weights the model is initialised from --seed. */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/loss.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "engine/safetensors.h"

static void usage(void)
{
	fprintf(stderr, "usage: engine_step --backend NAME --model NAME [--weights W.safetensors] --input XY.safetensors "
	                "--out OUT.safetensors [--state S.safetensors] [--lr F] [--momentum F] [--wd F] [--nesterov] "
	                "[--no-decay-bn-bias] [--lars ETA] [--label-smoothing F] [--steps N] [--seed S]\n"
	                "[--conv-algo auto|direct|winograd]\n");
}

static int add_tensor(struct dl_tensor_f32 **arr, size_t *n, const char *name, int ndim, const int *dims,
                      const float *data)
{
	struct dl_tensor_f32 *na = realloc(*arr, (*n + 1) * sizeof(*na));
	if (!na)
		return -1;
	*arr = na;
	struct dl_tensor_f32 *t = &na[*n];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->ndim = ndim;
	t->count = 1;
	for (int i = 0; i < ndim; i++) {
		t->dims[i] = dims[i];
		t->count *= (size_t)dims[i];
	}
	t->data = malloc(t->count * sizeof(float));
	if (!t->data)
		return -1;
	memcpy(t->data, data, t->count * sizeof(float));
	(*n)++;
	return 0;
}

int main(int argc, char **argv)
{
	const char *backend = NULL, *model = NULL, *weights = NULL, *input = NULL, *out = NULL, *state = NULL;
	double lr = 0.1, label_smoothing = 0.0;
	struct dl_optim_config oc = {.momentum = 0.9, .weight_decay = 1e-4, .decay_bn_and_bias = 1, .lars_eta = 0.001};
	int steps = 1;
	struct dl_backend_opts bo = { 0 };
	uint64_t seed = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int flag = 1;
		if (strcmp(a, "--nesterov") == 0)
			oc.nesterov = 1;
		else if (strcmp(a, "--no-decay-bn-bias") == 0)
			oc.decay_bn_and_bias = 0;
		else
			flag = 0;
		if (flag)
			continue;
		if (!v) {
			usage();
			return 2;
		}
		if (strcmp(a, "--backend") == 0)
			backend = v;
		else if (strcmp(a, "--model") == 0)
			model = v;
		else if (strcmp(a, "--weights") == 0)
			weights = v;
		else if (strcmp(a, "--input") == 0)
			input = v;
		else if (strcmp(a, "--out") == 0)
			out = v;
		else if (strcmp(a, "--state") == 0)
			state = v;
		else if (strcmp(a, "--lr") == 0)
			lr = atof(v);
		else if (strcmp(a, "--momentum") == 0)
			oc.momentum = atof(v);
		else if (strcmp(a, "--wd") == 0)
			oc.weight_decay = atof(v);
		else if (strcmp(a, "--lars") == 0)
			oc.lars = 1, oc.lars_eta = atof(v);
		else if (strcmp(a, "--label-smoothing") == 0)
			label_smoothing = atof(v);
		else if (strcmp(a, "--steps") == 0)
			steps = atoi(v);
		else if (strcmp(a, "--seed") == 0)
			seed = strtoull(v, NULL, 0);
		else if (strcmp(a, "--conv-algo") == 0 && (bo.conv_algo = dl_conv_algo_parse(v)) >= 0)
			;
		else {
			usage();
			return 2;
		}
		i++;
	}
	if (!backend || !model || !input || !out || steps < 1) {
		usage();
		return 2;
	}

	int rv = 1;
	char err[512] = "";
	struct dl_graph g = {0};
	struct dl_safetensors *wst = NULL, *xst = NULL;
	struct dl_backend *b = NULL;
	const struct dl_backend_ops *ops = NULL;
	float *x = NULL, *dlogits = NULL, *logits = NULL;
	int *labels = NULL;
	struct dl_tensor_f32 *outs = NULL;
	size_t n_outs = 0;
	struct dl_tensor_f32 **ptrs = NULL;

	xst = dl_safetensors_open(input, err, sizeof(err));
	if (!xst)
		goto out;
	const struct dl_st_entry *ex = dl_safetensors_find(xst, "x"), *ey = dl_safetensors_find(xst, "y");
	if (!ex || ex->dtype != DL_ST_F32 || ex->ndim != 4 || !ey || ey->dtype != DL_ST_I64 || ey->ndim != 1 ||
	    ey->dims[0] != ex->dims[0]) {
		snprintf(err, sizeof(err), "%s: need x F32 (N,C,H,W) and y I64 (N)", input);
		goto out;
	}
	int n = (int)ex->dims[0];
	int num_classes = 10;
	if (weights) {
		wst = dl_safetensors_open(weights, err, sizeof(err));
		if (!wst)
			goto out;
		const struct dl_st_entry *fw = dl_safetensors_find(wst, "fc.weight");
		if (!fw || fw->ndim != 2) {
			snprintf(err, sizeof(err), "%s: no 2-d fc.weight", weights);
			goto out;
		}
		num_classes = (int)fw->dims[0];
	}
	if (dl_model_build(&g, model, (int)ex->dims[1], (int)ex->dims[2], (int)ex->dims[3], num_classes, 0, seed,
	                   err, sizeof(err)))
		goto out;
	if (wst && dl_model_state_load(wst, &g, NULL, 0, err, sizeof(err)))
		goto out;
	x = malloc(ex->count * sizeof(float));
	labels = malloc((size_t)n * sizeof(int));
	dlogits = malloc((size_t)n * num_classes * sizeof(float));
	logits = malloc((size_t)n * num_classes * sizeof(float));
	if (!x || !labels || !dlogits || !logits) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	memcpy(x, ex->data, ex->count * sizeof(float));
	for (int i = 0; i < n; i++) {
		int64_t y;
		memcpy(&y, (const char *)ey->data + 8 * i, 8);
		labels[i] = (int)y;
	}
	ops = dl_backend_find(backend, err, sizeof(err));
	if (!ops)
		goto out;
	bo.optim = oc;
	bo.label_smoothing = label_smoothing;
	b = ops->create(&g, n, &bo, err, sizeof(err));
	if (!b)
		goto out;
	double loss = 0;
	int top1 = 0, top5 = 0;
	struct dl_batch in = {.x = x, .labels = labels};
	for (int s = 0; s < steps; s++) {
		struct dl_step_result res;
		if (ops->train_step(b, &in, lr, 0, &res) < 0) {
			snprintf(err, sizeof(err), "train_step: %s", ops->error(b));
			goto out;
		}
		if (res.nonfinite) {
			snprintf(err, sizeof(err), "step %d: loss or gradient not finite (loss %g)", s + 1, res.loss);
			goto out;
		}
	}
	/* The last step's logits and gradients, its loss and dlogits recomputed
	 * from those logits; then the state after it. */
	if (ops->last_step_out(b, logits) < 0 || ops->state_out(b, NULL) < 0) {
		snprintf(err, sizeof(err), "copying out: %s", ops->error(b));
		goto out;
	}
	loss = dl_softmax_xent(logits, labels, n, num_classes, (float)label_smoothing, dlogits, &top1, &top5);
	{
		int d2[2] = {n, num_classes}, d1[1] = {1};
		float lf = (float)loss;
		if (add_tensor(&outs, &n_outs, "logits", 2, d2, logits) ||
		    add_tensor(&outs, &n_outs, "dlogits", 2, d2, dlogits) ||
		    add_tensor(&outs, &n_outs, "loss", 1, d1, &lf)) {
			snprintf(err, sizeof(err), "out of memory");
			goto out;
		}
		for (int i = 0; i < g.n_params; i++) {
			char name[128];
			snprintf(name, sizeof(name), "grad.%s", g.params[i].name);
			if (add_tensor(&outs, &n_outs, name, g.params[i].ndim, g.params[i].dims, g.params[i].grad)) {
				snprintf(err, sizeof(err), "out of memory");
				goto out;
			}
		}
	}
	size_t nt = n_outs + (size_t)g.n_params + (size_t)g.n_buffers, k = 0;
	ptrs = calloc(nt, sizeof(*ptrs));
	if (!ptrs) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n_outs; i++)
		ptrs[k++] = &outs[i];
	for (int i = 0; i < g.n_params; i++)
		ptrs[k++] = &g.params[i];
	for (int i = 0; i < g.n_buffers; i++)
		ptrs[k++] = &g.buffers[i];
	struct dl_st_scalar sc[3] = {{"top1", top1}, {"top5", top5}, {"num_batches_tracked", g.bn_batches_tracked}};
	if (dl_safetensors_write_ex(out, ptrs, nt, sc, 3, "{\"tool\":\"engine_step\"}", err, sizeof(err)))
		goto out;
	if (state && dl_model_state_write(state, &g, NULL, 0, "{\"tool\":\"engine_step\"}", err, sizeof(err)))
		goto out;
	printf("engine_step: %s %s n=%d loss=%.6f top1=%d top5=%d\n", backend, model, n, loss, top1, top5);
	rv = 0;
out:
	if (rv)
		fprintf(stderr, "engine_step: %s\n", err);
	if (b)
		ops->destroy(b);
	for (size_t i = 0; i < n_outs; i++)
		free(outs[i].data);
	free(outs);
	free(ptrs);
	free(x);
	free(labels);
	free(dlogits);
	free(logits);
	dl_safetensors_close(wst);
	dl_safetensors_close(xst);
	dl_model_free(&g);
	return rv;
}
