/* Gradient allreduce across GPUs with NCCL.  The communicator is made from a
 * unique id that rank 0 creates and the callback broadcasts (the backend
 * passes the engine's dl_comm broadcast, which the runtime fills: PMIx,
 * TCP, ...); the engine never bootstraps anything itself.  Every
 * wait polls ncclCommGetAsyncError with a deadline, so a dead peer gives an
 * error line and an aborted communicator instead of a hang. */
#ifndef DLJOB_ENGINE_CUDA_NCCL_COMM_H
#define DLJOB_ENGINE_CUDA_NCCL_COMM_H

#include <stddef.h>
#include <cuda_runtime_api.h>

/* Copy len bytes at buf on rank 0 into buf on every rank.  0 or -1 with err. */
typedef int (*dl_blob_bcast_fn)(void *ctx, void *buf, size_t len, char *err, size_t errlen);

struct dl_nccl;

/* Join the NCCL communicator of `size` ranks on the current CUDA device
 * (the backend's device, made current first).
 * timeout_s bounds the init and every later wait (0: 600 s). */
struct dl_nccl *dl_nccl_create(int rank, int size, dl_blob_bcast_fn bcast, void *ctx, double timeout_s,
			       char *err, size_t errlen);
int dl_nccl_rank(const struct dl_nccl *c);
int dl_nccl_size(const struct dl_nccl *c);
/* Enqueue an in-place fp32 sum on stream s. */
int dl_nccl_allreduce_f32(struct dl_nccl *c, float *buf, size_t n, cudaStream_t s, char *err, size_t errlen);
/* Wait until ev has completed, polling NCCL's async error; on error or
 * timeout abort the communicator and return -1 with the reason. */
int dl_nccl_wait_event(struct dl_nccl *c, cudaEvent_t ev, char *err, size_t errlen);
void dl_nccl_destroy(struct dl_nccl *c);

#endif
