/* The uint8 NHWC batch layout (for backends that normalize on the GPU)
 * against the float32 NCHW one, on every dataset kind: an ImageFolder of
 * JPEGs made here (train with augmentation, and eval), the same tree packed
 * into shards, fashion-mnist IDX files made here (plain and +aug) and
 * synthetic.  Every element of (u8/255 - mean)/std must match the float
 * batch within 0.5/255/std (the rounding to 8 bits), with the same labels
 * in the same order.  Also: a counting allocator given through host_alloc
 * sees every ring buffer allocated and freed, with batches identical to the
 * default allocator's; and wrong combinations fail with a clear error. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/data/dataset.h"
#include "engine/data/image.h"
#include "engine/data/pack.h"
#include "tests/check.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static unsigned rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(rng >> 33);
}

static void mkdir_p(const char *path)
{
	char cmd[2100];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
	if (system(cmd) != 0) {
		fprintf(stderr, "cannot mkdir %s\n", path);
		exit(1);
	}
}

/* A w x h JPEG of gradients plus noise (so resampling has detail to average). */
static void write_jpeg(const char *path, int w, int h, int cls)
{
	struct dl_pixels px = {0};
	uint8_t *enc = NULL;
	size_t len = 0;
	char err[256];

	px.w = px.full_w = w;
	px.h = px.full_h = h;
	px.stride = (size_t)w * 3;
	px.rgb = malloc(px.stride * (size_t)h);
	if (!px.rgb)
		exit(1);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int c = 0; c < 3; c++)
				px.rgb[(size_t)y * px.stride + 3 * (size_t)x + c] =
					(uint8_t)((x * 255 / w) * (c == cls % 3) + (y * 200 / h) * (c != cls % 3) / 2 +
						  (int)(rnd() % 50));
	if (dl_jpeg_encode(&px, 90, &enc, &len, err, sizeof err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(enc, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
	free(enc);
	free(px.rgb);
}

static void make_imagefolder(const char *root)
{
	static const int sizes[][2] = {{300, 200}, {64, 80}, {47, 47}, {500, 120}, {90, 260}, {130, 100}};
	char path[2048];
	for (int s = 0; s < 2; s++)
		for (int c = 0; c < 3; c++) {
			snprintf(path, sizeof path, "%s/%s/class%d", root, s ? "val" : "train", c);
			mkdir_p(path);
			for (int i = 0; i < (s ? 3 : 6); i++) {
				snprintf(path, sizeof path, "%s/%s/class%d/img%d.jpg", root, s ? "val" : "train", c, i);
				write_jpeg(path, sizes[(i + c) % 6][0], sizes[(i + c) % 6][1], c);
			}
		}
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* Uncompressed IDX images (n,28,28) of random pixels, or labels (n). */
static void write_idx(const char *dir, const char *name, int images, uint32_t n)
{
	char path[2048];
	unsigned char hdr[16];
	size_t payload = images ? (size_t)n * 28 * 28 : n;
	put32(hdr, images ? 2051 : 2049);
	put32(hdr + 4, n);
	put32(hdr + 8, 28);
	put32(hdr + 12, 28);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(hdr, 1, images ? 16 : 8, f) != (images ? 16u : 8u)) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
	for (size_t i = 0; i < payload; i++)
		fputc(images ? (int)(rnd() % 256) : (int)(i % 10), f);
	if (fclose(f) != 0)
		exit(1);
}

/* Compare one epoch of a float and a u8 loader over ds/split; returns the
 * number of samples compared (0 on a failure already reported). */
static size_t compare_epoch(struct dl_dataset *ds, enum dl_split split, const char *what)
{
	char err[1024];
	struct dl_loader_options o = {.batch = 5, .threads = 2, .prefetch = 2, .seed = 7,
	                              .shuffle = split == DL_SPLIT_TRAIN, .drop_last = 0};
	struct dl_loader *lf = dl_loader_create(ds, split, &o, err, sizeof err);
	CHECK(lf != NULL, "%s: float loader: %s", what, err);
	o.layout = DL_BATCH_U8_NHWC;
	struct dl_loader *lu = dl_loader_create(ds, split, &o, err, sizeof err);
	CHECK(lu != NULL, "%s: u8 loader: %s", what, err);
	size_t done = 0, bad = 0;
	int C = ds->channels, H = ds->height, W = ds->width;
	double worst = 0;
	if (!lf || !lu)
		goto out;
	if (dl_loader_start_epoch(lf, 1, 0, err, sizeof err) != 0 || dl_loader_start_epoch(lu, 1, 0, err, sizeof err) != 0) {
		CHECK(0, "%s: start_epoch: %s", what, err);
		goto out;
	}
	for (;;) {
		const float *xf;
		const uint8_t *xu;
		const int *yf, *yu;
		int nf, nu;
		int rf = dl_loader_next_ref(lf, &xf, &yf, &nf, err, sizeof err);
		CHECK(rf >= 0, "%s: float next: %s", what, err);
		int ru = dl_loader_next_u8_ref(lu, &xu, &yu, &nu, err, sizeof err);
		CHECK(ru >= 0, "%s: u8 next: %s", what, err);
		CHECK(rf == ru && nf == nu, "%s: float gives %d/%d, u8 %d/%d", what, rf, nf, ru, nu);
		if (rf != 1 || ru != 1 || nf != nu)
			break;
		for (int i = 0; i < nf; i++) {
			CHECK(yf[i] == yu[i], "%s: sample %zu: label %d vs %d", what, done + (size_t)i, yf[i], yu[i]);
			for (int c = 0; c < C; c++) {
				double mean = ds->u8_mean[c], sd = ds->u8_std[c], tol = 0.5 / 255.0 / sd + 1e-5;
				for (int p = 0; p < H * W; p++) {
					double f = xf[(((size_t)i * C + c) * H * W) + (size_t)p];
					double u = xu[((size_t)i * H * W + (size_t)p) * C + (size_t)c];
					double d = fabs((u / 255.0 - mean) / sd - f);
					worst = d * sd * 255.0 > worst ? d * sd * 255.0 : worst;
					if (d > tol && bad++ < 5)
						CHECK(0, "%s: sample %zu channel %d pixel %d: float %.6f, u8 %g -> %.6f",
						      what, done + (size_t)i, c, p, f, u, (u / 255.0 - mean) / sd);
				}
			}
		}
		/* a short last batch is zero-filled past *n, as the float one is */
		size_t tail = 0;
		for (size_t b = (size_t)nu * H * W * C; b < (size_t)o.batch * H * W * C; b++)
			tail += xu[b] != 0;
		for (int i = nu; i < o.batch; i++)
			tail += yu[i] != 0;
		CHECK(tail == 0, "%s: %zu nonzero bytes/labels past the %d samples of a short batch", what, tail, nu);
		done += (size_t)nf;
	}
	CHECK(bad == 0, "%s: %zu elements off by more than the 8-bit rounding", what, bad);
	CHECK(done == ds->count[split == DL_SPLIT_EVAL], "%s: %zu samples compared of %zu", what, done,
	      ds->count[split == DL_SPLIT_EVAL]);
	printf("%s: %zu samples, largest difference %.3f/255 (in pixel units)\n", what, done, worst);
out:
	dl_loader_destroy(lf);
	dl_loader_destroy(lu);
	return done;
}

static void compare_spec(const char *spec, int image_size, const char *what)
{
	struct dl_data_options dopt = {.image_size = image_size};
	struct dl_dataset *ds = NULL;
	char err[1024], name[256];
	if (dl_dataset_open(spec, &dopt, &ds, err, sizeof err) != 0) {
		CHECK(0, "%s: open %s: %s", what, spec, err);
		return;
	}
	CHECK(ds->load_u8 && ds->u8_mean && ds->u8_std, "%s: no uint8 path", what);
	if (ds->load_u8) {
		snprintf(name, sizeof name, "%s train", what);
		compare_epoch(ds, DL_SPLIT_TRAIN, name);
		snprintf(name, sizeof name, "%s eval", what);
		compare_epoch(ds, DL_SPLIT_EVAL, name);
	}
	dl_dataset_close(ds);
}

/* A counting allocator: remembers every live block. */
struct counter {
	void *live[64];
	int allocs, frees, strays, fail_after;
	size_t bytes;
};

static void *count_alloc(size_t bytes, void *ctx)
{
	struct counter *c = ctx;
	if (c->fail_after >= 0 && c->allocs >= c->fail_after)
		return NULL;
	void *p = malloc(bytes);
	if (!p || c->allocs >= 64)
		return p; // beyond what we track: counted as a stray at free
	c->live[c->allocs++] = p;
	c->bytes += bytes;
	return p;
}

static void count_free(void *p, void *ctx)
{
	struct counter *c = ctx;
	for (int i = 0; i < c->allocs; i++) {
		if (c->live[i] == p) {
			c->live[i] = NULL;
			c->frees++;
			free(p);
			return;
		}
	}
	c->strays++;
	free(p);
}

static void test_allocator(const char *spec)
{
	struct dl_data_options dopt = {.image_size = 24};
	struct dl_dataset *ds = NULL;
	char err[1024];
	if (dl_dataset_open(spec, &dopt, &ds, err, sizeof err) != 0) {
		CHECK(0, "open %s: %s", spec, err);
		return;
	}
	for (int layout = 0; layout < 2; layout++) {
		struct counter cnt = {.fail_after = -1};
		struct dl_loader_options o = {.batch = 4, .threads = 2, .prefetch = 3, .seed = 3, .shuffle = 1,
		                              .drop_last = 1, .layout = (enum dl_batch_layout)layout};
		struct dl_loader *ld = dl_loader_create(ds, DL_SPLIT_TRAIN, &o, err, sizeof err);
		o.host_alloc = count_alloc;
		o.host_free = count_free;
		o.alloc_ctx = &cnt;
		struct dl_loader *lc = dl_loader_create(ds, DL_SPLIT_TRAIN, &o, err, sizeof err);
		CHECK(ld && lc, "layout %d: create: %s", layout, err);
		size_t sample = (size_t)ds->channels * ds->height * ds->width * (layout ? 1 : sizeof(float));
		CHECK(cnt.allocs == 2 * o.prefetch, "layout %d: %d ring buffers through host_alloc, want %d", layout,
		      cnt.allocs, 2 * o.prefetch);
		CHECK(cnt.bytes == (size_t)o.prefetch * (size_t)o.batch * (sample + sizeof(int)),
		      "layout %d: %zu bytes through host_alloc", layout, cnt.bytes);
		int batches = 0;
		if (ld && lc && dl_loader_start_epoch(ld, 0, 0, err, sizeof err) == 0 &&
		    dl_loader_start_epoch(lc, 0, 0, err, sizeof err) == 0) {
			for (;;) {
				const void *xd, *xc;
				const int *yd, *yc;
				int nd, nc, rd, rc;
				if (layout) {
					rd = dl_loader_next_u8_ref(ld, (const uint8_t **)&xd, &yd, &nd, err, sizeof err);
					rc = dl_loader_next_u8_ref(lc, (const uint8_t **)&xc, &yc, &nc, err, sizeof err);
				} else {
					rd = dl_loader_next_ref(ld, (const float **)&xd, &yd, &nd, err, sizeof err);
					rc = dl_loader_next_ref(lc, (const float **)&xc, &yc, &nc, err, sizeof err);
				}
				CHECK(rd == rc && rd >= 0, "layout %d: next %d vs %d: %s", layout, rd, rc, err);
				if (rd != 1 || rc != 1)
					break;
				int inring = 0;
				for (int i = 0; i < cnt.allocs; i++)
					inring |= cnt.live[i] == xc;
				CHECK(inring, "layout %d: batch %d is not in a host_alloc buffer", layout, batches);
				CHECK(nd == nc && memcmp(xd, xc, (size_t)nd * sample) == 0 &&
				      memcmp(yd, yc, (size_t)nd * sizeof(int)) == 0,
				      "layout %d: batch %d differs from the default allocator's", layout, batches);
				batches++;
			}
		}
		CHECK(batches == (int)(ds->count[0] / 4), "layout %d: %d batches", layout, batches);
		dl_loader_destroy(ld);
		dl_loader_destroy(lc);
		CHECK(cnt.frees == cnt.allocs && cnt.strays == 0, "layout %d: %d allocated, %d freed, %d strays",
		      layout, cnt.allocs, cnt.frees, cnt.strays);

		/* host_alloc failing half way: a clear error, and what it gave
		 * back is freed */
		struct counter c2 = {.fail_after = 3};
		o.alloc_ctx = &c2;
		err[0] = 0;
		struct dl_loader *lf = dl_loader_create(ds, DL_SPLIT_TRAIN, &o, err, sizeof err);
		CHECK(lf == NULL, "layout %d: create with a failing host_alloc succeeded", layout);
		CHECK_CONTAINS(err, "host_alloc failed");
		CHECK(c2.allocs == 3 && c2.frees == 3 && c2.strays == 0, "failing host_alloc: %d allocated, %d freed",
		      c2.allocs, c2.frees);
		dl_loader_destroy(lf);
	}
	dl_dataset_close(ds);
}

static int nou8_load(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed, float *chw,
                     int *label, char *err, size_t errlen)
{
	chw[0] = (float)index;
	*label = 0;
	return 0;
}

static void test_bad_combinations(void)
{
	struct dl_dataset fake;
	char err[1024];
	struct dl_loader_options o = {.batch = 2, .threads = 1, .prefetch = 2, .layout = DL_BATCH_U8_NHWC};

	/* a dataset without load_u8 cannot make uint8 batches */
	memset(&fake, 0, sizeof fake);
	snprintf(fake.kind, sizeof fake.kind, "fake");
	fake.channels = fake.height = fake.width = 1;
	fake.num_classes = 1;
	fake.count[0] = fake.count[1] = 4;
	fake.load = nou8_load;
	fake.max_bad_fraction = 0.01;
	err[0] = 0;
	struct dl_loader *l = dl_loader_create(&fake, DL_SPLIT_TRAIN, &o, err, sizeof err);
	CHECK(l == NULL, "u8 loader on a dataset without load_u8 was created");
	CHECK_CONTAINS(err, "fake dataset has no uint8 path");
	dl_loader_destroy(l);

	/* an unknown layout, and half an allocator */
	o.layout = (enum dl_batch_layout)7;
	l = dl_loader_create(&fake, DL_SPLIT_TRAIN, &o, err, sizeof err);
	CHECK(l == NULL, "layout 7 accepted");
	CHECK_CONTAINS(err, "unknown batch layout 7");
	dl_loader_destroy(l);
	o.layout = DL_BATCH_F32_NCHW;
	o.host_alloc = count_alloc;
	l = dl_loader_create(&fake, DL_SPLIT_TRAIN, &o, err, sizeof err);
	CHECK(l == NULL, "host_alloc without host_free accepted");
	CHECK_CONTAINS(err, "host_alloc and host_free must be given together");
	dl_loader_destroy(l);
	o.host_alloc = NULL;

	/* the float calls on a u8 loader, and the u8 call on a float loader */
	struct dl_data_options dopt = {0};
	struct dl_dataset *ds = NULL;
	if (dl_dataset_open("synthetic:3,4,4,5,8", &dopt, &ds, err, sizeof err) != 0) {
		CHECK(0, "synthetic: %s", err);
		return;
	}
	for (int layout = 0; layout < 2; layout++) {
		o.layout = (enum dl_batch_layout)layout;
		l = dl_loader_create(ds, DL_SPLIT_TRAIN, &o, err, sizeof err);
		CHECK(l != NULL, "create: %s", err);
		if (!l)
			continue;
		CHECK(dl_loader_start_epoch(l, 0, 0, err, sizeof err) == 0, "start: %s", err);
		float x[2 * 48];
		int y[2], n;
		const float *xf;
		const uint8_t *xu;
		const int *yr;
		if (layout == DL_BATCH_U8_NHWC) {
			err[0] = 0;
			CHECK(dl_loader_next(l, x, y, &n, err, sizeof err) == -1, "dl_loader_next on a u8 loader worked");
			CHECK_CONTAINS(err, "dl_loader_next on a loader made for uint8 NHWC batches");
			err[0] = 0;
			CHECK(dl_loader_next_ref(l, &xf, &yr, &n, err, sizeof err) == -1,
			      "dl_loader_next_ref on a u8 loader worked");
			CHECK_CONTAINS(err, "dl_loader_next_ref on a loader made for uint8 NHWC batches");
			CHECK(dl_loader_next_u8_ref(l, &xu, &yr, &n, err, sizeof err) == 1 && n == 2,
			      "the u8 call fails after the refused float calls: %s", err);
		} else {
			err[0] = 0;
			CHECK(dl_loader_next_u8_ref(l, &xu, &yr, &n, err, sizeof err) == -1,
			      "dl_loader_next_u8_ref on a float loader worked");
			CHECK_CONTAINS(err, "dl_loader_next_u8_ref on a loader made for float32 NCHW batches");
			CHECK(dl_loader_next_ref(l, &xf, &yr, &n, err, sizeof err) == 1 && n == 2,
			      "the float call fails after the refused u8 call: %s", err);
		}
		dl_loader_destroy(l);
	}
	dl_dataset_close(ds);
}

int main(void)
{
	char tmpl[] = "/tmp/dljob-test-u8-XXXXXX", path[256], shards[256], spec[320];
	const char *tmp = mkdtemp(tmpl);
	if (!tmp) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof path, "%s/folder", tmp);
	make_imagefolder(path);
	snprintf(shards, sizeof shards, "%s/shards", tmp);
	struct dl_pack_options po = {.src = path, .dst = shards, .shard_bytes = 1024ull << 20, .threads = 1, .quality = 90};
	if (dl_pack(&po) != 0) {
		fprintf(stderr, "dljob pack failed\n");
		return 1;
	}
	/* 48: filters of 3 to 13 taps over these sizes, DCT scaling on the big ones */
	compare_spec(path, 48, "imagefolder");
	compare_spec(shards, 40, "shards");

	snprintf(path, sizeof path, "%s/fmnist", tmp);
	mkdir_p(path);
	write_idx(path, "train-images-idx3-ubyte", 1, 40);
	write_idx(path, "train-labels-idx1-ubyte", 0, 40);
	write_idx(path, "t10k-images-idx3-ubyte", 1, 12);
	write_idx(path, "t10k-labels-idx1-ubyte", 0, 12);
	snprintf(spec, sizeof spec, "fashion-mnist:%s", path);
	compare_spec(spec, 0, "fashion-mnist");
	snprintf(spec, sizeof spec, "fashion-mnist+aug:%s", path);
	compare_spec(spec, 0, "fashion-mnist+aug");
	compare_spec("synthetic:3,17,13,10,30", 0, "synthetic");

	test_allocator("synthetic:3,8,8,10,24");
	snprintf(path, sizeof path, "%s/folder", tmp);
	test_allocator(path);
	test_bad_combinations();

	snprintf(spec, sizeof spec, "rm -rf '%s'", tmp);
	if (system(spec) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	if (check_failures) {
		fprintf(stderr, "%d check(s) failed\n", check_failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
