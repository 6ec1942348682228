/* The "cuda" backend: engine/backend.h's training step on one GPU (cuDNN
 * convolutions in NHWC, own kernels for batch norm, pooling, loss and the
 * optimizer, cuBLAS for the classifier, NCCL for the gradient reduction).
 *
 * The whole training state stays on the GPU: fp32 master weights, momentum
 * and BN running statistics, plus working copies of the weights in the
 * precision the options ask for (fp32 with TF32 off; bf16; fp16 with
 * dynamic loss scaling).  A step copies only the batch and labels in and
 * a few scalars out; LARS, the finite check and the loss scale live on the
 * GPU.  With several ranks the gradients are summed by NCCL on a stream of
 * their own, bucket by bucket as backward completes them; the NCCL
 * communicator is built from the engine's dl_comm (its broadcast spreads
 * the unique id).  The device part of a step is captured once as a CUDA
 * graph and replayed; if capture fails the backend warns once and launches
 * eagerly.  Written without a GPU at hand: tests/gpu/run.sh checks it. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_BACKEND_H
#define DLJOB_ENGINE_CUDA_CUDA_BACKEND_H

#include <stddef.h>
#include "engine/backend.h"

extern const struct dl_backend_ops dl_backend_cuda;

/* Number of CUDA devices, 0 when there is no usable GPU or driver. */
int dl_cuda_device_count(void);

/* dl_backend_cuda.auto_precision (backend.h): bf16 on a device of compute
 * capability 8.0 or newer (bf16 tensor cores), fp16 on 7.x (fp16 tensor
 * cores only), fp32 below (dlc_auto_precision, cuda_plan.h).  device as
 * dl_backend_opts.device; reads the device's attributes without making it
 * current.  -1 with msg: no such device. */
int dl_cuda_auto_precision(const char *device, char *msg, size_t msglen);

/* dl_backend_cuda.host_alloc/host_free: pinned host memory (cudaHostAlloc,
 * portable) for the loader's ring.  ctx is the device string of
 * dl_backend_opts.device (NULL: device 0 of the visible ones), made current
 * first, so no process opens a context on another GPU just to pin memory.
 * NULL on failure, after one line on stderr naming the call and CUDA's
 * reason. */
void *dl_cuda_host_alloc(size_t bytes, void *ctx);
void dl_cuda_host_free(void *p, void *ctx);

#endif
