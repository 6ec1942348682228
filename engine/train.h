/* The training loop: one process's part of data-parallel SGD.  The runtime
 * parses options into a dl_train_config, joins the process group, and calls
 * dl_train(); everything else (model, backend, optimizer, schedule, loaders,
 * metrics, checkpoints) is built and torn down here. */
#ifndef DLJOB_ENGINE_TRAIN_H
#define DLJOB_ENGINE_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "engine/comm.h"

struct dl_dataset;

struct dl_train_config {
	const char *model;        /* "resnet20", "resnet50", ... */
	const char *data;         /* dataset spec for dl_dataset_open() */
	struct dl_dataset *dataset; /* already opened by the caller (kept by it), or NULL: open `data` */
	const char *out_dir;      /* must exist; metrics, checkpoints and weights go here */
	const char *backend;      /* "cpu", "ref", "cuda", or "auto": cuda if built and a GPU is visible, else cpu */
	const char *gpu;          /* device index or PCI bus id the cuda backend must use; NULL: device 0 of what is visible */
	int epochs;
	int batch;                /* per process */
	double lr;                /* base LR for a global batch of 256 (scaled linearly) */
	const char *schedule;     /* "step", "cosine", "poly", "constant" */
	double warmup_epochs;
	double momentum;
	int nesterov;
	double weight_decay;
	double label_smoothing;
	int lars;
	int zero_init_residual;
	uint64_t seed;
	int threads;              /* compute threads (0: leave the runtime's default) */
	int loader_threads;       /* data worker threads (0: the loader decides) */
	int decode_memory_mib;    /* dl_data_options.decode_memory in MiB (0: its default) */
	const char *resume;       /* NULL: fresh run; "": newest checkpoint in out_dir; else a path */
	const char *init;         /* NULL, or weights to start from (dl_weights_init: torchvision names;
	                           * optimizer and position start fresh); not with resume */
	int init_head_new;        /* with init: keep the fresh classifier (another class count) */
	int image_size;           /* input side for JPEG data (0: the dataset's native size) */
	long max_steps;           /* stop after this many optimizer steps in total (0: no limit) */
	int eval;                 /* evaluate on the held-out split after every epoch */
	int print_every;          /* progress line + metrics record every N steps (rank 0) */
	const char *precision;    /* "auto" (dl_train_config_defaults: the backend picks, backend.h's
	                           * dl_backend_precision), "fp32" (NULL means the same), "bf16" (cpu,
	                           * cuda), "fp16" (cuda): the backend refuses what it does not support,
	                           * by name */
	const char *conv_algo;    /* cpu backend: "auto" (NULL means the same), "direct", "winograd" */
	size_t bucket_bytes;      /* gradient reduction bucket (0: 25 MiB; SIZE_MAX: one bucket after backward) */
	/* Set asynchronously (SIGTERM/SIGUSR1): finish the current step, write a
	 * checkpoint and return DL_TRAIN_PREEMPTED.  May be NULL. */
	volatile sig_atomic_t *stop;
};

/* dl_train() results besides -1 (error, message in err). */
#define DL_TRAIN_DONE 0
#define DL_TRAIN_PREEMPTED 1

/* Fill cfg with the defaults the command line documents. */
void dl_train_config_defaults(struct dl_train_config *cfg);

int dl_train(const struct dl_train_config *cfg, struct dl_comm *comm, char *err, size_t errlen);

#endif
