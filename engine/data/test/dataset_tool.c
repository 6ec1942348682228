/* Test helper: drive a dataset / the loader from scripts.
 *   dataset_tool dump SPEC SIZE train|eval OUT [CACHE_DIR]
 *       prints "classes K count N", then "label L" per sample in index
 *       order, and writes the samples (float32, (N,3,S,S)) to OUT.
 *   dataset_tool dump-later SPEC SIZE train|eval OUT [CACHE_DIR]
 *       the same, but waits for a line on stdin between the open (and the
 *       "classes" line) and the loads: the files may change in between.
 *   dataset_tool epoch SPEC SIZE train|eval BATCH THREADS MAX_BAD [DECODE_MIB]
 *       runs epoch 0 through the loader, prints "samples S bad B sum H" (H: a
 *       hash of every batch); DECODE_MIB: dl_data_options.decode_memory.
 *   dataset_tool bench SPEC SIZE THREADS BATCH SECONDS [ref|u8]
 *       train-split throughput through the loader (ref: dl_loader_next_ref,
 *       no copy; u8: uint8 NHWC batches, dl_loader_next_u8_ref): prints
 *       "img/s R img/cpu-s C".
 *   dataset_tool transform|transform8 SIZE SECONDS FILE...
 *       decode + train transform of the files (read once) in a loop on this
 *       thread, no loader (transform8: to uint8, dl_image_sample_u8): prints
 *       "img/s R img/cpu-s C".
 *   dataset_tool fingerprint SPEC
 *       prints the dataset's fingerprints "fp_classes fp_samples" (hex).
 *   dataset_tool plan FILE SIZE SEED
 *       prints the train crop torchvision-style: "top left height width flip".
 * Errors: the one-line message on stderr, exit 2. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/data/dataset.h"
#include "engine/data/image.h"

static int dump(int argc, char **argv, int later)
{
	struct dl_data_options opt = {.image_size = atoi(argv[3]), .cache_dir = argc > 6 ? argv[6] : NULL};
	struct dl_dataset *ds;
	enum dl_split split = strcmp(argv[4], "train") == 0 ? DL_SPLIT_TRAIN : DL_SPLIT_EVAL;
	char err[1024];

	if (dl_dataset_open(argv[2], &opt, &ds, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	size_t sf = (size_t)ds->channels * ds->height * ds->width;
	float *x = malloc(sizeof(float) * sf);
	FILE *f = fopen(argv[5], "wb");
	if (!x || !f) {
		perror(argv[5]);
		return 1;
	}
	printf("classes %d count %zu\n", ds->num_classes, ds->count[split]);
	if (later) {
		char line[16];
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 1;
	}
	for (size_t i = 0; i < ds->count[split]; i++) {
		int y = -1;
		if (ds->load(ds, split, i, 12345 + i, x, &y, err, sizeof err) != 0) {
			printf("bad %zu %s\n", i, err);
			memset(x, 0, sizeof(float) * sf);
		} else {
			printf("label %d\n", y);
		}
		if (fwrite(x, sizeof(float), sf, f) != sf) {
			perror(argv[5]);
			return 1;
		}
	}
	if (fclose(f) != 0) {
		perror(argv[5]);
		return 1;
	}
	free(x);
	dl_dataset_close(ds);
	return 0;
}

static int epoch(char **argv)
{
	struct dl_data_options opt = {.image_size = atoi(argv[3]), .max_bad_fraction = atof(argv[7]),
	                              .decode_memory = argv[8] ? (size_t)atoi(argv[8]) << 20 : 0};
	struct dl_dataset *ds;
	enum dl_split split = strcmp(argv[4], "train") == 0 ? DL_SPLIT_TRAIN : DL_SPLIT_EVAL;
	struct dl_loader_options lo = {.batch = atoi(argv[5]), .threads = atoi(argv[6]), .seed = 1, .world = 1,
	                               .shuffle = split == DL_SPLIT_TRAIN, .drop_last = 0};
	struct dl_loader_stats st;
	char err[1024];
	int n, rc = 2;

	if (dl_dataset_open(argv[2], &opt, &ds, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	struct dl_loader *l = dl_loader_create(ds, split, &lo, err, sizeof err);
	float *x = malloc(sizeof(float) * (size_t)lo.batch * ds->channels * ds->height * ds->width);
	int *y = malloc(sizeof(int) * (size_t)lo.batch);
	if (!l || !x || !y || dl_loader_start_epoch(l, 0, 0, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	/* FNV-1a over every batch, to compare runs (e.g. thread counts) */
	uint64_t h = 1469598103934665603ull;
	size_t xbytes = sizeof(float) * (size_t)lo.batch * ds->channels * ds->height * ds->width;
	int got;
	while ((got = dl_loader_next(l, x, y, &n, err, sizeof err)) == 1) {
		const unsigned char *p = (const unsigned char *)x;
		for (size_t i = 0; i < xbytes; i++)
			h = (h ^ p[i]) * 1099511628211ull;
		for (int i = 0; i < n; i++)
			h = (h ^ (uint64_t)y[i]) * 1099511628211ull;
	}
	if (got < 0) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	dl_loader_get_stats(l, &st);
	printf("samples %llu bad %llu sum %016llx\n", (unsigned long long)st.samples,
	       (unsigned long long)st.bad_samples, (unsigned long long)h);
	rc = 0;
out:
	dl_loader_destroy(l);
	dl_dataset_close(ds);
	free(x);
	free(y);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench(int argc, char **argv)
{
	int ref = argc > 7 && strcmp(argv[7], "ref") == 0, u8 = argc > 7 && strcmp(argv[7], "u8") == 0;
	struct dl_data_options opt = {.image_size = atoi(argv[3]), .max_bad_fraction = 0.5};
	struct dl_dataset *ds;
	struct dl_loader_options lo = {.batch = atoi(argv[5]), .threads = atoi(argv[4]), .prefetch = 4, .seed = 1,
	                               .world = 1, .shuffle = 1, .drop_last = 1,
	                               .layout = u8 ? DL_BATCH_U8_NHWC : DL_BATCH_F32_NCHW};
	double secs = atof(argv[6]), t0, t, c0;
	char err[1024];
	long done = 0;
	int n, rc = 0, ep = 0;

	if (dl_dataset_open(argv[2], &opt, &ds, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	struct dl_loader *l = dl_loader_create(ds, DL_SPLIT_TRAIN, &lo, err, sizeof err);
	float *x = malloc(sizeof(float) * (size_t)lo.batch * ds->channels * ds->height * ds->width);
	int *y = malloc(sizeof(int) * (size_t)lo.batch);
	if (!l || !x || !y) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	struct timespec cts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cts);
	c0 = (double)cts.tv_sec + 1e-9 * (double)cts.tv_nsec;
	t0 = now_s();
	do {
		if (dl_loader_start_epoch(l, ep++, 0, err, sizeof err) != 0) {
			fprintf(stderr, "%s\n", err);
			return 2;
		}
		const float *rx;
		const uint8_t *rx8;
		const int *ry;
		while ((t = now_s()) - t0 < secs &&
		       (rc = u8 ? dl_loader_next_u8_ref(l, &rx8, &ry, &n, err, sizeof err) :
		             ref ? dl_loader_next_ref(l, &rx, &ry, &n, err, sizeof err) :
		                   dl_loader_next(l, x, y, &n, err, sizeof err)) == 1)
			done += n;
		if (rc < 0) {
			fprintf(stderr, "%s\n", err);
			return 2;
		}
	} while (t - t0 < secs);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cts);
	double cpu = (double)cts.tv_sec + 1e-9 * (double)cts.tv_nsec - c0;
	/* the box is shared: also report images per CPU-second of this process */
	printf("img/s %.1f img/cpu-s %.1f\n", done / (t - t0), done / cpu);
	dl_loader_destroy(l);
	dl_dataset_close(ds);
	free(x);
	free(y);
	return 0;
}

static int transform(int argc, char **argv)
{
	int size = atoi(argv[2]), nf = argc - 4, u8 = strcmp(argv[1], "transform8") == 0;
	double secs = atof(argv[3]);
	uint8_t **bufs = calloc((size_t)nf, sizeof *bufs);
	size_t *lens = calloc((size_t)nf, sizeof *lens);
	float *chw = malloc(sizeof(float) * 3 * (size_t)size * (size_t)size);
	char err[1024];
	long done = 0;
	int rc = 2;

	if (!bufs || !lens || !chw)
		goto out;
	for (int i = 0; i < nf; i++)
		if (dl_read_file(argv[4 + i], 1u << 30, &bufs[i], &lens[i], err, sizeof err) != 0) {
			fprintf(stderr, "%s\n", err);
			goto out;
		}
	struct timespec cts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cts);
	double c0 = (double)cts.tv_sec + 1e-9 * (double)cts.tv_nsec, t0 = now_s(), t;
	while ((t = now_s()) - t0 < secs) {
		int i = (int)(done % nf);
		if ((u8 ? dl_image_sample_u8(bufs[i], lens[i], argv[4 + i], size, 1, (uint64_t)done, (uint8_t *)chw,
		                             err, sizeof err) :
		          dl_image_sample(bufs[i], lens[i], argv[4 + i], size, 1, (uint64_t)done, NULL, NULL, chw, err, sizeof err)) != 0) {
			fprintf(stderr, "%s\n", err);
			goto out;
		}
		done++;
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cts);
	printf("img/s %.1f img/cpu-s %.1f\n", done / (t - t0),
	       done / ((double)cts.tv_sec + 1e-9 * (double)cts.tv_nsec - c0));
	rc = 0;
out:
	for (int i = 0; bufs && i < nf; i++)
		free(bufs[i]);
	free(bufs);
	free(lens);
	free(chw);
	return rc;
}

static int plan(char **argv)
{
	char err[1024];
	uint8_t *buf;
	size_t len;
	int w, h;
	struct dl_resize_plan p;
	struct dl_pixels px;

	if (dl_read_file(argv[2], 1u << 30, &buf, &len, err, sizeof err) != 0)
		goto fail;
	if (dl_image_sniff(buf, len) == DL_IMG_JPEG) {
		if (dl_jpeg_dims(buf, len, &w, &h, err, sizeof err) != 0)
			goto fail;
	} else {
		if (dl_png_decode(buf, len, &px, err, sizeof err) != 0)
			goto fail;
		w = px.full_w;
		h = px.full_h;
		free(px.rgb);
	}
	dl_plan_make(&p, w, h, atoi(argv[3]), 1, strtoull(argv[4], NULL, 0));
	printf("%d %d %d %d %d\n", (int)p.y0, (int)p.x0, (int)(p.y1 - p.y0), (int)(p.x1 - p.x0), p.flip);
	free(buf);
	return 0;
fail:
	fprintf(stderr, "%s\n", err);
	return 2;
}

static int fingerprint(char **argv)
{
	struct dl_data_options opt = {.image_size = 32};
	struct dl_dataset *ds;
	char err[1024];

	if (dl_dataset_open(argv[2], &opt, &ds, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	printf("%016llx %016llx\n", (unsigned long long)ds->fp_classes, (unsigned long long)ds->fp_samples);
	dl_dataset_close(ds);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && (strcmp(argv[1], "dump") == 0 || strcmp(argv[1], "dump-later") == 0))
		return dump(argc, argv, strcmp(argv[1], "dump-later") == 0);
	if ((argc == 8 || argc == 9) && strcmp(argv[1], "epoch") == 0)
		return epoch(argv);
	if ((argc == 7 || argc == 8) && strcmp(argv[1], "bench") == 0)
		return bench(argc, argv);
	if (argc >= 5 && (strcmp(argv[1], "transform") == 0 || strcmp(argv[1], "transform8") == 0))
		return transform(argc, argv);
	if (argc == 3 && strcmp(argv[1], "fingerprint") == 0)
		return fingerprint(argv);
	if (argc == 5 && strcmp(argv[1], "plan") == 0)
		return plan(argv);
	fprintf(stderr, "usage: dataset_tool dump|epoch|plan ... (see the source)\n");
	return 1;
}
