/* Pinned (page-locked) host memory for buffers the GPU reads, in the shape
 * of the data loader's allocator hook (struct dl_loader_options host_alloc /
 * host_free), so the loader's ring can live in pinned memory without the
 * data library linking CUDA.  The CUDA backend also hands these out through
 * dl_backend_ops.host_alloc/host_free. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_HOST_H
#define DLJOB_ENGINE_CUDA_CUDA_HOST_H

#include <stddef.h>

/* cudaHostAlloc(bytes, portable) on the device dl_cuda_create would pick
 * (dl_cuda_select_device(-1)), so that with one process per GPU no process
 * opens a context on device 0 only to pin memory.  NULL on failure, after
 * one line on stderr naming the call and CUDA's reason.  ctx is unused. */
void *dl_cuda_host_alloc(size_t bytes, void *ctx);
/* cudaFreeHost; a failure is reported on stderr (nothing else can be done). */
void dl_cuda_host_free(void *p, void *ctx);

#endif
