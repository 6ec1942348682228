#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "engine/file.h"
#include "engine/metrics.h"

/* The file's length once a torn last line (no newline) is left out. */
static int whole_lines_len(int fd, off_t *len)
{
	struct stat st;
	char buf[4096];
	if (fstat(fd, &st) != 0)
		return -1;
	off_t end = st.st_size;
	while (end > 0) {
		size_t k = end < (off_t)sizeof(buf) ? (size_t)end : sizeof(buf);
		ssize_t r = pread(fd, buf, k, end - (off_t)k);
		if (r != (ssize_t)k) {
			if (r >= 0)
				errno = EIO; /* shrank under us */
			return -1;
		}
		const char *nl = memrchr(buf, '\n', k);
		if (nl) {
			end -= (off_t)k - (off_t)(nl - buf) - 1;
			break;
		}
		end -= (off_t)k;
	}
	*len = end;
	return 0;
}

int dl_metrics_open(struct dl_metrics *m, const char *dir, long resumed_at, char *err, size_t errlen)
{
	int flags = O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | (resumed_at < 0 ? O_TRUNC : 0);
	off_t whole;
	m->events.fd = -1;
	int n = snprintf(m->path, sizeof(m->path), "%s/metrics.jsonl", dir);
	if (n < 0 || (size_t)n >= sizeof(m->path)) {
		dl_errf(err, errlen, "output path too long: %s", dir);
		return -1;
	}
	m->fd = open(m->path, flags, 0666);
	if (m->fd < 0) {
		dl_errf(err, errlen, "cannot open %s: %s", m->path, strerror(errno));
		return -1;
	}
	if (whole_lines_len(m->fd, &whole) != 0 || ftruncate(m->fd, whole) != 0) {
		dl_errf(err, errlen, "cannot cut the torn last line of %s: %s", m->path, strerror(errno));
		dl_metrics_close(m);
		return -1;
	}
	if (dl_events_open(&m->events, dir, resumed_at, err, errlen) < 0) {
		dl_metrics_close(m);
		return -1;
	}
	return 0;
}

static int write_events(struct dl_metrics *m, const struct dl_metrics_record *r, char *err, size_t errlen)
{
	struct dl_event_scalar v[] = {
		{"train/loss", r->loss},
		{"train/lr", r->lr},
		{"train/img_per_s", r->img_per_s},
		{"time/loader_stall_s", r->loader_stall_s},
		{"time/compute_s", r->compute_s},
		{"time/comm_s", r->comm_s},
		{"time/exposed_comm_s", r->exposed_comm_s},
		{"eval/top1", r->top1},
		{"eval/top5", r->top5},
		{"eval/loss", r->eval_loss},
	};
	size_t n = sizeof(v) / sizeof(v[0]) - (r->has_eval ? 0 : 3);
	return dl_events_scalars(&m->events, r->step, v, n, err, errlen);
}

/* JSON has no NaN/Infinity: a diverged loss is written as null so every
 * line still parses. */
static int put_num(char *buf, size_t len, const char *key, double v, int fixed, int prec)
{
	if (!isfinite(v))
		return snprintf(buf, len, ",\"%s\":null", key);
	if (fixed)
		return snprintf(buf, len, ",\"%s\":%.*f", key, prec, v);
	return snprintf(buf, len, ",\"%s\":%.*g", key, prec, v);
}

int dl_metrics_write(struct dl_metrics *m, const struct dl_metrics_record *r, char *err, size_t errlen)
{
	char line[1024];
	size_t n = 0;
	int k;

#define PUT(expr)                                                  \
	do {                                                       \
		k = (expr);                                        \
		if (k < 0 || (size_t)k >= sizeof(line) - n)        \
			goto too_long;                             \
		n += (size_t)k;                                    \
	} while (0)

	PUT(snprintf(line + n, sizeof(line) - n, "{\"step\":%ld,\"epoch\":%d", r->step, r->epoch));
	PUT(put_num(line + n, sizeof(line) - n, "loss", r->loss, 0, 6));
	PUT(put_num(line + n, sizeof(line) - n, "lr", r->lr, 0, 6));
	PUT(put_num(line + n, sizeof(line) - n, "img_per_s", r->img_per_s, 1, 1));
	PUT(put_num(line + n, sizeof(line) - n, "loader_stall_s", r->loader_stall_s, 1, 4));
	PUT(put_num(line + n, sizeof(line) - n, "compute_s", r->compute_s, 1, 4));
	PUT(put_num(line + n, sizeof(line) - n, "comm_s", r->comm_s, 1, 4));
	PUT(put_num(line + n, sizeof(line) - n, "exposed_comm_s", r->exposed_comm_s, 1, 4));
	PUT(snprintf(line + n, sizeof(line) - n, ",\"bad_samples\":%" PRIu64, r->bad_samples));
	PUT(put_num(line + n, sizeof(line) - n, "wall_s", r->wall_s, 1, 3));
	PUT(snprintf(line + n, sizeof(line) - n, ",\"ranks\":%d", r->ranks));
	if (r->has_eval) {
		PUT(put_num(line + n, sizeof(line) - n, "top1", r->top1, 1, 4));
		PUT(put_num(line + n, sizeof(line) - n, "top5", r->top5, 1, 4));
		PUT(put_num(line + n, sizeof(line) - n, "eval_loss", r->eval_loss, 0, 6));
		PUT(snprintf(line + n, sizeof(line) - n, ",\"eval_samples\":%" PRIu64, r->eval_samples));
	}
	PUT(snprintf(line + n, sizeof(line) - n, "}\n"));
#undef PUT

	/* One write per line: with O_APPEND a reader never sees half a record
	 * from us, only possibly the tail of a crash. */
	if (dl_append_whole(m->fd, line, n) != 0) {
		dl_errf(err, errlen, "writing %s: %s", m->path, strerror(errno));
		return -1;
	}
	return write_events(m, r, err, errlen);
too_long:
	dl_errf(err, errlen, "%s:%d: metrics record too long", __FILE__, __LINE__);
	return -1;
}

void dl_metrics_close(struct dl_metrics *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	dl_events_close(&m->events);
}
