/* dljob pack SRC DST: ImageFolder -> shards.
 *
 * JPEGs are stored as they are, unless --max-side N caps their short side:
 * then they are decoded at M/8 scale (libjpeg-turbo, DCT domain) and
 * re-encoded.  PNGs become JPEG at quality 95 (smaller, faster to decode),
 * or are stored as they are with --keep-png.  Unusable files are reported
 * and left out.  Samples are processed by worker threads a block at a time
 * and written in index order, so the output does not depend on the thread
 * count; what they hold at once for reading, decoding, resizing and
 * re-encoding files is bounded by a shared decode budget (prepare,
 * engine/data/image.h dl_budget_run), as the loader's threads are.  The
 * prepared images of a block wait outside that budget until the block is
 * written, so a block ends at BLOCK images or as soon as its prepared bytes
 * reach a quarter of the budget (BLOCK_SHARE), whichever comes first: the
 * workers claim no further image then, and the ones still being prepared
 * add at most one image per thread.  Every file is written under a temporary name and renamed into
 * place; the index comes last, so an interrupted pack is never mistaken for
 * a dataset. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "engine/data/image.h"
#include "engine/data/internal.h"
#include "engine/data/pack.h"
#include "engine/data/shards.h"
#include "engine/file.h"

#define BLOCK 512
#define BLOCK_SHARE 4 // a block's prepared bytes: at most 1/BLOCK_SHARE of the decode budget
#define FMT_JPEG 1
#define FMT_PNG 2

struct item {
	uint8_t *data;
	size_t len;
	int label, format;
	char name[PATH_MAX];
	char err[512]; // non-empty: skipped
};

struct block {
	struct dl_dataset *ds;
	const struct dl_pack_options *o;
	struct dl_decode_budget *budget;
	int split;
	size_t first, n;
	struct item *items;
	size_t next;         // the next image to claim; after the workers, the block's length
	size_t held, cap;    // prepared bytes in the block; no image is claimed once held >= cap
	pthread_mutex_t mu;
};

/* Resize px (in place) so its short side is at most max_side: the DCT-domain
 * scaling of the decoder goes down to 1/8 only, and PNGs have none. */
static int cap_short_side(struct dl_pixels *px, int max_side, char *err, size_t errlen)
{
	struct dl_pixels small;
	int s = px->w < px->h ? px->w : px->h;
	if (s <= max_side)
		return 0;
	int nw = (int)((long long)px->w * max_side / s), nh = (int)((long long)px->h * max_side / s);
	if (dl_resize_rgb8(px, nw > 0 ? nw : 1, nh > 0 ? nh : 1, &small, err, errlen) != 0)
		return -1;
	free(px->rgb);
	*px = small;
	return 0;
}

struct prep {
	const struct dl_pack_options *o;
	const char *path;
	struct item *it;
};

static int prep_fetch(void *ctx, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	struct prep *p = ctx;
	return dl_read_file(p->path, DL_IMAGE_MAX_BYTES, buf, len, err, errlen);
}

/* The short side capped to max_side (cap_short_side's output size). */
static void capped(int w, int h, int max_side, int *nw, int *nh)
{
	int s = w < h ? w : h;
	*nw = w;
	*nh = h;
	if (max_side <= 0 || s <= max_side)
		return;
	*nw = (int)((long long)w * max_side / s);
	*nh = (int)((long long)h * max_side / s);
	*nw = *nw > 0 ? *nw : 1;
	*nh = *nh > 0 ? *nh : 1;
}

/* What prep_use allocates at most for this file, besides its bytes. */
static size_t prep_need(void *ctx, const uint8_t *buf, size_t len)
{
	struct prep *p = ctx;
	const struct dl_pack_options *o = p->o;
	int w, h, nw, nh;
	size_t need;
	char why[256];

	switch (dl_image_sniff(buf, len)) {
	case DL_IMG_JPEG:
		if (dl_jpeg_dims(buf, len, &w, &h, why, sizeof why) != 0)
			return 0;
		if (o->max_side > 0 && (w < h ? w : h) > o->max_side) {
			if (!(need = dl_jpeg_full_need(buf, len, o->max_side, &w, &h)))
				return 0;
			capped(w, h, o->max_side, &nw, &nh);
			return need + dl_resize_rgb8_need(w, h, nw, nh) + dl_jpeg_encode_need(nw, nh);
		}
		return dl_jpeg_full_need(buf, len, 64, &w, &h);
	case DL_IMG_PNG:
		if (!(need = dl_png_full_need(buf, len, &w, &h)))
			return 0;
		capped(w, h, o->max_side, &nw, &nh);
		if (nw != w || nh != h)
			return need + dl_resize_rgb8_need(w, h, nw, nh) + dl_jpeg_encode_need(nw, nh);
		return o->keep_png ? need : need + dl_jpeg_encode_need(w, h);
	default:
		return 0;
	}
}

/* Bring one sample's bytes to their stored form. */
static int prep_use(void *ctx, uint8_t **bufp, size_t len, char *err, size_t errlen)
{
	struct prep *p = ctx;
	const struct dl_pack_options *o = p->o;
	struct item *it = p->it;
	uint8_t *buf = *bufp, *enc = NULL;
	size_t enclen;
	struct dl_pixels px = {0};
	int rv = -1;

	enum dl_image_format f = dl_image_sniff(buf, len);
	if (f == DL_IMG_JPEG) {
		int w, h;
		if (dl_jpeg_dims(buf, len, &w, &h, err, errlen) != 0)
			goto out;
		if (o->max_side > 0 && (w < h ? w : h) > o->max_side) {
			if (dl_jpeg_decode_full(buf, len, o->max_side, &px, err, errlen) != 0 ||
			    cap_short_side(&px, o->max_side, err, errlen) != 0 ||
			    dl_jpeg_encode(&px, o->quality, &enc, &enclen, err, errlen) != 0)
				goto out;
			it->data = enc;
			it->len = enclen;
			enc = NULL;
		} else {
			/* stored as is: still check it decodes, so the loader
			 * does not meet it as a bad sample every epoch */
			if (dl_jpeg_decode_full(buf, len, 64, &px, err, errlen) != 0)
				goto out;
			it->data = buf;
			it->len = len;
			*bufp = NULL;
		}
		it->format = FMT_JPEG;
	} else if (f == DL_IMG_PNG) {
		if (dl_png_decode(buf, len, &px, err, errlen) != 0)
			goto out;
		if (o->max_side > 0 && (px.w < px.h ? px.w : px.h) > o->max_side) {
			/* cap the short side like the JPEGs (then stored as JPEG) */
			if (cap_short_side(&px, o->max_side, err, errlen) != 0 ||
			    dl_jpeg_encode(&px, 95, &enc, &enclen, err, errlen) != 0)
				goto out;
			it->data = enc;
			it->len = enclen;
			it->format = FMT_JPEG;
			enc = NULL;
		} else if (o->keep_png) {
			it->data = buf;
			it->len = len;
			it->format = FMT_PNG;
			*bufp = NULL;
		} else {
			if (dl_jpeg_encode(&px, 95, &enc, &enclen, err, errlen) != 0)
				goto out;
			it->data = enc;
			it->len = enclen;
			it->format = FMT_JPEG;
			enc = NULL;
		}
	} else {
		dl_errf(err, errlen, "%s", len == 0 ? "empty file" : "not a JPEG or PNG image");
		goto out;
	}
	rv = 0;
out:
	free(px.rgb);
	free(enc);
	return rv;
}

/* Read one sample and bring it to its stored form, within the decode
 * budget the workers share (the file's bytes, the decoded pixels, the
 * resized ones and the encoder's output). */
static void prepare(const struct dl_pack_options *o, struct dl_decode_budget *budget, struct dl_dataset *ds,
                    int split, size_t i, struct item *it)
{
	char path[PATH_MAX];
	struct stat st;

	memset(it, 0, sizeof *it);
	if (dl_imagefolder_path(ds, split, i, path, sizeof path, &it->label) != 0) {
		dl_errf(it->err, sizeof it->err, "sample %zu: no such sample, or its path is too long", i);
		return;
	}
	/* the name kept in the index is the path below SRC: split/class/file
	 * (neither class nor file names contain a slash) */
	const char *rel = path + strlen(path);
	for (int slashes = 0; rel > path; rel--)
		if (rel[-1] == '/' && ++slashes == 3)
			break;
	snprintf(it->name, sizeof it->name, "%s", rel);
	struct prep p = {o, path, it};
	size_t hint = stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 0;
	if (dl_budget_run(budget, hint < DL_IMAGE_MAX_BYTES ? hint : DL_IMAGE_MAX_BYTES, prep_fetch, prep_need, prep_use, &p,
	                  it->name, it->err, sizeof it->err) != 0 && !it->err[0])
		dl_errf(it->err, sizeof it->err, "%s:%d: failed without a message", __FILE__, __LINE__);
}

static void *block_worker(void *arg)
{
	struct block *b = arg;
	for (;;) {
		pthread_mutex_lock(&b->mu);
		size_t i = b->next < b->n && b->held < b->cap ? b->next++ : SIZE_MAX;
		pthread_mutex_unlock(&b->mu);
		if (i == SIZE_MAX)
			return NULL;
		prepare(b->o, b->budget, b->ds, b->split, b->first + i, &b->items[i]);
		pthread_mutex_lock(&b->mu);
		b->held += b->items[i].len;
		pthread_mutex_unlock(&b->mu);
	}
}

/* The growing index, in memory until the end. */
struct ibuf {
	uint8_t *p;
	size_t len, cap;
	int oom;
};

static void ib_put(struct ibuf *b, uint64_t v, int n)
{
	if (b->len + (size_t)n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1 << 20;
		uint8_t *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	for (int i = 0; i < n; i++)
		b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

static void ib_bytes(struct ibuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ib_put(b, (uint8_t)s[i], 1);
}


struct writer {
	const struct dl_pack_options *o;
	int fd, shard;
	uint64_t off, total_bytes;
	char tmp[PATH_MAX];
};

static int shard_close(struct writer *w)
{
	char final[PATH_MAX];
	if (w->fd < 0)
		return 0;
	if (fsync(w->fd) != 0 || close(w->fd) != 0) {
		fprintf(stderr, "dljob pack: %s: %s\n", w->tmp, strerror(errno));
		w->fd = -1;
		return -1;
	}
	w->fd = -1;
	snprintf(final, sizeof final, "%s/shard-%05d.bin", w->o->dst, w->shard);
	if (rename(w->tmp, final) != 0) {
		fprintf(stderr, "dljob pack: rename %s -> %s: %s\n", w->tmp, final, strerror(errno));
		return -1;
	}
	w->shard++;
	return 0;
}

static int shard_open(struct writer *w)
{
	snprintf(w->tmp, sizeof w->tmp, "%s/.shard-%05d.bin.tmp", w->o->dst, w->shard);
	// O_NOFOLLOW: DST may be shared, a symlink planted at the temp name must not redirect the write
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		fprintf(stderr, "dljob pack: %s: %s\n", w->tmp, strerror(errno));
		return -1;
	}
	w->off = 0;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* On a terminal the bar is redrawn in place; into a log file (a batch job's
 * stderr) it becomes one line every 10 s instead of thousands of \r's. */
static void progress(const char *split, size_t done, size_t total, uint64_t bytes, double t0, int final)
{
	int width = 30, fill = total ? (int)((double)done / total * width) : width;
	int tty = isatty(STDERR_FILENO);
	double dt = now_s() - t0;
	fprintf(stderr, "%sdljob pack: %-5s [%.*s%*s] %zu/%zu images, %.1f MB, %.0f img/s%s", tty ? "\r" : "",
	        split, fill, "##############################", width - fill, "", done, total, bytes / 1e6,
	        dt > 0 ? done / dt : 0.0, final || !tty ? "\n" : "");
}

int dl_pack(const struct dl_pack_options *opts)
{
	struct dl_pack_options o = *opts;
	struct dl_dataset *ds = NULL;
	struct dl_decode_budget *budget = NULL;
	struct ibuf ib = {0};
	struct writer w = {.fd = -1};
	struct item *items = NULL;
	char err[1024], path[PATH_MAX], tmp[PATH_MAX + 16];
	int rv = 1;

	if (o.threads == 0)
		o.threads = dl_cpu_count();

	struct dl_data_options dopt = {.threads = o.threads};
	if (dl_imagefolder_open(o.src, &dopt, &ds, err, sizeof err) != 0) {
		fprintf(stderr, "dljob pack: %s\n", err);
		return 1;
	}
	if (dl_decode_budget_create(o.decode_memory ? o.decode_memory : DL_DEFAULT_DECODE_MEMORY, &budget) != 0) {
		fprintf(stderr, "dljob pack: out of memory\n");
		goto out;
	}
	if (mkdir(o.dst, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "dljob pack: %s: %s\n", o.dst, strerror(errno));
		goto out;
	}
	snprintf(path, sizeof path, "%s/%s", o.dst, DL_SHARDS_INDEX);
	if (unlink(path) != 0 && errno != ENOENT) { // an old index must not describe new shards
		fprintf(stderr, "dljob pack: %s: %s\n", path, strerror(errno));
		goto out;
	}
	int nclass;
	const char *const *classes;
	dl_imagefolder_info(ds, &nclass, &classes);
	/* header; nshards is patched in at the end */
	ib_bytes(&ib, DL_SHARDS_MAGIC, 8);
	ib_put(&ib, DL_SHARDS_VERSION, 8);
	size_t nshards_at = ib.len;
	ib_put(&ib, 0, 8);
	ib_put(&ib, (uint64_t)nclass, 8);
	for (int c = 0; c < nclass; c++) {
		ib_put(&ib, strlen(classes[c]), 8);
		ib_bytes(&ib, classes[c], strlen(classes[c]));
	}
	w.o = &o;
	if (shard_open(&w) != 0)
		goto out;
	items = calloc(BLOCK, sizeof *items);
	pthread_t *th = calloc((size_t)o.threads, sizeof *th);
	if (!items || !th) {
		free(th);
		fprintf(stderr, "dljob pack: out of memory\n");
		goto out;
	}
	size_t skipped = 0;
	for (int split = 0; split < 2; split++) {
		size_t total = ds->count[split], kept = 0, count_at = ib.len;
		double t0 = now_s(), last = 0;
		ib_put(&ib, 0, 8); // patched below
		for (size_t first = 0, done = 0; first < total; first += done) {
			struct block b = {.ds = ds, .o = &o, .budget = budget, .split = split, .first = first,
			                  .n = total - first < BLOCK ? total - first : BLOCK, .items = items,
			                  .cap = (o.decode_memory ? o.decode_memory : DL_DEFAULT_DECODE_MEMORY) / BLOCK_SHARE};
			int started = 0;
			pthread_mutex_init(&b.mu, NULL);
			for (int t = 1; t < o.threads; t++)
				if (pthread_create(&th[t], NULL, block_worker, &b) == 0)
					started = t;
				else
					break;
			block_worker(&b);
			for (int t = 1; t <= started; t++)
				pthread_join(th[t], NULL);
			pthread_mutex_destroy(&b.mu);
			b.n = done = b.next; // all claimed (at least one: held starts at 0), all prepared
			for (size_t i = 0; i < b.n; i++) {
				struct item *it = &items[i];
				if (it->err[0]) {
					fprintf(stderr, "%sdljob pack: skipping %s: %s\n", isatty(STDERR_FILENO) ? "\n" : "",
					        it->name, it->err);
					skipped++;
					continue;
				}
				if (w.off > 0 && w.off + it->len > o.shard_bytes &&
				    (shard_close(&w) != 0 || shard_open(&w) != 0))
					goto fail_block;
				if (dl_write_all(w.fd, it->data, it->len) != 0) {
					fprintf(stderr, "dljob pack: writing %s: %s\n", w.tmp, strerror(errno));
					goto fail_block;
				}
				size_t nl = strlen(it->name) > 65535 ? 65535 : strlen(it->name);
				ib_put(&ib, (uint64_t)w.shard, 4);
				ib_put(&ib, (uint64_t)it->label, 4);
				ib_put(&ib, w.off, 8);
				ib_put(&ib, it->len, 4);
				ib_put(&ib, (uint64_t)it->format, 1);
				ib_put(&ib, 0, 1);
				ib_put(&ib, nl, 2);
				ib_bytes(&ib, it->name, nl);
				w.off += it->len;
				w.total_bytes += it->len;
				kept++;
			}
			for (size_t i = 0; i < b.n; i++)
				free(items[i].data);
			if (first + b.n < total && now_s() - last > (isatty(STDERR_FILENO) ? 0.2 : 10.0)) {
				progress(split ? "val" : "train", first + b.n, total, w.total_bytes, t0, 0);
				last = now_s();
			}
			continue;
fail_block:
			for (size_t i = 0; i < b.n; i++)
				free(items[i].data);
			free(th);
			goto out;
		}
		progress(split ? "val" : "train", total, total, w.total_bytes, t0, 1);
		/* (after an allocation failure the index may not hold these
		 * bytes, or be NULL: the run ends below, naming it) */
		for (int i = 0; i < 8 && !ib.oom; i++)
			ib.p[count_at + (size_t)i] = (uint8_t)((uint64_t)kept >> (8 * i));
	}
	free(th);
	if (shard_close(&w) != 0)
		goto out;
	for (int i = 0; i < 8 && !ib.oom; i++)
		ib.p[nshards_at + (size_t)i] = (uint8_t)((uint64_t)w.shard >> (8 * i));
	if (ib.oom) {
		fprintf(stderr, "dljob pack: out of memory for the index\n");
		goto out;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || dl_write_all(fd, ib.p, ib.len) != 0 || fsync(fd) != 0 || close(fd) != 0 ||
	    rename(tmp, path) != 0) {
		fprintf(stderr, "dljob pack: %s: %s\n", path, strerror(errno));
		goto out;
	}
	fprintf(stderr, "dljob pack: %s: %zu images in %d shards (%.1f MB)\n", o.dst,
	        ds->count[0] + ds->count[1] - skipped, w.shard, w.total_bytes / 1e6);
	if (skipped)
		fprintf(stderr, "dljob pack: %zu unusable images were left out (listed above)\n", skipped);
	rv = 0;
out:
	if (w.fd >= 0) {
		close(w.fd);
		unlink(w.tmp);
	}
	free(items);
	free(ib.p);
	dl_dataset_close(ds);
	dl_decode_budget_destroy(budget);
	return rv;
}
