#include "config.h"

/* Finite-difference check of a whole network's backward pass: resnet20 and
 * resnet18 (max-pool, strided stem) on tiny batches, in float64 on the "ref"
 * backend, train-mode BN.  The loss is a
 * fixed random projection of the logits, L = sum(R * logits), so dlogits = R
 * and every path through the net matters.  For a few elements of every
 * parameter tensor the central difference (L(w+h) - L(w-h)) / 2h must match
 * the analytic gradient. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/ref/ref_backend.h"

/* deterministic values for inputs and the projection */
static double lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double loss_at(struct dl_backend *b, const double *x, const double *r, int nk)
{
	if (dl_ref_forward_f64(b, x, 1))
		return NAN;
	const double *z = dl_ref_logits_f64(b);
	double l = 0;
	for (int i = 0; i < nk; i++)
		l += r[i] * z[i];
	return l;
}

/* Check picks_per_tensor elements of every tensor_stride-th param tensor
 * (plus the first and last), to keep the number of forwards small. */
static int check_model(const char *model, int n, int c, int hw, int k, int picks_per_tensor, int tensor_stride)
{
	int rv = 1, checked = 0, bad = 0;
	char err[256];
	struct dl_graph g;
	struct dl_backend *b = NULL;
	double *x = NULL, *r = NULL;
	uint64_t s = 12345;
	if (dl_model_build(&g, model, c, hw, hw, k, 0, 7, err, sizeof(err))) {
		fprintf(stderr, "test_gradcheck: %s\n", err);
		return 1;
	}
	// BN gamma/beta away from 1/0 so their gradients are not special cases
	for (int i = 0; i < g.n_params; i++)
		if (g.params[i].ndim == 1)
			for (size_t j = 0; j < g.params[i].count; j++)
				g.params[i].data[j] = (float)(strstr(g.params[i].name, ".weight") ? 1 + 0.3 * lcg(&s) : 0.2 * lcg(&s));
	b = dl_ref_create(&g, n, err, sizeof(err));
	x = malloc(sizeof(double) * n * c * hw * hw);
	r = malloc(sizeof(double) * n * k);
	if (!b || !x || !r) {
		fprintf(stderr, "test_gradcheck: %s\n", b ? "out of memory" : err);
		goto out;
	}
	for (int i = 0; i < n * c * hw * hw; i++)
		x[i] = lcg(&s);
	for (int i = 0; i < n * k; i++)
		r[i] = lcg(&s);
	dl_ref_load_graph(b);
	if (!isfinite(loss_at(b, x, r, n * k)) || dl_ref_backward_f64(b, r)) {
		fprintf(stderr, "test_gradcheck: forward/backward failed: %s\n", dl_backend_ref.error(b));
		goto out;
	}
	// keep the analytic grads: the FD forwards below do not touch them, but be safe
	double worst = 0;
	const char *worst_name = "";
	int tensors = 0;
	for (int i = 0; i < g.n_params; i++) {
		if (i % tensor_stride != 0 && i != g.n_params - 1)
			continue;
		tensors++;
		size_t cnt = g.params[i].count;
		double *an = malloc(cnt * sizeof(double));
		if (!an)
			goto out;
		memcpy(an, dl_ref_grad_f64(b, i), cnt * sizeof(double));
		double gmax = 0;
		for (size_t j = 0; j < cnt; j++)
			gmax = fmax(gmax, fabs(an[j]));
		double *w = dl_ref_param_f64(b, i);
		// first, last and one in between
		size_t picks[3] = {(size_t)((lcg(&s) + 1) / 2 * (double)(cnt - 1)), 0, cnt - 1};
		for (int p = 0; p < picks_per_tensor && p < 3; p++) {
			size_t j = picks[p];
			double w0 = w[j], h = 1e-6 * fmax(1.0, fabs(w0));
			w[j] = w0 + h;
			double lp = loss_at(b, x, r, n * k);
			w[j] = w0 - h;
			double lm = loss_at(b, x, r, n * k);
			w[j] = w0;
			double fd = (lp - lm) / (2 * h);
			// error relative to the tensor's largest gradient: tiny entries are
			// dominated by FD truncation and say nothing about correctness
			double e = fabs(fd - an[j]) / fmax(gmax, 1e-12);
			checked++;
			if (e > worst) {
				worst = e;
				worst_name = g.params[i].name;
			}
			if (!(e < 1e-5)) {
				bad++;
				fprintf(stderr, "FAIL %s %s[%zu]: analytic %.10g, finite difference %.10g (rel %.2e)\n",
				        model, g.params[i].name, j, an[j], fd, e);
			}
		}
		free(an);
	}
	printf("test_gradcheck: %s %dx%dx%dx%d, %d elements of %d tensors, worst rel err %.2e (%s)\n", model, n, c, hw,
	       hw, checked, tensors, worst, worst_name);
	fflush(stdout);
	rv = bad ? 1 : 0;
out:
	if (b)
		dl_backend_ref.destroy(b);
	free(x);
	free(r);
	dl_model_free(&g);
	return rv;
}

int main(void)
{
	int bad = check_model("resnet20", 2, 2, 8, 5, 3, 1);
	// stride 3 still covers conv, BN gamma and BN beta tensors all through the net
	bad |= check_model("resnet18", 4, 3, 32, 4, 1, 3);
	return bad ? 1 : 0;
}
