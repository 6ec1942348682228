#include "config.h"

#include <math.h>
#include <string.h>

#include "engine/schedule.h"

double dl_schedule_lr(const struct dl_schedule *s, long step)
{
	double peak = s->base_lr * (double)s->global_batch / 256.0;
	double spe = s->steps_per_epoch > 0 ? (double)s->steps_per_epoch : 1.0;
	double warm = s->warmup_epochs * spe;
	if (step < 0)
		step = 0;
	if (warm > 0 && step < warm)
		return peak * (double)step / warm;
	double total = (double)s->epochs * spe;
	double t = total > warm ? ((double)step - warm) / (total - warm) : 1.0;
	if (t < 0)
		t = 0;
	if (t > 1)
		t = 1;
	switch (s->kind) {
	case DL_SCHED_STEP: {
		if (s->step_every <= 0)
			return peak;
		long epoch = (long)floor((double)step / spe);
		return peak * pow(s->step_gamma, (double)(epoch / s->step_every));
	}
	case DL_SCHED_COSINE:
		return peak * 0.5 * (1.0 + cos(M_PI * t));
	case DL_SCHED_POLY:
		return peak * pow(1.0 - t, s->poly_power);
	case DL_SCHED_CONSTANT:
		return peak;
	}
	return peak;
}

int dl_schedule_kind_parse(const char *name)
{
	if (!name)
		return -1;
	if (strcmp(name, "step") == 0)
		return DL_SCHED_STEP;
	if (strcmp(name, "cosine") == 0)
		return DL_SCHED_COSINE;
	if (strcmp(name, "poly") == 0)
		return DL_SCHED_POLY;
	if (strcmp(name, "constant") == 0)
		return DL_SCHED_CONSTANT;
	return -1;
}
