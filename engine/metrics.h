/* metrics.jsonl: one JSON object per line, appended and flushed as it is
 * written so that a job can be watched (tail -f, or a test polling for
 * progress) and a killed job loses at most the line it was writing. */
#ifndef DLJOB_ENGINE_METRICS_H
#define DLJOB_ENGINE_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct dl_metrics {
	int fd; /* -1: closed */
};

/* One record.  Training fields cover the steps since the previous record;
 * has_eval adds the held-out results of the epoch that just ended. */
struct dl_metrics_record {
	long step;               /* optimizer steps done in total */
	int epoch;               /* 1-based epoch the step belongs to */
	double loss;             /* mean training loss over all ranks and the interval */
	double lr;               /* LR of the last step */
	double img_per_s;        /* training images per second, all ranks together */
	/* Rank 0's seconds over the steps since the previous record: waiting
	 * for data; computing (forward, loss, backward, update); reducing
	 * gradients (on the communication thread, overlapping compute); and of
	 * that, waited for after backward had ended (not hidden). */
	double loader_stall_s;
	double compute_s, comm_s, exposed_comm_s;
	uint64_t bad_samples;    /* rank 0's replaced samples so far */
	double wall_s;           /* seconds since the run started (resumes continue the count) */
	int has_eval;
	double top1, top5;       /* percent correct on the eval split */
	double eval_loss;
	uint64_t eval_samples;
};

/* Open PATH for appending (truncate: start it afresh).  Returns 0 or -1. */
int dl_metrics_open(struct dl_metrics *m, const char *path, int truncate, char *err, size_t errlen);
/* Append r as one line (a single write(2)).  Non-finite numbers become null. */
int dl_metrics_write(struct dl_metrics *m, const struct dl_metrics_record *r, char *err, size_t errlen);
void dl_metrics_close(struct dl_metrics *m);

#endif
