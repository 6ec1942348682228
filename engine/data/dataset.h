/* Datasets and the batch loader.  A dataset turns (split, index) into one
 * ready-to-train sample; the loader turns a dataset into per-rank batches
 * (sharding, shuffling, worker threads, prefetch).  Everything random is
 * drawn from seeds derived from (seed, epoch, index), so the batches are the
 * same whatever the thread count. */
#ifndef DLJOB_ENGINE_DATA_DATASET_H
#define DLJOB_ENGINE_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

enum dl_split { DL_SPLIT_TRAIN = 0, DL_SPLIT_EVAL = 1 };

struct dl_data_options {
	int image_size;         /* model input side for JPEG data (default 224); 0: dataset native */
	const char *cache_dir;  /* where an ImageFolder index may be cached (NULL: no cache) */
	int threads;            /* decode threads for scanning/packing (0: auto) */
	double max_bad_fraction;/* stop when more than this fraction of samples fail (default 0.01) */
	/* JPEG/PNG data (ImageFolder, shards): per-RGB-channel mean and std in
	 * [0,1] pixel units that samples are normalized with, (x/255 - mean) /
	 * std, std > 0; have_norm 0: torchvision's ImageNet values
	 * (0.485,0.456,0.406 / 0.229,0.224,0.225).  Other datasets keep their
	 * own normalization. */
	int have_norm;
	float mean[3], std[3];
	int cache_deferred;     /* 1: open only reads a cached index from cache_dir; the caller
	                         * writes one later with dl_dataset_save_index (so a run that
	                         * fails its checks writes nothing) */
	const char *node_cache_dir; /* a directory of this user on this node (created 0700 if
	                         * missing; not used unless it is this user's and closed to
	                         * others) where fashion-mnist keeps its inflated .gz files,
	                         * mapped by every later process (NULL: inflate every time) */
	size_t decode_memory;   /* JPEG/PNG data (ImageFolder, shards): bytes the threads loading
	                         * samples may hold at once for reading and decoding them, shared
	                         * (0: DL_DEFAULT_DECODE_MEMORY); a sample needing more is a bad
	                         * sample, one needing less waits its turn (engine/data/image.h) */
};

#define DL_DEFAULT_DECODE_MEMORY ((size_t)2048 << 20)

struct dl_dataset {
	char kind[16];            /* "fashion-mnist", "synthetic", "imagefolder", "shards" */
	int channels, height, width; /* sample shape after transforms */
	int num_classes;
	size_t count[2];          /* samples per split */
	/* Fill one sample: chw is (C,H,W) float32, normalized.  For the train
	 * split, augmentation is drawn from aug_seed.  Returns 0, or -1 when this
	 * sample is unusable (err names the file and reason; the loader
	 * substitutes another sample and counts it). Thread-safe. */
	int (*load)(struct dl_dataset *ds, enum dl_split split, size_t index,
	            uint64_t aug_seed, float *chw, int *label, char *err, size_t errlen);
	void (*close)(struct dl_dataset *ds);
	void *impl;
	/* Added: copied from dl_data_options by dl_dataset_open (0 there means
	 * the default 0.01); the loader stops when more than this fraction of
	 * a split's distinct samples turned out unusable. */
	double max_bad_fraction;
	/* Optional: write this dataset's scan index into dir (NULL when the
	 * dataset has nothing worth caching).  Returns 0 or -1 with err. */
	int (*save_index)(struct dl_dataset *ds, const char *dir, char *err, size_t errlen);
	/* (Added) Optional uint8 path, for backends that normalize on the
	 * device: fill hwc (H,W,C) uint8 with the sample before normalization --
	 * the same decode and augmentation as load (the same aug_seed gives the
	 * same crop and flip), rounded to nearest.  load's float is
	 * (hwc/255 - u8_mean[c]) / u8_std[c] up to that rounding, i.e. within
	 * 0.5/255/u8_std[c].  Same contract otherwise (0 or -1 with err,
	 * thread-safe).  NULL when the dataset has no uint8 path. */
	int (*load_u8)(struct dl_dataset *ds, enum dl_split split, size_t index,
	               uint64_t aug_seed, uint8_t *hwc, int *label, char *err, size_t errlen);
	const float *u8_mean, *u8_std; /* (channels), in [0,1] pixel units; set with load_u8 */
	/* (Added) What the data are, cheaply: 64-bit hashes a checkpoint keeps
	 * so that resuming on other data of the same sizes is refused; 0: none
	 * (synthetic data is its spec).  fp_classes: the class names in label
	 * order (ImageFolder, shards).  fp_samples: each split's sample list --
	 * ImageFolder and shards: every sample's label and file name (not its
	 * size or bytes: a stat of every file is what the index cache saves, and
	 * dljob pack keeps names and order, so a tree and its shards agree);
	 * fashion-mnist: image sizes and every label. */
	uint64_t fp_classes, fp_samples;
};

/* Open a dataset from a spec:
 *   "fashion-mnist:DIR"   IDX files (plain or .gz) as Debian's dataset-fashion-mnist ships them
 *                         (a plain DIR holding train-images-idx3-ubyte[.gz] and no train/ or
 *                         shards index means the same, as the plugin passes --dl-data=DIR)
 *   "fashion-mnist+aug:DIR"  (added) the same, train split with random crop (pad 2) + flip
 *   "synthetic[:C,H,W,K[,N]]"  deterministic random images for benchmarks
 *                         (added note: defaults 3,224,224,1000,1281; eval
 *                         split max(1, N/25) samples)
 *   "DIR"                 ImageFolder (DIR/train/<class>/..., DIR/val/...) or packed shards,
 *                         detected from what DIR holds.
 * Returns 0, or -1 with one line naming the problem in err. */
int dl_dataset_open(const char *spec, const struct dl_data_options *opt,
                    struct dl_dataset **out, char *err, size_t errlen);
void dl_dataset_close(struct dl_dataset *ds);
/* Cache what opening ds found (an ImageFolder's file list) in dir, for the
 * next open with cache_dir=dir; a no-op for datasets with nothing to cache or
 * whose index came from that cache. */
int dl_dataset_save_index(struct dl_dataset *ds, const char *dir, char *err, size_t errlen);

/* The name of class c: an ImageFolder's directory name; NULL for other
 * datasets or c out of range. */
const char *dl_dataset_class_name(const struct dl_dataset *ds, int c);

/* (Added) What a batch holds.  F32_NCHW: normalized float32 (batch,C,H,W)
 * (dl_loader_next / dl_loader_next_ref).  U8_NHWC: the dataset's load_u8
 * output, uint8 (batch,H,W,C), to be normalized with the dataset's
 * u8_mean/u8_std by whoever consumes it (dl_loader_next_u8_ref). */
enum dl_batch_layout { DL_BATCH_F32_NCHW = 0, DL_BATCH_U8_NHWC = 1 };

struct dl_loader_options {
	int batch;          /* samples per batch on this rank */
	int threads;        /* worker threads (0: CPUs this task may use, minus one; at least 1) */
	int prefetch;       /* batches prepared ahead (default 2) */
	uint64_t seed;
	int rank, world;    /* this rank's shard of each epoch's permutation */
	int shuffle;        /* train: 1, eval: 0 */
	int drop_last;      /* train: 1 (equal steps on every rank); eval: 0 (every sample exactly once) */
	/* (Added) Batch layout; U8_NHWC needs a dataset with load_u8. */
	enum dl_batch_layout layout;
	/* (Added) Allocator of the ring's batch buffers (images and labels),
	 * e.g. pinned host memory (cudaHostAlloc) so a GPU backend copies
	 * batches asynchronously; both set or both NULL (NULL: malloc/free).
	 * host_alloc returns NULL on failure (dl_loader_create then fails);
	 * every buffer it returned goes back through host_free at
	 * dl_loader_destroy (or when dl_loader_create fails). */
	void *(*host_alloc)(size_t bytes, void *ctx);
	void (*host_free)(void *p, void *ctx);
	void *alloc_ctx;
};

struct dl_loader_stats {
	double stall_seconds;   /* time dl_loader_next waited for data */
	uint64_t bad_samples;   /* samples replaced because they could not be loaded */
	uint64_t samples;       /* samples delivered */
};

struct dl_loader;

struct dl_loader *dl_loader_create(struct dl_dataset *ds, enum dl_split split,
                                   const struct dl_loader_options *o, char *err, size_t errlen);
/* Batches this rank gets per epoch. */
/* (Added note) The same on every rank: drop_last=1: floor(n/world/batch);
 * drop_last=0: ceil(ceil(n/world)/batch), where ranks holding one sample
 * fewer may get a last batch with *n == 0. */
size_t dl_loader_steps(const struct dl_loader *l);
/* Begin epoch `epoch`, skipping the first `skip` batches (resume). */
int dl_loader_start_epoch(struct dl_loader *l, int epoch, size_t skip, char *err, size_t errlen);
/* Next batch: x is (batch,C,H,W) float32, y (batch) labels; *n is how many
 * are real (the last eval batch may be short; the rest is zero-filled).
 * Returns 1 with a batch, 0 at the end of the epoch, -1 on error. */
int dl_loader_next(struct dl_loader *l, float *x, int *y, int *n, char *err, size_t errlen);
/* (Added) dl_loader_next without the copy: *x (batch,C,H,W) and *y point
 * into the loader's ring and stay valid until the next dl_loader_next(_ref),
 * dl_loader_start_epoch or dl_loader_destroy.  While a batch is held, the
 * workers run prefetch-1 batches ahead, so use prefetch >= 2. */
int dl_loader_next_ref(struct dl_loader *l, const float **x, const int **y, int *n, char *err, size_t errlen);
/* (Added) dl_loader_next_ref for a U8_NHWC loader: *x is (batch,H,W,C)
 * uint8 in the ring (a short last batch is zero-filled), same lifetime
 * rules.  Each of the float calls fails on a U8_NHWC loader, and this one
 * on an F32_NCHW loader, with an error naming the layout. */
int dl_loader_next_u8_ref(struct dl_loader *l, const uint8_t **x, const int **y, int *n, char *err,
                          size_t errlen);
void dl_loader_get_stats(const struct dl_loader *l, struct dl_loader_stats *s);
void dl_loader_destroy(struct dl_loader *l);

#endif
