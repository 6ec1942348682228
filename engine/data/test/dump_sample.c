/* Test helper: decode + transform one image file the way the ImageFolder
 * dataset does, and write the (3,size,size) float32 sample to OUT (raw,
 * little endian).  Exit 2 with the one-line error when the image is bad.
 *   dump_sample FILE SIZE train|eval SEED OUT */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/data/image.h"

int main(int argc, char **argv)
{
	char err[1024];
	uint8_t *buf;
	size_t len;

	if (argc != 6) {
		fprintf(stderr, "usage: dump_sample FILE SIZE train|eval SEED OUT\n");
		return 1;
	}
	int size = atoi(argv[2]), train = strcmp(argv[3], "train") == 0;
	float *chw = malloc(sizeof(float) * 3 * (size_t)size * (size_t)size);
	if (!chw)
		return 1;
	if (dl_read_file(argv[1], 1u << 30, &buf, &len, err, sizeof err) != 0 ||
	    dl_image_sample(buf, len, argv[1], size, train, strtoull(argv[4], NULL, 0), NULL, NULL, chw, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	FILE *f = fopen(argv[5], "wb");
	if (!f || fwrite(chw, sizeof(float), 3 * (size_t)size * size, f) != 3 * (size_t)size * size || fclose(f) != 0) {
		perror(argv[5]);
		return 1;
	}
	free(buf);
	free(chw);
	return 0;
}
