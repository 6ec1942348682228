/* Host-side planning of the CUDA backend that needs no GPU (and so is
 * tested on any machine: tests/gpu/test_cuda_plan.c): where each parameter
 * sits in the flat fp32 arrays, which node writes each gradient, how the
 * gradients are cut into reduction buckets, and how a device string is read. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_PLAN_H
#define DLJOB_ENGINE_CUDA_CUDA_PLAN_H

#include <stddef.h>
#include "engine/graph.h"
#include "engine/precision.h"

/* Flat arrays: DLC_SLOTS floats first (loss, stop flag: they ride in the
 * last reduction), then every param in graph order, each starting on a
 * multiple of 64 floats (256 bytes); gaps stay zero.  p_off has
 * g->n_params entries (NULL: only the length); *n_flat is the total length
 * in floats.  This and dlc_plan_bn_add are defined in cuda_arena.c (plain C,
 * also in the engine library). */
void dlc_plan_flat(const struct dl_graph *g, size_t *p_off, size_t *n_flat);

/* writer[p] = the node that writes param p's gradient (-1: none).  -1 with
 * err if a param is used by two nodes (shared weights). */
int dlc_param_writers(const struct dl_graph *g, int *writer, char *err, size_t errlen);

/* One reduction bucket: floats [off, off + count) of the flat gradient
 * array, reduced once node done_by's backward has run. */
struct dlc_bucket {
	size_t off, count;
	int done_by;
};

/* Buckets of about bucket_bytes (0: DL_BUCKET_BYTES_DEFAULT; SIZE_MAX: one;
 * the first closes at DL_FIRST_BUCKET_BYTES, as engine/backend.h says) over
 * the params taken from the last (whose gradients backward produces
 * first), a bucket closing with the param that brings it to its size, in
 * launch order: offsets decrease, the last bucket starts at 0
 * (it carries the slots), done_by never increases.  *out is malloc'ed
 * (free it); -1 with err when out of memory. */
int dlc_plan_buckets(const struct dl_graph *g, const int *writer, const size_t *p_off, size_t bucket_bytes,
		     struct dlc_bucket **out, int *n_out, char *err, size_t errlen);

/* Training forward: which BNs' normalization is applied by the residual
 * add that consumes their output (one pass, y = ReLU(BN(a) + b): the BN's
 * own output is neither written nor read back).  apply_by[i] = that ADD
 * node for BN node i, else -1 (for every node).  A BN qualifies when it
 * has no ReLU of its own, its output is not the graph's output and feeds
 * exactly one node input, an ADD's, whose two inputs differ, and its C is
 * one the 8-channel kernels take (C % 8 == 0, C/8 divides 256).  Returns
 * how many BNs are fused. */
int dlc_plan_bn_add(const struct dl_graph *g, int *apply_by);

/* dl_backend_opts.device: NULL or "" -> 0 with *index = 0; decimal digits
 * -> 0 with *index; a PCI bus id ("0000:3b:00.0", "3b:00.0": hex digits,
 * ':' and '.', at least one ':') -> 1; anything else -> -1. */
int dlc_parse_device(const char *s, int *index);

/* --precision auto on a GPU of compute capability major.x (an enum
 * dl_precision): DL_BF16 from 8 on (bf16 tensor cores: A100, H100, H200),
 * DL_FP16 on 7 (V100, T4: fp16 tensor cores only), DL_FP32 below. */
int dlc_auto_precision(int major);

#endif
