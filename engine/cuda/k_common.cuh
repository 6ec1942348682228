// Shared device helpers for the k_*.cu kernels: typed loads/stores that
// compute in fp32 whatever the storage dtype, a dtype dispatch, and the
// grid size for grid-stride loops.
#ifndef DLJOB_ENGINE_CUDA_K_COMMON_CUH
#define DLJOB_ENGINE_CUDA_K_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "engine/cuda/cuda_kernels.h"

__device__ __forceinline__ float ldf(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ldf(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float ldf(const __half *p, size_t i) { return __half2float(p[i]); }

__device__ __forceinline__ void stf(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void stf(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16(v); }
__device__ __forceinline__ void stf(__half *p, size_t i, float v) { p[i] = __float2half(v); }

// Run BODY with T bound to the storage type of dt.  BODY is a lambda-free
// statement list so each kernel template is instantiated three times.
#define DLC_DISPATCH(dt, ...)                                        \
	do {                                                         \
		switch (dt) {                                        \
		case DLC_F32: { typedef float T; __VA_ARGS__; } break;   \
		case DLC_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break; \
		case DLC_F16: { typedef __half T; __VA_ARGS__; } break;  \
		default: return cudaErrorInvalidValue;               \
		}                                                    \
	} while (0)

#define DLC_THREADS 256

// Blocks for a grid-stride loop over count elements: enough to fill the GPU,
// never more than needed.
static inline unsigned dlc_blocks(size_t count)
{
	size_t b = (count + DLC_THREADS - 1) / DLC_THREADS;
	if (b > 65536)
		b = 65536;
	if (b < 1)
		b = 1;
	return (unsigned)b;
}

#define DLC_GRID_STRIDE(i, count) \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count); i += (size_t)gridDim.x * blockDim.x)

#endif
