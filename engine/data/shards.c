/* The "shards" dataset: images packed by dljob pack, read with pread from a
 * few large files (one open per shard, no per-image metadata traffic). */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/data/image.h"
#include "engine/data/internal.h"
#include "engine/data/shards.h"
#include "engine/file.h"

struct shard_rec {
	uint32_t shard, label, size;
	uint64_t offset;
	size_t name_off;
};

struct shards {
	char *root;
	int nshards, nclass, size;
	float mean[3], std[3]; // normalization (dl_data_options)
	int *fds;            // (nshards)
	char *names;         // arena: class names then record names
	size_t nrec[2];
	struct shard_rec *rec[2];
	struct dl_decode_budget *budget; // shared by the loading threads
};

static void shards_free(struct shards *s)
{
	if (!s)
		return;
	for (int i = 0; s->fds && i < s->nshards; i++)
		if (s->fds[i] >= 0)
			close(s->fds[i]);
	free(s->fds);
	free(s->names);
	free(s->rec[0]);
	free(s->rec[1]);
	free(s->root);
	dl_decode_budget_destroy(s->budget);
	free(s);
}

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_u(struct rd *r, int n)
{
	uint64_t v = 0;
	if (r->end - r->p < n) {
		r->bad = 1;
		return 0;
	}
	for (int i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

struct shard_fetch {
	const struct shards *s;
	const struct shard_rec *r;
	const char *name;
};

static int shard_fetch(void *ctx, uint8_t **out, size_t *len, char *err, size_t errlen)
{
	const struct shard_fetch *sf = ctx;
	const struct shard_rec *r = sf->r;
	uint8_t *buf = malloc(r->size ? r->size : 1);
	if (!buf) {
		dl_errf(err, errlen, "%s: out of memory for %u bytes", sf->name, r->size);
		return -1;
	}
	size_t got = 0;
	while (got < r->size) {
		ssize_t n = pread(sf->s->fds[r->shard], buf + got, r->size - got, (off_t)(r->offset + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			dl_errf(err, errlen, "%s: %s", sf->name,
			        n < 0 ? strerror(errno) : "shard file shorter than its index says");
			free(buf);
			return -1;
		}
		got += (size_t)n;
	}
	*out = buf;
	*len = r->size;
	return 0;
}

/* One of chw (load) and hwc (load_u8) is set. */
static int shards_sample(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                         float *chw, uint8_t *hwc, int *label, char *err, size_t errlen)
{
	struct shards *s = ds->impl;
	int sp = split == DL_SPLIT_EVAL;
	char name[PATH_MAX + 64];

	if (index >= s->nrec[sp]) {
		dl_errf(err, errlen, "%s: sample %zu out of range", s->root, index);
		return -1;
	}
	const struct shard_rec *r = &s->rec[sp][index];
	snprintf(name, sizeof name, "%s/shard-%05u.bin@%llu (%s)", s->root, r->shard,
	         (unsigned long long)r->offset, s->names + r->name_off);
	/* as an ImageFolder file: dljob pack never writes a larger record, and
	 * one must not be read whole because the index says so */
	if (r->size > DL_IMAGE_MAX_BYTES) {
		dl_errf(err, errlen, "%s: %u bytes, more than the %u an image may have", name, r->size,
		        DL_IMAGE_MAX_BYTES);
		*label = (int)r->label;
		return -1;
	}
	struct shard_fetch sf = {s, r, name};
	int rc = dl_image_load(s->budget, r->size, shard_fetch, &sf, name, s->size, !sp, aug_seed, s->mean, s->std, chw,
	                       hwc, err, errlen);
	*label = (int)r->label;
	return rc;
}

static int shards_load(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                       float *chw, int *label, char *err, size_t errlen)
{
	return shards_sample(ds, split, index, aug_seed, chw, NULL, label, err, errlen);
}

static int shards_load_u8(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                          uint8_t *hwc, int *label, char *err, size_t errlen)
{
	return shards_sample(ds, split, index, aug_seed, NULL, hwc, label, err, errlen);
}

static void shards_close(struct dl_dataset *ds)
{
	shards_free(ds->impl);
	free(ds);
}

int dl_shards_open(const char *dir, const struct dl_data_options *opt,
                   struct dl_dataset **out, char *err, size_t errlen)
{
	struct shards *s = calloc(1, sizeof *s);
	struct dl_dataset *ds = calloc(1, sizeof *ds);
	char path[PATH_MAX + 64];
	uint8_t *buf = NULL;
	uint64_t *shard_size = NULL;
	size_t len, arena = 0, cap = 0;

	if (!s || !ds || !(s->root = strdup(dir))) {
		dl_errf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	s->size = opt->image_size > 0 ? opt->image_size : DL_DEFAULT_IMAGE_SIZE;
	snprintf(path, sizeof path, "%s/%s", dir, DL_SHARDS_INDEX);
	if (dl_read_file(path, (size_t)1 << 36, &buf, &len, err, errlen) != 0)
		goto fail;
	struct rd r = {buf, buf + len, 0};
	if (len < 8 || memcmp(buf, DL_SHARDS_MAGIC, 8) != 0) {
		dl_errf(err, errlen, "%s: not a dljob shard index (bad magic)", path);
		goto fail;
	}
	r.p += 8;
	uint64_t ver = rd_u(&r, 8), nsh = rd_u(&r, 8), ncl = rd_u(&r, 8);
	if (r.bad || ver != DL_SHARDS_VERSION || nsh == 0 || nsh > 1000000 || ncl == 0 || ncl > 1000000) {
		dl_errf(err, errlen, "%s: unsupported or damaged index (version %llu, %llu shards, %llu classes)", path,
		        (unsigned long long)ver, (unsigned long long)nsh, (unsigned long long)ncl);
		goto fail;
	}
	s->nshards = (int)nsh;
	s->nclass = (int)ncl;
	/* every name (class or record) goes into one arena; the index size
	 * bounds it */
	cap = len + 1;
	if (!(s->names = malloc(cap))) {
		dl_errf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	/* the fingerprints as imagefolder.c makes them: a tree and its shards
	 * (same samples, same order) agree */
	uint64_t hc = DL_FP_INIT, hs = DL_FP_INIT;
	for (uint64_t c = 0; c < ncl; c++) {
		uint64_t n = rd_u(&r, 8);
		if (r.bad || n > (uint64_t)(r.end - r.p)) {
			r.bad = 1;
			break;
		}
		dl_fp_str(&hc, (const char *)r.p, (size_t)n); // not needed to load samples
		r.p += n;
	}
	for (int sp = 0; sp < 2 && !r.bad; sp++) {
		uint64_t cnt = rd_u(&r, 8);
		if (r.bad || cnt > (uint64_t)(r.end - r.p) / 24) {
			r.bad = 1;
			break;
		}
		s->nrec[sp] = cnt;
		dl_fp_u64(&hs, cnt);
		s->rec[sp] = malloc((cnt ? cnt : 1) * sizeof(struct shard_rec));
		if (!s->rec[sp]) {
			dl_errf(err, errlen, "%s: out of memory", path);
			goto fail;
		}
		for (uint64_t i = 0; i < cnt; i++) {
			struct shard_rec *rec = &s->rec[sp][i];
			rec->shard = (uint32_t)rd_u(&r, 4);
			rec->label = (uint32_t)rd_u(&r, 4);
			rec->offset = rd_u(&r, 8);
			rec->size = (uint32_t)rd_u(&r, 4);
			(void)rd_u(&r, 2); // format, reserved: the decoder sniffs the bytes
			uint64_t n = rd_u(&r, 2);
			if (r.bad || n > (uint64_t)(r.end - r.p) || rec->shard >= nsh || rec->label >= ncl ||
			    arena + n + 1 > cap) {
				r.bad = 1;
				break;
			}
			memcpy(s->names + arena, r.p, n);
			s->names[arena + n] = 0;
			// the file name: what follows the record name's last '/' (split/class/file)
			const char *base = memrchr(s->names + arena, '/', n);
			base = base ? base + 1 : s->names + arena;
			dl_fp_u64(&hs, rec->label);
			dl_fp_str(&hs, base, n - (size_t)(base - (s->names + arena)));
			rec->name_off = arena;
			arena += n + 1;
			r.p += n;
		}
	}
	if (r.bad || r.p != r.end) {
		dl_errf(err, errlen, "%s: damaged index (truncated or inconsistent records)", path);
		goto fail;
	}
	if (s->nrec[0] == 0) {
		dl_errf(err, errlen, "%s: no training samples", path);
		goto fail;
	}
	s->fds = malloc(sizeof(int) * nsh);
	if (!s->fds) {
		dl_errf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	for (int i = 0; i < s->nshards; i++)
		s->fds[i] = -1;
	if (!(shard_size = malloc(sizeof(uint64_t) * nsh))) {
		dl_errf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	for (int i = 0; i < s->nshards; i++) {
		struct stat st;
		snprintf(path, sizeof path, "%s/shard-%05d.bin", dir, i);
		if ((s->fds[i] = dl_open_regular(path, &st, err, errlen)) < 0) // a FIFO must not block us
			goto fail;
		shard_size[i] = (uint64_t)st.st_size;
	}
	/* every record must lie inside its shard: a damaged index must not make
	 * a sample allocate and read what the file does not hold */
	for (int sp = 0; sp < 2; sp++) {
		for (size_t i = 0; i < s->nrec[sp]; i++) {
			const struct shard_rec *rec = &s->rec[sp][i];
			uint64_t have = shard_size[rec->shard];
			if (rec->offset > have || rec->size > have - rec->offset) {
				dl_errf(err, errlen, "%s: damaged index: %s sample %zu is %u bytes at offset %llu, "
				        "past the end of shard-%05u.bin (%llu bytes)", dir, sp ? "eval" : "train", i, rec->size,
				        (unsigned long long)rec->offset, rec->shard, (unsigned long long)have);
				goto fail;
			}
		}
	}
	free(shard_size);
	shard_size = NULL;
	free(buf);
	if (dl_decode_budget_create(opt->decode_memory ? opt->decode_memory : DL_DEFAULT_DECODE_MEMORY, &s->budget) != 0) {
		dl_errf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	snprintf(ds->kind, sizeof ds->kind, "shards");
	ds->fp_classes = dl_fp_end(hc);
	ds->fp_samples = dl_fp_end(hs);
	ds->channels = 3;
	ds->height = ds->width = s->size;
	ds->num_classes = s->nclass;
	ds->count[0] = s->nrec[0];
	ds->count[1] = s->nrec[1];
	ds->load = shards_load;
	ds->load_u8 = shards_load_u8;
	memcpy(s->mean, opt->have_norm ? opt->mean : dl_imagenet_mean, sizeof(s->mean));
	memcpy(s->std, opt->have_norm ? opt->std : dl_imagenet_std, sizeof(s->std));
	ds->u8_mean = s->mean;
	ds->u8_std = s->std;
	ds->close = shards_close;
	ds->impl = s;
	*out = ds;
	return 0;
fail:
	free(buf);
	free(shard_size);
	shards_free(s);
	free(ds);
	return -1;
}
