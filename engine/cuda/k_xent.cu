#include "config.h"

// Softmax cross-entropy over fp32 logits, one block per sample.
#include "engine/cuda/k_common.cuh"

#define XENT_THREADS 256

// Block-wide reduction helpers over XENT_THREADS threads.
__device__ float block_max(float v, float *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int o = XENT_THREADS / 2; o > 0; o >>= 1) {
		if ((int)threadIdx.x < o)
			sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + o]);
		__syncthreads();
	}
	float r = sh[0];
	__syncthreads();
	return r;
}

__device__ float block_sum(float v, float *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int o = XENT_THREADS / 2; o > 0; o >>= 1) {
		if ((int)threadIdx.x < o)
			sh[threadIdx.x] += sh[threadIdx.x + o];
		__syncthreads();
	}
	float r = sh[0];
	__syncthreads();
	return r;
}

// Smoothed target q = (1-ls)*onehot + ls/K; loss = -sum q*log softmax;
// dlogits = scale*(softmax - q)/N.
__global__ void xent_k(const float *logits, const int *labels, int n, int k, float ls, float scale,
		       float *dlogits, float *loss, int *correct)
{
	__shared__ float sh[XENT_THREADS];
	__shared__ int shi[XENT_THREADS];
	int row = blockIdx.x;
	const float *x = logits + (size_t)row * k;
	int y = labels[row];
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < k; j += XENT_THREADS)
		mx = fmaxf(mx, x[j]);
	mx = block_max(mx, sh);
	float se = 0.0f, sx = 0.0f;
	for (int j = threadIdx.x; j < k; j += XENT_THREADS) {
		se += expf(x[j] - mx);
		sx += x[j];
	}
	se = block_sum(se, sh);
	sx = block_sum(sx, sh);
	float lse = mx + logf(se);
	// arg max, lowest index on ties: the lowest index among threads holding mx
	int am = k;
	for (int j = threadIdx.x; j < k; j += XENT_THREADS)
		if (x[j] == mx && j < am)
			am = j;
	shi[threadIdx.x] = am;
	__syncthreads();
	for (int o = XENT_THREADS / 2; o > 0; o >>= 1) {
		if ((int)threadIdx.x < o)
			shi[threadIdx.x] = min(shi[threadIdx.x], shi[threadIdx.x + o]);
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		float xy = (y >= 0 && y < k) ? x[y] : 0.0f;
		// -sum q_j (x_j - lse) = (1-ls)(lse - x_y) + ls*(lse - mean_j x_j)
		loss[row] = (1.0f - ls) * (lse - xy) + ls * (lse - sx / (float)k);
		correct[row] = shi[0] == y;
	}
	if (dlogits) {
		float f = scale / (float)n;
		for (int j = threadIdx.x; j < k; j += XENT_THREADS) {
			float q = ls / (float)k + (j == y ? 1.0f - ls : 0.0f);
			dlogits[(size_t)row * k + j] = f * (expf(x[j] - lse) - q);
		}
	}
}

extern "C" cudaError_t dlc_xent(const float *logits, const int *labels, int n, int k, float ls, float scale,
				float *dlogits, float *loss, int *correct, cudaStream_t s)
{
	xent_k<<<n, XENT_THREADS, 0, s>>>(logits, labels, n, k, ls, scale, dlogits, loss, correct);
	return cudaGetLastError();
}
