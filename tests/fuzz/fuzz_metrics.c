/* fuzz_metrics: metrics.jsonl as dljob report reads it (the file is
 * untrusted: a run directory anyone may have written).  Input: a whole
 * metrics.jsonl.  It is read (engine/metrics_read.c), reported on with two
 * targets (runtime/report.c: throughput, phases, time to accuracy, groups,
 * the segments of a run resumed on another rank count), written as
 * Markdown and JSON as `dljob report` prints them, and, for inputs whose
 * size is a multiple of 16 (plotting is slow, so not every input), drawn
 * (runtime/plot.c). */
#include "config.h"
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/plot.h"
#include "runtime/report.h"
#include "tests/fuzz/fuzz_util.h"

/* fontconfig and cairo keep their font caches for the life of the process
 * (unreachable at exit, so the leak check reports them): free them at exit,
 * and draw once before the inputs so the first input that draws is not
 * charged with loading them. */
static void free_font_caches(void)
{
	cairo_debug_reset_static_data();
	FcFini();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char png[PATH_MAX], err[512];
	struct dl_metrics_record r = {.step = 1, .epoch = 1, .loss = 1, .wall_s = 1, .ranks = 1, .has_eval = 1,
	                              .top1 = 50};
	struct dl_metrics_log log = {.rec = &r, .n = 1, .cap = 1};
	struct dl_plot_series s = {"warm-up", &log};
	atexit(free_font_caches);
	fz_path(png, sizeof png, "warm.png");
	if (dl_plot_png(png, "warm-up", &s, 1, err, sizeof err) < 0)
		fz_die("plot", err);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char png[PATH_MAX], err[512];
	static const double targets[] = {0.5, 0.9};
	fz_write("metrics.jsonl", data, size);
	fz_path(png, sizeof png, "run.png");
	const char *dirs[] = {fz_tmpdir(), fz_tmpdir()};
	struct dl_report rep;
	if (dl_report_build(&rep, dirs, 2, targets, 2, err, sizeof err) == 0) {
		FILE *md = fopen("/dev/null", "w");
		if (!md)
			fz_die("fopen", "/dev/null");
		dl_report_markdown(md, &rep);
		fclose(md);
		json_t *j = dl_report_json(&rep);
		char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
		free(text);
		json_decref(j);
		if (size % 16 == 0) {
			struct dl_plot_series s[2] = {{"a", &rep.runs[0].log}, {"b", &rep.runs[1].log}};
			dl_plot_png(png, "fuzz", s, 2, err, sizeof err);
		}
	}
	dl_report_free(&rep);
	return 0;
}
