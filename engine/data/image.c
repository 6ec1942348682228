/* Encoded bytes -> normalized training sample: sniff the format, decode what
 * the transform needs, resample. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/data/image.h"
#include "engine/data/internal.h"
#include "engine/file.h"

enum dl_image_format dl_image_sniff(const uint8_t *buf, size_t len)
{
	if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
		return DL_IMG_JPEG;
	if (len >= 8 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0)
		return DL_IMG_PNG;
	return DL_IMG_UNKNOWN;
}

/* One of chw (float path) and hwc (uint8 path) is set. */
static int image_sample(const uint8_t *buf, size_t len, const char *name, int size, int train,
                        uint64_t aug_seed, const float *mean, const float *std, float *chw, uint8_t *hwc,
                        char *err, size_t errlen)
{
	struct dl_resize_plan plan;
	struct dl_pixels px = {0};
	char why[512];
	int rv = -1;

	switch (dl_image_sniff(buf, len)) {
	case DL_IMG_JPEG:
		if (dl_jpeg_decode_plan(buf, len, size, train, aug_seed, &plan, &px, why, sizeof why) != 0)
			goto fail;
		break;
	case DL_IMG_PNG:
		if (dl_png_decode(buf, len, &px, why, sizeof why) != 0)
			goto fail;
		dl_plan_make(&plan, px.full_w, px.full_h, size, train, aug_seed);
		break;
	default:
		snprintf(why, sizeof why, len == 0 ? "empty file" : "not a JPEG or PNG image");
		goto fail;
	}
	if ((hwc ? dl_resample_hwc8(&px, &plan, hwc, why, sizeof why) :
	     dl_resample_chw(&px, &plan, mean, std, chw, why, sizeof why)) != 0)
		goto fail;
	rv = 0;
	goto out;
fail:
	dl_errf(err, errlen, "%s: %s", name, why);
out:
	free(px.rgb);
	return rv;
}

int dl_image_sample(const uint8_t *buf, size_t len, const char *name, int size, int train,
                    uint64_t aug_seed, const float *mean, const float *std, float *chw, char *err,
                    size_t errlen)
{
	return image_sample(buf, len, name, size, train, aug_seed, mean, std, chw, NULL, err, errlen);
}

int dl_image_sample_u8(const uint8_t *buf, size_t len, const char *name, int size, int train,
                       uint64_t aug_seed, uint8_t *hwc, char *err, size_t errlen)
{
	return image_sample(buf, len, name, size, train, aug_seed, NULL, NULL, NULL, hwc, err, errlen);
}

/* ---- the decode budget ------------------------------------------------- */

struct dl_decode_budget {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t total, used;
	uint64_t next, serving; // tickets of the waits, served in order
};

int dl_decode_budget_create(size_t bytes, struct dl_decode_budget **out)
{
	struct dl_decode_budget *b = calloc(1, sizeof *b);
	*out = NULL;
	if (!b)
		return -1;
	if (pthread_mutex_init(&b->mu, NULL) != 0) {
		free(b);
		return -1;
	}
	if (pthread_cond_init(&b->cv, NULL) != 0) {
		pthread_mutex_destroy(&b->mu);
		free(b);
		return -1;
	}
	b->total = bytes;
	*out = b;
	return 0;
}

void dl_decode_budget_destroy(struct dl_decode_budget *b)
{
	if (!b)
		return;
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

/* Take n bytes (n <= total): wait = 1 waits for them, in turn; wait = 0
 * takes them only if they are free now and nobody waits.  0: taken. */
static int budget_take(struct dl_decode_budget *b, size_t n, int wait)
{
	int rv = 0;
	pthread_mutex_lock(&b->mu);
	if (!wait) {
		if (b->next == b->serving && n <= b->total - b->used)
			b->used += n;
		else
			rv = -1;
	} else {
		uint64_t ticket = b->next++;
		while (ticket != b->serving || n > b->total - b->used)
			pthread_cond_wait(&b->cv, &b->mu);
		b->used += n;
		b->serving++;
		pthread_cond_broadcast(&b->cv); // the next in turn may fit too
	}
	pthread_mutex_unlock(&b->mu);
	return rv;
}

static void budget_give(struct dl_decode_budget *b, size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&b->mu);
	b->used -= n;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

static size_t image_need(const uint8_t *buf, size_t len, int size, int train, uint64_t aug_seed)
{
	switch (dl_image_sniff(buf, len)) {
	case DL_IMG_JPEG:
		return dl_jpeg_need(buf, len, size, train, aug_seed);
	case DL_IMG_PNG:
		return dl_png_need(buf, len, size, train, aug_seed);
	default:
		return 0;
	}
}

#define MIB(x) (((x) >> 20) + (((x) & ((1u << 20) - 1)) != 0)) // rounded up, SIZE_MAX too

/* Holding part of the budget while waiting for more could deadlock two
 * threads that each hold some, so a sample whose header asks for more than
 * it holds takes the rest only if it is free at once; otherwise it gives
 * everything back, waits for the whole need, and fetches the bytes again
 * (a file that grew meanwhile gets one more turn). */
int dl_budget_run(struct dl_decode_budget *b, size_t size_hint, dl_fetch_fn fetch, dl_need_fn needf,
                  dl_use_fn use, void *ctx, const char *name, char *err, size_t errlen)
{
	uint8_t *buf = NULL;
	size_t len = 0, held = 0, want = size_hint;
	int rc = -1;

	for (int attempt = 0;; attempt++) {
		if (want > b->total) {
			dl_errf(err, errlen, "%s: needs %zu MiB to read and decode (its %zu encoded bytes, the decoded "
			        "pixels and the buffers that transform them), more than the %zu MiB of decode memory the "
			        "threads share (--decode-memory)", name, MIB(want), len ? len : size_hint, MIB(b->total));
			goto out;
		}
		if (want > held) {
			(void)budget_take(b, want - held, 1);
			held = want;
		}
		if (fetch(ctx, &buf, &len, err, errlen) != 0)
			goto out;
		size_t extra = needf(ctx, buf, len), need = len + extra;
		if (need < len || need > b->total) {
			want = need < len ? SIZE_MAX : need;
			continue; // the message above
		}
		if (need <= held) {
			budget_give(b, held - need);
			held = need;
			break;
		}
		if (budget_take(b, need - held, 0) == 0) {
			held = need;
			break;
		}
		if (attempt > 0) {
			dl_errf(err, errlen, "%s: changed while being read (it needed %zu MiB, then %zu)", name, MIB(want),
			        MIB(need));
			goto out;
		}
		free(buf);
		buf = NULL;
		budget_give(b, held);
		held = 0;
		want = need;
	}
	rc = use(ctx, &buf, len, err, errlen);
out:
	free(buf);
	budget_give(b, held);
	return rc;
}

struct image_load {
	dl_fetch_fn fetch;
	void *ctx;
	const char *name;
	int size, train;
	uint64_t aug_seed;
	const float *mean, *std;
	float *chw;
	uint8_t *hwc;
};

static int image_load_fetch(void *ctx, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	struct image_load *l = ctx;
	return l->fetch(l->ctx, buf, len, err, errlen);
}

static size_t image_load_need(void *ctx, const uint8_t *buf, size_t len)
{
	struct image_load *l = ctx;
	return image_need(buf, len, l->size, l->train, l->aug_seed);
}

static int image_load_use(void *ctx, uint8_t **buf, size_t len, char *err, size_t errlen)
{
	struct image_load *l = ctx;
	return l->hwc ? dl_image_sample_u8(*buf, len, l->name, l->size, l->train, l->aug_seed, l->hwc, err, errlen) :
	       dl_image_sample(*buf, len, l->name, l->size, l->train, l->aug_seed, l->mean, l->std, l->chw, err,
	                       errlen);
}

int dl_image_load(struct dl_decode_budget *b, size_t size_hint, dl_fetch_fn fetch, void *ctx, const char *name,
                  int size, int train, uint64_t aug_seed, const float *mean, const float *std, float *chw,
                  uint8_t *hwc, char *err, size_t errlen)
{
	struct image_load l = {fetch, ctx, name, size, train, aug_seed, mean, std, chw, hwc};
	return dl_budget_run(b, size_hint, image_load_fetch, image_load_need, image_load_use, &l, name, err, errlen);
}

int dl_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	int fd, rv;

	*buf = NULL;
	*len = 0;
	if ((fd = dl_open_regular(path, &st, err, errlen)) < 0) // a FIFO x.jpg must not block us
		return -1;
	rv = dl_read_fd(fd, &st, path, max_bytes, buf, len, err, errlen);
	close(fd);
	return rv;
}

int dl_read_fd(int fd, const struct stat *st, const char *path, size_t max_bytes, uint8_t **buf, size_t *len,
               char *err, size_t errlen)
{
	uint8_t *b = NULL;
	size_t got = 0;

	*buf = NULL;
	*len = 0;
	if ((size_t)st->st_size > max_bytes) {
		dl_errf(err, errlen, "%s: %lld bytes, more than the %zu an image may have", path,
		        (long long)st->st_size, max_bytes);
		return -1;
	}
	b = malloc((size_t)st->st_size + 1);
	if (!b) {
		dl_errf(err, errlen, "%s: out of memory for %lld bytes", path, (long long)st->st_size);
		return -1;
	}
	while (got < (size_t)st->st_size) {
		ssize_t r = pread(fd, b + got, (size_t)st->st_size - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			dl_errf(err, errlen, "%s: read: %s", path, strerror(errno));
			free(b);
			return -1;
		}
		if (r == 0)
			break; // shrank under us: decode what is there
		got += (size_t)r;
	}
	*buf = b;
	*len = got;
	return 0;
}
