/* TensorBoard event files (engine/tfevents.h): one Event per metrics
 * record, scalars only. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "engine/file.h"
#include "engine/tfevent.pb-c.h"
#include "engine/tfevents.h"

/* Bitwise, reflected polynomial 0x82f63b78: the records are a few hundred
 * bytes every --print-every steps, a table would buy nothing. */
uint32_t dl_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	crc = ~crc;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
	}
	return ~crc;
}

static uint32_t masked_crc(const void *buf, size_t len)
{
	uint32_t c = dl_crc32c(0, buf, len);
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static double unix_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Frame ev as one TFRecord and write it with a single write(2). */
static int write_event(struct dl_events *e, const Tensorflow__Event *ev, char *err, size_t errlen)
{
	size_t len = tensorflow__event__get_packed_size(ev);
	unsigned char *rec = malloc(len + 16);
	if (!rec) {
		dl_errf(err, errlen, "TensorBoard event of %zu bytes: out of memory", len);
		return -1;
	}
	put_le(rec, len, 8);
	put_le(rec + 8, masked_crc(rec, 8), 4);
	if (tensorflow__event__pack(ev, rec + 12) != len) {
		free(rec);
		dl_errf(err, errlen, "%s:%d: protobuf-c packed a different size than it announced", __FILE__, __LINE__);
		return -1;
	}
	put_le(rec + 12 + len, masked_crc(rec + 12, len), 4);
	int rv = dl_append_whole(e->fd, rec, len + 16);
	if (rv != 0)
		dl_errf(err, errlen, "writing %s: %s", e->path, strerror(errno));
	free(rec);
	return rv;
}

int dl_events_open(struct dl_events *e, const char *dir, long resumed_at, char *err, size_t errlen)
{
	char host[64], *path = e->path;
	e->fd = -1;
	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	/* The host name goes into a file name: keep it to a safe alphabet. */
	for (char *c = host; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", *c))
			*c = '_';
	int n = snprintf(path, sizeof(e->path), "%s/events.out.tfevents.%lld.%s.%ld", dir, (long long)time(NULL), host,
	                 (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(e->path)) {
		dl_errf(err, errlen, "output path too long: %s", dir);
		return -1;
	}
	e->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0666);
	if (e->fd < 0) {
		dl_errf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
	ev.wall_time = unix_now();
	ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
	ev.file_version = (char *)"brain.Event:2";
	if (write_event(e, &ev, err, errlen) < 0)
		goto fail;
	if (resumed_at >= 0) {
		Tensorflow__SessionLog log = TENSORFLOW__SESSION_LOG__INIT;
		log.status = TENSORFLOW__SESSION_LOG__SESSION_STATUS__START;
		ev.step = resumed_at + 1;
		ev.what_case = TENSORFLOW__EVENT__WHAT_SESSION_LOG;
		ev.session_log = &log;
		if (write_event(e, &ev, err, errlen) < 0)
			goto fail;
	}
	return 0;
fail:
	dl_events_close(e);
	return -1;
}

int dl_events_scalars(struct dl_events *e, long step, const struct dl_event_scalar *v, size_t n, char *err,
                      size_t errlen)
{
	Tensorflow__Summary__Value vals[32], *ptrs[32];
	if (n > sizeof(vals) / sizeof(vals[0])) {
		dl_errf(err, errlen, "%s:%d: %zu scalars in one event (at most 32)", __FILE__, __LINE__, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		tensorflow__summary__value__init(&vals[i]);
		vals[i].tag = (char *)v[i].tag;
		vals[i].value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
		vals[i].simple_value = (float)v[i].value;
		ptrs[i] = &vals[i];
	}
	Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
	sum.n_value = n;
	sum.value = ptrs;
	Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
	ev.wall_time = unix_now();
	ev.step = step;
	ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
	ev.summary = &sum;
	return write_event(e, &ev, err, errlen);
}

void dl_events_close(struct dl_events *e)
{
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
}
