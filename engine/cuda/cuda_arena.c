#include "config.h"

/* See cuda_arena.h.  Plain C, no CUDA: built into the engine library (for
 * `dljob plan`) and into the CUDA backend. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "engine/cuda/cuda_arena.h"
#include "engine/cuda/cuda_plan.h"
#include "engine/cuda/cuda_types.h"

static size_t align64(size_t x)
{
	return (x + 63) / 64 * 64;
}

void dlc_plan_flat(const struct dl_graph *g, size_t *p_off, size_t *n_flat)
{
	size_t n = DLC_SLOTS;
	for (int i = 0; i < g->n_params; i++) {
		if (p_off)
			p_off[i] = n;
		n = align64(n + g->params[i].count);
	}
	*n_flat = n;
}

int dlc_plan_bn_add(const struct dl_graph *g, int *apply_by)
{
	int fused = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int c = g->values[d->out].c, uses = 0, add = -1;
		apply_by[i] = -1;
		if (d->kind != DL_NODE_BN || d->relu || d->out == g->output || c < 8 || c % 8 || 256 % (c / 8))
			continue;
		for (int j = 0; j < g->n_nodes; j++)
			for (int k = 0; k < 2; k++)
				if (g->nodes[j].in[k] == d->out) {
					uses++;
					add = g->nodes[j].kind == DL_NODE_ADD && g->nodes[j].in[0] != g->nodes[j].in[1] ? j : -1;
				}
		if (uses == 1 && add >= 0) {
			apply_by[i] = add;
			fused++;
		}
	}
	return fused;
}

int dlc_arena_cp(const struct dl_graph *g, int v)
{
	int c = g->values[v].c;
	return v == g->input && c % 8 ? (c + 7) / 8 * 8 : c;
}

void dlc_arena_rules(const struct dl_graph *g, struct dl_mp_rules *r, const int *bn_apply_by)
{
	int fc_out = 0;
	for (int i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].out == g->output && g->nodes[i].kind == DL_NODE_FC)
			fc_out = 1;
	memset(r, 0, sizeof *r);
	r->bn_relu_reads_out = 0; /* BN backward recomputes its ReLU mask from the input */
	r->pool_reads_in = 0;     /* max-pool backward reads the winners' indices */
	r->bn_apply_by = bn_apply_by;
	r->output_stored = !fc_out; /* an FC writes fp32 logits to d_logits directly */
	r->input_grad = 0;
}

/* k_bn.cu's bn_groups, bn_groups8 (per = 8) and dlc_bn_part_floats */
static size_t bn_part_floats(size_t m, int c, int sm_count)
{
	size_t rpb = c >= 8 && c / 8 <= 256 ? 256 / (size_t)(c / 8) : 1;
	size_t g8 = (m + rpb * 8 - 1) / (rpb * 8), cap = (size_t)sm_count * 8;
	g8 = g8 > cap ? cap : g8 < 1 ? 1 : g8;
	size_t g = (m + 8 * 128 - 1) / (8 * 128);
	g = g > 512 ? 512 : g < 1 ? 1 : g;
	return (g > g8 ? g : g8) * (size_t)c * 2;
}

size_t dlc_arena_bn_part(const struct dl_graph *g, int n, int sm_count)
{
	size_t part = 0;
	for (int i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].kind == DL_NODE_BN) {
			const struct dl_shape *x = &g->values[g->nodes[i].in[0]];
			size_t p = bn_part_floats((size_t)n * x->h * x->w, x->c, sm_count);
			part = p > part ? p : part;
		}
	return part;
}

static size_t elems(const struct dl_graph *g, int n, int v)
{
	return (size_t)n * g->values[v].h * g->values[v].w * dlc_arena_cp(g, v);
}

int dlc_arena_plan(const struct dl_graph *g, const struct dlc_arena_in *in, struct dl_mp *mp, char *err,
		   size_t errlen)
{
	int end = dl_mp_end(g), n = in->n, rc = -1;
	size_t es = in->esize, n_flat, n_bflat = 0, n_chunks = 0;
	int *apply_by = malloc(((size_t)g->n_nodes + 1) * sizeof *apply_by);
	struct dl_mp_life *life = malloc(((size_t)g->n_values + 1) * sizeof *life);
	if (dl_mp_init(mp, end + 1, DLC_ARENA_ALIGN, err, errlen))
		goto out;
	if (!apply_by || !life) {
		dl_errf(err, errlen, "cuda arena plan: out of memory");
		goto out;
	}
	dlc_plan_bn_add(g, apply_by);
	struct dl_mp_rules rules;
	dlc_arena_rules(g, &rules, apply_by);
	rules.relu_prologue = in->fused;
	if (dl_mp_value_lives(g, &rules, life, err, errlen))
		goto out;
	dlc_plan_flat(g, NULL, &n_flat);
	for (int i = 0; i < g->n_buffers; i++)
		n_bflat += g->buffers[i].count;
	for (int i = 0; i < g->n_params; i++)
		n_chunks += (g->params[i].count + DLC_CHUNK - 1) / DLC_CHUNK;
	size_t x_count = (size_t)n * g->values[g->input].c * g->values[g->input].h * g->values[g->input].w;
	size_t out_count = (size_t)n * g->values[g->output].c * g->values[g->output].h * g->values[g->output].w;
	int img_c = g->values[g->input].c;
#define ADD(bytes, first, last, kind, what, idx)                                                   \
	do {                                                                                      \
		if (dl_mp_add(mp, (bytes), (first), (last), (kind), (what), (idx), err, errlen) < 0) \
			goto out;                                                                 \
	} while (0)
#define KEEP(bytes, kind, what, idx) ADD(bytes, 0, end, kind, what, idx)
	KEEP(n_flat * sizeof(float), DL_MP_WEIGHTS, DLC_A_W, 0);
	KEEP(n_flat * sizeof(float), DL_MP_GRADS, DLC_A_GR, 0);
	KEEP(n_flat * sizeof(float), DL_MP_OPTIM, DLC_A_MOM, 0);
	KEEP((n_bflat + 1) * sizeof(float), DL_MP_WEIGHTS, DLC_A_BUFS, 0);
	KEEP(sizeof(struct dlc_ctl), DL_MP_OPTIM, DLC_A_CTL, 0);
	KEEP(sizeof(struct dlc_optdev), DL_MP_OPTIM, DLC_A_OPT, 0);
	KEEP(((size_t)g->n_params + 1) * sizeof(float), DL_MP_OPTIM, DLC_A_TRUST, 0);
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		if (d->kind == DL_NODE_CONV) {
			const struct dl_tensor_f32 *p = &g->params[d->param[0]];
			if (p->ndim != 4) {
				dl_errf(err, errlen, "cuda arena plan: conv weight %s is not 4-d", p->name);
				goto out;
			}
			KEEP((size_t)p->dims[0] * p->dims[2] * p->dims[3] * dlc_arena_cp(g, d->in[0]) * es, DL_MP_WEIGHTS,
			     DLC_A_WORK, d->param[0]);
		} else if (d->kind == DL_NODE_FC) {
			KEEP(g->params[d->param[0]].count * es, DL_MP_WEIGHTS, DLC_A_WORK, d->param[0]);
		}
	}
	for (int v = 0; v < g->n_values; v++) {
		const struct dl_mp_life *l = &life[v];
		if (l->act_first >= 0)
			ADD(elems(g, n, v) * es, l->act_first, l->act_last, DL_MP_ACT, DLC_A_ACT, v);
		if (l->grad_first >= 0)
			ADD(elems(g, n, v) * es, l->grad_first, l->grad_last, DL_MP_ACT, DLC_A_GRAD, v);
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int f = dl_mp_fwd(g, i), b = dl_mp_bwd(g, i), c = g->values[d->in[0]].c;
		const struct dl_shape *y = &g->values[d->out];
		if (d->kind == DL_NODE_CONV) {
			ADD((size_t)y->c * d->kernel * d->kernel * dlc_arena_cp(g, d->in[0]) * es, b, b, DL_MP_GRADS,
			    DLC_A_DW, i);
		} else if (d->kind == DL_NODE_BN) {
			ADD((size_t)c * sizeof(float), f, b, DL_MP_ACT, DLC_A_MEAN, i);
			ADD((size_t)c * sizeof(float), f, b, DL_MP_ACT, DLC_A_INVSTD, i);
		} else if (d->kind == DL_NODE_MAXPOOL) {
			ADD(elems(g, n, d->out), f, b, DL_MP_ACT, DLC_A_ARG, i);
		} else if (d->kind == DL_NODE_FC) {
			ADD((size_t)n * y->c * es, b, b, DL_MP_WORK, DLC_A_DLWORK, i);
		}
		if (d->kind == DL_NODE_CONV && life[d->in[0]].prologue) {
			ADD(elems(g, n, d->in[0]) * es, f, f, DL_MP_ACT, DLC_A_PRO_F, i);
			ADD(elems(g, n, d->in[0]) * es, b, b, DL_MP_ACT, DLC_A_PRO_B, i);
		}
	}
	KEEP((in->bn_part_floats + 1) * sizeof(float), DL_MP_WORK, DLC_A_BNPART, 0);
	KEEP(in->ws_bytes + 1, DL_MP_WORK, DLC_A_WS, 0);
	KEEP(DLC_BLAS_WS_BYTES, DL_MP_WORK, DLC_A_BLASWS, 0);
	KEEP(x_count * sizeof(float), DL_MP_IO, DLC_A_X, 0);
	KEEP(x_count, DL_MP_IO, DLC_A_U8, 0);
	KEEP(2 * (size_t)img_c * sizeof(float), DL_MP_IO, DLC_A_NORM, 0);
	KEEP((size_t)n * sizeof(int), DL_MP_IO, DLC_A_LABELS, 0);
	KEEP(out_count * sizeof(float), DL_MP_IO, DLC_A_LOGITS, 0);
	KEEP(out_count * sizeof(float), DL_MP_IO, DLC_A_DLOGITS, 0);
	KEEP((size_t)n * sizeof(float), DL_MP_IO, DLC_A_LOSS, 0);
	KEEP((size_t)n * sizeof(int), DL_MP_IO, DLC_A_TOP, 0);
	KEEP(sizeof(float), DL_MP_IO, DLC_A_FLAG, 0);
	KEEP((n_chunks + 1) * sizeof(struct dlc_part), DL_MP_OPTIM, DLC_A_PART, 0);
	KEEP(((size_t)g->n_params + 1) * sizeof(struct dlc_ptensor), DL_MP_OPTIM, DLC_A_TENSORS, 0);
	KEEP((n_chunks + 1) * sizeof(struct dlc_chunk), DL_MP_OPTIM, DLC_A_CHUNKS, 0);
#undef KEEP
#undef ADD
	if (dl_mp_assign(mp, err, errlen) || dl_mp_check(mp, err, errlen))
		goto out;
	rc = 0;
out:
	free(apply_by);
	free(life);
	if (rc)
		dl_mp_free(mp);
	return rc;
}
