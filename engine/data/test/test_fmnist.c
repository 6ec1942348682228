/* fashion-mnist:DIR against Debian's dataset-fashion-mnist files
 * (/usr/share/datasets/fashion-mnist, first labels known from the published
 * dataset) and against broken IDX files crafted here in a temp dir: wrong
 * magic, truncated plain and gzip files, label/image count mismatch and a
 * missing file must each fail with one line naming the file and the fault.
 * fashion-mnist+aug: train samples are seeded shifts/flips of the plain ones. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "engine/data/dataset.h"
#include "tests/check.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* Write an IDX file: ndim 3 (images, n x 28 x 28) or 1 (labels); `keep`
 * bytes of payload are actually written (truncation), gz selects gzip. */
static void write_idx(const char *dir, const char *name, uint32_t magic, uint32_t n, int ndim,
                      size_t keep, int gz)
{
	char path[512];
	unsigned char hdr[16];
	size_t hlen = ndim == 3 ? 16 : 8;
	size_t payload = ndim == 3 ? (size_t)n * 28 * 28 : n;
	unsigned char *buf = calloc(payload ? payload : 1, 1);

	for (size_t i = 0; i < payload; i++)
		buf[i] = (unsigned char)(ndim == 3 ? i * 7 : i % 10);
	put32(hdr, magic);
	put32(hdr + 4, n);
	put32(hdr + 8, 28);
	put32(hdr + 12, 28);
	if (keep > payload)
		keep = payload;
	snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
	if (gz) {
		gzFile f = gzopen(path, "wb");
		gzwrite(f, hdr, (unsigned)hlen);
		gzwrite(f, buf, (unsigned)keep);
		gzclose(f);
	} else {
		FILE *f = fopen(path, "wb");
		fwrite(hdr, 1, hlen, f);
		fwrite(buf, 1, keep, f);
		fclose(f);
	}
	free(buf);
}

static void clear(const char *dir)
{
	const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
	                       "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
	char path[512];
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		unlink(path);
		snprintf(path, sizeof path, "%s/%s.gz", dir, names[i]);
		unlink(path);
	}
}

/* Good files, then break one thing; returns dl_dataset_open's result. */
static int open_broken(const char *dir, int what, char *err, size_t errlen)
{
	struct dl_dataset *ds = NULL;
	char spec[600];
	int gz = what == 3;
	clear(dir);
	write_idx(dir, "train-images-idx3-ubyte", what == 1 ? 2049 : 2051, 100, 3,
	          what == 2 || what == 3 ? 50 * 784 + 3 : (size_t)-1, gz);
	write_idx(dir, "train-labels-idx1-ubyte", 2049, what == 4 ? 90 : 100, 1, (size_t)-1, 0);
	write_idx(dir, "t10k-images-idx3-ubyte", 2051, 20, 3, (size_t)-1, 1);
	if (what != 5)
		write_idx(dir, "t10k-labels-idx1-ubyte", 2049, 20, 1, (size_t)-1, 1);
	snprintf(spec, sizeof spec, "fashion-mnist:%s", dir);
	int rc = dl_dataset_open(spec, NULL, &ds, err, errlen);
	if (rc == 0) {
		CHECK(ds->count[0] == 100 && ds->count[1] == 20, "counts %zu %zu", ds->count[0], ds->count[1]);
		float x[784];
		int y;
		CHECK(ds->load(ds, DL_SPLIT_TRAIN, 33, 0, x, &y, err, errlen) == 0 && y == 3, "label %d", y);
		dl_dataset_close(ds);
	}
	return rc;
}

int main(void)
{
	char err[1024], tmpl[] = "/tmp/dljob-fmnist-XXXXXX";
	struct dl_dataset *ds = NULL;

	/* The real dataset */
	CHECK(dl_dataset_open("fashion-mnist:" FMNIST_DIR, NULL, &ds, err, sizeof err) == 0, "%s", err);
	if (ds) {
		CHECK(strcmp(ds->kind, "fashion-mnist") == 0 && ds->channels == 1 && ds->height == 28 &&
		      ds->width == 28 && ds->num_classes == 10 && ds->count[0] == 60000 && ds->count[1] == 10000,
		      "shape/count");
		/* The published first labels: train 9 0 0 3 0 2, t10k 9 2 1 1 6 */
		int want_tr[] = {9, 0, 0, 3, 0, 2}, want_te[] = {9, 2, 1, 1, 6};
		float x[784];
		int y;
		double sum = 0, sq = 0;
		for (int i = 0; i < 6; i++) {
			CHECK(ds->load(ds, DL_SPLIT_TRAIN, (size_t)i, 0, x, &y, err, sizeof err) == 0, "%s", err);
			CHECK(y == want_tr[i], "train label %d is %d, want %d", i, y, want_tr[i]);
		}
		for (int i = 0; i < 5; i++) {
			CHECK(ds->load(ds, DL_SPLIT_EVAL, (size_t)i, 0, x, &y, err, sizeof err) == 0, "%s", err);
			CHECK(y == want_te[i], "t10k label %d is %d, want %d", i, y, want_te[i]);
		}
		/* normalized with the dataset mean/std: about zero mean, unit variance */
		for (int i = 0; i < 2000; i++) {
			ds->load(ds, DL_SPLIT_TRAIN, (size_t)i * 29, 0, x, &y, err, sizeof err);
			for (int j = 0; j < 784; j++) {
				sum += x[j];
				sq += (double)x[j] * x[j];
			}
		}
		double mean = sum / (2000.0 * 784), var = sq / (2000.0 * 784) - mean * mean;
		CHECK(mean > -0.05 && mean < 0.05 && var > 0.9 && var < 1.1, "mean %g var %g", mean, var);
		/* corner pixel of sample 0 is background 0 -> -mean/std */
		ds->load(ds, DL_SPLIT_TRAIN, 0, 0, x, &y, err, sizeof err);
		CHECK(x[0] > -0.8103f && x[0] < -0.8100f, "x[0] = %g", x[0]);
		dl_dataset_close(ds);
	}

	/* fashion-mnist+aug: train samples are shifted (<= 2 px, zero fill) and
	 * maybe mirrored copies of the plain ones, fixed by the seed; eval is
	 * untouched */
	struct dl_dataset *plain = NULL, *aug = NULL;
	CHECK(dl_dataset_open("fashion-mnist:" FMNIST_DIR, NULL, &plain, err, sizeof err) == 0, "%s", err);
	CHECK(dl_dataset_open("fashion-mnist+aug:" FMNIST_DIR, NULL, &aug, err, sizeof err) == 0, "%s", err);
	if (plain && aug) {
		float p[784], a[784], b[784], bg = (0.0f - 0.2860f) / 0.3530f;
		int y, ya, changed = 0, explained = 0;
		for (int i = 0; i < 200; i++) {
			plain->load(plain, DL_SPLIT_TRAIN, (size_t)i, 0, p, &y, err, sizeof err);
			aug->load(aug, DL_SPLIT_TRAIN, (size_t)i, 1000 + (uint64_t)i, a, &ya, err, sizeof err);
			aug->load(aug, DL_SPLIT_TRAIN, (size_t)i, 1000 + (uint64_t)i, b, &ya, err, sizeof err);
			CHECK(y == ya && memcmp(a, b, sizeof a) == 0, "sample %d: augmentation not fixed by the seed", i);
			changed += memcmp(a, p, sizeof a) != 0;
			/* find the shift/flip that explains a */
			for (int dy = -2; dy <= 2; dy++)
				for (int dx = -2; dx <= 2; dx++)
					for (int fl = 0; fl < 2; fl++) {
						int ok = 1;
						for (int r = 0; r < 28 && ok; r++)
							for (int c = 0; c < 28 && ok; c++) {
								int sr = r + dy, sc = (fl ? 27 - c : c) + dx;
								float want = sr >= 0 && sr < 28 && sc >= 0 && sc < 28 ? p[sr * 28 + sc] : bg;
								ok = fabsf(a[r * 28 + c] - want) < 1e-5f;
							}
						if (ok) {
							explained++;
							dy = dx = 3;
							break;
						}
					}
		}
		CHECK(changed > 150, "only %d of 200 augmented samples differ from the plain ones", changed);
		CHECK(explained == 200, "only %d of 200 augmented samples are a shift/flip of the plain one", explained);
		plain->load(plain, DL_SPLIT_EVAL, 7, 0, p, &y, err, sizeof err);
		aug->load(aug, DL_SPLIT_EVAL, 7, 5, a, &y, err, sizeof err);
		CHECK(memcmp(a, p, sizeof a) == 0, "eval samples are augmented");
	}
	dl_dataset_close(plain);
	dl_dataset_close(aug);

	/* Crafted broken files */
	CHECK(mkdtemp(tmpl) != NULL, "mkdtemp");
	CHECK(open_broken(tmpl, 0, err, sizeof err) == 0, "good crafted files rejected: %s", err);
	/* the data's fingerprint (what a checkpoint records): the same files
	 * give the same one, a changed label another (same sizes) */
	{
		char spec[600], path[600];
		uint64_t fp[3] = {0};
		snprintf(spec, sizeof spec, "fashion-mnist:%s", tmpl);
		snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", tmpl);
		for (int k = 0; k < 3; k++) {
			if (k == 2) {
				FILE *f = fopen(path, "r+b");
				CHECK(f && fseek(f, 8 + 5, SEEK_SET) == 0 && fputc(9, f) != EOF && fclose(f) == 0, "%s", path);
			}
			CHECK(dl_dataset_open(spec, NULL, &ds, err, sizeof err) == 0, "%s", err);
			if (ds) {
				CHECK(ds->fp_classes == 0 && ds->count[0] == 100, "classes %llx, %zu samples",
				      (unsigned long long)ds->fp_classes, ds->count[0]);
				fp[k] = ds->fp_samples;
				dl_dataset_close(ds);
			}
		}
		CHECK(fp[0] != 0 && fp[0] == fp[1], "the same IDX files: fingerprints %llx, %llx",
		      (unsigned long long)fp[0], (unsigned long long)fp[1]);
		CHECK(fp[2] != fp[0], "a label changed: the fingerprint stayed %llx", (unsigned long long)fp[0]);
	}
	CHECK(open_broken(tmpl, 1, err, sizeof err) == -1, "wrong magic accepted");
	CHECK_CONTAINS(err, "train-images-idx3-ubyte: bad magic number 2049 (want 2051");
	CHECK(open_broken(tmpl, 2, err, sizeof err) == -1, "truncated file accepted");
	CHECK_CONTAINS(err, "train-images-idx3-ubyte: truncated");
	CHECK(open_broken(tmpl, 3, err, sizeof err) == -1, "truncated gz accepted");
	CHECK_CONTAINS(err, "train-images-idx3-ubyte.gz: truncated");
	CHECK(open_broken(tmpl, 4, err, sizeof err) == -1, "count mismatch accepted");
	CHECK_CONTAINS(err, "train-labels-idx1-ubyte: 90 labels but");
	CHECK_CONTAINS(err, "has 100 images");
	CHECK(open_broken(tmpl, 5, err, sizeof err) == -1, "missing file accepted");
	CHECK_CONTAINS(err, "t10k-labels-idx1-ubyte.gz: missing");
	CHECK(strchr(err, '\n') == NULL, "multi-line error");
	clear(tmpl);
	rmdir(tmpl);

	if (check_failures)
		fprintf(stderr, "test_fmnist: %d checks failed\n", check_failures);
	else
		printf("test_fmnist: all checks passed\n");
	return check_failures ? 1 : 0;
}
