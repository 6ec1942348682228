/* fuzz_imagefolder: the ImageFolder index cache (cache_read in
 * engine/data/imagefolder.c), which a later open trusts instead of
 * scanning the tree.
 * The tree is ROOT/{train,val}/a/x.jpg (an 8x8 JPEG).  Input: the cache file
 * after its first two fields (magic "DLJOBIF2" and the root path, which the
 * harness writes so that the cache belongs to ROOT): nclass, stamps, class
 * names, records as cache_write lays them out -- but for nclass 1, whose
 * four stamps (train, val, train/a, val/a) the harness inserts after nclass
 * from the tree itself (a ctime cannot be set, so no fixed input could
 * match the tree otherwise): there the input is nclass, names, records.
 * When the open succeeds, the first and the last sample of each split are
 * loaded. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "engine/data/dataset.h"
#include "engine/data/image.h"
#include "tests/fuzz/fuzz_util.h"

static char root[PATH_MAX], cache[PATH_MAX], cache_file[PATH_MAX + 64];
static uint64_t stamps[4][3]; // train, val, train/a, val/a: mtime, ctime (ns), inode

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static void stamp(const char *rel, uint64_t *out)
{
	char path[PATH_MAX];
	struct stat st;
	fz_path(path, sizeof path, rel);
	if (stat(path, &st) != 0)
		fz_die("stat", path);
	out[0] = (uint64_t)st.st_mtim.tv_sec * 1000000000 + (uint64_t)st.st_mtim.tv_nsec;
	out[1] = (uint64_t)st.st_ctim.tv_sec * 1000000000 + (uint64_t)st.st_ctim.tv_nsec;
	out[2] = (uint64_t)st.st_ino;
}

static void setup(void)
{
	static const char *const dirs[] = {"root/train", "root/val", "root/train/a", "root/val/a"};
	uint8_t rgb[8 * 8 * 3], *jpg = NULL;
	size_t n = 0;
	char err[256], tmp[PATH_MAX];
	if (root[0])
		return;
	fz_mkdir("root/train/a");
	fz_mkdir("root/val/a");
	fz_mkdir("cache");
	for (size_t i = 0; i < sizeof rgb; i++)
		rgb[i] = (uint8_t)(i * 5);
	struct dl_pixels px = {.rgb = rgb, .w = 8, .h = 8, .full_w = 8, .full_h = 8, .stride = 24};
	if (dl_jpeg_encode(&px, 90, &jpg, &n, err, sizeof err) != 0)
		fz_die("jpeg encode", err);
	fz_write("root/train/a/x.jpg", jpg, n);
	fz_write("root/val/a/x.jpg", jpg, n);
	free(jpg);
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		stamp(dirs[i], stamps[i]);
	fz_path(tmp, sizeof tmp, "root");
	if (!realpath(tmp, root))
		fz_die("realpath", tmp);
	fz_path(cache, sizeof cache, "cache");
	snprintf(cache_file, sizeof cache_file, "cache/imagefolder-%016llx.idx", (unsigned long long)fnv1a(root));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	float x[3 * 8 * 8];
	setup();
	uint64_t nclass = 0;
	if (size >= 8)
		memcpy(&nclass, data, 8);
	size_t rl = strlen(root), ins = nclass == 1 ? sizeof stamps : 0, n = 16 + rl + size + ins;
	uint8_t *file = malloc(n);
	if (!file)
		return 0;
	uint64_t len = rl;
	memcpy(file, "DLJOBIF2", 8);
	memcpy(file + 8, &len, 8);
	memcpy(file + 16, root, rl);
	if (ins) {
		memcpy(file + 16 + rl, data, 8);
		memcpy(file + 24 + rl, stamps, ins);
		memcpy(file + 24 + rl + ins, data + 8, size - 8);
	} else {
		memcpy(file + 16 + rl, data, size);
	}
	fz_write(cache_file, file, n);
	free(file);
	/* cache_deferred: a cache that does not match falls back to a scan
	 * without writing a new one over the input */
	struct dl_data_options opt = {.image_size = 8, .cache_dir = cache, .threads = 1, .cache_deferred = 1};
	struct dl_dataset *ds = NULL;
	if (dl_dataset_open(root, &opt, &ds, err, sizeof err) != 0)
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
