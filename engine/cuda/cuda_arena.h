/* The CUDA backend's device arena as a memory plan (engine/memplan.h):
 * every buffer the backend allocates, with its size and the steps of a
 * training step in which it is live.  Plain C, no CUDA: the backend
 * allocates from this plan, and `dljob plan` prints it on any machine.
 * Persistent: fp32 master weights, their gradients and momentum, the
 * working-dtype weight copies, BN running statistics, optimizer tables,
 * the input batch and the loss, the image in NHWC (its padded channels stay
 * zero), the cuDNN/cuBLAS workspaces and the BN partial sums.  Shared by
 * lifetime: every other activation and its gradient (dl_mp_value_lives
 * with the rules of dlc_arena_rules), BN batch statistics and max-pool
 * indices (forward to backward of their node), the working-dtype weight
 * gradient of each conv and the FC's logit gradient (its backward step);
 * in the fused layout, each BN+ReLU output that a conv computes in its
 * prologue (DLC_A_PRO_F, DLC_A_PRO_B: that conv's forward, backward step). */
#ifndef DLJOB_ENGINE_CUDA_CUDA_ARENA_H
#define DLJOB_ENGINE_CUDA_CUDA_ARENA_H

#include <stddef.h>

#include "engine/graph.h"
#include "engine/memplan.h"

#define DLC_ARENA_ALIGN 256
#define DLC_BLAS_WS_BYTES ((size_t)32 << 20) /* cuBLAS's recommended workspace on Hopper */

/* dl_mp_buf.what of each arena buffer; idx is the param, value or node
 * index where the name says so, else 0. */
enum dlc_arena_what {
	DLC_A_W, DLC_A_GR, DLC_A_MOM, DLC_A_BUFS, DLC_A_CTL, DLC_A_OPT, DLC_A_TRUST,
	DLC_A_WORK,   /* param: working copy */
	DLC_A_ACT,    /* value */
	DLC_A_GRAD,   /* value */
	DLC_A_DW,     /* conv node: weight gradient in the working dtype */
	DLC_A_MEAN,   /* BN node */
	DLC_A_INVSTD, /* BN node */
	DLC_A_ARG,    /* MAXPOOL node */
	DLC_A_DLWORK, /* FC node */
	DLC_A_BNPART, DLC_A_WS, DLC_A_BLASWS, DLC_A_X, DLC_A_U8, DLC_A_NORM, DLC_A_LABELS, DLC_A_LOGITS,
	DLC_A_DLOGITS, DLC_A_LOSS, DLC_A_TOP, DLC_A_FLAG, DLC_A_PART, DLC_A_TENSORS, DLC_A_CHUNKS,
	DLC_A_PRO_F,  /* conv node: its BN+ReLU prologue's output in its forward step (fused layout) */
	DLC_A_PRO_B,  /* conv node: the same, recomputed in its backward step (fused layout) */
	DLC_A_N
};

struct dlc_arena_in {
	int n;                 /* batch size */
	size_t esize;          /* bytes per element of the working dtype */
	size_t ws_bytes;       /* cuDNN workspace: the most any chosen algorithm needs */
	size_t bn_part_floats; /* the largest dlc_bn_part_floats of any BN */
	/* 0: the layout the backend runs now; 1: the fused one (dl_mp_rules'
	 * relu_prologue), which its cuDNN graph-API fusions are to run: planned
	 * (dljob plan --layout fused), not yet run by the backend */
	int fused;
};

/* Stored channels of value v: the image is padded to a multiple of 8. */
int dlc_arena_cp(const struct dl_graph *g, int v);
/* The rules the backend's forward and backward follow (bn_apply_by: an
 * array of g->n_nodes from dlc_plan_bn_add, owned by the caller). */
void dlc_arena_rules(const struct dl_graph *g, struct dl_mp_rules *r, const int *bn_apply_by);
/* Every buffer into mp (dl_mp_init'ed here; dl_mp_free it), offsets
 * assigned and the plan checked.  0, or -1 with err. */
int dlc_arena_plan(const struct dl_graph *g, const struct dlc_arena_in *in, struct dl_mp *mp, char *err,
		   size_t errlen);
/* dlc_bn_part_floats (k_bn.cu) of the largest BN for a GPU of sm_count
 * multiprocessors, without the GPU: the same formula. */
size_t dlc_arena_bn_part(const struct dl_graph *g, int n, int sm_count);

#endif
