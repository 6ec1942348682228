/* Convolution throughput of the oneDNN layers on resnet50 shapes, through
 * the same blocked-layout path the "cpu" backend runs.  Run by hand:
 *
 *   tests/bench/bench_ops [BATCH [REPS]]
 *
 * One line per shape: the algorithm the backend picked for it (direct,
 * winograd: oneDNN's, own-wino: cpu_wino's, direct+col-dw: oneDNN's direct
 * kernel with the weight gradient over the gathered input), then GFLOP/s of forward,
 * backward-data, backward-weights (2*N*Co*Ho*Wo*Ci*k*k flops each: the
 * direct convolution's count, also for Winograd, which does fewer
 * multiplications, so its rows can pass the FMA peak below; the weights and
 * their gradient resident in the forward's layout as the network keeps
 * them, so backward-data includes the reorder into its own layout where it
 * reads another), then the same per CPU-second used, which stays
 * meaningful on a busy machine (with OMP_NUM_THREADS=1 it is the per-core
 * rate).  The fp32 FMA peak of
 * the machine in hand is the yardstick: 12 independent chains of 512-bit
 * FMAs (the rates of the machines measured so far are in
 * tests/bench/RESULTS.md).  A
 * shape that runs on cpu_wino's panel path (own-wino) or its wgrad path
 * (wino+own-dw: oneDNN's Winograd but the own weight gradient) gets a
 * second line with oneDNN's Winograd alone, timed right after it; one on
 * its stride-2 path (own-wino, k3 s2) a second line with oneDNN's direct
 * kernel (it has no stride-2 Winograd). */
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

/* CPU seconds of the whole process: on a shared, oversubscribed machine
 * flops per CPU-second still say how good the kernels are. */
static double cputime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct shape {
	const char *name;
	int ci, h, co, k, s, p;
};

static const struct shape shapes[] = {
	{ "conv1 7x7/2", 3, 224, 64, 7, 2, 3 },
	{ "layer1 3x3", 64, 56, 64, 3, 1, 1 },
	{ "layer1 1x1 up", 64, 56, 256, 1, 1, 0 },
	{ "layer2.0 3x3/2", 128, 56, 128, 3, 2, 1 },
	{ "layer2 3x3", 128, 28, 128, 3, 1, 1 },
	{ "layer3.0 3x3/2", 256, 28, 256, 3, 2, 1 },
	{ "layer3 3x3", 256, 14, 256, 3, 1, 1 },
	{ "layer3 1x1 down", 1024, 14, 256, 1, 1, 0 },
	{ "layer4.0 3x3/2", 512, 14, 512, 3, 2, 1 },
	{ "layer4 3x3", 512, 7, 512, 3, 1, 1 },
};

/* One shape; wide_off: keep it off cpu_wino's panel, wgrad and stride-2 paths
 * (oneDNN's kernels instead).  Returns 1 where one of them ran, 0, or -1. */
static int bench(const struct shape *sh, int n, int reps, int wide_off)
{
	struct cpu_ctx cc, *c = &cc;
	struct cpu_conv l;
	dnnl_memory_desc_t blk;
	dnnl_memory_t src, dst, dsrc, ddst;
	int rv = -1, ho = (sh->h + 2 * sh->p - sh->k) / sh->s + 1;
	size_t wc = 0;
	float *w = NULL, *dw = NULL;
	if (cpu_ctx_init(c) < 0)
		goto out;
	c->wino_wide_off = wide_off;
	if (cpu_md4(c, &blk, n, sh->ci, sh->h, sh->h, dnnl_nChw16c) < 0 ||
	    cpu_conv_init(c, &l, sh->ci == 3 ? NULL : &blk, n, sh->ci, sh->h, sh->h, sh->co, sh->k,
			  sh->s, sh->p, sh->ci != 3) < 0 ||
	    cpu_conv_finish(c, &l, 1) < 0)
		goto out;
	/* Weights in the layout the layer keeps them in (padding included),
	 * 64-byte aligned as the backend's (oneDNN's Winograd kernels fault on
	 * less). */
	wc = l.winograd == 2 && l.wg.path == CPU_WINO_GROUP ? (size_t)sh->co * sh->ci * sh->k * sh->k /* plain */
			     : dnnl_memory_desc_get_size(&l.wt.res_md) / sizeof(float);
	w = aligned_alloc(64, (wc * sizeof(float) + 63) / 64 * 64);
	dw = aligned_alloc(64, (wc * sizeof(float) + 63) / 64 * 64);
	CHECK(w && dw, "out of memory");
	for (size_t i = 0; i < wc; i++)
		w[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
	CHECK((src = cpu_mem(c, &l.src_md, NULL)) && (dst = cpu_mem(c, &l.dst_md, NULL)) &&
		      (dsrc = cpu_mem(c, &l.src_md, NULL)) && (ddst = cpu_mem(c, &l.dst_md, NULL)),
	      "%s", c->err);
	if (cpu_ctx_finalize(c) < 0)
		goto out;
	double flops = 2.0 * n * sh->co * ho * ho * sh->ci * sh->k * sh->k;
	double t[3] = { 0, 0, 0 }, u[3] = { 0, 0, 0 };
	for (int r = -1; r < reps; r++) { /* r = -1 warms up */
		double t0 = now(), u0 = cputime();
		if (cpu_conv_forward_exec(c, &l, w, src, dst) < 0)
			goto out;
		double t1 = now(), u1 = cputime();
		if (cpu_conv_backward_exec(c, &l, w, dw, src, ddst, NULL) < 0)
			goto out;
		double t2 = now(), u2 = cputime();
		/* The stem never needs bwd-data (its input is the image), and
		 * oneDNN has only a reference kernel for 3 input channels. */
		if (sh->ci != 3 && cpu_conv_backward_exec(c, &l, w, dw, src, ddst, dsrc) < 0)
			goto out;
		double t3 = now(), u3 = cputime();
		if (r >= 0) {
			u[0] += u1 - u0;
			u[1] += (u3 - u2) - (u2 - u1);
			u[2] += u2 - u1;
			t[0] += t1 - t0;
			t[1] += (t3 - t2) - (t2 - t1); /* bwd-data = both minus weights alone */
			t[2] += t2 - t1;
		}
	}
	static const char *const algo[] = { "direct", "winograd", "own-wino", "wino+own-dw", "direct+col-dw" };
	printf("%-16s n%-3d %4d->%-4d %3dx%-3d k%d s%d %-8s  fwd %7.1f  bwd-data %7.1f  bwd-weights %7.1f GFLOP/s"
	       "  (per CPU-second: %6.1f %6.1f %6.1f)\n",
	       sh->name, n, sh->ci, sh->co, sh->h, sh->h, sh->k, sh->s, algo[l.own_dw ? 3 : l.col_dw ? 4 : l.winograd], flops * reps / t[0] * 1e-9,
	       sh->ci != 3 ? flops * reps / t[1] * 1e-9 : 0.0, flops * reps / t[2] * 1e-9,
	       flops * reps / u[0] * 1e-9, sh->ci != 3 ? flops * reps / u[1] * 1e-9 : 0.0,
	       flops * reps / u[2] * 1e-9);
	rv = (l.winograd == 2 && cpu_wino_hwio(&l.wg)) || l.own_dw;
out:
fail:
	if (rv < 0)
		fprintf(stderr, "bench_ops: %s: %s\n", sh->name, c->err);
	cpu_ctx_destroy(c);
	free(w);
	free(dw);
	return rv;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 16, reps = argc > 2 ? atoi(argv[2]) : 5;
	int rv = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (n < 1 || reps < 1) {
		fprintf(stderr, "usage: bench_ops [BATCH [REPS]]\n");
		return 2;
	}
	/* Where cpu_wino's panel or wgrad path runs, oneDNN's Winograd right after it,
	 * for the ratio in the same run. */
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		int r = bench(&shapes[i], n, reps, 0);
		if (r == 1)
			r = bench(&shapes[i], n, reps, 1);
		rv |= r < 0;
	}
	return rv;
}
