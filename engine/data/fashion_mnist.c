/* fashion-mnist:DIR -- the IDX files of Fashion-MNIST (as Debian's
 * dataset-fashion-mnist ships them, gzip'd, or uncompressed).  Both splits are
 * read into memory at open (47 MB + 8 MB of uint8), so load() is a lookup.
 * No augmentation by default; fashion-mnist+aug:DIR adds the usual random
 * crop (2 pixels of padding) and horizontal flip to the training split. */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "engine/data/internal.h"
#include "engine/file.h"

/* Mean and std of the Fashion-MNIST training pixels in [0,1]. */
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f
#define IDX_IMAGES_MAGIC 2051
#define IDX_LABELS_MAGIC 2049

struct fmnist_split {
	uint8_t *pixels; /* (count, rows, cols) */
	uint8_t *labels; /* (count) */
	size_t count;
};

struct fmnist {
	struct fmnist_split split[2];
	int rows, cols;
	int augment; // train: random crop with 2 pixels of zero padding + flip
};

/* Prefer the .gz the Debian package ships, fall back to an uncompressed file
 * (gzopen reads plain files transparently). */
static int find_file(const char *dir, const char *base, char *path, size_t len)
{
	snprintf(path, len, "%s/%s.gz", dir, base);
	if (access(path, R_OK) == 0)
		return 0;
	snprintf(path, len, "%s/%s", dir, base);
	if (access(path, R_OK) == 0)
		return 0;
	return -1;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read exactly len bytes, part of `what`, which is `whole` bytes of which
 * `done` are already read; -1 with a message naming the file on short read. */
static int read_exact(gzFile f, const char *path, void *buf, size_t len, const char *what,
                      size_t done, size_t whole, char *err, size_t errlen)
{
	size_t got = 0;
	while (got < len) {
		unsigned chunk = len - got > (1u << 30) ? (1u << 30) : (unsigned)(len - got);
		int r = gzread(f, (char *)buf + got, chunk);
		if (r < 0) {
			int zerr;
			const char *msg = gzerror(f, &zerr);
			dl_errf(err, errlen, "%s: truncated or corrupt while reading %s (%s)", path, what,
			        zerr == Z_ERRNO ? strerror(errno) : msg);
			return -1;
		}
		if (r == 0) {
			dl_errf(err, errlen, "%s: truncated: %s needs %zu bytes, file ends after %zu",
			        path, what, whole, done + got);
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

/* Read one IDX file: magic, dims, payload. ndim is 3 for images, 1 for labels.
 * The payload buffer grows with what the file really holds (the header may
 * claim gigabytes in a few bytes, and a .gz's real size is only known by
 * reading it). */
static int read_idx(const char *path, uint32_t magic, int ndim, uint32_t dims[3],
                    uint8_t **data, char *err, size_t errlen)
{
	unsigned char hdr[16];
	size_t hlen = 4 + 4 * (size_t)ndim, total = 1, cap = 0, got = 0;
	int rv = -1;
	struct stat st;
	gzFile f = NULL;
	int fd = dl_open_regular(path, &st, err, errlen); // a FIFO must not block us

	*data = NULL;
	if (fd < 0)
		return -1;
	if (!(f = gzdopen(fd, "rb"))) {
		close(fd);
		dl_errf(err, errlen, "%s: %s", path, errno ? strerror(errno) : "cannot open");
		return -1;
	}
	if (read_exact(f, path, hdr, hlen, "the IDX header", 0, hlen, err, errlen) != 0)
		goto out;
	if (be32(hdr) != magic) {
		dl_errf(err, errlen, "%s: bad magic number %u (want %u for an IDX %s file)", path,
		        be32(hdr), magic, ndim == 3 ? "image" : "label");
		goto out;
	}
	for (int i = 0; i < ndim; i++) {
		dims[i] = be32(hdr + 4 + 4 * i);
		if (dims[i] == 0 || (i > 0 && dims[i] > 4096) || dims[0] > (1u << 28)) {
			dl_errf(err, errlen, "%s: implausible dimension %d = %u in the IDX header", path, i, dims[i]);
			goto out;
		}
		total *= dims[i];
	}
	if (gzdirect(f) && (uint64_t)st.st_size - hlen < total) { // uncompressed: its size is known
		dl_errf(err, errlen, "%s: truncated: the IDX header announces %zu bytes of %s, the file holds %llu",
		        path, total, ndim == 3 ? "images" : "labels", (unsigned long long)st.st_size - hlen);
		goto out;
	}
	while (got < total) {
		if (got == cap) {
			size_t ncap = cap ? (cap > total / 2 ? total : 2 * cap) : (total < (1u << 20) ? total : (1u << 20));
			uint8_t *nb = realloc(*data, ncap);
			if (!nb) {
				dl_errf(err, errlen, "%s: out of memory for %zu bytes", path, ncap);
				goto out;
			}
			*data = nb;
			cap = ncap;
		}
		if (read_exact(f, path, *data + got, cap - got, ndim == 3 ? "the images the header announces" :
		               "the labels the header announces", got, total, err, errlen) != 0)
			goto out;
		got = cap;
	}
	rv = 0;
out:
	if (rv != 0) {
		free(*data);
		*data = NULL;
	}
	gzclose(f);
	return rv;
}

static int load_split(struct fmnist *fm, int s, const char *dir, const char *prefix,
                      char *err, size_t errlen)
{
	char ipath[4096], lpath[4096], base[64];
	uint32_t idims[3], ldims[3];
	struct fmnist_split *sp = &fm->split[s];

	snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
	if (find_file(dir, base, ipath, sizeof ipath) != 0) {
		dl_errf(err, errlen, "%s/%s.gz: missing (fashion-mnist:DIR needs the IDX files; Debian: apt install dataset-fashion-mnist)",
		        dir, base);
		return -1;
	}
	snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
	if (find_file(dir, base, lpath, sizeof lpath) != 0) {
		dl_errf(err, errlen, "%s/%s.gz: missing", dir, base);
		return -1;
	}
	if (read_idx(ipath, IDX_IMAGES_MAGIC, 3, idims, &sp->pixels, err, errlen) != 0)
		return -1;
	if (read_idx(lpath, IDX_LABELS_MAGIC, 1, ldims, &sp->labels, err, errlen) != 0)
		return -1;
	if (idims[0] != ldims[0]) {
		dl_errf(err, errlen, "%s: %u labels but %s has %u images", lpath, ldims[0], ipath, idims[0]);
		return -1;
	}
	if (s == 0) {
		fm->rows = (int)idims[1];
		fm->cols = (int)idims[2];
	} else if ((int)idims[1] != fm->rows || (int)idims[2] != fm->cols) {
		dl_errf(err, errlen, "%s: images are %ux%u but the training images are %dx%d",
		        ipath, idims[1], idims[2], fm->rows, fm->cols);
		return -1;
	}
	for (uint32_t i = 0; i < ldims[0]; i++) {
		if (sp->labels[i] >= 10) {
			dl_errf(err, errlen, "%s: label %u of sample %u is out of range (10 classes)",
			        lpath, sp->labels[i], i);
			return -1;
		}
	}
	sp->count = idims[0];
	return 0;
}

static const float fmnist_mean[1] = {FMNIST_MEAN}, fmnist_std[1] = {FMNIST_STD};

/* One of chw (load: normalized floats) and hw (load_u8: the pixels as they
 * are, so the two paths agree exactly) is set. */
static int fmnist_sample(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                         float *chw, uint8_t *hw, int *label, char *err, size_t errlen)
{
	struct fmnist *fm = ds->impl;
	const struct fmnist_split *sp = &fm->split[split == DL_SPLIT_EVAL];
	size_t npix = (size_t)fm->rows * fm->cols;

	if (index >= sp->count) {
		dl_errf(err, errlen, "fashion-mnist: sample %zu out of range (%zu)", index, sp->count);
		return -1;
	}
	// chw is (1,rows,cols) float, hw (rows,cols) uint8
	const uint8_t *px = sp->pixels + index * npix;
	if (fm->augment && split == DL_SPLIT_TRAIN) {
		/* RandomCrop(28, padding=2) + RandomHorizontalFlip: output (y,x)
		 * reads (y+dy, x+dx) of the image, 0 outside, dx,dy in [-2,2] */
		uint64_t st = aug_seed;
		int dy = (int)dl_rand_below(&st, 5) - 2, dx = (int)dl_rand_below(&st, 5) - 2;
		int flip = dl_rand_unit(&st) < 0.5;
		for (int y = 0; y < fm->rows; y++) {
			for (int x = 0; x < fm->cols; x++) {
				int sy = y + dy, sx = (flip ? fm->cols - 1 - x : x) + dx;
				uint8_t v = sy >= 0 && sy < fm->rows && sx >= 0 && sx < fm->cols ?
				            px[sy * fm->cols + sx] : 0;
				if (hw)
					hw[y * fm->cols + x] = v;
				else
					chw[y * fm->cols + x] = ((float)v * (1.0f / 255.0f) - FMNIST_MEAN) * (1.0f / FMNIST_STD);
			}
		}
	} else if (hw) {
		memcpy(hw, px, npix);
	} else {
		for (size_t i = 0; i < npix; i++)
			chw[i] = ((float)px[i] * (1.0f / 255.0f) - FMNIST_MEAN) * (1.0f / FMNIST_STD);
	}
	*label = sp->labels[index];
	return 0;
}

static int fmnist_load(struct dl_dataset *ds, enum dl_split split, size_t index,
                       uint64_t aug_seed, float *chw, int *label, char *err, size_t errlen)
{
	return fmnist_sample(ds, split, index, aug_seed, chw, NULL, label, err, errlen);
}

static int fmnist_load_u8(struct dl_dataset *ds, enum dl_split split, size_t index,
                          uint64_t aug_seed, uint8_t *hw, int *label, char *err, size_t errlen)
{
	return fmnist_sample(ds, split, index, aug_seed, NULL, hw, label, err, errlen);
}

static void fmnist_close(struct dl_dataset *ds)
{
	struct fmnist *fm = ds->impl;
	if (fm) {
		for (int s = 0; s < 2; s++) {
			free(fm->split[s].pixels);
			free(fm->split[s].labels);
		}
		free(fm);
	}
	free(ds);
}

int dl_fashion_mnist_open(const char *dir, int augment, const struct dl_data_options *opt,
                          struct dl_dataset **out, char *err, size_t errlen)
{
	struct dl_dataset *ds = calloc(1, sizeof *ds);
	struct fmnist *fm = calloc(1, sizeof *fm);

	if (!ds || !fm) {
		free(ds);
		free(fm);
		dl_errf(err, errlen, "fashion-mnist: out of memory");
		return -1;
	}
	ds->impl = fm;
	fm->augment = augment;
	ds->close = fmnist_close;
	ds->load = fmnist_load;
	ds->load_u8 = fmnist_load_u8;
	ds->u8_mean = fmnist_mean;
	ds->u8_std = fmnist_std;
	if (!*dir) {
		dl_errf(err, errlen, "fashion-mnist: no directory given (fashion-mnist:DIR)");
		goto fail;
	}
	if (load_split(fm, 0, dir, "train", err, errlen) != 0 ||
	    load_split(fm, 1, dir, "t10k", err, errlen) != 0)
		goto fail;
	snprintf(ds->kind, sizeof ds->kind, "fashion-mnist");
	ds->channels = 1;
	ds->height = fm->rows;
	ds->width = fm->cols;
	ds->num_classes = 10;
	ds->count[0] = fm->split[0].count;
	ds->count[1] = fm->split[1].count;
	*out = ds;
	return 0;
fail:
	fmnist_close(ds);
	return -1;
}
