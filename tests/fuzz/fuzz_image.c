/* fuzz_image: JPEG and PNG decoding plus the crop/resize transform
 * (engine/data/image.c, jpeg.c, png.c, transform.c), from memory as the
 * ImageFolder and shard datasets call it.  Input: the encoded image; its
 * first byte also picks train (random crop) or eval, and the output side. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include "engine/data/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	if (size < 1)
		return 0;
	int train = data[0] & 1, side = 8 + (data[0] >> 1 & 31);
	float *chw = malloc(sizeof(float) * 3 * (size_t)side * (size_t)side);
	uint8_t *hwc = malloc(3 * (size_t)side * (size_t)side);
	if (chw && hwc) {
		(void)dl_image_sample(data, size, "fuzz", side, train, size, NULL, NULL, chw, err, sizeof err);
		(void)dl_image_sample_u8(data, size, "fuzz", side, train, size, hwc, err, sizeof err);
	}
	free(chw);
	free(hwc);
	return 0;
}
