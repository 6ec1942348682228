/* The "cpu" backend: oneDNN primitives over a dl_graph, activations kept in
 * the blocked layouts oneDNN picks, reordered only at the edges.  Through
 * dl_backend_ops it trains: in fp32 the weights of every convolution and
 * of the FC whose forward takes a blocked layout live in that layout
 * between steps (cpu_weights_finish), with their gradient and momentum, so
 * the forward never reorders weights and SGD runs on that layout; what is
 * left per step is the reorder into backward-data's layout where oneDNN's
 * backward-data kernel reads another one (1x1 and strided convolutions:
 * 16o16i blocks against the forward's 16i16o) and of a weight gradient that
 * comes in another layout.  bf16 converts the conv weights from their fp32
 * masters each step.  The other params and the BN buffers are g's float32
 * arrays.  Backward writes the gradients straight into the reducer's flat
 * buffer (engine/comm_async.h), whose buckets are summed across ranks on
 * the communication thread while backward goes on.
 *
 * The calls below are for tests that need per-pass access (whole-network
 * comparisons against the ref backend); they bypass loss, reduction and
 * update. */
#ifndef DLJOB_ENGINE_CPU_CPU_BACKEND_H
#define DLJOB_ENGINE_CPU_CPU_BACKEND_H

#include "engine/backend.h"

extern const struct dl_backend_ops dl_backend_cpu;

/* = dl_backend_cpu.create. */
struct dl_backend *dl_cpu_create(struct dl_graph *g, int n, const struct dl_backend_opts *o, char *err,
				  size_t errlen);
/* Forward of x (N,C,H,W) float32; train=1: batch statistics, running
 * buffers updated in g, g->bn_batches_tracked += 1. */
int dl_cpu_forward(struct dl_backend *b, const float *x, int train);
/* Logits (N,K) of the last forward. */
const float *dl_cpu_logits(struct dl_backend *b);
/* Backward from dlogits (N,K) after a train forward; gradients in dl_cpu_grad. */
int dl_cpu_backward(struct dl_backend *b, const float *dlogits);
/* 1 if param p's weights stay in a blocked layout between steps. */
int dl_cpu_resident(const struct dl_backend *b, int p);
/* Weight reorders run since create: out[0] into the forward's layouts,
 * out[1] into backward-data's, out[2] of weight gradients into the
 * optimizer's layout. */
void dl_cpu_weight_reorders(const struct dl_backend *b, long out[3]);
/* The gradient of param p into out (g->params[p].count floats, torchvision
 * layout).  Returns 0 or -1. */
int dl_cpu_grad(struct dl_backend *b, int p, float *out);

#endif
