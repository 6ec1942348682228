/* Internal interface between the files of engine/data/: the dataset
 * constructors that dl_dataset_open dispatches to, and the small helpers
 * they share (seed mixing, error formatting). Not installed, not a contract. */
#ifndef DLJOB_ENGINE_DATA_INTERNAL_H
#define DLJOB_ENGINE_DATA_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include "engine/data/dataset.h"
#include "common/err.h"

/* splitmix64: one 64-bit state, good enough statistics for shuffling and
 * augmentation, and trivially reproducible from a seed. */
static inline uint64_t dl_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Combine two values into a seed; order matters, so (a,b) != (b,a). */
static inline uint64_t dl_seed_mix(uint64_t a, uint64_t b)
{
	uint64_t s = a ^ 0x6a09e667f3bcc909ull;
	(void)dl_splitmix64(&s);
	s ^= b;
	return dl_splitmix64(&s);
}

/* Uniform double in [0,1) with 53 random bits. */
static inline double dl_rand_unit(uint64_t *state)
{
	return (double)(dl_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0 (Lemire's multiply; bias < 2^-32 for our n). */
static inline uint64_t dl_rand_below(uint64_t *state, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)dl_splitmix64(state) * n) >> 64);
}

/* The data fingerprints of struct dl_dataset: FNV-1a 64 over a stream of
 * integers (8 bytes, little-endian) and strings (length, then bytes).
 * dl_fp_end maps the (2^-64 likely) 0 to 1: 0 means "no fingerprint". */
#define DL_FP_INIT 1469598103934665603ull
static inline void dl_fp_bytes(uint64_t *h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 1099511628211ull;
}

static inline void dl_fp_u64(uint64_t *h, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	dl_fp_bytes(h, b, 8);
}

static inline void dl_fp_str(uint64_t *h, const char *s, size_t n)
{
	dl_fp_u64(h, n);
	dl_fp_bytes(h, s, n);
}

static inline uint64_t dl_fp_end(uint64_t h)
{
	return h ? h : 1;
}


/* Default values of struct dl_data_options fields left 0. */
#define DL_DEFAULT_IMAGE_SIZE 224
#define DL_DEFAULT_MAX_BAD 0.01

/* CPUs this task may run on (sched_getaffinity), at least 1. */
int dl_cpu_count(void);

int dl_fashion_mnist_open(const char *dir, int augment, const struct dl_data_options *opt,
                          struct dl_dataset **out, char *err, size_t errlen);
int dl_synthetic_open(const char *args, const struct dl_data_options *opt,
                      struct dl_dataset **out, char *err, size_t errlen);
int dl_imagefolder_open(const char *dir, const struct dl_data_options *opt,
                        struct dl_dataset **out, char *err, size_t errlen);
int dl_shards_open(const char *dir, const struct dl_data_options *opt,
                   struct dl_dataset **out, char *err, size_t errlen);
/* ImageFolder details for dljob pack (dl_imagefolder_path: -1 when i is out
 * of range or the path does not fit in len). */
int dl_imagefolder_info(const struct dl_dataset *ds, int *nclass, const char *const **classes);
int dl_imagefolder_path(const struct dl_dataset *ds, int split, size_t i, char *path, size_t len, int *label);

#endif
