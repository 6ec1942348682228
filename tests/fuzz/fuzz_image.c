/* fuzz_image: JPEG and PNG decoding plus the crop/resize transform
 * (engine/data/image.c, jpeg.c, png.c, transform.c), from memory as the
 * ImageFolder and shard datasets call it: through the decode budget
 * (dl_image_load, which reads the header for what decoding needs first),
 * and the headers as dljob pack sizes its work (dl_jpeg_full_need,
 * dl_png_full_need).  Input: the encoded image; its length picks train
 * (random crop) or eval, and the output side (a byte of the image would
 * pin them: every JPEG starts 0xff, every PNG 0x89). */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "engine/data/image.h"

struct input {
	const uint8_t *data;
	size_t size;
};

static int fetch(void *ctx, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	const struct input *in = ctx;
	(void)err, (void)errlen;
	if (!(*buf = malloc(in->size ? in->size : 1)))
		return -1;
	memcpy(*buf, in->data, in->size);
	*len = in->size;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct dl_decode_budget *budget;
	char err[512];
	if (size < 1)
		return 0;
	if (!budget && dl_decode_budget_create((size_t)2048 << 20, &budget) != 0)
		abort();
	int train = size & 1, side = 8 + (int)(size >> 1 & 31), w, h;
	(void)dl_jpeg_full_need(data, size, side, &w, &h);
	(void)dl_png_full_need(data, size, &w, &h);
	struct input in = {data, size};
	float *chw = malloc(sizeof(float) * 3 * (size_t)side * (size_t)side);
	uint8_t *hwc = malloc(3 * (size_t)side * (size_t)side);
	if (chw && hwc) {
		(void)dl_image_load(budget, size, fetch, &in, "fuzz", side, train, size, NULL, NULL, chw, NULL, err,
		                    sizeof err);
		(void)dl_image_load(budget, size, fetch, &in, "fuzz", side, train, size, NULL, NULL, NULL, hwc, err,
		                    sizeof err);
	}
	free(chw);
	free(hwc);
	return 0;
}
