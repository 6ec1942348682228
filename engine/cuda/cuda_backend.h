/* The "cuda" backend (cuDNN convolutions in NHWC, own kernels for batch
 * norm, pooling, loss and the optimizer, cuBLAS for the classifier, NCCL for
 * gradient allreduce).  Through dl_backend_ops (engine/backend.h) it behaves
 * like every backend: params are read from the graph at each forward and
 * gradients copied back to g->params[i].grad by backward.  The calls below
 * are the fast path that keeps everything on the GPU:
 *
 *   struct dl_cuda_options o; dl_cuda_default_options(&o);
 *   b = dl_cuda_create(g, batch, &o, err, sizeof err);  // uploads g's params
 *   dl_cuda_set_sgd(b, &sgd);
 *   for each step:
 *       fill dl_cuda_input_f32(b) (or _u8) and dl_cuda_labels(b)  (pinned host memory)
 *       dl_cuda_train_step(b, DL_CUDA_INPUT_F32, lr);  // H2D, fwd, loss, bwd, allreduce, SGD
 *       dl_cuda_step_result(b, &loss, &correct);       // waits (with the NCCL timeout)
 *   dl_cuda_store_graph(b, mom);  // params, running stats, momentum -> g (checkpoints)
 *
 * Precision: working copies of weights and all activations are bf16 (default),
 * fp16 (static loss scale, fast path only) or fp32 (TF32 off, for checks);
 * master weights, gradients of parameters, BN statistics and logits are
 * always fp32.  NCCL (nccl_comm.h) is used by the fast path only: through
 * dl_backend_ops the caller sums gradients itself (dl_comm).
 * Written without a GPU at hand: tests/gpu/run.sh is what checks it. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_BACKEND_H
#define DLJOB_ENGINE_CUDA_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "engine/backend.h"

extern const struct dl_backend_ops dl_backend_cuda;

struct dl_nccl;

enum dl_cuda_precision { DL_CUDA_FP32 = 0, DL_CUDA_BF16 = 1, DL_CUDA_FP16 = 2 };

struct dl_cuda_options {
	enum dl_cuda_precision precision; /* DLJOB_CUDA_PRECISION=fp32|bf16|fp16, default bf16 */
	int cuda_graphs;        /* DLJOB_CUDA_GRAPHS=1: capture the train step after one eager step */
	int conv_find;          /* 1: time cuDNN algorithms (cudnnFind*), 0: heuristics (Get*_v7);
				   DLJOB_CUDA_CONV_ALGO=find|heuristic, default find */
	size_t workspace_limit; /* most cuDNN workspace one convolution may use (default 1 GiB) */
	float loss_scale;       /* static loss scale; 0: 1024 for fp16, 1 otherwise */
	struct dl_nccl *nccl;   /* fast path only: sum gradients across ranks (NULL: one GPU) */
	size_t bucket_bytes;    /* allreduce bucket size (default 25 MiB) */
	int poison;             /* DLJOB_CUDA_POISON=1: fill activations with NaN at create (tests) */
	int device;             /* CUDA device; -1: DLJOB_CUDA_DEVICE, else when several GPUs are
				   visible the local rank (SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK,
				   LOCAL_RANK) modulo their count, else the current device */
};

/* Defaults, then the DLJOB_CUDA_* environment variables above. */
void dl_cuda_default_options(struct dl_cuda_options *o);
/* Number of CUDA devices, 0 when there is no usable GPU or driver. */
int dl_cuda_device_count(void);
/* Make `device` current on this thread (-1: DLJOB_CUDA_DEVICE, else the
 * local rank modulo the visible GPUs when there are several, else the
 * current one).  Returns the device, or -1 with err.  dl_cuda_create calls
 * it; call it yourself before dl_nccl_create, which uses the current device. */
int dl_cuda_select_device(int device, char *err, size_t errlen);
/* Create on the device options.device picks (cudaSetDevice on this thread,
 * which must be the one that runs the backend).  NULL with one line in err. */
struct dl_backend *dl_cuda_create(struct dl_graph *g, int n, const struct dl_cuda_options *o, char *err,
				  size_t errlen);

struct dl_cuda_sgd {
	float momentum, weight_decay;
	int nesterov;
	int decay_bn_and_bias; /* 0: params with no_decay set get no weight decay (the default) */
	float label_smoothing;
};
int dl_cuda_set_sgd(struct dl_backend *b, const struct dl_cuda_sgd *s);

/* F32/U8: copy the pinned buffer below to the GPU first; RESIDENT: reuse the
 * float32 batch already on the GPU from the last F32 step (benchmarks with
 * synthetic data in GPU memory). */
enum dl_cuda_input { DL_CUDA_INPUT_F32 = 0, DL_CUDA_INPUT_U8 = 1, DL_CUDA_INPUT_RESIDENT = 2 };
/* Pinned host buffers the next step reads: (N,C,H,W) float32 normalized
 * images; or (N,H,W,C) uint8 images plus flip flags (N) that the GPU
 * normalizes with dl_cuda_set_normalize's mean/std and mirrors; labels (N). */
float *dl_cuda_input_f32(struct dl_backend *b);
uint8_t *dl_cuda_input_u8(struct dl_backend *b);
uint8_t *dl_cuda_input_flip(struct dl_backend *b);
int *dl_cuda_labels(struct dl_backend *b);
/* Per-channel mean and std (of x/255) for the uint8 input, c entries. */
int dl_cuda_set_normalize(struct dl_backend *b, const float *mean, const float *std, int c);

/* Enqueue one training step (asynchronous; at most one in flight). */
int dl_cuda_train_step(struct dl_backend *b, enum dl_cuda_input in, float lr);
/* Enqueue one evaluation forward (BN running stats) with loss and top-1. */
int dl_cuda_eval_step(struct dl_backend *b, enum dl_cuda_input in);
/* Wait for the last step; mean loss and number of correct top-1 over the
 * batch.  Returns -1 on any CUDA/NCCL error or timeout. */
int dl_cuda_step_result(struct dl_backend *b, double *loss, int *correct);

/* GPU time of the last collected train/eval step in ms (CUDA events). */
double dl_cuda_last_step_ms(struct dl_backend *b);

/* Graph <-> device: load g's params and running buffers (and reset the
 * momentum), or store the device's params, buffers and momentum into g
 * (momentum into mom[i], each g->params[i].count floats; mom may be NULL). */
int dl_cuda_load_graph(struct dl_backend *b);
int dl_cuda_store_graph(struct dl_backend *b, float **mom);

/* Bytes of the one device arena, and device memory in use by this backend as
 * cudaMemGetInfo saw it after create (arena + cuDNN/cuBLAS/NCCL handles). */
void dl_cuda_memory(struct dl_backend *b, size_t *arena_bytes, size_t *device_bytes);

#endif
