/* The "ref" backend: executes a dl_graph with the float64 ops of
 * ref_ops.h.  Through dl_backend_ops it trains like any backend, plainly:
 * g's float32 params and buffers are its master state (read as double at
 * every forward), gradients are rounded to float32 into the reducer's flat
 * buffer (engine/comm_async.h), reduced across ranks and applied with
 * dl_sgd_step (optim.h), the same float32 update torch does.
 *
 * The entry points below are for tests that need per-pass access,
 * bypassing the step (and float32 where wanted), e.g. for
 * finite-difference gradient checks:
 *
 *   b = dl_ref_create(g, n, err, sizeof err);
 *   dl_ref_load_graph(b);                 // params, buffers: graph -> double
 *   double *w = dl_ref_param_f64(b, i);   // edit w[j] in double
 *   dl_ref_forward_f64(b, x64, 1);        // uses the double params as they are
 *   dl_ref_backward_f64(b, dlogits64);    // dl_ref_grad_f64(b, i) = d loss / d w
 *
 * The f64 calls never touch the graph (not its params, grads or running
 * buffers); training-mode BN updates only the backend's double running
 * buffers (dl_ref_buffer_f64).  dl_ref_forward (float32 input) loads the
 * graph first and, when training, stores the running buffers back and
 * increments g->bn_batches_tracked (torch's num_batches_tracked). */
#ifndef DLJOB_ENGINE_REF_REF_BACKEND_H
#define DLJOB_ENGINE_REF_REF_BACKEND_H

#include "engine/backend.h"

extern const struct dl_backend_ops dl_backend_ref;

/* The backend without training state (no optimizer, no reduction): for
 * the per-pass calls below.  destroy through dl_backend_ref.destroy. */
struct dl_backend *dl_ref_create(struct dl_graph *g, int n, char *err, size_t errlen);
/* Forward from float32 (N,C,H,W) x (loads g first), its float32 logits
 * (N,K), and backward from float32 dlogits (N,K) into dl_ref_grad_f64. */
int dl_ref_forward(struct dl_backend *b, const float *x, int train);
const float *dl_ref_logits(struct dl_backend *b);
int dl_ref_backward(struct dl_backend *b, const float *dlogits);
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
/* The smallest decision margin (ref_relu_margin, ref_maxpool_margin) of
 * every ReLU and max pool over every forward since create, training steps
 * included: below ~1e-5 a float32 backend may take another mask than this
 * one, and its gradients then differ by whole elements. */
double dl_ref_margin(const struct dl_backend *b);

/* Memory by lifetime (engine/memplan.h), for tests: dl_ref_plan lists the
 * activation (what 0) and gradient (what 1) array of every value (idx)
 * with its lifetime in a training step, offsets not yet assigned
 * (dl_mp_assign them; dl_mp_free it).  With fused, the fused layout
 * (dl_mp_rules' relu_prologue): a BN+ReLU output that only convs read has
 * no array; each reading conv node (idx) has one for its forward step
 * (what 2) and one for its backward step (what 3), and the backend,
 * running on such a plan, writes y there right before that conv's forward
 * and recomputes it there from the BN's input and batch statistics right
 * before its backward (the BN's backward takes the ReLU mask from its
 * input).  dl_ref_use_plan moves those arrays
 * into one arena laid out by an assigned plan; with poison, the arena is
 * NaN at the start of each forward and each array turns NaN after its
 * last step, so a step that reads outside the planned lifetimes gives a
 * different result.  Before any step; 0, or -1 with err. */
struct dl_mp;
int dl_ref_plan(struct dl_backend *b, struct dl_mp *mp, int fused, char *err, size_t errlen);
int dl_ref_use_plan(struct dl_backend *b, const struct dl_mp *mp, int poison, char *err, size_t errlen);

#endif
