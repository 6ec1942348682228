#include "config.h"

/* torch.optim.SGD (dampening 0) with optional LARS.  Norms are summed in
 * double so the trust ratio does not depend on the order of a float sum. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "engine/optim.h"

/* Tensors smaller than this are updated by one thread: not worth a fork. */
#define PAR_MIN 65536

struct dl_optim {
	struct dl_graph *g;
	struct dl_optim_config c;
	long steps;
	size_t n_state;
	struct dl_tensor_f32 *state; /* momentum buffers, one per param, or none */
	double *trust;               /* last trust ratio per param */
};

struct dl_optim *dl_optim_create(struct dl_graph *g, const struct dl_optim_config *c, char *err, size_t errlen)
{
	struct dl_optim *o = calloc(1, sizeof(*o));
	if (!o) {
		snprintf(err, errlen, "out of memory creating the optimizer");
		return NULL;
	}
	o->g = g;
	o->c = *c;
	if (!(c->momentum >= 0 && c->momentum < 1) || !(c->weight_decay >= 0) || (c->lars && !(c->lars_eta > 0))) {
		snprintf(err, errlen, "bad optimizer settings: momentum %g, weight decay %g, lars eta %g", c->momentum,
		         c->weight_decay, c->lars_eta);
		goto fail;
	}
	o->trust = calloc((size_t)g->n_params + 1, sizeof(double));
	if (!o->trust)
		goto oom;
	if (c->momentum > 0) {
		o->state = calloc((size_t)g->n_params, sizeof(*o->state));
		if (!o->state && g->n_params > 0)
			goto oom;
		o->n_state = (size_t)g->n_params;
		for (int i = 0; i < g->n_params; i++) {
			struct dl_tensor_f32 *p = &g->params[i], *s = &o->state[i];
			int len = snprintf(s->name, sizeof(s->name), "%s.momentum_buffer", p->name);
			if (len < 0 || (size_t)len >= sizeof(s->name)) {
				snprintf(err, errlen, "%s:%d: state name for %s too long", __FILE__, __LINE__, p->name);
				goto fail;
			}
			s->ndim = p->ndim;
			memcpy(s->dims, p->dims, sizeof(s->dims));
			s->count = p->count;
			s->no_decay = p->no_decay;
			s->data = calloc(p->count ? p->count : 1, sizeof(float));
			if (!s->data)
				goto oom;
		}
	}
	return o;
oom:
	snprintf(err, errlen, "out of memory for the optimizer state");
fail:
	dl_optim_destroy(o);
	return NULL;
}

void dl_optim_destroy(struct dl_optim *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->n_state; i++)
		free(o->state[i].data);
	free(o->state);
	free(o->trust);
	free(o);
}

size_t dl_optim_n_state(const struct dl_optim *o)
{
	return o->n_state;
}

struct dl_tensor_f32 *dl_optim_state(struct dl_optim *o, size_t i)
{
	return i < o->n_state ? &o->state[i] : NULL;
}

long dl_optim_steps(const struct dl_optim *o)
{
	return o->steps;
}

void dl_optim_set_steps(struct dl_optim *o, long steps)
{
	o->steps = steps;
}

double dl_optim_trust_ratio(const struct dl_optim *o, size_t i)
{
	return i < (size_t)o->g->n_params ? o->trust[i] : 1.0;
}

/* SGD on floats [lo, hi), in float arithmetic as torch does it, one
 * rounding per op.  Always inlined: where the flags are constants the
 * branches fold away and the simd loop vectorizes (the update is
 * elementwise and memory-bound; the branchy scalar loop ran at half the
 * memory speed). */
static inline __attribute__((always_inline)) void
sgd_range(float *restrict w, float *restrict buf, const float *restrict gr, long lo, long hi,
	  float fwd, float ftrust, float fmu, float flr, int decay, int scale, int has_buf,
	  int first, int nesterov)
{
#pragma omp simd
	for (long j = lo; j < hi; j++) {
		float d = gr[j];
		if (decay)
			d = d + fwd * w[j];
		if (scale)
			d = d * ftrust;
		if (has_buf) {
			buf[j] = first ? d : fmu * buf[j] + d;
			d = nesterov ? d + fmu * buf[j] : buf[j];
		}
		w[j] = w[j] - flr * d;
	}
}

int dl_optim_step(struct dl_optim *o, double lr)
{
	struct dl_graph *g = o->g;
	const double mu = o->c.momentum;
	if (!isfinite(lr))
		return -1;
	// Check every gradient first so a NaN leaves the weights untouched.
	for (int i = 0; i < g->n_params; i++) {
		const float *gr = g->params[i].grad;
		const long cnt = (long)g->params[i].count;
		unsigned bad = 0;
		// NaN and inf are the floats whose exponent bits are all ones; the
		// integer test vectorizes, where a float sum is one serial chain.
#pragma omp parallel for simd reduction(| : bad) if (parallel : cnt > PAR_MIN) schedule(static)
		for (long j = 0; j < cnt; j++) {
			uint32_t bits;
			memcpy(&bits, &gr[j], sizeof(bits));
			bad |= (bits & 0x7f800000u) == 0x7f800000u;
		}
		if (bad)
			return -1;
	}
	for (int i = 0; i < g->n_params; i++) {
		struct dl_tensor_f32 *p = &g->params[i];
		int decay = !p->no_decay || o->c.decay_bn_and_bias;
		double wd = decay ? o->c.weight_decay : 0.0;
		double trust = 1.0;
		if (o->c.lars && decay) {
			double wn = 0, gn = 0;
			const long cnt = (long)p->count;
			const float *pw = p->data, *pg = p->grad;
#pragma omp parallel for reduction(+ : wn, gn) if (cnt > PAR_MIN) schedule(static)
			for (long j = 0; j < cnt; j++) {
				wn += (double)pw[j] * pw[j];
				gn += (double)pg[j] * pg[j];
			}
			wn = sqrt(wn);
			gn = sqrt(gn);
			// A zero norm (fresh zero-init gamma, dead layer) would give 0 or inf: keep the plain step.
			if (wn > 0 && gn > 0)
				trust = o->c.lars_eta * wn / (gn + wd * wn);
		}
		o->trust[i] = trust;
		float *w = p->data, *buf = o->n_state ? o->state[i].data : NULL;
		const float fwd = (float)wd, ftrust = (float)trust, fmu = (float)mu, flr = (float)lr;
		const int first = o->steps == 0, nesterov = o->c.nesterov, scale = trust != 1.0;
		const long cnt = (long)p->count;
		// The usual step (momentum after the first, no LARS scale, no
		// Nesterov) runs loops specialized on constants, anything else
		// the general one.
		const int usual = buf && !first && !scale && !nesterov;
		const float *gr = p->grad;
#pragma omp parallel if (cnt > PAR_MIN)
		{
			int nt = omp_get_num_threads(), me = omp_get_thread_num();
			long lo = cnt * me / nt, hi = cnt * (me + 1) / nt;
			if (usual && fwd != 0)
				sgd_range(w, buf, gr, lo, hi, fwd, 1.f, fmu, flr, 1, 0, 1, 0, 0);
			else if (usual)
				sgd_range(w, buf, gr, lo, hi, 0.f, 1.f, fmu, flr, 0, 0, 1, 0, 0);
			else
				sgd_range(w, buf, gr, lo, hi, fwd, ftrust, fmu, flr, fwd != 0, scale,
					  buf != NULL, first, nesterov);
		}
	}
	o->steps++;
	return 0;
}
