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
// dlogits = scale*(softmax - q)/N; top = bit 0 top-1, bit 1 top-min(5,K),
// counting the logits other than the label's that are >= it (ties count
// against the label, as dl_softmax_xent).
__global__ void xent_k(const float *logits, const int *labels, int n, int k, float ls, const float *scale_p,
		       float *dlogits, float *loss, int *top)
{
	__shared__ float sh[XENT_THREADS];
	int row = blockIdx.x;
	const float *x = logits + (size_t)row * k;
	int y = labels[row];
	float xy = (y >= 0 && y < k) ? x[y] : 0.0f;
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < k; j += XENT_THREADS)
		mx = fmaxf(mx, x[j]);
	mx = block_max(mx, sh);
	// sum_j exp(x_j - mx) = nmax + rest: the maxima's terms are exactly 1,
	// counted apart so that log1p keeps a confident sample's small loss
	// (the sum itself rounds 1 + 1e-6 to within 6e-8 of 1); a NaN logit
	// lands in rest as NaN
	float nmax = 0.0f, rest = 0.0f, sx = 0.0f, above = 0.0f;
	for (int j = threadIdx.x; j < k; j += XENT_THREADS) {
		float d = x[j] - mx;
		nmax += x[j] == mx ? 1.0f : 0.0f;
		rest += x[j] < mx ? expf(d) : (x[j] == mx ? 0.0f : d);
		sx += x[j];
		above += (j != y && x[j] >= xy) ? 1.0f : 0.0f;
	}
	nmax = block_sum(nmax, sh);
	rest = block_sum(rest, sh);
	sx = block_sum(sx, sh);
	above = block_sum(above, sh);
	// lse = mx + ls0, kept apart: mx - x_y is exact for the label's logit
	float ls0 = log1pf((nmax - 1.0f) + rest);
	if (threadIdx.x == 0) {
		// -sum q_j (x_j - lse) = (1-ls)(lse - x_y) + ls*(lse - mean_j x_j)
		loss[row] = (1.0f - ls) * ((mx - xy) + ls0) + ls * ((mx - sx / (float)k) + ls0);
		int topk = k < 5 ? k : 5;
		top[row] = (above < 1.0f ? 1 : 0) | (above < (float)topk ? 2 : 0);
	}
	if (dlogits) {
		float f = *scale_p / (float)n;
		for (int j = threadIdx.x; j < k; j += XENT_THREADS) {
			float q = ls / (float)k + (j == y ? 1.0f - ls : 0.0f);
			dlogits[(size_t)row * k + j] = f * (expf((x[j] - mx) - ls0) - q);
		}
	}
}

extern "C" cudaError_t dlc_xent(const float *logits, const int *labels, int n, int k, float ls, const float *scale,
				float *dlogits, float *loss, int *top, cudaStream_t s)
{
	if (dlogits && !scale)
		return cudaErrorInvalidValue;
	xent_k<<<n, XENT_THREADS, 0, s>>>(logits, labels, n, k, ls, scale, dlogits, loss, top);
	return cudaGetLastError();
}
