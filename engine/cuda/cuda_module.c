/* The CUDA backend as a loadable module (engine/backend.h): dljob dlopens
 * $(pkglibdir)/dljob-cuda.so only when the cuda backend is asked for, so
 * the dljob executable itself links no CUDA library.  This is the module's
 * one exported symbol (engine/cuda/local.mk keeps every other one local);
 * its name carries DL_BACKEND_ABI, so a module of another layout is
 * refused by name. */
#include "config.h"

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"

const struct dl_backend_ops *DL_BACKEND_ENTRY(void)
{
	return &dl_backend_cuda;
}
