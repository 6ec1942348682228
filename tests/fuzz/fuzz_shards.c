/* fuzz_shards: the packed-shard index and its records (engine/data/shards.c,
 * layout in engine/data/shards.h), as dljob pack writes them.
 * Input: the whole DIR/dljob-shards.idx.  DIR also holds shard-00000.bin and
 * shard-00001.bin, each a 75-byte 2x2 PNG twice (offsets 0 and 75), so
 * records that point there decode.  When the open succeeds, the first and
 * the last sample of each split are loaded. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "engine/data/dataset.h"
#include "tests/fuzz/fuzz_util.h"

/* a 2x2 RGB PNG (tests/fuzz/gen_corpus.py makes the same bytes) */
static const uint8_t png[75] = {
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d,
	0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02,
	0x08, 0x02, 0x00, 0x00, 0x00, 0xfd, 0xd4, 0x9a, 0x73, 0x00, 0x00, 0x00,
	0x12, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xe0, 0x3a, 0x21, 0xf7,
	0x4b, 0x24, 0x8a, 0x01, 0x42, 0x01, 0x00, 0x20, 0x8e, 0x04, 0xb1, 0xed,
	0x5e, 0x52, 0xb9, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
	0x42, 0x60, 0x82,
};

static void setup(void)
{
	static int done;
	uint8_t two[2 * sizeof png];
	if (done)
		return;
	memcpy(two, png, sizeof png);
	memcpy(two + sizeof png, png, sizeof png);
	fz_write("shard-00000.bin", two, sizeof two);
	fz_write("shard-00001.bin", two, sizeof two);
	done = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	float x[3 * 8 * 8];
	setup();
	fz_write("dljob-shards.idx", data, size);
	struct dl_data_options opt = {.image_size = 8};
	struct dl_dataset *ds = NULL;
	if (dl_dataset_open(fz_tmpdir(), &opt, &ds, err, sizeof err) != 0)
		return 0;
	for (int s = 0; s < 2; s++) {
		int y;
		if (ds->count[s] > 0) {
			(void)ds->load(ds, (enum dl_split)s, 0, 1, x, &y, err, sizeof err);
			(void)ds->load(ds, (enum dl_split)s, ds->count[s] - 1, 2, x, &y, err, sizeof err);
		}
	}
	dl_dataset_close(ds);
	return 0;
}
