/* `dljob report RUN_DIR...`: what the scaling studies ask of a set of runs,
 * from their metrics.jsonl alone.
 *
 * Per run: throughput (img/s, all ranks together, and per rank), time per
 * phase and the share of each, final and best top-1, time to reach each
 * --target accuracy.  Across runs grouped by rank count: scaling
 * efficiency (throughput per rank relative to the smallest rank count),
 * throughput speed-up, learning speed-up (DeepEx: the smallest run's wall
 * time to a target accuracy over this group's) and, for repeated runs,
 * variability (mean, min, max, coefficient of variation, as Han et al.).
 * A run resumed on another rank count is split into segments, one per rank
 * count, each with its own throughput per rank, and said to have changed.
 * Output: Markdown on stdout, --json FILE, --plot FILE.png. */
#ifndef DLJOB_RUNTIME_REPORT_H
#define DLJOB_RUNTIME_REPORT_H

#include "runtime/opttab.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include "engine/metrics.h"

#define DL_REPORT_MAX_TARGETS 16

/* A stretch of a run on one rank count: a run resumed from a checkpoint on
 * another rank count (tests/train/test_resume_change.sh) has one segment
 * per rank count it ran on, in order; every record says its ranks. */
struct dl_report_segment {
	int ranks;
	long from_step, to_step;     /* the steps after from_step up to to_step */
	size_t records;
	/* Mean of img_per_s (all ranks together) over the segment's training
	 * records, leaving out its first when it has two or more: each start
	 * and each resume begins with a warm-up (first-touch allocations,
	 * kernel selection).  Per rank: divided by this segment's ranks. */
	double img_per_s, img_per_s_per_rank;
};

/* One run's numbers.  NaN: not defined (no eval records, target not
 * reached, no training record to measure). */
struct dl_report_run {
	const char *name;            /* the RUN_DIR as given */
	struct dl_metrics_log log;
	int ranks;                   /* the last record's (what the run ended on) */
	struct dl_report_segment *segments; /* more than one: resumed on another rank count */
	size_t n_segments;
	long steps;
	double wall_s;
	/* Mean of img_per_s over the training records the segments use (not
	 * the eval records, nor each segment's first), and of each record's
	 * img_per_s over its own rank count: per rank right across a change of
	 * rank count. */
	double img_per_s, img_per_s_per_rank;
	/* Sums over all records (rank 0's seconds) and shares of
	 * compute + exposed_comm + loader_stall, the step's wall time. */
	double compute_s, exposed_comm_s, loader_stall_s, comm_s;
	double compute_share, exposed_comm_share, loader_stall_share;
	double final_top1, best_top1;
	/* First eval record with top1 >= 100 * target: its wall_s and step. */
	double tta_s[DL_REPORT_MAX_TARGETS];
	long tta_step[DL_REPORT_MAX_TARGETS];
};

/* mean, min, max and coefficient of variation (sample standard deviation
 * over the mean; NaN for fewer than two values) of n values; NaN values
 * are left out, and `n` counts what was kept. */
struct dl_stats {
	size_t n;
	double mean, min, max, cv;
};

/* Runs with the same rank count (a run that changed rank count: its last
 * one).  The throughput of a group is that of its runs that kept one rank
 * count: a run that changed has no single rank count to scale against, so
 * it is left out of img_per_s (its n says how many were used) and shown by
 * segment instead. */
struct dl_report_group {
	int ranks;
	size_t n_runs;
	size_t n_changed;           /* of n_runs, those that changed rank count */
	struct dl_stats img_per_s, final_top1;
	struct dl_stats tta_s[DL_REPORT_MAX_TARGETS];
	double img_per_s_per_rank;  /* mean img_per_s / ranks */
	double scaling_efficiency;  /* img_per_s_per_rank / the smallest group's */
	double throughput_speedup;  /* mean img_per_s / the smallest group's */
	/* the smallest group's mean time to target / this group's; NaN unless
	 * every run of both groups reached the target */
	double learning_speedup[DL_REPORT_MAX_TARGETS];
};

struct dl_report {
	size_t n_targets;
	double targets[DL_REPORT_MAX_TARGETS]; /* fractions, e.g. 0.85 */
	size_t n_runs, n_groups;
	struct dl_report_run *runs;
	struct dl_report_group *groups;        /* by rank count, ascending */
};

void dl_stats_of(const double *v, size_t n, struct dl_stats *s);

/* Read the runs' DIR/metrics.jsonl and compute everything.  Returns 0, or
 * -1 with "FILE:LINE: what is wrong" in err.  dl_report_free() either way. */
int dl_report_build(struct dl_report *rep, const char *const *dirs, size_t n_dirs, const double *targets,
                    size_t n_targets, char *err, size_t errlen);
void dl_report_free(struct dl_report *rep);

/* The report as Markdown (what `dljob report` prints) and as a JSON
 * object (--json; NULL when out of memory or a run name is not UTF-8). */
void dl_report_markdown(FILE *f, const struct dl_report *rep);
json_t *dl_report_json(const struct dl_report *rep);

/* `dljob report [options] RUN_DIR...`; argv[0] is "report".  Returns an
 * exit status (DL_EXIT_*). */
int dl_report_main(int argc, char **argv);
/* Its options (runtime/opttab.h): usage, parsing, dljob --list-options. */
extern const struct dl_opt_table dl_report_opttab;

#endif
