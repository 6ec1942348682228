#include "config.h"

/* Pinned host memory behind the data loader's allocator hook. */
#include <stdio.h>
#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_host.h"

void *dl_cuda_host_alloc(size_t bytes, void *ctx)
{
	char err[256];
	void *p = NULL;
	(void)ctx;
	/* cudaHostAlloc opens a context on the current device: make that the
	 * device this process trains on, as dl_cuda_create will. */
	if (dl_cuda_select_device(-1, err, sizeof err) < 0) {
		fprintf(stderr, "dljob: pinned host memory: %s\n", err);
		return NULL;
	}
	/* portable: pinned for every context, whichever thread copies from it */
	cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
	if (e != cudaSuccess) {
		fprintf(stderr, "dljob: %s:%d: cudaHostAlloc(%zu bytes): %s\n", __FILE__, __LINE__, bytes,
			cudaGetErrorString(e));
		return NULL;
	}
	return p;
}

void dl_cuda_host_free(void *p, void *ctx)
{
	(void)ctx;
	if (!p)
		return;
	cudaError_t e = cudaFreeHost(p);
	if (e != cudaSuccess)
		fprintf(stderr, "dljob: %s:%d: cudaFreeHost: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));
}
