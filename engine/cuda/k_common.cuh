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

// Eight consecutive elements as floats: one 16-byte access for bf16/fp16,
// two for fp32.  v indexes groups of 8 (element 8v); the caller checks that
// the pointer is 16-byte aligned (dlc_vec8_ok).
__device__ __forceinline__ void ld8(const float *p, size_t v, float *f)
{
	float4 a = reinterpret_cast<const float4 *>(p)[2 * v], b = reinterpret_cast<const float4 *>(p)[2 * v + 1];
	f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
__device__ __forceinline__ void ld8(const __nv_bfloat16 *p, size_t v, float *f)
{
	uint4 u = reinterpret_cast<const uint4 *>(p)[v];
	const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
	for (int k = 0; k < 4; k++) {
		float2 t = __bfloat1622float2(h[k]);
		f[2 * k] = t.x, f[2 * k + 1] = t.y;
	}
}
__device__ __forceinline__ void ld8(const __half *p, size_t v, float *f)
{
	uint4 u = reinterpret_cast<const uint4 *>(p)[v];
	const __half2 *h = reinterpret_cast<const __half2 *>(&u);
#pragma unroll
	for (int k = 0; k < 4; k++) {
		float2 t = __half22float2(h[k]);
		f[2 * k] = t.x, f[2 * k + 1] = t.y;
	}
}
__device__ __forceinline__ void st8(float *p, size_t v, const float *f)
{
	reinterpret_cast<float4 *>(p)[2 * v] = make_float4(f[0], f[1], f[2], f[3]);
	reinterpret_cast<float4 *>(p)[2 * v + 1] = make_float4(f[4], f[5], f[6], f[7]);
}
__device__ __forceinline__ void st8(__nv_bfloat16 *p, size_t v, const float *f)
{
	uint4 u;
	__nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
	for (int k = 0; k < 4; k++)
		h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
	reinterpret_cast<uint4 *>(p)[v] = u;
}
__device__ __forceinline__ void st8(__half *p, size_t v, const float *f)
{
	uint4 u;
	__half2 *h = reinterpret_cast<__half2 *>(&u);
#pragma unroll
	for (int k = 0; k < 4; k++)
		h[k] = __floats2half2_rn(f[2 * k], f[2 * k + 1]);
	reinterpret_cast<uint4 *>(p)[v] = u;
}

// Whether p (NULL allowed) may be read in groups of 8 elements.
static inline int dlc_vec8_ok(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

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

// The multiprocessors of the current device (1 if it cannot be asked: the
// error stays set, so the launcher's cudaGetLastError reports it).
static inline int dlc_sm_count(void)
{
	int d = 0, n = 0;
	if (cudaGetDevice(&d) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d) != cudaSuccess ||
	    n < 1)
		return 1;
	return n;
}

// Blocks of `threads` threads of `kernel` one multiprocessor holds at once.
template <typename K> static inline int dlc_per_sm(K kernel, int threads)
{
	int per = 0;
	if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, threads, 0) != cudaSuccess || per < 1)
		return 1;
	return per;
}

// Blocks for a grid-stride loop of `kernel` over count items: one wave of
// what the GPU holds at once, never more than the items need.  The threads
// of such a grid loop many times, so they load their constants once.
template <typename K> static inline unsigned dlc_resident(K kernel, int threads, size_t count)
{
	size_t need = (count + (size_t)threads - 1) / (size_t)threads;
	size_t cap = (size_t)dlc_sm_count() * (size_t)dlc_per_sm(kernel, threads);
	if (need > cap)
		need = cap;
	return need < 1 ? 1u : (unsigned)need;
}

#define DLC_GRID_STRIDE(i, count) \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count); i += (size_t)gridDim.x * blockDim.x)

#endif
