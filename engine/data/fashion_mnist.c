/* fashion-mnist:DIR -- the IDX files of Fashion-MNIST (as Debian's
 * dataset-fashion-mnist ships them, gzip'd, or uncompressed).  Both splits are
 * in memory from open on (47 MB + 8 MB of uint8), so load() is a lookup.
 * No augmentation by default; fashion-mnist+aug:DIR adds the usual random
 * crop (2 pixels of padding) and horizontal flip to the training split.
 *
 * Inflating the .gz files costs ~0.15 CPU-s per process, most of a 1-task
 * launch.  With opt->node_cache_dir (the runtime passes a private directory
 * of this user on this node), a .gz is inflated once per node: the first
 * process writes the plain IDX file there (under a lock, so the ranks of a
 * node that start together inflate it once between them) and every process
 * maps it read-only, touching only the pages of the samples it loads.  The
 * directory must be owned by this user and closed to others (else it is not
 * used); a cached file is named after the source's device, inode, size and
 * mtime, must be a regular file of this user that nobody else may write, and
 * is checked like the source (IDX header, exact size) before use. */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "engine/data/internal.h"
#include "engine/file.h"

/* Mean and std of the Fashion-MNIST training pixels in [0,1]. */
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f
#define IDX_IMAGES_MAGIC 2051
#define IDX_LABELS_MAGIC 2049

/* One IDX file's payload: malloc'ed, or inside a read-only mapping of a
 * cached file (map, maplen: what to munmap). */
struct idx_data {
	uint8_t *data;
	void *map;
	size_t maplen;
};

struct fmnist_split {
	struct idx_data px, lb;
	uint8_t *pixels; /* (count, rows, cols): px.data */
	uint8_t *labels; /* (count): lb.data */
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

/* Check an IDX header (hlen = 4 + 4 * ndim bytes): the magic, plausible
 * dims; *total is the payload's size.  0, or -1 with err naming path. */
static int idx_header(const unsigned char *hdr, const char *path, uint32_t magic, int ndim,
                      uint32_t dims[3], size_t *total, char *err, size_t errlen)
{
	*total = 1;
	if (be32(hdr) != magic) {
		dl_errf(err, errlen, "%s: bad magic number %u (want %u for an IDX %s file)", path,
		        be32(hdr), magic, ndim == 3 ? "image" : "label");
		return -1;
	}
	for (int i = 0; i < ndim; i++) {
		dims[i] = be32(hdr + 4 + 4 * i);
		if (dims[i] == 0 || (i > 0 && dims[i] > 4096) || dims[0] > (1u << 28)) {
			dl_errf(err, errlen, "%s: implausible dimension %d = %u in the IDX header", path, i, dims[i]);
			return -1;
		}
		*total *= dims[i];
	}
	return 0;
}

/* Read one IDX file: magic, dims, payload. ndim is 3 for images, 1 for labels.
 * The payload buffer grows with what the file really holds (the header may
 * claim gigabytes in a few bytes, and a .gz's real size is only known by
 * reading it).  *gz is set when the file was compressed. */
static int read_idx(const char *path, uint32_t magic, int ndim, uint32_t dims[3],
                    uint8_t **data, int *gz, char *err, size_t errlen)
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
	// 256 KiB reads instead of zlib's 8 KiB: fewer, larger reads inflate
	// faster (tests/bench/RESULTS.md, "Figures the data loader's comments held")
	(void)gzbuffer(f, 1u << 18);
	if (read_exact(f, path, hdr, hlen, "the IDX header", 0, hlen, err, errlen) != 0)
		goto out;
	if (idx_header(hdr, path, magic, ndim, dims, &total, err, errlen) != 0)
		goto out;
	*gz = !gzdirect(f);
	if (!*gz && (uint64_t)st.st_size - hlen < total) { // uncompressed: its size is known
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

/* ---- the per-node cache of inflated files ---------------------------------- */

/* The cache directory, opened: 0700 and this user's, else -1 (not used). */
static int cache_dir_open(const char *dir)
{
	struct stat st;
	int dfd;

	if (!dir || !*dir)
		return -1;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	if (fstat(dfd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		close(dfd);
		return -1;
	}
	return dfd;
}

/* The cached file named `name` in dfd, mapped: 0 with out set, -1 if it is
 * missing or not usable (then out is untouched). */
static int cache_map(int dfd, const char *name, const char *src, uint32_t magic, int ndim,
                     uint32_t dims[3], struct idx_data *out)
{
	size_t hlen = 4 + 4 * (size_t)ndim, total;
	char e[64];
	struct stat st;
	void *map;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022) != 0 || (uint64_t)st.st_size < hlen) {
		close(fd);
		return -1;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -1;
	if (idx_header(map, src, magic, ndim, dims, &total, e, sizeof e) != 0 ||
	    (uint64_t)st.st_size != hlen + total) {
		munmap(map, (size_t)st.st_size);
		return -1;
	}
	out->map = map;
	out->maplen = (size_t)st.st_size;
	out->data = (uint8_t *)map + hlen;
	return 0;
}

/* Write the inflated file (header + payload) as `name` in dfd, atomically:
 * a private temporary file, renamed.  Best effort: a failure is said once
 * on stderr and changes nothing else. */
static void cache_write(int dfd, const char *dir, const char *name, uint32_t magic, int ndim,
                        const uint32_t dims[3], const uint8_t *data, size_t total)
{
	unsigned char hdr[16];
	size_t hlen = 4 + 4 * (size_t)ndim;
	char tmp[128];
	int fd;

	for (int i = 0; i < 4; i++)
		hdr[i] = (unsigned char)(magic >> (24 - 8 * i));
	for (int d = 0; d < ndim; d++)
		for (int i = 0; i < 4; i++)
			hdr[4 + 4 * d + i] = (unsigned char)(dims[d] >> (24 - 8 * i));
	snprintf(tmp, sizeof tmp, "%s.%ld.tmp", name, (long)getpid());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	for (size_t off = 0, n = hlen + total; off < n;) {
		const uint8_t *p = off < hlen ? hdr + off : data + (off - hlen);
		size_t len = off < hlen ? hlen - off : n - off;
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			goto fail_unlink;
		}
		off += (size_t)w;
	}
	if (close(fd) != 0 || renameat(dfd, tmp, dfd, name) != 0)
		goto fail_unlink;
	return;
fail_unlink:
	(void)unlinkat(dfd, tmp, 0);
fail:
	fprintf(stderr, "dljob: data: cannot cache %s/%s: %s (continuing without)\n", dir, name,
	        strerror(errno ? errno : EIO));
}

/* Read path into out: from the node cache when it holds it (a .gz inflated
 * by an earlier process), else from path, caching it if it was a .gz.  The
 * cache is keyed by the source's identity, so a changed file is a miss. */
static int load_idx(const char *path, const char *cache, uint32_t magic, int ndim, uint32_t dims[3],
                    struct idx_data *out, char *err, size_t errlen)
{
	char name[160] = "";
	struct stat st;
	int dfd = -1, lfd = -1, gz = 0, rv;

	memset(out, 0, sizeof *out);
	if (cache && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    (dfd = cache_dir_open(cache)) >= 0) {
		snprintf(name, sizeof name, "fmnist-%llx-%llx-%llx-%lld.%09ld.idx",
		         (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		         (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
		         (long)st.st_mtim.tv_nsec);
		if (cache_map(dfd, name, path, magic, ndim, dims, out) == 0)
			goto done;
		/* One process of the node inflates while the others wait (at
		 * most 60 s: then each inflates on its own, as without cache). */
		char lock[176];
		snprintf(lock, sizeof lock, "%s.lock", name);
		lfd = openat(dfd, lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		for (int t = 0; lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) != 0; t++) {
			if (t == 6000) {
				close(lfd);
				lfd = -1;
				break;
			}
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, NULL);
		}
		if (lfd >= 0 && cache_map(dfd, name, path, magic, ndim, dims, out) == 0)
			goto done;
	}
	rv = read_idx(path, magic, ndim, dims, &out->data, &gz, err, errlen);
	if (rv == 0 && gz && dfd >= 0) {
		size_t total = 1;
		for (int i = 0; i < ndim; i++)
			total *= dims[i];
		errno = 0;
		cache_write(dfd, cache, name, magic, ndim, dims, out->data, total);
	}
	if (lfd >= 0)
		close(lfd); // releases the lock
	if (dfd >= 0)
		close(dfd);
	return rv;
done:
	if (lfd >= 0)
		close(lfd);
	close(dfd);
	return 0;
}

static void idx_free(struct idx_data *d)
{
	if (d->map)
		munmap(d->map, d->maplen);
	else
		free(d->data);
	memset(d, 0, sizeof *d);
}

static int load_split(struct fmnist *fm, int s, const char *dir, const char *prefix,
                      const char *cache, char *err, size_t errlen)
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
	if (load_idx(ipath, cache, IDX_IMAGES_MAGIC, 3, idims, &sp->px, err, errlen) != 0)
		return -1;
	sp->pixels = sp->px.data;
	if (load_idx(lpath, cache, IDX_LABELS_MAGIC, 1, ldims, &sp->lb, err, errlen) != 0)
		return -1;
	sp->labels = sp->lb.data;
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
			idx_free(&fm->split[s].px);
			idx_free(&fm->split[s].lb);
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
	if (load_split(fm, 0, dir, "train", opt->node_cache_dir, err, errlen) != 0 ||
	    load_split(fm, 1, dir, "t10k", opt->node_cache_dir, err, errlen) != 0)
		goto fail;
	snprintf(ds->kind, sizeof ds->kind, "fashion-mnist");
	ds->channels = 1;
	ds->height = fm->rows;
	ds->width = fm->cols;
	ds->num_classes = 10;
	ds->count[0] = fm->split[0].count;
	ds->count[1] = fm->split[1].count;
	/* the data's fingerprint: the sizes and every label (70 KB; another
	 * IDX set of the same sizes, MNIST's digits say, has other labels) */
	uint64_t hs = DL_FP_INIT;
	dl_fp_u64(&hs, (uint64_t)fm->rows);
	dl_fp_u64(&hs, (uint64_t)fm->cols);
	for (int s = 0; s < 2; s++) {
		dl_fp_u64(&hs, fm->split[s].count);
		dl_fp_bytes(&hs, fm->split[s].labels, fm->split[s].count);
	}
	ds->fp_samples = dl_fp_end(hs);
	*out = ds;
	return 0;
fail:
	fmnist_close(ds);
	return -1;
}
