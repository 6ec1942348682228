#include "config.h"

/* Training throughput of the engine: forward(train) + loss + backward + SGD
 * step on random data, timed per step.
 *
 *   bench_engine BACKEND MODEL C H W CLASSES BATCH [STEPS [WARMUP]]
 *
 * Prints one line: median img/s over STEPS timed steps (after WARMUP
 * untimed ones), min/max, images per CPU-second of the process, and peak
 * RSS (getrusage, KiB).  BENCH_PRECISION=bf16 in the environment: the
 * backend's bf16 mixed precision (create_ex), as --precision bf16;
 * BENCH_CONV_ALGO=auto|direct|winograd: as --conv-algo. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/loss.h"
#include "engine/model.h"
#include "engine/optim.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 8) {
		fprintf(stderr, "usage: bench_engine BACKEND MODEL C H W CLASSES BATCH [STEPS [WARMUP]]\n");
		return 2;
	}
	const char *backend = argv[1], *model = argv[2];
	int c = atoi(argv[3]), h = atoi(argv[4]), w = atoi(argv[5]), k = atoi(argv[6]), n = atoi(argv[7]);
	int steps = argc > 8 ? atoi(argv[8]) : 7, warmup = argc > 9 ? atoi(argv[9]) : 2;
	int rv = 1;
	char err[512] = "";
	struct dl_graph g = {0};
	struct dl_backend *b = NULL;
	struct dl_optim *o = NULL;
	const struct dl_backend_ops *ops = dl_backend_find(backend);
	size_t xs = (size_t)n * c * h * w;
	float *x = malloc(xs * sizeof(float)), *dl = malloc((size_t)n * k * sizeof(float));
	int *y = malloc((size_t)n * sizeof(int));
	double *t = calloc((size_t)(steps > 0 ? steps : 1), sizeof(double));
	/* per step: forward, loss + backward, optimizer */
	double *ph[3] = { calloc((size_t)(steps > 0 ? steps : 1), sizeof(double)),
			  calloc((size_t)(steps > 0 ? steps : 1), sizeof(double)),
			  calloc((size_t)(steps > 0 ? steps : 1), sizeof(double)) };
	if (!ops || !x || !dl || !y || !t || !ph[0] || !ph[1] || !ph[2] || steps < 1) {
		fprintf(stderr, "bench_engine: %s\n", !ops ? "unknown backend" : "bad arguments or out of memory");
		goto out;
	}
	uint64_t s = 88172645463325252ULL;
	for (size_t i = 0; i < xs; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
	}
	for (int i = 0; i < n; i++)
		y[i] = i % k;
	if (dl_model_build(&g, model, c, h, w, k, 0, 1, err, sizeof(err)))
		goto fail;
	struct dl_optim_config oc = {.momentum = 0.9, .weight_decay = 1e-4};
	const char *prec = getenv("BENCH_PRECISION");
	const char *algo = getenv("BENCH_CONV_ALGO");
	struct dl_backend_opts bo = {.bf16 = prec && strcmp(prec, "bf16") == 0,
				     .conv_algo = algo ? dl_conv_algo_parse(algo) : DL_CONV_AUTO};
	if (bo.conv_algo < 0) {
		snprintf(err, sizeof(err), "BENCH_CONV_ALGO=%s: not auto, direct or winograd", algo);
		goto fail;
	}
	if ((bo.bf16 || bo.conv_algo) && !ops->create_ex) {
		snprintf(err, sizeof(err), "backend %s has no options", backend);
		goto fail;
	}
	if (!(b = bo.bf16 || bo.conv_algo ? ops->create_ex(&g, n, &bo, err, sizeof(err)) : ops->create(&g, n, err, sizeof(err))) || !(o = dl_optim_create(&g, &oc, err, sizeof(err))))
		goto fail;
	double cpu0 = 0;
	for (int i = 0; i < warmup + steps; i++) {
		if (i == warmup)
			cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		double t0 = clock_s(CLOCK_MONOTONIC);
		if (ops->forward(b, x, 1)) {
			snprintf(err, sizeof(err), "forward: %s", ops->error(b));
			goto fail;
		}
		double t1 = clock_s(CLOCK_MONOTONIC);
		dl_softmax_xent(ops->logits(b), y, n, k, 0, dl, NULL, NULL);
		if (ops->backward(b, dl)) {
			snprintf(err, sizeof(err), "backward: %s", ops->error(b));
			goto fail;
		}
		double t2 = clock_s(CLOCK_MONOTONIC);
		if (dl_optim_step(o, 0.01)) {
			snprintf(err, sizeof(err), "optimizer step failed");
			goto fail;
		}
		if (i >= warmup) {
			double t3 = clock_s(CLOCK_MONOTONIC);
			t[i - warmup] = t3 - t0;
			ph[0][i - warmup] = t1 - t0;
			ph[1][i - warmup] = t2 - t1;
			ph[2][i - warmup] = t3 - t2;
		}
	}
	// CPU time of the whole process over the timed steps: less sensitive than
	// wall time to other jobs sharing the cores
	double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	qsort(t, (size_t)steps, sizeof(double), cmp_double);
	for (int p = 0; p < 3; p++)
		qsort(ph[p], (size_t)steps, sizeof(double), cmp_double);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("engine %s%s %s %dx%dx%dx%d: median %.2f img/s (min %.2f max %.2f, %d steps) %.2f img/cpu-s peak_rss_kib %ld"
	       " median ms fwd %.1f bwd %.1f sgd %.1f\n",
	       backend, bo.bf16 ? " bf16" : "", model, n, c, h, w, n / t[steps / 2], n / t[steps - 1], n / t[0], steps,
	       (double)n * steps / cpu, ru.ru_maxrss, ph[0][steps / 2] * 1e3, ph[1][steps / 2] * 1e3,
	       ph[2][steps / 2] * 1e3);
	rv = 0;
	goto out;
fail:
	fprintf(stderr, "bench_engine: %s\n", err);
out:
	if (b)
		ops->destroy(b);
	dl_optim_destroy(o);
	dl_model_free(&g);
	free(x);
	free(dl);
	free(y);
	free(t);
	free(ph[0]), free(ph[1]), free(ph[2]);
	return rv;
}
