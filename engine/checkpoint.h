/* Training checkpoints: everything needed to continue a run so that the
 * result is bit-for-bit what an uninterrupted run gives (single process):
 * params, BN running stats and num_batches_tracked, SGD momentum buffers,
 * the position in the schedule and in the data, and the seed everything
 * random is derived from.  Stored as one safetensors file (torchvision
 * names, so torch can read the weights directly) with the position in
 * __metadata__. */
#ifndef DLJOB_ENGINE_CHECKPOINT_H
#define DLJOB_ENGINE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "engine/graph.h"

struct dl_optim_state;

#define DL_CHECKPOINT_NAME "checkpoint.safetensors"
#define DL_CHECKPOINT_PREV_NAME "checkpoint.prev.safetensors"

struct dl_ckpt_state {
	long step;           /* optimizer steps done in total */
	int epoch;           /* 0-based epoch in progress (== epochs when finished) */
	long epoch_step;     /* batches already done in that epoch (the loader skips them) */
	uint64_t seed;       /* init, shuffling and augmentation all derive from it */
	double wall_s;       /* training time so far, to continue the metrics clock */
	/* The run that wrote it, which dl_checkpoint_check compares with the run
	 * that continues it: what would make the position mean other samples or
	 * the weights another model is refused, the rest is allowed. */
	char model[32];
	int global_batch;    /* ranks x batch: the samples of one step */
	int epochs;
	/* Added to format 1 later (checkpoints without them still load: 0 or ""
	 * here, and what they would check is not checked). */
	int ranks, batch;    /* world size, per-rank batch */
	int num_classes;
	long train_samples, eval_samples; /* the dataset's splits */
	double lr, warmup_epochs;         /* --lr, --warmup-epochs */
	char schedule[16];                /* --schedule */
	char precision[8];                /* fp32, bf16, fp16 */
	char backend[8];                  /* the resolved backend: cpu, cuda, ref */
	/* The dataset's fingerprints (struct dl_dataset fp_classes, fp_samples;
	 * "data_classes", "data_samples" in the metadata, 16 hex digits): 0 when
	 * the dataset has none or the checkpoint is older than them. */
	uint64_t data_classes, data_samples;
};

/* Write DIR/checkpoint.safetensors atomically (o's loss scale, when it has
 * one, as the metadata keys loss_scale and loss_scale_good); the one it replaces becomes
 * DIR/checkpoint.prev.safetensors, so a crash mid-write always leaves one
 * complete checkpoint.  Returns 0, or -1 with one line in err. */
int dl_checkpoint_save(const char *dir, const struct dl_graph *g, const struct dl_optim_state *o,
                       const struct dl_ckpt_state *s, char *err, size_t errlen);

/* Remove from DIR the temporary files a killed writer of dljob's outputs
 * left: NAME.tmp.PID (engine/safetensors.h, runtime/plot.c, the index
 * cache) for NAME checkpoint.safetensors, model.safetensors, metrics.png or
 * imagefolder-*.idx, when they are regular files and PID is not this
 * process.  Nothing reads them (a checkpoint is only ever taken under its
 * own name), but each is as large as what it was to become, and a job
 * killed again and again would fill the disk with them.  Rank 0 calls it
 * before it writes anything; each removal is said on stderr.  Returns the
 * number removed. */
int dl_out_remove_stale_tmp(const char *dir);

/* The newest complete checkpoint in DIR, written to path.  Returns 0, or -1
 * if there is none. */
int dl_checkpoint_find(const char *dir, char *path, size_t len);

/* Load PATH into g (params, buffers, num_batches_tracked) and o (momentum
 * buffers; steps = the checkpoint's step; loss_scale and loss_scale_good
 * from the optional keys of the same names, 0 without them), and its
 * position and run into s.
 * run (NULL: no check): the run that continues it; dl_checkpoint_check
 * refuses it before anything is loaded.  A checkpoint of another format
 * version is refused naming both versions.  Returns 0, or -1 with one line
 * in err naming the file and what is wrong (and what to do). */
int dl_checkpoint_load(const char *path, struct dl_graph *g, struct dl_optim_state *o,
                       struct dl_ckpt_state *s, const struct dl_ckpt_state *run, char *err, size_t errlen);

/* May run (its model, global batch, epochs, dataset splits and classes)
 * continue checkpoint ck of PATH?  Refused: another model; another global
 * batch (the position, the step count and the schedule are counted in
 * global batches; another rank count is fine with --batch giving the same
 * global batch, and the message says which --batch); a dataset whose split
 * sizes or class count changed (the position would name other samples),
 * or whose fingerprints (class names, sample list) differ from those the
 * checkpoint recorded -- other data of the same sizes;
 * --epochs that end before the checkpoint's position.  Allowed: more or
 * fewer epochs, another --lr, --schedule, --warmup-epochs, --precision or
 * backend (the caller says what changed).  Returns 0, or -1 with err. */
int dl_checkpoint_check(const char *path, const struct dl_ckpt_state *ck, const struct dl_ckpt_state *run,
                        char *err, size_t errlen);

/* --init: the weights of a model to start from.  PATH is a safetensors
 * file with torchvision state_dict names: what torchvision's
 * model.state_dict() saved with safetensors gives, dljob's model.safetensors
 * or one of its checkpoints.  Loads g's params and BN running statistics
 * (F32, F64, F16 or BF16 data) and num_batches_tracked; a checkpoint's
 * momentum buffers and position are ignored (optimizer and schedule start
 * fresh).  Strict: every tensor of g must be in the file with its shape and
 * every tensor of the file must be one of g's; otherwise err names each
 * missing, unexpected and mis-shaped tensor (as many as fit).
 * new_head = 1: the classifier (the FC layer's weight and bias) keeps g's
 * fresh initialisation and the file's, whatever its class count, is not
 * used (fine-tuning on other classes).  Returns 0, or -1 with err. */
int dl_weights_init(const char *path, struct dl_graph *g, int new_head, char *err, size_t errlen);

#endif
