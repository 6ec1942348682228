#include "config.h"

/* What every file of the cuda backend reports through and enters by: the
 * backend's error line for a failed CUDA, cuDNN or cuBLAS call (dlc_fail:
 * "file:line: call: reason" in b->err, the CK_* macros of cuda_internal.h;
 * the backend's own checks write b->err with dl_errf) and making the
 * backend's device current with no stale error (dlc_use_device).  It calls
 * into no other file of the backend, so the backend's files depend on it
 * one way. */
#include <stdio.h>

#include "common/err.h"
#include "engine/cuda/cuda_internal.h"

void dlc_fail(struct dl_backend *b, const char *file, int line, const char *call, const char *why)
{
	dl_errf(b->err, sizeof b->err, "%s:%d: %s: %s", file, line, call, why);
}

/* The kernel launchers report cudaGetLastError(), which also returns an
 * error left by any earlier failed runtime call on this thread (a refused
 * device, a failed cudaMalloc of the caller's, a cudaErrorNotReady): the
 * backend would report it as its own launch failure.  Each entry point
 * clears it first.  A sticky error (a device fault) is not lost: every
 * later call returns it again. */
void dlc_clear_stale_error(void)
{
	(void)cudaGetLastError();
}

int dlc_use_device(struct dl_backend *b)
{
	CK_CUDA(b, cudaSetDevice(b->device));
	dlc_clear_stale_error();
	return 0;
}

