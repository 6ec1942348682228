#include "config.h"

/* Test hook `profile` (benchmark only): where an eager train step's GPU time
 * goes.  One timing event at every boundary of the step on the compute
 * stream, which runs everything in order, so the time between two marks is
 * the work enqueued between them:
 *   mark 0            input conversion
 *   mark 1+i          forward of node i            (i = 0 .. n-1)
 *   mark 1+n          logits, loss, dlogits
 *   mark 2+n+(n-1-i)  backward of node i           (i = n-1 .. 0)
 *   mark 2+2n         gradient statistics, optimizer
 *   mark 3+2n         end
 * Steps replaying a CUDA graph are not marked (profile turns graphs off).
 * With NCCL, the optimizer segment also holds the wait for the last
 * buckets' reduction (the compute stream waits for it there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_internal.h"
#include "engine/cuda/cuda_test.h"

int dlc_prof_init(struct dl_backend *b)
{
	if (!b->test.profile)
		return 0;
	b->n_pev = 2 * b->g->n_nodes + 4;
	b->pev = calloc((size_t)b->n_pev, sizeof *b->pev);
	b->pms = calloc((size_t)b->n_pev, sizeof *b->pms);
	if (!b->pev || !b->pms) {
		dl_errf(b->err, sizeof b->err, "cuda backend: out of memory for the profile");
		return -1;
	}
	for (int k = 0; k < b->n_pev; k++)
		CK_CUDA(b, cudaEventCreate(&b->pev[k]));
	return 0;
}

int dlc_prof_mark(struct dl_backend *b, int k)
{
	if (b->pev && !b->capturing && k >= 0 && k < b->n_pev) {
		CK_CUDA(b, cudaEventRecord(b->pev[k], b->s));
		b->prof_marked++;
	}
	return 0;
}

/* After an eager step has completed: add its segments. */
void dlc_prof_collect(struct dl_backend *b)
{
	if (!b->pev)
		return;
	if (b->prof_marked == b->n_pev) {
		for (int k = 0; k + 1 < b->n_pev; k++) {
			float ms = 0.0f;
			if (cudaEventElapsedTime(&ms, b->pev[k], b->pev[k + 1]) == cudaSuccess)
				b->pms[k] += ms;
			else
				(void)cudaGetLastError();
		}
		b->prof_steps++;
	}
	b->prof_marked = 0;
}

void dlc_prof_free(struct dl_backend *b)
{
	for (int k = 0; b->pev && k < b->n_pev; k++)
		if (b->pev[k])
			cudaEventDestroy(b->pev[k]);
	free(b->pev);
	free(b->pms);
	b->pev = NULL;
	b->pms = NULL;
}

static const char *kind_name(enum dl_node_kind k)
{
	switch (k) {
	case DL_NODE_CONV: return "conv";
	case DL_NODE_BN: return "bn";
	case DL_NODE_RELU: return "relu";
	case DL_NODE_ADD: return "add";
	case DL_NODE_MAXPOOL: return "maxpool";
	case DL_NODE_GAP: return "gap";
	case DL_NODE_FC: return "fc";
	}
	return "?";
}

/* node i's forward + backward, summed over the marked steps */
static double node_ms(const struct dl_backend *b, int i)
{
	int n = b->g->n_nodes;
	return b->pms[1 + i] + b->pms[2 + n + (n - 1 - i)];
}

void dl_cuda_profile_print(struct dl_backend *b, FILE *f)
{
	if (!b->pev || b->prof_steps == 0) {
		fprintf(f, "profile: no eager step was marked\n");
		return;
	}
	const struct dl_graph *g = b->g;
	int n = g->n_nodes;
	double s = 1.0 / b->prof_steps, total = 0.0;
	double fwd[DL_NODE_FC + 1] = { 0 }, bwd[DL_NODE_FC + 1] = { 0 };
	int cnt[DL_NODE_FC + 1] = { 0 };
	for (int k = 0; k + 1 < b->n_pev; k++)
		total += b->pms[k] * s;
	for (int i = 0; i < n; i++) {
		enum dl_node_kind kd = g->nodes[i].kind;
		fwd[kd] += b->pms[1 + i] * s;
		bwd[kd] += b->pms[2 + n + (n - 1 - i)] * s;
		cnt[kd]++;
	}
	fprintf(f, "profile: %d eager steps, %.3f ms per step on the compute stream\n", b->prof_steps, total);
	fprintf(f, "profile: %-10s %5s %10s %10s %7s\n", "part", "nodes", "fwd ms", "bwd ms", "share");
	fprintf(f, "profile: %-10s %5s %10.3f %10s %6.1f%%\n", "input", "-", b->pms[0] * s, "-",
		100 * b->pms[0] * s / total);
	for (int kd = 0; kd <= DL_NODE_FC; kd++)
		if (cnt[kd])
			fprintf(f, "profile: %-10s %5d %10.3f %10.3f %6.1f%%\n", kind_name((enum dl_node_kind)kd), cnt[kd],
				fwd[kd], bwd[kd], 100 * (fwd[kd] + bwd[kd]) / total);
	fprintf(f, "profile: %-10s %5s %10.3f %10s %6.1f%%\n", "loss", "-", b->pms[1 + n] * s, "-",
		100 * b->pms[1 + n] * s / total);
	fprintf(f, "profile: %-10s %5s %10s %10.3f %6.1f%%\n", "optimizer", "-", "-", b->pms[2 + 2 * n] * s,
		100 * b->pms[2 + 2 * n] * s / total);
	/* the ten costliest nodes, forward + backward */
	int top[10], nt = 0;
	for (int i = 0; i < n; i++) {
		double t = node_ms(b, i);
		int p = nt;
		if (nt < 10)
			nt++;
		else if (t <= node_ms(b, top[9]))
			continue;
		else
			p = 9;
		for (; p > 0 && t > node_ms(b, top[p - 1]); p--)
			top[p] = top[p - 1];
		top[p] = i;
	}
	for (int j = 0; j < nt; j++) {
		int i = top[j];
		const struct dl_node *d = &g->nodes[i];
		const struct dl_shape *x = &g->values[d->in[0]], *y = &g->values[d->out];
		char algos[64] = "";
		if (d->kind == DL_NODE_CONV) {
			const struct dlc_conv *c = &b->node[i].conv;
			snprintf(algos, sizeof algos, " (cuDNN algorithms fwd %d, bwd-data %d, bwd-filter %d)", (int)c->fwd,
				 c->has_dx ? (int)c->bwd_data : -1, (int)c->bwd_filter);
		}
		fprintf(f, "profile: node %3d %-7s %4dx%3dx%3d -> %4dx%3dx%3d k%d s%d: fwd %.3f ms, bwd %.3f ms%s\n", i,
			kind_name(d->kind), x->c, x->h, x->w, y->c, y->h, y->w, d->kernel, d->stride, b->pms[1 + i] * s,
			b->pms[2 + n + (n - 1 - i)] * s, algos);
	}
}
