#include "config.h"

// Elementwise kernels: residual add (+ReLU) and its backward (also the
// ReLU's), FC bias.  The
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

// Backward of y = ReLU(a + b) (or of a + b, or of ReLU(a) with no b): the
// gradient dy' = (y == NULL || y > 0) ? dy : 0 goes to ga and to gb (either
// may be NULL), each written or added to (acc_a, acc_b): one pass reads dy
// and y once for both inputs.
template <typename T>
__global__ void add_bwd_k(const T *dy, const T *y, T *ga, int acc_a, T *gb, int acc_b, size_t count)
{
	DLC_GRID_STRIDE(i, count) {
		float v = (y == NULL || ldf(y, i) > 0.0f) ? ldf(dy, i) : 0.0f;
		if (ga)
			stf(ga, i, acc_a ? v + ldf(ga, i) : v);
		if (gb)
			stf(gb, i, acc_b ? v + ldf(gb, i) : v);
	}
}

template <typename T>
__global__ void add_bwd8_k(const T *dy, const T *y, T *ga, int acc_a, T *gb, int acc_b, size_t nv)
{
	DLC_GRID_STRIDE(v, nv) {
		float d[8], fy[8], fa[8], fb[8];
		ld8(dy, v, d);
		if (y) {
			ld8(y, v, fy);
#pragma unroll
			for (int k = 0; k < 8; k++)
				d[k] = fy[k] > 0.0f ? d[k] : 0.0f;
		}
		if (ga && acc_a)
			ld8(ga, v, fa);
		if (gb && acc_b)
			ld8(gb, v, fb);
		if (ga) {
#pragma unroll
			for (int k = 0; k < 8; k++)
				fa[k] = acc_a ? d[k] + fa[k] : d[k];
			st8(ga, v, fa);
		}
		if (gb) {
#pragma unroll
			for (int k = 0; k < 8; k++)
				fb[k] = acc_b ? d[k] + fb[k] : d[k];
			st8(gb, v, fb);
		}
	}
}

extern "C" cudaError_t dlc_add_bwd(const void *dy, const void *y, void *ga, int acc_a, void *gb, int acc_b,
				   enum dlc_dtype dt, size_t count, cudaStream_t s)
{
	if (!ga && !gb)
		return cudaSuccess;
	if (count % 8 == 0 && dlc_vec8_ok(dy) && dlc_vec8_ok(y) && dlc_vec8_ok(ga) && dlc_vec8_ok(gb))
		DLC_DISPATCH(dt, add_bwd8_k<T><<<dlc_blocks(count / 8), DLC_THREADS, 0, s>>>(
					 (const T *)dy, (const T *)y, (T *)ga, acc_a, (T *)gb, acc_b, count / 8));
	else
		DLC_DISPATCH(dt, add_bwd_k<T><<<dlc_blocks(count), DLC_THREADS, 0, s>>>(
					 (const T *)dy, (const T *)y, (T *)ga, acc_a, (T *)gb, acc_b, count));
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
