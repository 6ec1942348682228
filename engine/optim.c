#include "config.h"

/* torch.optim.SGD (dampening 0) with optional LARS, on arrays a backend
 * owns.  Norms are summed in double so the trust ratio does not depend on
 * the order of a float sum. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "common/err.h"
#include "engine/optim.h"

/* Tensors smaller than this are updated by one thread: not worth a fork. */
#define PAR_MIN 65536

int dl_optim_state_init(struct dl_optim_state *s, const struct dl_graph *g, double momentum, char *err,
			size_t errlen)
{
	memset(s, 0, sizeof(*s));
	if (!(momentum > 0))
		return 0;
	s->mom = calloc((size_t)g->n_params + 1, sizeof(*s->mom));
	if (!s->mom)
		goto oom;
	s->n = (size_t)g->n_params;
	for (int i = 0; i < g->n_params; i++) {
		const struct dl_tensor_f32 *p = &g->params[i];
		struct dl_tensor_f32 *m = &s->mom[i];
		int len = snprintf(m->name, sizeof(m->name), "%s.momentum_buffer", p->name);
		if (len < 0 || (size_t)len >= sizeof(m->name)) {
			dl_errf(err, errlen, "%s:%d: state name for %s too long", __FILE__, __LINE__, p->name);
			dl_optim_state_free(s);
			return -1;
		}
		m->ndim = p->ndim;
		memcpy(m->dims, p->dims, sizeof(m->dims));
		m->count = p->count;
		m->no_decay = p->no_decay;
		m->data = calloc(p->count ? p->count : 1, sizeof(float));
		if (!m->data)
			goto oom;
	}
	return 0;
oom:
	dl_errf(err, errlen, "out of memory for the optimizer state");
	dl_optim_state_free(s);
	return -1;
}

void dl_optim_state_free(struct dl_optim_state *s)
{
	for (size_t i = 0; s->mom && i < s->n; i++)
		free(s->mom[i].data);
	free(s->mom);
	memset(s, 0, sizeof(*s));
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

int dl_all_finite(const float *x, size_t n)
{
	const long cnt = (long)n;
	unsigned bad = 0;
	// NaN and inf are the floats whose exponent bits are all ones; the
	// integer test vectorizes, where a float sum is one serial chain.
#pragma omp parallel for simd reduction(| : bad) if (parallel : cnt > PAR_MIN) schedule(static)
	for (long j = 0; j < cnt; j++) {
		uint32_t bits;
		memcpy(&bits, &x[j], sizeof(bits));
		bad |= (bits & 0x7f800000u) == 0x7f800000u;
	}
	return !bad;
}

void dl_sgd_step(const struct dl_optim_config *c, const struct dl_sgd_param *ps, int n, double lr, int first,
		 double *trust_out)
{
	const double mu = c->momentum;
	for (int i = 0; i < n; i++) {
		const struct dl_sgd_param *p = &ps[i];
		int decay = !p->no_decay || c->decay_bn_and_bias;
		double wd = decay ? c->weight_decay : 0.0;
		double trust = 1.0;
		if (c->lars && decay) {
			double wn = 0, gn = 0;
			const long cnt = (long)p->count;
			const float *pw = p->w, *pg = p->g;
#pragma omp parallel for reduction(+ : wn, gn) if (cnt > PAR_MIN) schedule(static)
			for (long j = 0; j < cnt; j++) {
				wn += (double)pw[j] * pw[j];
				gn += (double)pg[j] * pg[j];
			}
			wn = sqrt(wn);
			gn = sqrt(gn);
			// A zero norm (fresh zero-init gamma, dead layer) would give 0 or inf: keep the plain step.
			if (wn > 0 && gn > 0)
				trust = c->lars_eta * wn / (gn + wd * wn);
		}
		if (trust_out)
			trust_out[i] = trust;
		float *w = p->w, *buf = mu > 0 ? p->buf : NULL;
		const float fwd = (float)wd, ftrust = (float)trust, fmu = (float)mu, flr = (float)lr;
		const int nesterov = c->nesterov, scale = trust != 1.0;
		const long cnt = (long)p->count;
		// The usual step (momentum after the first, no LARS scale, no
		// Nesterov) runs loops specialized on constants, anything else
		// the general one.
		const int usual = buf && !first && !scale && !nesterov;
		const float *gr = p->g;
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
}
