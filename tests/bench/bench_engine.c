#include "config.h"

/* Training throughput of the engine: the backend's whole train_step
 * (forward, loss, backward, SGD) on random data, timed per step.
 *
 *   bench_engine BACKEND MODEL C H W CLASSES BATCH [STEPS [WARMUP]]
 *
 * Prints one line: median img/s over STEPS timed steps (after WARMUP
 * untimed ones), min/max, images per CPU-second of the process, and peak
 * RSS (getrusage, KiB).  BENCH_PRECISION=bf16 in the environment: the
 * backend's bf16 mixed precision, as --precision bf16;
 * BENCH_CONV_ALGO=auto|direct|winograd: as --conv-algo; BENCH_RSS=1: also
 * VmRSS and VmHWM (/proc/self/status) after create and after each step, on
 * stderr, to see where the peak is reached. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/model.h"
#include "engine/optim.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "label: VmRSS ... VmHWM ..." from /proc/self/status on stderr. */
static void print_rss(const char *label, int i)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return;
	fprintf(stderr, "%s %d:", label, i);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6) || !strncmp(line, "VmHWM:", 6))
			fprintf(stderr, " %.*s", (int)strcspn(line, "\n"), line);
	fprintf(stderr, "\n");
	fclose(f);
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
	const struct dl_backend_ops *ops = dl_backend_find(backend, err, sizeof(err));
	size_t xs = (size_t)n * c * h * w;
	float *x = malloc(xs * sizeof(float));
	int *y = malloc((size_t)n * sizeof(int));
	double *t = calloc((size_t)(steps > 0 ? steps : 1), sizeof(double));
	if (!ops || !x || !y || !t || steps < 1) {
		fprintf(stderr, "bench_engine: %s\n", !ops ? err : "bad arguments or out of memory");
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
	const char *prec = getenv("BENCH_PRECISION");
	const char *algo = getenv("BENCH_CONV_ALGO");
	struct dl_backend_opts bo = {.precision = (enum dl_precision)dl_precision_parse(prec),
				     .conv_algo = algo ? dl_conv_algo_parse(algo) : DL_CONV_AUTO,
				     .optim = {.momentum = 0.9, .weight_decay = 1e-4}};
	if (bo.conv_algo < 0 || (int)bo.precision < 0) {
		snprintf(err, sizeof(err), "BENCH_CONV_ALGO=%s / BENCH_PRECISION=%s: unknown", algo ? algo : "",
			 prec ? prec : "");
		goto fail;
	}
	int rss = getenv("BENCH_RSS") != NULL;
	if (rss)
		print_rss("before create", 0);
	if (!(b = ops->create(&g, n, &bo, err, sizeof(err))))
		goto fail;
	if (rss)
		print_rss("after create", 0);
	struct dl_batch in = {.x = x, .labels = y};
	double cpu0 = 0;
	for (int i = 0; i < warmup + steps; i++) {
		if (i == warmup)
			cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		double t0 = clock_s(CLOCK_MONOTONIC);
		struct dl_step_result res;
		if (ops->train_step(b, &in, 0.01, 0, &res)) {
			snprintf(err, sizeof(err), "train_step: %s", ops->error(b));
			goto fail;
		}
		if (res.nonfinite) {
			snprintf(err, sizeof(err), "step %d: not finite", i);
			goto fail;
		}
		if (i >= warmup)
			t[i - warmup] = clock_s(CLOCK_MONOTONIC) - t0;
		if (rss)
			print_rss("after step", i);
	}
	// CPU time of the whole process over the timed steps: less sensitive than
	// wall time to other jobs sharing the cores
	double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	qsort(t, (size_t)steps, sizeof(double), cmp_double);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("engine %s%s %s %dx%dx%dx%d: median %.2f img/s (min %.2f max %.2f, %d steps) %.2f img/cpu-s peak_rss_kib %ld"
	       " median ms step %.1f\n",
	       backend, bo.precision == DL_BF16 ? " bf16" : "", model, n, c, h, w, n / t[steps / 2], n / t[steps - 1],
	       n / t[0], steps, (double)n * steps / cpu, ru.ru_maxrss, t[steps / 2] * 1e3);
	rv = 0;
	goto out;
fail:
	fprintf(stderr, "bench_engine: %s\n", err);
out:
	if (b)
		ops->destroy(b);
	dl_model_free(&g);
	free(x);
	free(y);
	free(t);
	return rv;
}
