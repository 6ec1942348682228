#include "config.h"

// Elementwise kernels: residual add (+ReLU), ReLU backward, FC bias.  The
// first two run 8 elements per 16-byte access wherever the sizes and
// pointers allow (every resnet activation), else one element per thread.
#include "engine/cuda/k_common.cuh"

template <typename T>
__global__ void add_relu_k(const T *a, const T *b, T *y, size_t count, int relu)
{
	DLC_GRID_STRIDE(i, count) {
		float v = ldf(a, i) + (b ? ldf(b, i) : 0.0f);
		if (relu && v < 0.0f)
			v = 0.0f;
		stf(y, i, v);
	}
}

// The same, 8 elements per access (count/8 groups, 16-byte aligned).
template <typename T>
__global__ void add_relu8_k(const T *a, const T *b, T *y, size_t nv, int relu)
{
	DLC_GRID_STRIDE(v, nv) {
		float fa[8], fb[8];
		ld8(a, v, fa);
		if (b)
			ld8(b, v, fb);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float t = fa[k] + (b ? fb[k] : 0.0f);
			fa[k] = relu && t < 0.0f ? 0.0f : t;
		}
		st8(y, v, fa);
	}
}

extern "C" cudaError_t dlc_add_relu(const void *a, const void *b, void *y, enum dlc_dtype dt, size_t count,
				    int relu, cudaStream_t s)
{
	if (count % 8 == 0 && dlc_vec8_ok(a) && dlc_vec8_ok(b) && dlc_vec8_ok(y))
		DLC_DISPATCH(dt, add_relu8_k<T><<<dlc_blocks(count / 8), DLC_THREADS, 0, s>>>(
					 (const T *)a, (const T *)b, (T *)y, count / 8, relu));
	else
		DLC_DISPATCH(dt, add_relu_k<T><<<dlc_blocks(count), DLC_THREADS, 0, s>>>((const T *)a, (const T *)b,
										   (T *)y, count, relu));
	return cudaGetLastError();
}

template <typename T>
__global__ void relu_bwd_k(const T *dy, const T *y, T *dx, size_t count, int accumulate)
{
	DLC_GRID_STRIDE(i, count) {
		float v = (y == NULL || ldf(y, i) > 0.0f) ? ldf(dy, i) : 0.0f;
		if (accumulate)
			v += ldf(dx, i);
		stf(dx, i, v);
	}
}

template <typename T>
__global__ void relu_bwd8_k(const T *dy, const T *y, T *dx, size_t nv, int accumulate)
{
	DLC_GRID_STRIDE(v, nv) {
		float d[8], fy[8], fx[8];
		ld8(dy, v, d);
		if (y)
			ld8(y, v, fy);
		if (accumulate)
			ld8(dx, v, fx);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float t = (y == NULL || fy[k] > 0.0f) ? d[k] : 0.0f;
			d[k] = accumulate ? t + fx[k] : t;
		}
		st8(dx, v, d);
	}
}

extern "C" cudaError_t dlc_relu_bwd(const void *dy, const void *y, void *dx, enum dlc_dtype dt, size_t count,
				    int accumulate, cudaStream_t s)
{
	if (count % 8 == 0 && dlc_vec8_ok(dy) && dlc_vec8_ok(y) && dlc_vec8_ok(dx))
		DLC_DISPATCH(dt, relu_bwd8_k<T><<<dlc_blocks(count / 8), DLC_THREADS, 0, s>>>(
					 (const T *)dy, (const T *)y, (T *)dx, count / 8, accumulate));
	else
		DLC_DISPATCH(dt, relu_bwd_k<T><<<dlc_blocks(count), DLC_THREADS, 0, s>>>((const T *)dy, (const T *)y,
										   (T *)dx, count, accumulate));
	return cudaGetLastError();
}

__global__ void bias_add_k(float *logits, const float *bias, int n, int k)
{
	DLC_GRID_STRIDE(i, (size_t)n * k) logits[i] += bias[i % k];
}

extern "C" cudaError_t dlc_bias_add(float *logits, const float *bias, int n, int k, cudaStream_t s)
{
	bias_add_k<<<dlc_blocks((size_t)n * k), DLC_THREADS, 0, s>>>(logits, bias, n, k);
	return cudaGetLastError();
}

// One thread per class, summing the batch in order (deterministic).
__global__ void bias_grad_k(const float *dl, float *db, int n, int k)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= k)
		return;
	float acc = 0.0f;
	for (int i = 0; i < n; i++)
		acc += dl[(size_t)i * k + j];
	db[j] = acc;
}

extern "C" cudaError_t dlc_bias_grad(const float *dlogits, float *db, int n, int k, cudaStream_t s)
{
	bias_grad_k<<<(k + 127) / 128, 128, 0, s>>>(dlogits, db, n, k);
	return cudaGetLastError();
}
