#include "config.h"

/* See memplan.h.  Placement is "greedy by size" (largest buffer first), each
 * buffer at the lowest-waste gap (best fit) among the buffers already
 * placed whose lifetimes overlap its own, or above them all. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "engine/memplan.h"

int dl_mp_init(struct dl_mp *p, int n_steps, size_t align, char *err, size_t errlen)
{
	memset(p, 0, sizeof *p);
	if (n_steps < 1 || align == 0 || (align & (align - 1))) {
		dl_errf(err, errlen, "memory plan: bad schedule (%d steps) or alignment %zu", n_steps, align);
		return -1;
	}
	p->n_steps = n_steps;
	p->align = align;
	return 0;
}

void dl_mp_free(struct dl_mp *p)
{
	free(p->b);
	memset(p, 0, sizeof *p);
}

int dl_mp_add(struct dl_mp *p, size_t bytes, int first, int last, int kind, int what, int idx, char *err,
	      size_t errlen)
{
	if (first < 0 || last < first || last >= p->n_steps || kind < 0 || kind >= DL_MP_NKIND ||
	    bytes > SIZE_MAX / 2) {
		dl_errf(err, errlen, "memory plan: buffer %d.%d: bad lifetime [%d, %d] of %d steps or size %zu",
			 what, idx, first, last, p->n_steps, bytes);
		return -1;
	}
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 256;
		struct dl_mp_buf *nb = realloc(p->b, (size_t)cap * sizeof *nb);
		if (!nb) {
			dl_errf(err, errlen, "memory plan: out of memory");
			return -1;
		}
		p->b = nb;
		p->cap = cap;
	}
	p->b[p->n] = (struct dl_mp_buf){ .bytes = bytes, .first = first, .last = last, .kind = kind,
					 .what = what, .idx = idx };
	return p->n++;
}

size_t dl_mp_size(const struct dl_mp *p, const struct dl_mp_buf *b)
{
	size_t s = b->bytes ? b->bytes : 1;
	return (s + p->align - 1) & ~(p->align - 1);
}

static int overlap_t(const struct dl_mp_buf *a, const struct dl_mp_buf *b)
{
	return a->first <= b->last && b->first <= a->last;
}

/* qsort contexts: C11 has no qsort_r, so the keys are copied in */
struct by_size {
	size_t size;
	int first, i;
};
static int cmp_size(const void *x, const void *y)
{
	const struct by_size *a = x, *b = y;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}
struct span {
	size_t off, end;
};
static int cmp_span(const void *x, const void *y)
{
	const struct span *a = x, *b = y;
	return a->off < b->off ? -1 : a->off > b->off;
}

int dl_mp_assign(struct dl_mp *p, char *err, size_t errlen)
{
	int n = p->n;
	struct by_size *ord = malloc(((size_t)n + 1) * sizeof *ord);
	struct span *sp = malloc(((size_t)n + 1) * sizeof *sp);
	char *placed = calloc((size_t)n + 1, 1);
	if (!ord || !sp || !placed) {
		free(ord);
		free(sp);
		free(placed);
		dl_errf(err, errlen, "memory plan: out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++)
		ord[i] = (struct by_size){ dl_mp_size(p, &p->b[i]), p->b[i].first, i };
	qsort(ord, (size_t)n, sizeof *ord, cmp_size);
	size_t total = 0;
	int rc = 0;
	for (int k = 0; k < n; k++) {
		struct dl_mp_buf *b = &p->b[ord[k].i];
		size_t size = ord[k].size;
		int m = 0;
		for (int j = 0; j < n; j++)
			if (placed[j] && overlap_t(&p->b[j], b))
				sp[m++] = (struct span){ p->b[j].off, p->b[j].off + dl_mp_size(p, &p->b[j]) };
		qsort(sp, (size_t)m, sizeof *sp, cmp_span);
		/* best fit: the smallest gap between live neighbours that holds it */
		size_t best = SIZE_MAX, best_gap = SIZE_MAX, lo = 0;
		for (int j = 0; j < m; j++) {
			if (sp[j].off > lo && sp[j].off - lo >= size && sp[j].off - lo < best_gap) {
				best = lo;
				best_gap = sp[j].off - lo;
			}
			if (sp[j].end > lo)
				lo = sp[j].end;
		}
		if (best == SIZE_MAX)
			best = lo; /* above every live neighbour */
		if (best > SIZE_MAX / 2 - size) {
			dl_errf(err, errlen, "memory plan: arena size overflows");
			rc = -1;
			break;
		}
		b->off = best;
		placed[ord[k].i] = 1;
		if (best + size > total)
			total = best + size;
	}
	p->total = total;
	free(ord);
	free(sp);
	free(placed);
	return rc;
}

int dl_mp_check(const struct dl_mp *p, char *err, size_t errlen)
{
	int n = p->n;
	struct by_size *ord = malloc(((size_t)n + 1) * sizeof *ord);
	if (!ord) {
		dl_errf(err, errlen, "memory plan: out of memory checking");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const struct dl_mp_buf *b = &p->b[i];
		size_t size = dl_mp_size(p, b);
		if (b->off % p->align || b->off > p->total || size > p->total - b->off || b->first < 0 ||
		    b->last < b->first || b->last >= p->n_steps) {
			dl_errf(err, errlen,
				 "memory plan: buffer %d (%d.%d) at %zu+%zu, steps [%d, %d]: misaligned, outside the "
				 "%zu-byte arena or outside the %d steps",
				 i, b->what, b->idx, b->off, size, b->first, b->last, p->total, p->n_steps);
			free(ord);
			return -1;
		}
		/* sorted by offset (the size field carries it), a sweep finds every overlap */
		ord[i] = (struct by_size){ b->off, 0, i };
	}
	qsort(ord, (size_t)n, sizeof *ord, cmp_size); /* offsets descending */
	for (int k = n - 1; k >= 0; k--) {
		const struct dl_mp_buf *a = &p->b[ord[k].i];
		size_t end = a->off + dl_mp_size(p, a);
		for (int j = k - 1; j >= 0 && p->b[ord[j].i].off < end; j--) {
			const struct dl_mp_buf *c = &p->b[ord[j].i];
			if (overlap_t(a, c)) {
				dl_errf(err, errlen,
					 "memory plan: buffers %d (%d.%d, bytes %zu+%zu, steps [%d, %d]) and %d (%d.%d, "
					 "bytes %zu+%zu, steps [%d, %d]) are live at the same time and overlap",
					 ord[k].i, a->what, a->idx, a->off, dl_mp_size(p, a), a->first, a->last, ord[j].i,
					 c->what, c->idx, c->off, dl_mp_size(p, c), c->first, c->last);
				free(ord);
				return -1;
			}
		}
	}
	free(ord);
	return 0;
}

size_t dl_mp_live_peak(const struct dl_mp *p, int *step)
{
	size_t best = 0;
	int bs = 0;
	for (int s = 0; s < p->n_steps; s++) {
		size_t live = 0;
		for (int i = 0; i < p->n; i++)
			if (p->b[i].first <= s && s <= p->b[i].last)
				live += dl_mp_size(p, &p->b[i]);
		if (live > best) {
			best = live;
			bs = s;
		}
	}
	if (step)
		*step = bs;
	return best;
}

size_t dl_mp_persistent_bytes(const struct dl_mp *p, int kind)
{
	size_t s = 0;
	for (int i = 0; i < p->n; i++)
		if (p->b[i].kind == kind && p->b[i].first == 0 && p->b[i].last == p->n_steps - 1)
			s += dl_mp_size(p, &p->b[i]);
	return s;
}

static int max_i(int a, int b)
{
	return a > b ? a : b;
}

int dl_mp_bn_prologue(const struct dl_graph *g, int node)
{
	if (node < 0 || node >= g->n_nodes)
		return 0;
	const struct dl_node *d = &g->nodes[node];
	int readers = 0;
	if (d->kind != DL_NODE_BN || !d->relu || d->out == g->output)
		return 0;
	for (int j = node + 1; j < g->n_nodes; j++)
		for (int k = 0; k < 2; k++)
			if (g->nodes[j].in[k] == d->out) {
				if (g->nodes[j].kind != DL_NODE_CONV || k != 0)
					return 0;
				readers++;
			}
	return readers > 0;
}

int dl_mp_value_lives(const struct dl_graph *g, const struct dl_mp_rules *r, struct dl_mp_life *life, char *err,
		      size_t errlen)
{
	int nv = g->n_values, end = dl_mp_end(g);
	for (int v = 0; v < nv; v++)
		life[v] = (struct dl_mp_life){ -1, -1, -1, -1, -1, 0 };
	int *prod = malloc(((size_t)nv + 1) * sizeof *prod), *lastc = malloc(((size_t)nv + 1) * sizeof *lastc);
	if (!prod || !lastc) {
		free(prod);
		free(lastc);
		dl_errf(err, errlen, "memory plan: out of memory");
		return -1;
	}
	for (int v = 0; v < nv; v++)
		prod[v] = lastc[v] = -1;
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int bad = d->out < 0 || d->out >= nv || prod[d->out] >= 0 || d->out == g->input;
		for (int k = 0; k < 2; k++)
			if (d->in[k] >= nv || (k == 0 && d->in[0] < 0) ||
			    (d->in[k] >= 0 && d->in[k] != g->input && (prod[d->in[k]] < 0)))
				bad = 1;
		if (bad) {
			free(prod);
			free(lastc);
			dl_errf(err, errlen, "memory plan: node %d: bad values (in %d, %d, out %d) or not in topological order",
				 i, d->in[0], d->in[1], d->out);
			return -1;
		}
		prod[d->out] = i;
		for (int k = 0; k < 2; k++)
			if (d->in[k] >= 0)
				lastc[d->in[k]] = i;
	}
	/* activations: born at the producer, live to the last reader */
	for (int v = 0; v < nv; v++)
		if (v == g->input)
			life[v].act_first = 0, life[v].act_last = end;
		else if (prod[v] >= 0)
			life[v].act_first = life[v].act_last = dl_mp_fwd(g, prod[v]);
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int f = dl_mp_fwd(g, i), bw = dl_mp_bwd(g, i);
		for (int k = 0; k < 2; k++) {
			int v = d->in[k];
			if (v < 0)
				continue;
			/* a fused BN's output is read in eval only, by its ADD; the ADD
			 * reads the BN's input in training */
			life[v].act_last = max_i(life[v].act_last, f);
			if (d->kind == DL_NODE_ADD && prod[v] >= 0 && r->bn_apply_by && r->bn_apply_by[prod[v]] == i) {
				int x = g->nodes[prod[v]].in[0];
				life[x].act_last = max_i(life[x].act_last, f);
			}
		}
		int v = d->in[0], o = d->out;
		switch (d->kind) {
		case DL_NODE_CONV:
		case DL_NODE_FC:
			life[v].act_last = max_i(life[v].act_last, bw);
			break;
		case DL_NODE_BN:
			life[v].act_last = max_i(life[v].act_last, bw);
			if (r->relu_prologue && dl_mp_bn_prologue(g, i))
				life[o].prologue = 1; /* the mask from the input, see below */
			else if (d->relu && r->bn_relu_reads_out)
				life[o].act_last = max_i(life[o].act_last, bw);
			break;
		case DL_NODE_RELU:
			life[o].act_last = max_i(life[o].act_last, bw);
			break;
		case DL_NODE_ADD:
			if (d->relu)
				life[o].act_last = max_i(life[o].act_last, bw);
			break;
		case DL_NODE_MAXPOOL:
			if (r->pool_reads_in)
				life[v].act_last = max_i(life[v].act_last, bw);
			break;
		case DL_NODE_GAP:
			break;
		}
	}
	/* prologue values: each reading conv computes them from the BN's
	 * input (and batch statistics) in its forward and its backward step,
	 * so the input lives to the last of those (the BN's own backward, which
	 * reads it, comes later still) */
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		if (d->kind != DL_NODE_CONV || !life[d->in[0]].prologue)
			continue;
		int x = g->nodes[prod[d->in[0]]].in[0];
		life[x].act_last = max_i(life[x].act_last, dl_mp_bwd(g, i));
	}
	for (int v = 0; v < nv; v++)
		if (life[v].prologue)
			life[v].act_first = life[v].act_last = -1;
	if (r->output_stored)
		life[g->output].act_last = end;
	else
		life[g->output].act_first = life[g->output].act_last = -1;
	/* gradients: from the first backward write to the producer's backward */
	for (int v = 0; v < nv; v++) {
		if ((v == g->input && !r->input_grad) || (v == g->output && !r->output_stored))
			continue;
		if (v == g->output) {
			/* set from the loss before the first backward node (any
			 * reader of the logits adds to it) */
			life[v].zero_by = -1;
			life[v].grad_first = dl_mp_bwd(g, g->n_nodes - 1);
		} else {
			life[v].zero_by = lastc[v] >= 0 ? lastc[v] : prod[v];
			if (life[v].zero_by < 0) {
				continue; /* an input nothing reads */
			}
			life[v].grad_first = dl_mp_bwd(g, life[v].zero_by);
		}
		life[v].grad_last = prod[v] >= 0 ? dl_mp_bwd(g, prod[v]) : life[v].grad_first;
	}
	free(prod);
	free(lastc);
	return 0;
}
