/* SGD with momentum, exactly torch.optim.SGD (dampening 0), optionally with
 * LARS layer-wise trust ratios (You et al. 2017).  The math every backend's
 * update follows; backends that keep float32 arrays on the host (ref, cpu)
 * call dl_sgd_step on their own resident arrays, in whatever layout they
 * keep them (the update is elementwise; LARS norms do not depend on the
 * order as long as padding is zero).  The host copy of the optimizer state
 * (dl_optim_state) exists only at boundaries: checkpoints and resume. */
#ifndef DLJOB_ENGINE_OPTIM_H
#define DLJOB_ENGINE_OPTIM_H

#include <stddef.h>
#include <stdio.h>
#include "common/err.h"
#include "engine/graph.h"

struct dl_optim_config {
	double momentum;       /* 0.9; 0 = plain SGD, no state */
	double weight_decay;   /* 1e-4 / 5e-5 */
	int nesterov;
	int lars;              /* scale each decayed param's step by eta*|w|/(|g|+wd*|w|) */
	double lars_eta;       /* 0.001 */
	int decay_bn_and_bias; /* 1: decay (and LARS-scale) no_decay params too, as plain torch does */
};

/* 0 if c is usable, else -1 with one line in err.  Inline: the CUDA
 * backend module (backend.h) calls it and links nothing of the engine. */
static inline int dl_optim_config_check(const struct dl_optim_config *c, char *err, size_t errlen)
{
	if (!(c->momentum >= 0 && c->momentum < 1) || !(c->weight_decay >= 0) || (c->lars && !(c->lars_eta > 0))) {
		dl_errf(err, errlen, "bad optimizer settings: momentum %g, weight decay %g, lars eta %g", c->momentum,
		         c->weight_decay, c->lars_eta);
		return -1;
	}
	return 0;
}

/* One parameter as the update sees it: w, g and buf in the same layout
 * (buf NULL when momentum is 0), count floats each, padding zero. */
struct dl_sgd_param {
	float *w;
	const float *g;
	float *buf;
	size_t count;
	int no_decay;          /* dl_tensor_f32.no_decay of the param */
};

/* 1 if all n floats are finite (no NaN, no inf), else 0. */
int dl_all_finite(const float *x, size_t n);

/* One step over the n params, in float arithmetic as torch does it:
 *   d = g + wd*w            (wd = 0 for no_decay params unless decay_bn_and_bias)
 *   d *= trust ratio        (LARS only, decayed params only; norms in double:
 *                            eta*|w|/(|g|+wd*|w|), 1 if either norm is 0)
 *   buf = d (first step), else buf = momentum*buf + d
 *   d = nesterov ? d + momentum*buf : buf
 *   w -= lr*d
 * first: no step has been taken yet (the momentum buffers are not live).
 * trust (n entries, may be NULL) gets the ratio used per param (1 when not
 * applied).  The caller checks finiteness first (dl_all_finite). */
void dl_sgd_step(const struct dl_optim_config *c, const struct dl_sgd_param *p, int n, double lr, int first,
		 double *trust);

/* The optimizer state as a host copy (checkpoints, --resume): momentum
 * buffers named "<param>.momentum_buffer", one per param of the graph, same
 * shape and torchvision layout as the param (none when momentum is 0), and
 * the optimizer steps taken (0: the buffers are not live yet, the first
 * step initialises them with buf = d). */
struct dl_optim_state {
	size_t n;
	struct dl_tensor_f32 *mom;
	long steps;
	/* fp16's dynamic loss scale (engine/backend.h) and its clean steps
	 * since the scale last changed (torch GradScaler's scale and
	 * growth_tracker), so a resumed fp16 run goes on with the scale it had.
	 * loss_scale 0: none (a backend or precision without dynamic loss
	 * scaling, or a checkpoint written before it was kept); state_in then
	 * starts from the initial scale. */
	double loss_scale;
	long loss_scale_good;
};

/* Allocate s for g's params (zero buffers, steps 0).  Returns 0 or -1 with
 * one line in err; s then holds nothing to free. */
int dl_optim_state_init(struct dl_optim_state *s, const struct dl_graph *g, double momentum, char *err,
			size_t errlen);
void dl_optim_state_free(struct dl_optim_state *s);

#endif
