/* The run plot (runtime/plot.h).  Layout, in pixels of a 1600 x 1000
 * image: the title and the legend on top, then a 2 x 2 grid of panels;
 * each panel has its title, a frame, grid lines at "nice" ticks (1, 2, 5 x
 * 10^k) with their labels, and its axis label.  Loss is drawn at every
 * metrics record, top-1 at every eval record (with a marker, as there are
 * few).  Wall time is in seconds, minutes or hours as the longest run
 * needs. */
#include "config.h"
#include <cairo.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "engine/file.h"
#include "runtime/plot.h"

#define W 1600
#define H 1000
#define FONT "DejaVu Sans"

/* Tableau's 10 colours, the ones matplotlib uses by default. */
static const double palette[10][3] = {
	{0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
	{0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
	{0.737, 0.741, 0.133}, {0.090, 0.745, 0.812},
};

enum { X_STEP, X_WALL };
enum { Y_LOSS, Y_TOP1 };

struct axis {
	double lo, hi, tick;
};

/* A tick spacing of 1, 2 or 5 x 10^k giving about `want` intervals. */
static double nice_tick(double range, int want)
{
	if (!(range > 0) || !isfinite(range))
		return 1;
	double raw = range / want, p = pow(10, floor(log10(raw))), f = raw / p;
	return p * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

static void axis_fit(struct axis *a, double lo, double hi, int want)
{
	if (!(hi > lo)) {
		hi = lo + 1;
		lo = lo - 1;
	}
	a->tick = nice_tick(hi - lo, want);
	a->lo = floor(lo / a->tick + 1e-9) * a->tick;
	a->hi = ceil(hi / a->tick - 1e-9) * a->tick;
}

static int has_point(const struct dl_metrics_record *r, int y)
{
	return y == Y_LOSS ? isfinite(r->loss) : r->has_eval && isfinite(r->top1);
}

static double xval(const struct dl_metrics_record *r, int x, double unit)
{
	return x == X_STEP ? (double)r->step : r->wall_s / unit;
}

static double yval(const struct dl_metrics_record *r, int y)
{
	return y == Y_LOSS ? r->loss : r->top1;
}

static void text_at(cairo_t *cr, double x, double y, double size, double ax, double ay, const char *s)
{
	cairo_text_extents_t te;
	cairo_set_font_size(cr, size);
	cairo_text_extents(cr, s, &te);
	cairo_move_to(cr, x - ax * te.width - te.x_bearing, y - ay * te.height - te.y_bearing);
	cairo_show_text(cr, s);
}

static void fmt_tick(char *buf, size_t len, double v, double tick)
{
	if (fabs(v) < tick * 1e-6)
		v = 0;
	if (fabs(v) >= 1e5 || (v != 0 && fabs(v) < 1e-3))
		snprintf(buf, len, "%.3g", v);
	else
		snprintf(buf, len, "%.*f", tick >= 1 ? 0 : (int)ceil(-log10(tick) - 1e-9), v);
}

static void panel(cairo_t *cr, double px, double py, double pw, double ph, int x, int y, double unit,
                  const char *unit_name, const struct dl_plot_series *s, size_t n)
{
	/* plot area inside the panel box: room for the title, the tick labels
	 * and the axis labels (ax0 and aw once the y tick labels are known) */
	double ax0 = px + 95, ay0 = py + 40, aw = pw - 120, ah = ph - 110;
	double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
	char buf[128];

	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < s[i].log->n; k++) {
			const struct dl_metrics_record *r = &s[i].log->rec[k];
			if (!has_point(r, y))
				continue;
			double xv = xval(r, x, unit), yv = yval(r, y);
			xlo = fmin(xlo, xv), xhi = fmax(xhi, xv), ylo = fmin(ylo, yv), yhi = fmax(yhi, yv);
		}
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
	text_at(cr, ax0 + aw / 2, py + 14, 20, 0.5, 0.5,
	        y == Y_LOSS ? (x == X_STEP ? "Training loss by step" : "Training loss by wall time")
	                    : (x == X_STEP ? "Top-1 accuracy (held out) by step" : "Top-1 accuracy (held out) by wall time"));
	cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	if (xlo > xhi) {
		cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
		text_at(cr, ax0 + aw / 2, ay0 + ah / 2, 18, 0.5, 0.5,
		        y == Y_TOP1 ? "no eval records (one comes at each epoch's end)" : "no training records");
		cairo_rectangle(cr, ax0, ay0, aw, ah);
		cairo_stroke(cr);
		return;
	}
	struct axis xa, ya;
	axis_fit(&xa, fmin(0, xlo), xhi, 6);
	if (y == Y_LOSS)
		axis_fit(&ya, fmin(0, ylo), yhi, 5);
	else
		axis_fit(&ya, fmax(0, ylo - 2), fmin(100, yhi + 2), 5);
	/* the widest y tick label sets where the plot area begins */
	double label_w = 0;
	cairo_set_font_size(cr, 16);
	for (int t = 0; t <= 1000; t++) {
		double v = ya.lo + t * ya.tick;
		cairo_text_extents_t te;
		if (v > ya.hi + ya.tick * 1e-6)
			break;
		fmt_tick(buf, sizeof(buf), v, ya.tick);
		cairo_text_extents(cr, buf, &te);
		label_w = fmax(label_w, te.x_advance);
	}
	ax0 = px + 50 + fmin(label_w, pw / 3);
	aw = pw - (ax0 - px) - 25;
#define PX(v) (ax0 + ((v) - xa.lo) / (xa.hi - xa.lo) * aw)
#define PY(v) (ay0 + ah - ((v) - ya.lo) / (ya.hi - ya.lo) * ah)
	/* grid and tick labels */
	cairo_set_line_width(cr, 1);
	for (int t = 0; t <= 1000; t++) {
		double v = xa.lo + t * xa.tick;
		if (v > xa.hi + xa.tick * 1e-6)
			break;
		cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
		cairo_move_to(cr, PX(v), ay0);
		cairo_line_to(cr, PX(v), ay0 + ah);
		cairo_stroke(cr);
		cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
		fmt_tick(buf, sizeof(buf), v, xa.tick);
		text_at(cr, PX(v), ay0 + ah + 8, 16, 0.5, 0, buf);
	}
	for (int t = 0; t <= 1000; t++) {
		double v = ya.lo + t * ya.tick;
		if (v > ya.hi + ya.tick * 1e-6)
			break;
		cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
		cairo_move_to(cr, ax0, PY(v));
		cairo_line_to(cr, ax0 + aw, PY(v));
		cairo_stroke(cr);
		cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
		fmt_tick(buf, sizeof(buf), v, ya.tick);
		text_at(cr, ax0 - 8, PY(v), 16, 1, 0.5, buf);
	}
	cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
	cairo_rectangle(cr, ax0, ay0, aw, ah);
	cairo_stroke(cr);
	/* axis labels */
	if (x == X_STEP)
		snprintf(buf, sizeof(buf), "step");
	else
		snprintf(buf, sizeof(buf), "wall time (%s)", unit_name);
	text_at(cr, ax0 + aw / 2, ay0 + ah + 34, 17, 0.5, 0, buf);
	cairo_save(cr);
	cairo_translate(cr, px + 22, ay0 + ah / 2);
	cairo_rotate(cr, -M_PI / 2);
	text_at(cr, 0, 0, 17, 0.5, 0.5, y == Y_LOSS ? "loss (mean over the interval)" : "top-1 (%)");
	cairo_restore(cr);
	/* the series, clipped to the plot area */
	cairo_save(cr);
	cairo_rectangle(cr, ax0, ay0, aw, ah);
	cairo_clip(cr);
	cairo_set_line_width(cr, 2.5);
	cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
	for (size_t i = 0; i < n; i++) {
		const double *c = palette[i % 10];
		int started = 0;
		cairo_set_source_rgb(cr, c[0], c[1], c[2]);
		for (size_t k = 0; k < s[i].log->n; k++) {
			const struct dl_metrics_record *r = &s[i].log->rec[k];
			if (!has_point(r, y))
				continue;
			double X = PX(xval(r, x, unit)), Y = PY(yval(r, y));
			if (started)
				cairo_line_to(cr, X, Y);
			else
				cairo_move_to(cr, X, Y);
			started = 1;
		}
		cairo_stroke(cr);
		if (y == Y_TOP1)
			for (size_t k = 0; k < s[i].log->n; k++) {
				const struct dl_metrics_record *r = &s[i].log->rec[k];
				if (!has_point(r, y))
					continue;
				cairo_arc(cr, PX(xval(r, x, unit)), PY(yval(r, y)), 5, 0, 2 * M_PI);
				cairo_fill(cr);
			}
	}
	cairo_restore(cr);
#undef PX
#undef PY
}

/* cairo's PNG writer into a file descriptor, keeping the errno of a
 * failed write (a full disk) to say it. */
struct png_out {
	int fd, err;
};

static cairo_status_t png_write(void *closure, const unsigned char *data, unsigned int len)
{
	struct png_out *po = closure;
	if (dl_write_all(po->fd, data, len) != 0) {
		po->err = errno;
		return CAIRO_STATUS_WRITE_ERROR;
	}
	return CAIRO_STATUS_SUCCESS;
}

int dl_plot_png(const char *path, const char *title, const struct dl_plot_series *s, size_t n, char *err,
                size_t errlen)
{
	int rv = -1;
	cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
	cairo_t *cr = cairo_create(sf);
	if (cairo_status(cr) != CAIRO_STATUS_SUCCESS) {
		dl_errf(err, errlen, "cairo: %s", cairo_status_to_string(cairo_status(cr)));
		goto out;
	}
	double wall_max = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < s[i].log->n; k++)
			if (isfinite(s[i].log->rec[k].wall_s))
				wall_max = fmax(wall_max, s[i].log->rec[k].wall_s);
	double unit = wall_max > 3 * 3600 ? 3600 : wall_max > 600 ? 60 : 1;
	const char *unit_name = unit == 3600 ? "h" : unit == 60 ? "min" : "s";

	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
	text_at(cr, W / 2.0, 24, 24, 0.5, 0.5, title);
	/* legend: one row of swatches and labels, centred under the title */
	cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, 17);
	double total = 0, wid[64];
	size_t shown = n < 64 ? n : 64;
	for (size_t i = 0; i < shown; i++) {
		cairo_text_extents_t te;
		cairo_text_extents(cr, s[i].label, &te);
		wid[i] = 40 + te.x_advance + 28;
		total += wid[i];
	}
	double lx = fmax(10, (W - total) / 2);
	for (size_t i = 0; i < shown; i++) {
		const double *c = palette[i % 10];
		cairo_set_source_rgb(cr, c[0], c[1], c[2]);
		cairo_rectangle(cr, lx, 56, 32, 6);
		cairo_fill(cr);
		cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
		text_at(cr, lx + 40, 59, 17, 0, 0.5, s[i].label);
		lx += wid[i];
	}
	double top = 80, pw = W / 2.0, ph = (H - top) / 2.0;
	for (int y = 0; y < 2; y++)
		for (int x = 0; x < 2; x++)
			panel(cr, x * pw, top + y * ph, pw, ph, x, y, unit, unit_name, s, n);
	cairo_surface_flush(sf);
	struct png_out po = {.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)};
	if (po.fd < 0) {
		dl_errf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		goto out;
	}
	cairo_status_t st = cairo_surface_write_to_png_stream(sf, png_write, &po);
	if (close(po.fd) != 0 && !po.err)
		po.err = errno;
	if (st != CAIRO_STATUS_SUCCESS || po.err) {
		/* cairo says only "error while writing to output stream": the
		 * cause is the write's errno */
		dl_errf(err, errlen, "writing %s: %s", path, po.err ? strerror(po.err) : cairo_status_to_string(st));
		goto out;
	}
	rv = 0;
out:
	cairo_destroy(cr);
	cairo_surface_destroy(sf);
	return rv;
}

int dl_plot_run_dir(const char *dir, char *err, size_t errlen)
{
	char in[4096], out[4096], tmp[4096];
	struct dl_metrics_log log;
	int a = snprintf(in, sizeof(in), "%s/metrics.jsonl", dir), b = snprintf(out, sizeof(out), "%s/metrics.png", dir),
	    c = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", out, (long)getpid());
	if (a < 0 || (size_t)a >= sizeof(in) || b < 0 || (size_t)b >= sizeof(out) || c < 0 || (size_t)c >= sizeof(tmp)) {
		dl_errf(err, errlen, "output path too long: %s", dir);
		return -1;
	}
	if (dl_metrics_read(in, &log, err, errlen) < 0)
		return -1;
	char label[64];
	snprintf(label, sizeof(label), "%d rank%s", log.rec[log.n - 1].ranks, log.rec[log.n - 1].ranks == 1 ? "" : "s");
	struct dl_plot_series s = {.label = label, .log = &log};
	/* Through a temporary file and a rename: a write that fails (a full
	 * disk) leaves the picture an earlier run of this directory drew. */
	int rv = dl_plot_png(tmp, dir, &s, 1, err, errlen);
	if (rv == 0 && rename(tmp, out) != 0) {
		dl_errf(err, errlen, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
		rv = -1;
	}
	if (rv != 0)
		unlink(tmp);
	dl_metrics_log_free(&log);
	return rv;
}
