/* SGD with momentum, exactly torch.optim.SGD (dampening 0), optionally with
 * LARS layer-wise trust ratios (You et al. 2017).  Works on the plain
 * float32 params of a dl_graph, after the gradients have been reduced. */
#ifndef DLJOB_ENGINE_OPTIM_H
#define DLJOB_ENGINE_OPTIM_H

#include <stddef.h>
#include "engine/graph.h"

struct dl_optim_config {
	double momentum;       /* 0.9; 0 = plain SGD, no state */
	double weight_decay;   /* 1e-4 / 5e-5 */
	int nesterov;
	int lars;              /* scale each decayed param's step by eta*|w|/(|g|+wd*|w|) */
	double lars_eta;       /* 0.001 */
	int decay_bn_and_bias; /* 1: decay (and LARS-scale) no_decay params too, as plain torch does */
};

struct dl_optim;

struct dl_optim *dl_optim_create(struct dl_graph *g, const struct dl_optim_config *c, char *err, size_t errlen);
/* One step over every param using g->params[i].grad:
 *   d = g + wd*w            (wd = 0 for no_decay params unless decay_bn_and_bias)
 *   d *= trust ratio        (LARS only, decayed params only)
 *   buf = d (first step), else buf = momentum*buf + d
 *   d = nesterov ? d + momentum*buf : buf
 *   w -= lr*d
 * Returns 0, or -1 if lr or a gradient is not finite (nothing is changed). */
int dl_optim_step(struct dl_optim *o, double lr);
/* Momentum buffers, one per param, named "<param>.momentum_buffer", same
 * shape as the param (none if momentum is 0): checkpoints save and restore
 * them in place through these pointers. */
size_t dl_optim_n_state(const struct dl_optim *o);
struct dl_tensor_f32 *dl_optim_state(struct dl_optim *o, size_t i);
/* Steps taken so far.  The first step initialises the buffers (buf = d), so
 * after restoring buffers from a checkpoint set this to the saved count (>0). */
long dl_optim_steps(const struct dl_optim *o);
void dl_optim_set_steps(struct dl_optim *o, long steps);
/* Last LARS trust ratio of param i (1 when not applied), for logging/tests. */
double dl_optim_trust_ratio(const struct dl_optim *o, size_t i);
void dl_optim_destroy(struct dl_optim *o);

#endif
