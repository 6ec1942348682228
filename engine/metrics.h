/* metrics.jsonl: one JSON object per line, appended and flushed as it is
 * written so that a job can be watched (tail -f, or a test polling for
 * progress) and a killed job loses at most the line it was writing.  The
 * same records go to a TensorBoard event file beside it (engine/tfevents.h).
 * dl_metrics_read() reads a metrics.jsonl back (dljob report, the plot):
 * the file is untrusted input. */
#ifndef DLJOB_ENGINE_METRICS_H
#define DLJOB_ENGINE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tfevents.h"

struct dl_metrics {
	int fd; /* -1: closed */
	char path[4096];
	struct dl_events events;
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
	int ranks;               /* processes training together */
	int has_eval;
	double top1, top5;       /* percent correct on the eval split */
	double eval_loss;
	uint64_t eval_samples;
};

/* Open DIR/metrics.jsonl and a new TensorBoard event file in DIR.  A
 * fresh run (resumed_at -1) starts metrics.jsonl afresh; one resumed after
 * step resumed_at appends to it (and marks the event file, see
 * dl_events_open), after cutting a torn last line (one without its
 * newline: the run before was killed mid-write, or its disk filled), which
 * would otherwise run into the first new record and break the file for
 * every reader.  Returns 0 or -1. */
int dl_metrics_open(struct dl_metrics *m, const char *dir, long resumed_at, char *err, size_t errlen);
/* Append r as one line (a single write(2); if it fails, the part written is
 * cut off again, so the file still ends with a whole line), non-finite
 * numbers as null, and
 * as one Event of scalars: train/loss, train/lr, train/img_per_s,
 * time/loader_stall_s, time/compute_s, time/comm_s, time/exposed_comm_s,
 * and with has_eval eval/top1, eval/top5, eval/loss. */
int dl_metrics_write(struct dl_metrics *m, const struct dl_metrics_record *r, char *err, size_t errlen);
void dl_metrics_close(struct dl_metrics *m);

/* A metrics.jsonl read back.  Records are in step order: a record whose
 * step is not after the one before it (a run resumed from an earlier
 * checkpoint) replaces the records from that step on, except that an eval
 * record may follow the training record of its step.  Numbers written as
 * null read as NaN. */
struct dl_metrics_log {
	struct dl_metrics_record *rec;
	size_t n, cap;
};

/* Read PATH.  Every line must be one JSON object with the fields
 * dl_metrics_write writes (unknown fields are ignored), each in range; a
 * last line without its newline (a writer killed mid-line) is ignored.
 * Returns 0, or -1 with "PATH:LINE: what is wrong" in err. */
int dl_metrics_read(const char *path, struct dl_metrics_log *log, char *err, size_t errlen);
void dl_metrics_log_free(struct dl_metrics_log *log);

#endif
