/* The "ref" backend: executes a dl_graph with the float64 ops of
 * ref_ops.h.  Through dl_backend_ops it behaves like any backend (float32 in
 * and out; params read from the graph as double at every forward, grads
 * written back as float32).  The float64 entry points below let a caller
 * bypass float32 completely, e.g. for finite-difference gradient checks:
 *
 *   b = dl_backend_ref.create(g, n, err, sizeof err);
 *   dl_ref_load_graph(b);                 // params, buffers: graph -> double
 *   double *w = dl_ref_param_f64(b, i);   // edit w[j] in double
 *   dl_ref_forward_f64(b, x64, 1);        // uses the double params as they are
 *   dl_ref_backward_f64(b, dlogits64);    // dl_ref_grad_f64(b, i) = d loss / d w
 *
 * The f64 calls never touch the graph (not its params, grads or running
 * buffers); training-mode BN updates only the backend's double running
 * buffers (dl_ref_buffer_f64).  forward() through the ops table loads the
 * graph first and, when training, stores the running buffers back and
 * increments g->bn_batches_tracked (torch's num_batches_tracked). */
#ifndef DLJOB_ENGINE_REF_REF_BACKEND_H
#define DLJOB_ENGINE_REF_REF_BACKEND_H

#include "engine/backend.h"

extern const struct dl_backend_ops dl_backend_ref;

/* Copy g's params and running buffers (float32) into the backend's doubles. */
void dl_ref_load_graph(struct dl_backend *b);
/* The backend's double copy of g->params[i].data (same layout and count). */
double *dl_ref_param_f64(struct dl_backend *b, int i);
/* d(loss)/d(param i) of the last dl_ref_backward_f64 / backward, in double. */
const double *dl_ref_grad_f64(struct dl_backend *b, int i);
/* The backend's double copy of g->buffers[i].data. */
double *dl_ref_buffer_f64(struct dl_backend *b, int i);
/* Forward in double: x is (N,C,H,W).  Returns 0 or -1. */
int dl_ref_forward_f64(struct dl_backend *b, const double *x, int train);
/* Logits of the last forward, (N,K) double. */
const double *dl_ref_logits_f64(struct dl_backend *b);
/* Backward in double from dlogits (N,K); only after forward(train=1). */
int dl_ref_backward_f64(struct dl_backend *b, const double *dlogits);

#endif
