/* Learning-rate schedules, evaluated per optimizer step. */
#ifndef DLJOB_ENGINE_SCHEDULE_H
#define DLJOB_ENGINE_SCHEDULE_H

enum dl_sched_kind { DL_SCHED_STEP, DL_SCHED_COSINE, DL_SCHED_POLY, DL_SCHED_CONSTANT };

struct dl_schedule {
	double base_lr;         /* per 256 images (Goyal et al. linear scaling rule) */
	int global_batch;       /* images per step over all ranks */
	double warmup_epochs;   /* linear warmup from 0 to the peak over this many epochs */
	enum dl_sched_kind kind;
	double step_gamma;      /* STEP: multiply by gamma ... */
	int step_every;         /* ... every this many epochs (counted from epoch 0) */
	double poly_power;      /* POLY: peak * (1-t)^power */
	int epochs;             /* total, for COSINE/POLY */
	long steps_per_epoch;
};

/* LR for 0-based optimizer step `step`.  peak = base_lr*global_batch/256.
 * Warmup (w = warmup_epochs*steps_per_epoch steps): peak*step/w.  After it,
 * t = (step-w)/(epochs*steps_per_epoch - w) in [0,1]:
 *   STEP: peak * gamma^floor(step/steps_per_epoch / step_every)
 *   COSINE: peak * (1+cos(pi*t))/2;  POLY: peak*(1-t)^power;  CONSTANT: peak. */
double dl_schedule_lr(const struct dl_schedule *s, long step);
/* Parse "step", "cosine", "poly", "constant"; -1 if unknown. */
int dl_schedule_kind_parse(const char *name);

#endif
