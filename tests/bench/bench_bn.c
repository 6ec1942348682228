/* Batch norm on resnet shapes: the cpu backend's own nChw16c kernels
 * (engine/cpu/cpu_bn_blk.c) against oneDNN's primitive, through the layers
 * the network runs.  Run by hand:
 *
 *   tests/bench/bench_bn [REPS]
 *
 * One line per shape: best-of-REPS milliseconds of training forward,
 * backward, and the fused BN + residual add + ReLU forward (own kernels)
 * against oneDNN's BN followed by its binary add with a ReLU post-op.  Best
 * of, not median: on a shared machine the fastest run is the one nobody
 * else disturbed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/cpu/cpu_layers.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct shape {
	const char *name;
	int n, c, h;
};

static const struct shape shapes[] = {
	{ "r50 stem", 16, 64, 112 },    { "r50 layer1 64", 16, 64, 56 },
	{ "r50 layer1 256", 16, 256, 56 }, { "r50 layer2 512", 16, 512, 28 },
	{ "r50 layer3 1024", 16, 1024, 14 }, { "r50 layer4 2048", 16, 2048, 7 },
	{ "r20 16x28", 128, 16, 28 },   { "r20 32x14", 128, 32, 14 },
	{ "r20 64x7", 128, 64, 7 },
};

/* One variant (own = 1: own kernels) of one shape; ms[0..2]: forward,
 * backward, BN + add + ReLU forward. */
static int run(const struct shape *s, int own, int reps, double ms[3])
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_bn l;
	struct cpu_add add;
	dnnl_memory_desc_t md;
	dnnl_memory_t x, y, dy, dx, r, z;
	size_t cnt = (size_t)s->n * s->c * s->h * s->h;
	float *g = malloc(s->c * sizeof(float)), *b = malloc(s->c * sizeof(float));
	float *dg = malloc(s->c * sizeof(float)), *db = malloc(s->c * sizeof(float));
	int rv = -1;
	if (cpu_ctx_init(c) < 0)
		goto out;
	c->bn_onednn = !own;
	if (!g || !b || !dg || !db ||
	    cpu_md4(c, &md, s->n, s->c, s->h, s->h, dnnl_nChw16c) < 0 ||
	    cpu_bn_init(c, &l, &md, s->c, 0, 1e-5f) < 0 ||
	    cpu_add_init(c, &add, &md, &md, 1) < 0 || !(x = cpu_mem(c, &md, NULL)) ||
	    !(y = cpu_mem(c, &md, NULL)) || !(dy = cpu_mem(c, &md, NULL)) ||
	    !(dx = cpu_mem(c, &md, NULL)) || !(r = cpu_mem(c, &md, NULL)) ||
	    !(z = cpu_mem(c, &md, NULL)) || cpu_ctx_finalize(c) < 0)
		goto out;
	if (l.blk != own) {
		fprintf(stderr, "bench_bn: %s: own kernels %s\n", s->name,
			own ? "not usable" : "not switched off");
		goto out;
	}
	float *px = cpu_handle(x), *pdy = cpu_handle(dy), *pr = cpu_handle(r);
	for (size_t i = 0; i < cnt; i++) {
		px[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
		pdy[i] = (float)((i * 40503u) % 997) * 1e-3f - 0.5f;
		pr[i] = (float)((i * 69069u) % 991) * 1e-3f - 0.5f;
	}
	for (int ch = 0; ch < s->c; ch++)
		g[ch] = 1, b[ch] = 0.1f;
	for (int k = 0; k < 3; k++)
		ms[k] = 1e30;
	for (int rep = 0; rep < reps + 1; rep++) { /* the first is warm-up */
		double t0 = now();
		if (cpu_bn_forward_train_exec(c, &l, g, b, x, y) < 0)
			goto out;
		double t1 = now();
		if (cpu_bn_backward_exec(c, &l, g, dg, db, x, dy, dx) < 0)
			goto out;
		double t2 = now();
		if (own) {
			if (cpu_bn_blk_prepare(c, &l, g, b, NULL, NULL, x) < 0 ||
			    cpu_bn_blk_apply(c, &l, x, r, NULL, z, 1, NULL) < 0)
				goto out;
		} else if (cpu_bn_forward_train_exec(c, &l, g, b, x, y) < 0 ||
			   cpu_add_forward_exec(c, &add, y, r, z) < 0) {
			goto out;
		}
		double t3 = now();
		if (rep == 0)
			continue;
		double t[3] = { t1 - t0, t2 - t1, t3 - t2 };
		for (int k = 0; k < 3; k++)
			ms[k] = t[k] * 1e3 < ms[k] ? t[k] * 1e3 : ms[k];
	}
	rv = 0;
out:
	if (rv < 0 && c->err[0])
		fprintf(stderr, "bench_bn: %s: %s\n", s->name, c->err);
	cpu_ctx_destroy(c);
	free(g), free(b), free(dg), free(db);
	return rv;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10;
	if (reps < 1) {
		fprintf(stderr, "usage: bench_bn [REPS >= 1]\n");
		return 2;
	}
	printf("%-16s %-20s %8s %8s %8s | %8s %8s %8s\n", "shape", "N,C,HxW", "fwd", "bwd",
	       "bn+add", "fwd", "bwd", "bn+add");
	printf("%-16s %-20s %26s | %26s\n", "", "", "oneDNN (ms, best)", "own (ms, best)");
	double tot[2][3] = { { 0 } };
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		const struct shape *s = &shapes[i];
		double m[2][3];
		char dims[32];
		if (run(s, 0, reps, m[0]) < 0 || run(s, 1, reps, m[1]) < 0)
			return 1;
		snprintf(dims, sizeof dims, "%d,%d,%dx%d", s->n, s->c, s->h, s->h);
		printf("%-16s %-20s %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f\n", s->name, dims, m[0][0],
		       m[0][1], m[0][2], m[1][0], m[1][1], m[1][2]);
		for (int v = 0; v < 2; v++)
			for (int k = 0; k < 3; k++)
				tot[v][k] += m[v][k];
	}
	printf("%-16s %-20s %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f\n", "sum", "", tot[0][0],
	       tot[0][1], tot[0][2], tot[1][0], tot[1][1], tot[1][2]);
	return 0;
}
