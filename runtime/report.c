/* dljob report (runtime/report.h). */
#include "config.h"
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli.h"
#include "common/optval.h"
#include "runtime/plot.h"
#include "runtime/report.h"

void dl_stats_of(const double *v, size_t n, struct dl_stats *s)
{
	double sum = 0, sq = 0;
	s->n = 0;
	s->min = INFINITY;
	s->max = -INFINITY;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i])) {
			s->n++;
			sum += v[i];
			s->min = fmin(s->min, v[i]);
			s->max = fmax(s->max, v[i]);
		}
	if (s->n == 0) {
		s->mean = s->min = s->max = s->cv = NAN;
		return;
	}
	s->mean = sum / (double)s->n;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			sq += (v[i] - s->mean) * (v[i] - s->mean);
	s->cv = s->n >= 2 && s->mean != 0 ? sqrt(sq / (double)(s->n - 1)) / s->mean : NAN;
}

/* A run's numbers from its log (at least one record).  Returns 0, or -1
 * when out of memory. */
static int run_numbers(struct dl_report_run *r, const double *targets, size_t n_targets)
{
	const struct dl_metrics_log *l = &r->log;
	const struct dl_metrics_record *last = &l->rec[l->n - 1];
	size_t used = 0, n_seg = 0;
	double ips = 0, ips_rank = 0;

	r->ranks = last->ranks;
	r->steps = last->step;
	r->wall_s = last->wall_s;
	r->final_top1 = r->best_top1 = NAN;
	for (size_t t = 0; t < n_targets; t++) {
		r->tta_s[t] = NAN;
		r->tta_step[t] = -1;
	}
	for (size_t k = 0; k < l->n; k++) {
		const struct dl_metrics_record *e = &l->rec[k];
		n_seg += k == 0 || e->ranks != l->rec[k - 1].ranks;
		r->compute_s += isfinite(e->compute_s) ? e->compute_s : 0;
		r->exposed_comm_s += isfinite(e->exposed_comm_s) ? e->exposed_comm_s : 0;
		r->loader_stall_s += isfinite(e->loader_stall_s) ? e->loader_stall_s : 0;
		r->comm_s += isfinite(e->comm_s) ? e->comm_s : 0;
		if (e->has_eval && isfinite(e->top1)) {
			r->final_top1 = e->top1;
			r->best_top1 = isfinite(r->best_top1) ? fmax(r->best_top1, e->top1) : e->top1;
			for (size_t t = 0; t < n_targets; t++)
				if (r->tta_step[t] < 0 && e->top1 >= 100 * targets[t]) {
					r->tta_s[t] = e->wall_s;
					r->tta_step[t] = e->step;
				}
		}
	}
	r->segments = calloc(n_seg, sizeof(*r->segments));
	if (!r->segments)
		return -1;
	r->n_segments = n_seg;
	/* per segment: its training records, the first left out when there
	 * are two or more (the warm-up of a start or a resume) */
	for (size_t k = 0, sg = 0; k < l->n; sg++) {
		struct dl_report_segment *g = &r->segments[sg];
		size_t j = k, n_train = 0, seen = 0, used_here = 0;
		double sum = 0;
		for (; j < l->n && l->rec[j].ranks == l->rec[k].ranks; j++)
			n_train += !l->rec[j].has_eval && isfinite(l->rec[j].img_per_s);
		g->ranks = l->rec[k].ranks;
		g->from_step = k ? l->rec[k - 1].step : 0;
		g->to_step = l->rec[j - 1].step;
		g->records = j - k;
		for (size_t i = k; i < j; i++) {
			const struct dl_metrics_record *e = &l->rec[i];
			if (e->has_eval || !isfinite(e->img_per_s))
				continue;
			if (seen++ < (n_train >= 2 ? 1u : 0u))
				continue;
			sum += e->img_per_s;
			used_here++;
			ips += e->img_per_s;
			ips_rank += e->img_per_s / e->ranks;
			used++;
		}
		g->img_per_s = used_here ? sum / (double)used_here : NAN;
		g->img_per_s_per_rank = g->img_per_s / g->ranks;
		k = j;
	}
	r->img_per_s = used ? ips / (double)used : NAN;
	r->img_per_s_per_rank = used ? ips_rank / (double)used : NAN;
	double step_s = r->compute_s + r->exposed_comm_s + r->loader_stall_s;
	r->compute_share = step_s > 0 ? r->compute_s / step_s : NAN;
	r->exposed_comm_share = step_s > 0 ? r->exposed_comm_s / step_s : NAN;
	r->loader_stall_share = step_s > 0 ? r->loader_stall_s / step_s : NAN;
	return 0;
}

static int by_ranks(const void *a, const void *b)
{
	const struct dl_report_run *x = a, *y = b;
	return (x->ranks > y->ranks) - (x->ranks < y->ranks);
}

int dl_report_build(struct dl_report *rep, const char *const *dirs, size_t n_dirs, const double *targets,
                    size_t n_targets, char *err, size_t errlen)
{
	memset(rep, 0, sizeof(*rep));
	if (n_targets > DL_REPORT_MAX_TARGETS) {
		dl_errf(err, errlen, "at most %d targets", DL_REPORT_MAX_TARGETS);
		return -1;
	}
	rep->n_targets = n_targets;
	memcpy(rep->targets, targets, n_targets * sizeof(*targets));
	rep->runs = calloc(n_dirs ? n_dirs : 1, sizeof(*rep->runs));
	rep->groups = calloc(n_dirs ? n_dirs : 1, sizeof(*rep->groups));
	double *v = calloc(n_dirs ? n_dirs : 1, sizeof(*v));
	if (!rep->runs || !rep->groups || !v) {
		free(v);
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n_dirs; i++) {
		char path[4096];
		struct dl_report_run *r = &rep->runs[i];
		int n = snprintf(path, sizeof(path), "%s/metrics.jsonl", dirs[i]);
		if (n < 0 || (size_t)n >= sizeof(path)) {
			free(v);
			dl_errf(err, errlen, "path too long: %s", dirs[i]);
			return -1;
		}
		r->name = dirs[i];
		if (dl_metrics_read(path, &r->log, err, errlen) < 0) {
			free(v);
			return -1;
		}
		rep->n_runs++;
		if (run_numbers(r, targets, n_targets) < 0) {
			free(v);
			dl_errf(err, errlen, "out of memory");
			return -1;
		}
	}
	/* stable order within a rank count: the order given */
	for (size_t i = 1; i < rep->n_runs; i++)
		for (size_t j = i; j > 0 && by_ranks(&rep->runs[j - 1], &rep->runs[j]) > 0; j--) {
			struct dl_report_run t = rep->runs[j];
			rep->runs[j] = rep->runs[j - 1];
			rep->runs[j - 1] = t;
		}
	for (size_t i = 0; i < rep->n_runs;) {
		struct dl_report_group *g = &rep->groups[rep->n_groups++];
		size_t j = i;
		while (j < rep->n_runs && rep->runs[j].ranks == rep->runs[i].ranks)
			j++;
		g->ranks = rep->runs[i].ranks;
		g->n_runs = j - i;
#define STATS(field, dst)                                    \
	do {                                                 \
		for (size_t k = i; k < j; k++)               \
			v[k - i] = rep->runs[k].field;       \
		dl_stats_of(v, j - i, dst);                  \
	} while (0)
		/* throughput: the runs that kept one rank count (NaN is left out) */
		for (size_t k = i; k < j; k++) {
			v[k - i] = rep->runs[k].n_segments > 1 ? NAN : rep->runs[k].img_per_s;
			g->n_changed += rep->runs[k].n_segments > 1;
		}
		dl_stats_of(v, j - i, &g->img_per_s);
		STATS(final_top1, &g->final_top1);
		for (size_t t = 0; t < n_targets; t++)
			STATS(tta_s[t], &g->tta_s[t]);
#undef STATS
		g->img_per_s_per_rank = g->img_per_s.mean / g->ranks;
		i = j;
	}
	const struct dl_report_group *base = &rep->groups[0];
	for (size_t k = 0; k < rep->n_groups; k++) {
		struct dl_report_group *g = &rep->groups[k];
		g->scaling_efficiency = g->img_per_s_per_rank / base->img_per_s_per_rank;
		g->throughput_speedup = g->img_per_s.mean / base->img_per_s.mean;
		for (size_t t = 0; t < n_targets; t++)
			g->learning_speedup[t] = g->tta_s[t].n == g->n_runs && base->tta_s[t].n == base->n_runs
			                                 ? base->tta_s[t].mean / g->tta_s[t].mean
			                                 : NAN;
	}
	free(v);
	return 0;
}

void dl_report_free(struct dl_report *rep)
{
	for (size_t i = 0; i < rep->n_runs; i++) {
		dl_metrics_log_free(&rep->runs[i].log);
		free(rep->runs[i].segments);
	}
	free(rep->runs);
	free(rep->groups);
	memset(rep, 0, sizeof(*rep));
}

/* ---- output ------------------------------------------------------------- */

/* "%.*f" or "-" for a number that is not defined. */
static const char *fnum(char *buf, size_t len, double v, int prec)
{
	if (!isfinite(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.*f", prec, v);
	return buf;
}

static const char *pct(char *buf, size_t len, double share)
{
	if (!isfinite(share))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", 100 * share);
	return buf;
}

/* A run name in a Markdown cell: '|' and newlines would break the table. */
static void md_name(FILE *f, const char *s)
{
	for (; *s; s++)
		if (*s == '|' || *s == '\\' || *s == '`' || *s == '*' || *s == '_')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fputc('?', f);
		else
			fputc(*s, f);
}

void dl_report_markdown(FILE *f, const struct dl_report *rep)
{
	char a[64], b[64], c[64], d[64];

	fprintf(f, "## Runs\n\n| run | ranks | steps | wall (s) | img/s | img/s per rank | compute (s) | exposed comm (s) "
	           "| loader stall (s) | comm, overlapped (s) | final top-1 (%%)");
	for (size_t t = 0; t < rep->n_targets; t++)
		fprintf(f, " | time to %g%% (s) | step", 100 * rep->targets[t]);
	fprintf(f, " |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:");
	for (size_t t = 0; t < rep->n_targets; t++)
		fprintf(f, "|--:|--:");
	fprintf(f, "|\n");
	for (size_t i = 0; i < rep->n_runs; i++) {
		const struct dl_report_run *r = &rep->runs[i];
		fprintf(f, "| ");
		md_name(f, r->name);
		fprintf(f, " | ");
		for (size_t sg = 0; sg < r->n_segments; sg++) /* "2->1": resumed on another rank count */
			fprintf(f, "%s%d", sg ? "->" : "", r->segments[sg].ranks);
		fprintf(f, " | %ld | %s | %s | ", r->steps, fnum(a, sizeof(a), r->wall_s, 2),
		        fnum(b, sizeof(b), r->img_per_s, 1));
		fprintf(f, "%s | %s (%s) | ", fnum(a, sizeof(a), r->img_per_s_per_rank, 1),
		        fnum(b, sizeof(b), r->compute_s, 2), pct(c, sizeof(c), r->compute_share));
		fprintf(f, "%s (%s) | ", fnum(a, sizeof(a), r->exposed_comm_s, 2), pct(b, sizeof(b), r->exposed_comm_share));
		fprintf(f, "%s (%s) | %s | %s", fnum(a, sizeof(a), r->loader_stall_s, 2),
		        pct(b, sizeof(b), r->loader_stall_share), fnum(c, sizeof(c), r->comm_s, 2),
		        fnum(d, sizeof(d), r->final_top1, 2));
		for (size_t t = 0; t < rep->n_targets; t++) {
			if (r->tta_step[t] >= 0)
				fprintf(f, " | %s | %ld", fnum(a, sizeof(a), r->tta_s[t], 2), r->tta_step[t]);
			else
				fprintf(f, " | not reached | -");
		}
		fprintf(f, " |\n");
	}

	int changed = 0;
	for (size_t i = 0; i < rep->n_runs; i++)
		changed |= rep->runs[i].n_segments > 1;
	if (changed) {
		fprintf(f, "\n## Runs that changed rank count\n\nResumed on another rank count: each segment's img/s "
		           "per rank is over its own rank count, and the run's above is their mean over the records. "
		           "In the scaling table such a run counts with its last rank count for accuracy, but not "
		           "for throughput.\n\n| run | segment | ranks | steps | records | img/s | img/s per rank |\n"
		           "|---|--:|--:|---|--:|--:|--:|\n");
		for (size_t i = 0; i < rep->n_runs; i++) {
			const struct dl_report_run *r = &rep->runs[i];
			for (size_t sg = 0; r->n_segments > 1 && sg < r->n_segments; sg++) {
				const struct dl_report_segment *g = &r->segments[sg];
				char steps[48];
				/* steps from_step+1..to_step; none new (an eval record at the
				 * step the last segment ended on): that step alone, and no
				 * from_step + 1 past LONG_MAX */
				if (g->from_step < g->to_step)
					snprintf(steps, sizeof(steps), "%ld-%ld", g->from_step + 1, g->to_step);
				else
					snprintf(steps, sizeof(steps), "%ld", g->to_step);
				fprintf(f, "| ");
				md_name(f, r->name);
				fprintf(f, " | %zu | %d | %s | %zu | %s | %s |\n", sg + 1, g->ranks, steps, g->records,
				        fnum(a, sizeof(a), g->img_per_s, 1), fnum(b, sizeof(b), g->img_per_s_per_rank, 1));
			}
		}
	}

	fprintf(f, "\n## Scaling (relative to %d rank%s)\n\n| ranks | runs | img/s | img/s per rank | scaling efficiency "
	           "| throughput speed-up", rep->groups[0].ranks, rep->groups[0].ranks == 1 ? "" : "s");
	for (size_t t = 0; t < rep->n_targets; t++)
		fprintf(f, " | time to %g%% (s) | learning speed-up", 100 * rep->targets[t]);
	fprintf(f, " |\n|--:|--:|--:|--:|--:|--:");
	for (size_t t = 0; t < rep->n_targets; t++)
		fprintf(f, "|--:|--:");
	fprintf(f, "|\n");
	for (size_t k = 0; k < rep->n_groups; k++) {
		const struct dl_report_group *g = &rep->groups[k];
		fprintf(f, "| %d | %zu", g->ranks, g->n_runs);
		if (g->n_changed)
			fprintf(f, " (%zu changed rank count)", g->n_changed);
		fprintf(f, " | %s | %s | ", fnum(a, sizeof(a), g->img_per_s.mean, 1), fnum(b, sizeof(b), g->img_per_s_per_rank, 1));
		fprintf(f, "%s | %s", pct(a, sizeof(a), g->scaling_efficiency), fnum(b, sizeof(b), g->throughput_speedup, 2));
		for (size_t t = 0; t < rep->n_targets; t++) {
			fprintf(f, " | %s", fnum(a, sizeof(a), g->tta_s[t].mean, 2));
			if (g->tta_s[t].n < g->n_runs)
				fprintf(f, " (%zu/%zu reached)", g->tta_s[t].n, g->n_runs);
			fprintf(f, " | %s", fnum(b, sizeof(b), g->learning_speedup[t], 2));
		}
		fprintf(f, " |\n");
	}

	int any = 0;
	for (size_t k = 0; k < rep->n_groups; k++)
		any |= rep->groups[k].n_runs >= 2;
	if (!any)
		return;
	fprintf(f, "\n## Variability of repeated runs\n\n| ranks | measure | runs | mean | min | max | CV |\n"
	           "|--:|---|--:|--:|--:|--:|--:|\n");
	for (size_t k = 0; k < rep->n_groups; k++) {
		const struct dl_report_group *g = &rep->groups[k];
		if (g->n_runs < 2)
			continue;
		for (size_t m = 0; m < 2 + rep->n_targets; m++) {
			const struct dl_stats *s = m == 0 ? &g->img_per_s : m == 1 ? &g->final_top1 : &g->tta_s[m - 2];
			char what[64];
			if (m == 0)
				snprintf(what, sizeof(what), "img/s");
			else if (m == 1)
				snprintf(what, sizeof(what), "final top-1 (%%)");
			else
				snprintf(what, sizeof(what), "time to %g%% (s)", 100 * rep->targets[m - 2]);
			fprintf(f, "| %d | %s | %zu | %s | ", g->ranks, what, s->n, fnum(a, sizeof(a), s->mean, 2));
			fprintf(f, "%s | %s | %s |\n", fnum(a, sizeof(a), s->min, 2), fnum(b, sizeof(b), s->max, 2),
			        pct(c, sizeof(c), s->cv));
		}
	}
}

/* A JSON number, null where not defined. */
static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *jstats(const struct dl_stats *s)
{
	return json_pack("{s:I,s:o,s:o,s:o,s:o}", "n", (json_int_t)s->n, "mean", jnum(s->mean), "min", jnum(s->min),
	                 "max", jnum(s->max), "cv", jnum(s->cv));
}

json_t *dl_report_json(const struct dl_report *rep)
{
	json_t *root = json_object(), *targets = json_array(), *runs = json_array(), *groups = json_array();
	if (!root || !targets || !runs || !groups)
		goto fail;
	json_object_set_new(root, "targets", targets);
	json_object_set_new(root, "runs", runs);
	json_object_set_new(root, "groups", groups);
	for (size_t t = 0; t < rep->n_targets; t++)
		json_array_append_new(targets, json_real(rep->targets[t]));
	for (size_t i = 0; i < rep->n_runs; i++) {
		const struct dl_report_run *r = &rep->runs[i];
		json_t *tta = json_array();
		for (size_t t = 0; tta && t < rep->n_targets; t++)
			json_array_append_new(tta, json_pack("{s:f,s:o,s:o}", "target", rep->targets[t], "wall_s",
			                                     jnum(r->tta_s[t]), "step",
			                                     r->tta_step[t] >= 0 ? json_integer(r->tta_step[t]) : json_null()));
		json_t *phases = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "compute_s", jnum(r->compute_s),
		                           "exposed_comm_s", jnum(r->exposed_comm_s), "loader_stall_s",
		                           jnum(r->loader_stall_s), "comm_s", jnum(r->comm_s), "compute_share",
		                           jnum(r->compute_share), "exposed_comm_share", jnum(r->exposed_comm_share),
		                           "loader_stall_share", jnum(r->loader_stall_share));
		json_t *segs = json_array();
		for (size_t sg = 0; segs && sg < r->n_segments; sg++) {
			const struct dl_report_segment *g = &r->segments[sg];
			json_array_append_new(segs, json_pack("{s:i,s:I,s:I,s:I,s:o,s:o}", "ranks", g->ranks, "from_step",
			                                      (json_int_t)g->from_step, "to_step", (json_int_t)g->to_step,
			                                      "records", (json_int_t)g->records, "img_per_s",
			                                      jnum(g->img_per_s), "img_per_s_per_rank",
			                                      jnum(g->img_per_s_per_rank)));
		}
		json_t *o = json_pack("{s:s,s:i,s:b,s:o,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "run", r->name, "ranks",
		                      r->ranks, "ranks_changed", r->n_segments > 1, "segments", segs ? segs : json_null(),
		                      "records", (json_int_t)r->log.n, "steps", (json_int_t)r->steps, "wall_s",
		                      jnum(r->wall_s), "img_per_s", jnum(r->img_per_s), "img_per_s_per_rank",
		                      jnum(r->img_per_s_per_rank), "phases", phases ? phases : json_null(),
		                      "final_top1", jnum(r->final_top1), "best_top1", jnum(r->best_top1),
		                      "time_to_accuracy", tta ? tta : json_null());
		if (!o || json_array_append_new(runs, o) < 0)
			goto fail;
	}
	for (size_t k = 0; k < rep->n_groups; k++) {
		const struct dl_report_group *g = &rep->groups[k];
		json_t *tta = json_array();
		for (size_t t = 0; tta && t < rep->n_targets; t++)
			json_array_append_new(tta, json_pack("{s:f,s:o,s:o}", "target", rep->targets[t], "wall_s",
			                                     jstats(&g->tta_s[t]), "learning_speedup",
			                                     jnum(g->learning_speedup[t])));
		json_t *o = json_pack("{s:i,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o}", "ranks", g->ranks, "runs",
		                      (json_int_t)g->n_runs, "runs_changed_ranks", (json_int_t)g->n_changed, "img_per_s",
		                      jstats(&g->img_per_s), "img_per_s_per_rank",
		                      jnum(g->img_per_s_per_rank), "scaling_efficiency", jnum(g->scaling_efficiency),
		                      "throughput_speedup", jnum(g->throughput_speedup), "final_top1",
		                      jstats(&g->final_top1), "time_to_accuracy", tta ? tta : json_null());
		if (!o || json_array_append_new(groups, o) < 0)
			goto fail;
	}
	return root;
fail:
	json_decref(root);
	return NULL;
}

/* What the command line sets, in the option table's types. */
struct report_args {
	double target;         /* the last --target (each is kept in targets[]) */
	const char *json, *plot;
};

/* dljob report's options (runtime/opttab.h says how to read a row). */
#define REPORT_OPTIONS(X, H) \
	X(TARGET, "target", required_argument, "X", DBL_MIN_OPEN, 0, 1, target, \
	  "time to reach top-1 >= X (a fraction, e.g. 0.85); repeatable") \
	X(JSON, "json", required_argument, "FILE", NONE, 0, 0, json, \
	  "also write the numbers as JSON to FILE ('-': stdout, no Markdown)") \
	X(PLOT, "plot", required_argument, "FILE", NONE, 0, 0, plot, \
	  "also draw loss and top-1 against step and wall time (PNG)") \
	X(HELP, "help", no_argument, NULL, NONE, 0, 0, json, "this text")

#define DL_OPT_STRUCT struct report_args
DL_OPT_DEFINE(REPORT_OPTIONS, report)
const struct dl_opt_table dl_report_opttab = DL_OPT_TABLE(report, "dljob report");

static void usage(FILE *f)
{
	fprintf(f,
	"Usage: dljob report [OPTION]... RUN_DIR...\n"
	"Summarize runs from their RUN_DIR/metrics.jsonl: throughput, time per phase,\n"
	"time to accuracy; across rank counts scaling efficiency and learning speed-up;\n"
	"variability of repeated runs; for a run resumed on another rank count, its\n"
	"throughput per segment.  Markdown tables on stdout.\n"
	"\n");
	dl_opt_usage(f, &dl_report_opttab);
}

int dl_report_main(int argc, char **argv)
{
	double targets[DL_REPORT_MAX_TARGETS];
	size_t n_targets = 0;
	struct report_args a = {0};
	const char *json_path, *plot_path;
	char err[512];
	int opt, rv = DL_EXIT_ERROR;
	struct dl_report rep;
	struct dl_plot_series *series = NULL;
	char (*labels)[128] = NULL;

	memset(&rep, 0, sizeof(rep));
	optind = 1;
	while ((opt = dl_opt_next(&dl_report_opttab, ":", argc, argv, &a, err, sizeof(err))) != -1) {
		switch (opt) {
		case OPT_TARGET:
			if (n_targets == DL_REPORT_MAX_TARGETS) {
				fprintf(stderr, "dljob report: at most %d --target\n", DL_REPORT_MAX_TARGETS);
				return DL_EXIT_USAGE;
			}
			targets[n_targets++] = a.target;
			break;
		case OPT_JSON: a.json = optarg; break;
		case OPT_PLOT: a.plot = optarg; break;
		case OPT_HELP: usage(stdout); return DL_EXIT_OK;
		case DL_OPT_ERROR:
			fprintf(stderr, "dljob report: %s\n", err);
			return DL_EXIT_USAGE;
		default: break;
		}
	}
	json_path = a.json;
	plot_path = a.plot;
	if (optind >= argc) {
		fprintf(stderr, "dljob report: no RUN_DIR given (see dljob report --help)\n");
		return DL_EXIT_USAGE;
	}
	if (dl_report_build(&rep, (const char *const *)argv + optind, (size_t)(argc - optind), targets, n_targets, err,
	                    sizeof(err)) < 0) {
		fprintf(stderr, "dljob report: %s\n", err);
		goto out;
	}
	if (!json_path || strcmp(json_path, "-") != 0)
		dl_report_markdown(stdout, &rep);
	if (json_path) {
		json_t *j = dl_report_json(&rep);
		if (!j) {
			/* jansson refuses strings that are not UTF-8 */
			fprintf(stderr, "dljob report: cannot encode the report as JSON (out of memory, or a "
			        "RUN_DIR name that is not UTF-8)\n");
			goto out;
		}
		int bad;
		errno = 0;
		if (strcmp(json_path, "-") == 0)
			bad = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0 || fputc('\n', stdout) == EOF;
		else
			bad = json_dump_file(j, json_path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0;
		json_decref(j);
		if (bad) {
			fprintf(stderr, "dljob report: cannot write %s: %s\n", json_path,
			        errno ? strerror(errno) : "write error");
			goto out;
		}
	}
	if (plot_path) {
		series = calloc(rep.n_runs, sizeof(*series));
		labels = calloc(rep.n_runs, sizeof(*labels));
		if (!series || !labels) {
			fprintf(stderr, "dljob report: out of memory\n");
			goto out;
		}
		for (size_t i = 0; i < rep.n_runs; i++) {
			const struct dl_report_run *r = &rep.runs[i];
			if (r->n_segments > 1) /* first and last rank count */
				snprintf(labels[i], sizeof(labels[i]), "%.100s (%d->%d ranks)", r->name, r->segments[0].ranks,
				         r->ranks);
			else
				snprintf(labels[i], sizeof(labels[i]), "%.100s (%d rank%s)", r->name, r->ranks,
				         r->ranks == 1 ? "" : "s");
			series[i] = (struct dl_plot_series){.label = labels[i], .log = &rep.runs[i].log};
		}
		char title[64];
		snprintf(title, sizeof(title), "dljob report: %zu run%s", rep.n_runs, rep.n_runs == 1 ? "" : "s");
		if (dl_plot_png(plot_path, title, series, rep.n_runs, err, sizeof(err)) < 0) {
			fprintf(stderr, "dljob report: %s\n", err);
			goto out;
		}
	}
	if (fflush(stdout) == EOF) {
		fprintf(stderr, "dljob report: writing stdout: %s\n", strerror(errno));
		goto out;
	}
	rv = DL_EXIT_OK;
out:
	free(series);
	free(labels);
	dl_report_free(&rep);
	return rv;
}
