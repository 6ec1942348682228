/* synthetic[:C,H,W,K[,N]] -- deterministic images computed from the index,
 * for benchmarks and tests that must not touch the disk.
 * Defaults: 3,224,224,1000 with N = 1281 training samples (ImageNet/1000);
 * the eval split has max(1, N/25) samples (ImageNet's 50k:1.28M ratio).
 * Each sample is label-dependent per-channel offsets plus uniform noise, so
 * a model can learn something, and train samples get fresh noise from
 * aug_seed (like augmentation would give) while eval samples do not.
 * Values lie in [-2,2]; the uint8 path stores round((v+2)*255/4), i.e.
 * mean 0.5 and std 0.25 in [0,1] pixel units for every channel. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "engine/data/internal.h"

struct synthetic {
	int k;
	float *mean, *std; // (channels): 0.5, 0.25
};

/* One of chw (load) and hwc (load_u8) is set. */
static int synth_sample(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                        float *chw, uint8_t *hwc, int *label, char *err, size_t errlen)
{
	struct synthetic *sy = ds->impl;
	size_t hw = (size_t)ds->height * ds->width;

	if (index >= ds->count[split == DL_SPLIT_EVAL]) {
		dl_errf(err, errlen, "synthetic: sample %zu out of range", index);
		return -1;
	}
	uint64_t id = dl_seed_mix((uint64_t)split + 1, index);
	uint64_t st = id;
	int y = (int)dl_rand_below(&st, (uint64_t)sy->k);
	uint64_t noise = split == DL_SPLIT_TRAIN ? dl_seed_mix(id, aug_seed) : id;
	// chw is (C,H,W): channel c is offset(y,c) + U(-1,1) noise
	for (int c = 0; c < ds->channels; c++) {
		uint64_t cs = dl_seed_mix((uint64_t)y, (uint64_t)c);
		float off = (float)(dl_rand_unit(&cs) * 2.0 - 1.0);
		float *p = chw ? chw + (size_t)c * hw : NULL;
		uint64_t ns = dl_seed_mix(noise, (uint64_t)c);
		for (size_t i = 0; i < hw; i += 4) {
			/* 4 noise values of 16 bits from one draw keeps this cheap */
			uint64_t r = dl_splitmix64(&ns);
			for (size_t j = 0; j < 4 && i + j < hw; j++) {
				float v = off + ((float)((r >> (16 * j)) & 0xffff) * (2.0f / 65535.0f) - 1.0f);
				if (hwc) {
					// hwc is (H,W,C)
					float q = (v + 2.0f) * (255.0f / 4.0f) + 0.5f;
					hwc[(i + j) * (size_t)ds->channels + (size_t)c] =
						(uint8_t)(q < 0.0f ? 0.0f : q > 255.0f ? 255.0f : q);
				} else {
					p[i + j] = v;
				}
			}
		}
	}
	*label = y;
	return 0;
}

static int synth_load(struct dl_dataset *ds, enum dl_split split, size_t index,
                      uint64_t aug_seed, float *chw, int *label, char *err, size_t errlen)
{
	return synth_sample(ds, split, index, aug_seed, chw, NULL, label, err, errlen);
}

static int synth_load_u8(struct dl_dataset *ds, enum dl_split split, size_t index,
                         uint64_t aug_seed, uint8_t *hwc, int *label, char *err, size_t errlen)
{
	return synth_sample(ds, split, index, aug_seed, NULL, hwc, label, err, errlen);
}

static void synth_close(struct dl_dataset *ds)
{
	struct synthetic *sy = ds->impl;
	if (sy) {
		free(sy->mean);
		free(sy->std);
		free(sy);
	}
	free(ds);
}

int dl_synthetic_open(const char *args, const struct dl_data_options *opt,
                      struct dl_dataset **out, char *err, size_t errlen)
{
	long v[5] = {3, 224, 224, 1000, 1281};
	int nv = 0;
	const char *p = args;

	while (*p) {
		char *end;
		if (nv == 5) {
			dl_errf(err, errlen, "synthetic:%s: too many fields (want C,H,W,K[,N])", args);
			return -1;
		}
		v[nv] = strtol(p, &end, 10);
		if (end == p || (*end && *end != ',') || v[nv] <= 0 ||
		    v[nv] > (nv == 4 ? 100000000L : nv == 3 ? 1000000L : 8192L)) {
			dl_errf(err, errlen, "synthetic:%s: field %d is not a positive integer in range", args, nv + 1);
			return -1;
		}
		nv++;
		p = *end ? end + 1 : end;
	}
	if (nv != 0 && nv < 4) {
		dl_errf(err, errlen, "synthetic:%s: want C,H,W,K[,N]", args);
		return -1;
	}
	struct dl_dataset *ds = calloc(1, sizeof *ds);
	struct synthetic *sy = calloc(1, sizeof *sy);
	if (sy) {
		sy->mean = malloc(sizeof(float) * (size_t)v[0]);
		sy->std = malloc(sizeof(float) * (size_t)v[0]);
	}
	if (!ds || !sy || !sy->mean || !sy->std) {
		if (sy) {
			free(sy->mean);
			free(sy->std);
		}
		free(ds);
		free(sy);
		dl_errf(err, errlen, "synthetic: out of memory");
		return -1;
	}
	for (long c = 0; c < v[0]; c++) {
		sy->mean[c] = 0.5f;
		sy->std[c] = 0.25f;
	}
	snprintf(ds->kind, sizeof ds->kind, "synthetic");
	sy->k = (int)v[3];
	ds->channels = (int)v[0];
	ds->height = (int)v[1];
	ds->width = (int)v[2];
	ds->num_classes = (int)v[3];
	ds->count[0] = (size_t)v[4];
	ds->count[1] = v[4] / 25 > 0 ? (size_t)v[4] / 25 : 1;
	ds->load = synth_load;
	ds->load_u8 = synth_load_u8;
	ds->u8_mean = sy->mean;
	ds->u8_std = sy->std;
	ds->close = synth_close;
	ds->impl = sy;
	*out = ds;
	return 0;
}
