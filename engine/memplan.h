/* Memory by lifetime: a device-neutral planner that gives every buffer of a
 * training step an offset in one arena, so that buffers never live at the
 * same time share memory (activations of the forward pass and the
 * gradients of the backward pass, once dead).  A backend lists its buffers
 * with their sizes and the steps of the schedule in which they are live;
 * dl_mp_assign places them (greedy by size, best fit among the buffers
 * whose lifetimes overlap); dl_mp_check proves a plan safe.
 *
 * The schedule of a training step over a graph of N nodes (dl_mp_fwd,
 * dl_mp_bwd): step 0 loads the input, forward node i runs at step 1 + i,
 * backward node i at step 2N - i, the optimizer at step 2N + 1 (the last,
 * DL_MP_END).  A buffer is live from its first to its last step, both
 * included, so the output of a step never shares memory with its inputs.
 * Eval runs the forward steps only: a plan for a training step serves it. */
#ifndef DLJOB_ENGINE_MEMPLAN_H
#define DLJOB_ENGINE_MEMPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/graph.h"

/* What a buffer is for: dljob plan prints the parts by kind. */
enum dl_mp_kind {
	DL_MP_WEIGHTS = 0, /* fp32 masters, working copies, BN running statistics */
	DL_MP_GRADS = 1,   /* the parameters' gradients */
	DL_MP_OPTIM = 2,   /* optimizer state (momentum, per-tensor tables) */
	DL_MP_ACT = 3,     /* activations, their gradients, per-node state kept for backward */
	DL_MP_WORK = 4,    /* library workspaces and scratch */
	DL_MP_IO = 5,      /* the batch and the loss on the device */
	DL_MP_NKIND = 6
};

struct dl_mp_buf {
	size_t bytes;  /* as requested */
	int first, last; /* steps, both included; persistent: 0 .. n_steps - 1 */
	int kind;      /* enum dl_mp_kind */
	int what, idx; /* the owner's tag (e.g. "activation of value idx"): the planner ignores them */
	size_t off;    /* assigned by dl_mp_assign: a multiple of align */
};

struct dl_mp {
	size_t align;  /* every offset a multiple of it, every size rounded up to it (a power of 2) */
	int n_steps;
	int n, cap;
	struct dl_mp_buf *b;
	size_t total;  /* arena bytes, after dl_mp_assign */
};

/* Steps of a training step over g (see above). */
static inline int dl_mp_fwd(const struct dl_graph *g, int node) { (void)g; return 1 + node; }
static inline int dl_mp_bwd(const struct dl_graph *g, int node) { return 2 * g->n_nodes - node; }
static inline int dl_mp_end(const struct dl_graph *g) { return 2 * g->n_nodes + 1; }

/* An empty plan over n_steps steps.  0, or -1 with err. */
int dl_mp_init(struct dl_mp *p, int n_steps, size_t align, char *err, size_t errlen);
void dl_mp_free(struct dl_mp *p);
/* Add a buffer live in steps [first, last] (first = 0, last = n_steps - 1
 * for one that lives throughout).  Returns its index, or -1 with err (bad
 * lifetime, out of memory). */
int dl_mp_add(struct dl_mp *p, size_t bytes, int first, int last, int kind, int what, int idx, char *err,
	      size_t errlen);
/* Size as the arena holds it: bytes rounded up to p->align (at least align). */
size_t dl_mp_size(const struct dl_mp *p, const struct dl_mp_buf *b);
/* Assign every offset and p->total.  0, or -1 with err (out of memory,
 * arena size overflow). */
int dl_mp_assign(struct dl_mp *p, char *err, size_t errlen);
/* Check a plan: every offset aligned, every buffer inside [0, total), no
 * two buffers whose lifetimes overlap share a byte.  0, or -1 with err
 * naming the first two buffers in conflict. */
int dl_mp_check(const struct dl_mp *p, char *err, size_t errlen);
/* The most bytes live at one step (sizes as dl_mp_size): a lower bound of
 * any plan's total; *step (may be NULL) gets that step. */
size_t dl_mp_live_peak(const struct dl_mp *p, int *step);
/* Bytes of the buffers of `kind` that live throughout (dl_mp_size each). */
size_t dl_mp_persistent_bytes(const struct dl_mp *p, int kind);

/* How a backend reads values in a training step (dl_mp_value_lives):
 * forward reads every node's inputs; backward reads, per node kind:
 * CONV, FC: the input; BN: the input, and its output when bn_relu_reads_out
 * and the BN has a ReLU; RELU, and ADD with a ReLU: the output (the mask);
 * MAXPOOL: the input when pool_reads_in (else a per-node index array);
 * GAP: nothing. */
struct dl_mp_rules {
	int bn_relu_reads_out;
	int pool_reads_in;
	/* NULL, or per node: the ADD node that applies this BN's normalization
	 * in a training forward (one pass over the BN's input): the BN's own
	 * output is then only written in eval, and lives to the ADD only */
	const int *bn_apply_by;
	/* the graph output's value lives throughout (it holds the logits a
	 * caller reads after the step); else it is not stored (FC writes the
	 * logits elsewhere) and has no gradient buffer */
	int output_stored;
	int input_grad; /* the input gets a gradient buffer */
	/* the fused layout (MLPerf's NormConvolution): the output of a BN with
	 * a ReLU that only convolutions read (dl_mp_bn_prologue) is never
	 * stored across steps.  Each reading conv computes it, relu(scale * x +
	 * bias) from the BN's input and batch statistics, in its forward step,
	 * and again in its backward step for its weight gradient, into a
	 * buffer live in that one step (the backend lists one per reader and
	 * step); the BN's backward takes the ReLU mask from its input.  0: the
	 * plain layout, the output stored from the BN to its last reader. */
	int relu_prologue;
};

/* 1 when the output of BN node `node` is computed by its readers under
 * relu_prologue: a BN with a ReLU, not the graph output, read by at least
 * one node and only by convolutions. */
int dl_mp_bn_prologue(const struct dl_graph *g, int node);

/* Per value: act_first/act_last: steps its activation is live (the input:
 * 0 to the end; fused BN outputs: the BN to its ADD; prologue values: none,
 * see prologue).  grad_first/grad_last:
 * its gradient, from the backward step of the last node that reads it in
 * the forward (the first to add to it) -- or of its producer when nothing
 * reads it -- to its producer's backward step; -1 when it has none.  Every
 * array has g->n_values entries.  0, or -1 with err when the graph is
 * malformed. */
struct dl_mp_life {
	int act_first, act_last;
	int grad_first, grad_last;
	int zero_by; /* node whose backward writes the gradient first (-1: the output, set before backward) */
	int prologue; /* relu_prologue and dl_mp_bn_prologue of its producer: no activation buffer
		       * (act_first = act_last = -1); each reading conv i has one for step
		       * dl_mp_fwd(g, i) and one for dl_mp_bwd(g, i) */
};
int dl_mp_value_lives(const struct dl_graph *g, const struct dl_mp_rules *r, struct dl_mp_life *life, char *err,
		      size_t errlen);

#endif
