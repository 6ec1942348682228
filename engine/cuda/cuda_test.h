/* Hooks of the CUDA backend for its tests and benchmark only
 * (tests/gpu/test_cuda_ops.c, tests/bench/bench_gpu.c); the trainer uses
 * dl_backend_cuda alone. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_TEST_H
#define DLJOB_ENGINE_CUDA_CUDA_TEST_H

#include <stddef.h>
#include <stdio.h>
#include "engine/backend.h"

struct dl_cuda_test_opts {
	int poison;      /* fill activations, BN statistics and logits with NaN at create */
	int no_graphs;   /* launch every step eagerly (no CUDA graph) */
	int heuristic;   /* choose cuDNN algorithms by heuristics, not cudnnFind */
	int fail_find;   /* act as if cudnnFind ran out of memory, leaving a failed cudaMalloc's
			  * error as the runtime's last error (the heuristic fallback) */
	int force_nccl;  /* reduce through a one-rank NCCL communicator when there is no comm */
	int fail_capture; /* act as if graph capture failed (the eager fallback) */
	int other_math;  /* choose, where cuDNN offers one, a convolution algorithm whose math type
			  * differs from the one the search starts from (bf16/fp16: tensor op math;
			  * fp32: FMA, and fp32 must stay FMA), so that applying it shows */
	int gemm_only;   /* choose only cuDNN's GEMM-type convolution algorithms (no Winograd, no FFT):
			  * their fp32 error is that of plain dot products */
	int deterministic; /* choose only convolution algorithms cuDNN reports deterministic (no
			    * atomics): two runs of the same steps then round alike */
	int profile;     /* time every node of every (eager: graphs off) train step; dl_cuda_profile_print */
};

/* dl_backend_cuda.create with test options (t may be NULL). */
struct dl_backend *dl_cuda_create_test(struct dl_graph *g, int n, const struct dl_backend_opts *o,
				       const struct dl_cuda_test_opts *t, char *err, size_t errlen);
/* The fp16 loss scale now (1 for fp32/bf16). */
double dl_cuda_loss_scale(struct dl_backend *b);
/* 1 if the last train step replayed a CUDA graph. */
int dl_cuda_last_step_graphed(struct dl_backend *b);
/* GPU time of the last train or eval step in ms (CUDA events). */
double dl_cuda_last_step_ms(struct dl_backend *b);
/* Bench: from now on float batches are not copied again; steps reuse the
 * one already on the GPU (synthetic data resident in GPU memory). */
void dl_cuda_set_resident_input(struct dl_backend *b, int on);
/* Convolution node `node`, direction dir (0 forward, 1 backward data,
 * 2 backward filter): *set = the cuDNN math type (cudnnMathType_t) on the
 * descriptor that direction's workspace query and call use, as
 * cudnnGetConvolutionMathType reads it; *chosen = the mathType of the
 * cudnnFind/Get entry its algorithm was chosen from.  -1 if node is not a
 * convolution or has no such direction (no backward data into the image). */
int dl_cuda_conv_math(struct dl_backend *b, int node, int dir, int *set, int *chosen);
/* With the profile hook: GPU time per node kind and direction, per step,
 * and the ten costliest nodes (cuda_prof.c). */
void dl_cuda_profile_print(struct dl_backend *b, FILE *f);
/* Bytes of the one device arena, and device memory in use by this backend
 * as cudaMemGetInfo saw it after create (arena + cuDNN/cuBLAS/NCCL). */
void dl_cuda_memory(struct dl_backend *b, size_t *arena_bytes, size_t *device_bytes);
/* The cuDNN workspace the chosen algorithms need: with it as --workspace,
 * `dljob plan` gives arena_bytes exactly. */
size_t dl_cuda_workspace_bytes(struct dl_backend *b);

#endif
