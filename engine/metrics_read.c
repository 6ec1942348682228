/* metrics.jsonl read back (engine/metrics.h), with jansson: the file is
 * untrusted input (a run directory anyone may have written). */
#include "config.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "engine/file.h"
#include "engine/metrics.h"

#define MAX_LINE 65536      /* dl_metrics_write's lines are under 1 KiB */
#define MAX_RANKS (1 << 20)

static int bad(char *err, size_t errlen, const char *path, size_t line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int bad(char *err, size_t errlen, const char *path, size_t line, const char *fmt, ...)
{
	va_list ap;
	int n;

	/* "path:line: " first, then the message after it (dl_verrf) */
	if (!err || errlen == 0)
		return -1;
	n = snprintf(err, errlen, "%s:%zu: ", path, line);
	if (n < 0 || (size_t)n >= errlen)
		return -1;
	va_start(ap, fmt);
	dl_verrf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* A number field: a JSON number in [lo, hi], or null (NaN) when nullable.
 * Missing: *v untouched, returns 0 only when optional. */
static int num(json_t *o, const char *key, int required, double lo, double hi, double *v, const char *path,
               size_t line, char *err, size_t errlen)
{
	json_t *j = json_object_get(o, key);
	if (!j) {
		if (required)
			return bad(err, errlen, path, line, "no \"%s\"", key);
		return 0;
	}
	if (json_is_null(j)) {
		*v = NAN;
		return 0;
	}
	if (!json_is_number(j))
		return bad(err, errlen, path, line, "\"%s\" is not a number", key);
	double d = json_number_value(j);
	if (!(d >= lo && d <= hi))
		return bad(err, errlen, path, line, "\"%s\": %g is out of range [%g, %g]", key, d, lo, hi);
	*v = d;
	return 0;
}

/* An integer field in [lo, hi], required. */
static int integer(json_t *o, const char *key, json_int_t lo, json_int_t hi, json_int_t *v, const char *path,
                   size_t line, char *err, size_t errlen)
{
	json_t *j = json_object_get(o, key);
	if (!j)
		return bad(err, errlen, path, line, "no \"%s\"", key);
	if (!json_is_integer(j))
		return bad(err, errlen, path, line, "\"%s\" is not an integer", key);
	*v = json_integer_value(j);
	if (*v < lo || *v > hi)
		return bad(err, errlen, path, line, "\"%s\": %lld is out of range [%lld, %lld]", key, (long long)*v,
		           (long long)lo, (long long)hi);
	return 0;
}

static int parse_record(const char *text, size_t len, struct dl_metrics_record *r, const char *path, size_t line,
                        char *err, size_t errlen)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	int rv = -1;
	json_int_t step, epoch, bad_samples, ranks, eval_samples = 0;

	if (!o)
		return bad(err, errlen, path, line, "column %d: %s", je.column, je.text);
	if (!json_is_object(o)) {
		bad(err, errlen, path, line, "not a JSON object");
		goto out;
	}
	memset(r, 0, sizeof(*r));
	/* Any finite non-negative value: a diverging run logs losses of 1e27
	 * and more before it stops, and those are what the report must show. */
	const double T = 1e300;
	if (integer(o, "step", 1, LONG_MAX, &step, path, line, err, errlen) < 0 ||
	    integer(o, "epoch", 1, INT_MAX, &epoch, path, line, err, errlen) < 0 ||
	    integer(o, "bad_samples", 0, LLONG_MAX, &bad_samples, path, line, err, errlen) < 0 ||
	    integer(o, "ranks", 1, MAX_RANKS, &ranks, path, line, err, errlen) < 0 ||
	    num(o, "loss", 1, 0, T, &r->loss, path, line, err, errlen) < 0 ||
	    num(o, "lr", 1, 0, T, &r->lr, path, line, err, errlen) < 0 ||
	    num(o, "img_per_s", 1, 0, T, &r->img_per_s, path, line, err, errlen) < 0 ||
	    num(o, "loader_stall_s", 1, 0, T, &r->loader_stall_s, path, line, err, errlen) < 0 ||
	    num(o, "compute_s", 1, 0, T, &r->compute_s, path, line, err, errlen) < 0 ||
	    num(o, "comm_s", 1, 0, T, &r->comm_s, path, line, err, errlen) < 0 ||
	    num(o, "exposed_comm_s", 1, 0, T, &r->exposed_comm_s, path, line, err, errlen) < 0 ||
	    num(o, "wall_s", 1, 0, T, &r->wall_s, path, line, err, errlen) < 0)
		goto out;
	r->step = (long)step;
	r->epoch = (int)epoch;
	r->bad_samples = (uint64_t)bad_samples;
	r->ranks = (int)ranks;
	if (json_object_get(o, "top1")) {
		r->has_eval = 1;
		r->eval_loss = NAN;
		if (num(o, "top1", 1, 0, 100, &r->top1, path, line, err, errlen) < 0 ||
		    num(o, "top5", 1, 0, 100, &r->top5, path, line, err, errlen) < 0 ||
		    num(o, "eval_loss", 0, 0, T, &r->eval_loss, path, line, err, errlen) < 0)
			goto out;
		if (json_object_get(o, "eval_samples") &&
		    integer(o, "eval_samples", 0, LLONG_MAX, &eval_samples, path, line, err, errlen) < 0)
			goto out;
		r->eval_samples = (uint64_t)eval_samples;
	}
	rv = 0;
out:
	json_decref(o);
	return rv;
}

static int append(struct dl_metrics_log *log, const struct dl_metrics_record *r)
{
	/* A resumed run repeats the steps after its checkpoint: the new
	 * records replace the old ones from that step on.  An eval record
	 * right after the training record of the same step (the epoch's last
	 * step was also a --print-every step) is not a repeat. */
	while (log->n > 0) {
		const struct dl_metrics_record *p = &log->rec[log->n - 1];
		if (p->step < r->step || (p->step == r->step && r->has_eval && !p->has_eval))
			break;
		log->n--;
	}
	if (log->n == log->cap) {
		size_t cap = log->cap ? 2 * log->cap : 64;
		struct dl_metrics_record *p = realloc(log->rec, cap * sizeof(*p));
		if (!p)
			return -1;
		log->rec = p;
		log->cap = cap;
	}
	log->rec[log->n++] = *r;
	return 0;
}

int dl_metrics_read(const char *path, struct dl_metrics_log *log, char *err, size_t errlen)
{
	struct stat st;
	FILE *f = NULL;
	char *buf = NULL;
	size_t len = 0, line = 0;
	int rv = -1;

	memset(log, 0, sizeof(*log));
	int fd = dl_open_regular(path, &st, err, errlen);
	if (fd < 0)
		return -1;
	f = fdopen(fd, "r");
	if (!f) {
		dl_errf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	buf = malloc(MAX_LINE + 2);
	if (!buf) {
		dl_errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (;;) {
		int c = 0;
		len = 0;
		line++;
		while (len <= MAX_LINE && (c = getc(f)) != EOF && c != '\n')
			buf[len++] = (char)c;
		if (len > MAX_LINE) {
			bad(err, errlen, path, line, "line longer than %d bytes", MAX_LINE);
			goto out;
		}
		if (c == EOF) {
			if (ferror(f)) {
				dl_errf(err, errlen, "%s: read error: %s", path, strerror(errno));
				goto out;
			}
			break; /* a last line without '\n' is a torn write: ignored */
		}
		if (memchr(buf, '\0', len)) {
			bad(err, errlen, path, line, "NUL byte");
			goto out;
		}
		struct dl_metrics_record r;
		if (parse_record(buf, len, &r, path, line, err, errlen) < 0)
			goto out;
		if (append(log, &r) < 0) {
			dl_errf(err, errlen, "%s: out of memory", path);
			goto out;
		}
	}
	if (log->n == 0) {
		dl_errf(err, errlen, "%s: no records", path);
		goto out;
	}
	rv = 0;
out:
	free(buf);
	fclose(f);
	if (rv < 0)
		dl_metrics_log_free(log);
	return rv;
}

void dl_metrics_log_free(struct dl_metrics_log *log)
{
	free(log->rec);
	memset(log, 0, sizeof(*log));
}
