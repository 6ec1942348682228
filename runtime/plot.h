/* The run plot: training loss and held-out top-1 against step and against
 * wall time, one line per run, as a PNG drawn with cairo.  Written by the
 * trainer's rank 0 at the end of a run (OUT/metrics.png) and by dljob report
 * --plot. */
#ifndef DLJOB_RUNTIME_PLOT_H
#define DLJOB_RUNTIME_PLOT_H

#include <stddef.h>
#include "engine/metrics.h"

struct dl_plot_series {
	const char *label;                /* legend text */
	const struct dl_metrics_log *log;
};

/* Four panels (loss / top-1 x step / wall time) of the n series, under
 * `title`, into the PNG file `path`.  Returns 0, or -1 with the reason. */
int dl_plot_png(const char *path, const char *title, const struct dl_plot_series *s, size_t n, char *err,
                size_t errlen);

/* DIR/metrics.jsonl drawn into DIR/metrics.png, through DIR/metrics.png.tmp.PID
 * and a rename: a failed write leaves the one there before. */
int dl_plot_run_dir(const char *dir, char *err, size_t errlen);

#endif
