/* The "cpu" backend: oneDNN primitives over a dl_graph, activations kept in
 * the blocked layouts oneDNN picks, reordered only at the edges.  Through
 * dl_backend_ops it trains: g's float32 params and BN buffers are its
 * master state, backward writes the gradients straight into the reducer's
 * flat buffer (engine/comm_async.h), whose buckets are summed across ranks
 * on the communication thread while backward goes on.
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
/* Gradient of param p (g->params[p].count floats, torchvision layout). */
float *dl_cpu_grad(struct dl_backend *b, int p);

#endif
