/* What resuming on another rank count relies on (engine/train.c,
 * dl_checkpoint_check): with the global batch kept, global step s of an
 * epoch takes the same samples, with the same augmentation, whatever the
 * ranks x per-rank batch that make it up, also when the epoch starts
 * mid-way (the loader's skip, as after --resume), and the epoch has the same
 * number of steps.  So a checkpoint's (epoch, epoch_step, step) means the
 * same position for 1 x 24, 2 x 12, 3 x 8 and 4 x 6.  Checked on the
 * synthetic dataset, a sample known by its bytes and label.
 *   test_resume_shard */
#include "config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/data/dataset.h"
#include "tests/check.h"

#define GLOBAL 24
#define MAX_STEPS 8

/* FNV-1a of a sample's bytes and its label. */
static uint64_t sample_id(const float *x, size_t n, int y)
{
	uint64_t h = 1469598103934665603ULL;
	const unsigned char *p = (const unsigned char *)x;
	for (size_t i = 0; i < n * sizeof(float); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return (h ^ (uint64_t)(unsigned)y) * 1099511628211ULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The sorted sample ids of each global step from `skip` on, all ranks of
 * `world` together, into ids[step][GLOBAL]; returns the steps per epoch. */
static long global_steps(struct dl_dataset *ds, int world, int epoch, size_t skip, uint64_t ids[][GLOBAL])
{
	int batch = GLOBAL / world;
	size_t sample = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
	long steps = -1;
	char err[512];
	memset(ids, 0, sizeof(uint64_t) * MAX_STEPS * GLOBAL);
	for (int r = 0; r < world; r++) {
		struct dl_loader_options o = {.batch = batch, .threads = 2, .prefetch = 2, .seed = 11, .rank = r,
		                              .world = world, .shuffle = 1, .drop_last = 1};
		struct dl_loader *l = dl_loader_create(ds, DL_SPLIT_TRAIN, &o, err, sizeof err);
		float *x = malloc(sizeof(float) * sample * (size_t)batch);
		int *y = malloc(sizeof(int) * (size_t)batch);
		int n, rc;
		CHECK(l && x && y, "loader %d of %d: %s", r, world, err);
		if (!l || !x || !y)
			exit(1);
		steps = (long)dl_loader_steps(l);
		CHECK(steps <= MAX_STEPS, "%ld steps", steps);
		CHECK(dl_loader_start_epoch(l, epoch, skip, err, sizeof err) == 0, "start_epoch: %s", err);
		for (size_t s = skip; (rc = dl_loader_next(l, x, y, &n, err, sizeof err)) == 1 && s < MAX_STEPS; s++) {
			CHECK(n == batch, "batch of %d, want %d", n, batch);
			for (int i = 0; i < n; i++)
				ids[s][r * batch + i] = sample_id(x + (size_t)i * sample, sample, y[i]);
		}
		CHECK(rc == 0, "rank %d of %d: %s", r, world, err);
		dl_loader_destroy(l);
		free(x);
		free(y);
	}
	for (long s = 0; s < steps && s < MAX_STEPS; s++)
		qsort(ids[s], GLOBAL, sizeof(uint64_t), cmp_u64);
	return steps;
}

int main(void)
{
	struct dl_data_options opt = {.image_size = 0};
	struct dl_dataset *ds;
	char err[512];
	static uint64_t one[MAX_STEPS][GLOBAL], many[MAX_STEPS][GLOBAL];

	/* 180 samples: 7 steps of 24 (the 12 left over are dropped) */
	if (dl_dataset_open("synthetic:1,4,4,5,180", &opt, &ds, err, sizeof err) != 0) {
		fprintf(stderr, "synthetic: %s\n", err);
		return 1;
	}
	for (int epoch = 0; epoch < 2; epoch++) {
		long steps1 = global_steps(ds, 1, epoch, 0, one);
		CHECK(steps1 == 7, "1 x 24: %ld steps per epoch", steps1);
		for (int world = 2; world <= 4; world++)
			for (size_t skip = 0; skip <= 3; skip += 3) {
				long steps = global_steps(ds, world, epoch, skip, many);
				CHECK(steps == steps1, "%d x %d: %ld steps per epoch, 1 x 24: %ld", world, GLOBAL / world,
				      steps, steps1);
				for (long s = (long)skip; s < steps && s < steps1; s++)
					CHECK(memcmp(one[s], many[s], sizeof one[s]) == 0,
					      "epoch %d, global step %ld (skip %zu): %d x %d takes other samples than 1 x 24",
					      epoch, s, skip, world, GLOBAL / world);
			}
	}
	dl_dataset_close(ds);
	if (check_failures) {
		fprintf(stderr, "test_resume_shard: %d checks failed\n", check_failures);
		return 1;
	}
	printf("test_resume_shard: the samples of each global step are the same on 1 to 4 ranks\n");
	return 0;
}
