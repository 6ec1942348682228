/* Encoded bytes -> normalized training sample: sniff the format, decode what
 * the transform needs, resample. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
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

int dl_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	uint8_t *b = NULL;
	size_t got = 0;
	int rv = -1, fd;

	*buf = NULL;
	*len = 0;
	if ((fd = dl_open_regular(path, &st, err, errlen)) < 0) // a FIFO x.jpg must not block us
		return -1;
	if ((size_t)st.st_size > max_bytes) {
		dl_errf(err, errlen, "%s: %lld bytes, more than the %zu an image may have", path,
		        (long long)st.st_size, max_bytes);
		goto out;
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		dl_errf(err, errlen, "%s: out of memory for %lld bytes", path, (long long)st.st_size);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = pread(fd, b + got, (size_t)st.st_size - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			dl_errf(err, errlen, "%s: read: %s", path, strerror(errno));
			goto out;
		}
		if (r == 0)
			break; // shrank under us: decode what is there
		got += (size_t)r;
	}
	*buf = b;
	*len = got;
	b = NULL;
	rv = 0;
out:
	free(b);
	close(fd);
	return rv;
}
