/* fuzz_idx: the IDX reader behind fashion-mnist:DIR (engine/data/fashion_mnist.c).
 * Input: byte 0 picks which of the four files (train/t10k x images/labels)
 * gets the remaining bytes; the other three hold a valid set of one 2x2 image
 * labelled 0.  The bytes may be plain or gzip (gzopen reads both).  When the
 * open succeeds, sample 0 of each split is loaded. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include "engine/data/dataset.h"
#include "tests/fuzz/fuzz_util.h"

static const char *const files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                     "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
static const uint8_t images[] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4};
static const uint8_t labels[] = {0, 0, 8, 1, 0, 0, 0, 1, 0};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[PATH_MAX + 32], err[512];
	if (size < 1)
		return 0;
	int which = data[0] & 3;
	for (int i = 0; i < 4; i++) {
		if (i == which)
			fz_write(files[i], data + 1, size - 1);
		else if (i & 1)
			fz_write(files[i], labels, sizeof labels);
		else
			fz_write(files[i], images, sizeof images);
	}
	snprintf(dir, sizeof dir, "fashion-mnist:%s", fz_tmpdir());
	struct dl_data_options opt = {0};
	struct dl_dataset *ds = NULL;
	if (dl_dataset_open(dir, &opt, &ds, err, sizeof err) != 0)
		return 0;
	size_t n = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
	float *x = malloc(n * sizeof *x);
	if (x) {
		for (int s = 0; s < 2; s++) {
			int y;
			if (ds->count[s] > 0)
				(void)ds->load(ds, (enum dl_split)s, ds->count[s] - 1, 1, x, &y, err, sizeof err);
		}
		free(x);
	}
	dl_dataset_close(ds);
	return 0;
}
