#include "config.h"

// Batch norm over NHWC activations, seen as a matrix of M = N*H*W rows and C
// channels.  Per-channel sums are done in two deterministic stages (no
// atomics): a (32 channels x 8 rows) block reduces a strided set of rows into
// one partial per (row group, channel); a finalize kernel adds the partials
// in double.  Forward sums are shifted by the channel's first value, which
// keeps E[x^2]-E[x]^2 accurate when |mean| >> std.
#include "engine/cuda/k_common.cuh"

#define BN_TX 32
#define BN_TY 8

// Row groups for M rows: about 128 rows per thread, at most 512 groups.
static int bn_groups(size_t m)
{
	size_t g = (m + BN_TY * 128 - 1) / (BN_TY * 128);
	if (g > 512)
		g = 512;
	if (g < 1)
		g = 1;
	return (int)g;
}

extern "C" size_t dlc_bn_part_floats(size_t m, int c)
{
	return (size_t)bn_groups(m) * c * 2;
}

// Block reduction of (a, b) over threadIdx.y; thread y==0 gets the sums.
__device__ __forceinline__ void bn_block_sum(float &a, float &b)
{
	__shared__ float sa[BN_TY][BN_TX + 1], sb[BN_TY][BN_TX + 1];
	sa[threadIdx.y][threadIdx.x] = a;
	sb[threadIdx.y][threadIdx.x] = b;
	__syncthreads();
	if (threadIdx.y == 0) {
		for (int k = 1; k < BN_TY; k++) {
			a += sa[k][threadIdx.x];
			b += sb[k][threadIdx.x];
		}
	}
}

// part[(group*C + c)*2 + {0,1}] = sum over rows of (x-K, (x-K)^2), K = x[0,c].
template <typename T>
__global__ void bn_stats_k(const T *x, size_t m, int c, float *part)
{
	int ch = blockIdx.x * BN_TX + threadIdx.x;
	float s1 = 0.0f, s2 = 0.0f;
	if (ch < c) {
		float k = ldf(x, (size_t)ch);
		for (size_t r = (size_t)blockIdx.y * BN_TY + threadIdx.y; r < m; r += (size_t)gridDim.y * BN_TY) {
			float d = ldf(x, r * c + ch) - k;
			s1 += d;
			s2 += d * d;
		}
	}
	bn_block_sum(s1, s2);
	if (threadIdx.y == 0 && ch < c) {
		part[((size_t)blockIdx.y * c + ch) * 2 + 0] = s1;
		part[((size_t)blockIdx.y * c + ch) * 2 + 1] = s2;
	}
}

template <typename T>
__global__ void bn_stats_final_k(const T *x, size_t m, int c, int groups, const float *part, float *mean,
				 float *invstd, float *run_mean, float *run_var, float momentum, float eps)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= c)
		return;
	double s1 = 0.0, s2 = 0.0;
	for (int gi = 0; gi < groups; gi++) {
		s1 += part[((size_t)gi * c + ch) * 2 + 0];
		s2 += part[((size_t)gi * c + ch) * 2 + 1];
	}
	double dm = s1 / (double)m;
	double var = s2 / (double)m - dm * dm; // biased, used to normalize
	if (var < 0.0)
		var = 0.0;
	double mu = (double)ldf(x, (size_t)ch) + dm;
	mean[ch] = (float)mu;
	invstd[ch] = (float)(1.0 / sqrt(var + (double)eps));
	// torch: running stats use the unbiased variance
	double uvar = m > 1 ? var * (double)m / (double)(m - 1) : var;
	run_mean[ch] = (float)((1.0 - momentum) * run_mean[ch] + momentum * mu);
	run_var[ch] = (float)((1.0 - momentum) * run_var[ch] + momentum * uvar);
}

// y = gamma*(x-mean)*invstd + beta, then ReLU.
template <typename T>
__global__ void bn_apply_k(const T *x, T *y, size_t total, int c, const float *gamma, const float *beta,
			   const float *mean, const float *invstd, int relu)
{
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % c);
		float v = (ldf(x, i) - mean[ch]) * invstd[ch] * gamma[ch] + beta[ch];
		if (relu && v < 0.0f)
			v = 0.0f;
		stf(y, i, v);
	}
}

// Inference: same affine form from the running statistics.
template <typename T>
__global__ void bn_infer_k(const T *x, T *y, size_t total, int c, const float *gamma, const float *beta,
			   const float *rmean, const float *rvar, float eps, int relu)
{
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % c);
		float v = (ldf(x, i) - rmean[ch]) * rsqrtf(rvar[ch] + eps) * gamma[ch] + beta[ch];
		if (relu && v < 0.0f)
			v = 0.0f;
		stf(y, i, v);
	}
}

extern "C" cudaError_t dlc_bn_fwd_train(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
					const float *gamma, const float *beta, float *save_mean,
					float *save_invstd, float *run_mean, float *run_var, float momentum,
					float eps, int relu, float *part, cudaStream_t s)
{
	int groups = bn_groups(m);
	dim3 grid((c + BN_TX - 1) / BN_TX, groups), block(BN_TX, BN_TY);
	size_t total = m * (size_t)c;
	DLC_DISPATCH(dt,
		bn_stats_k<T><<<grid, block, 0, s>>>((const T *)x, m, c, part);
		bn_stats_final_k<T><<<(c + 127) / 128, 128, 0, s>>>((const T *)x, m, c, groups, part, save_mean,
								     save_invstd, run_mean, run_var, momentum, eps);
		bn_apply_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (T *)y, total, c, gamma, beta,
									save_mean, save_invstd, relu));
	return cudaGetLastError();
}

extern "C" cudaError_t dlc_bn_fwd_infer(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
					const float *gamma, const float *beta, const float *run_mean,
					const float *run_var, float eps, int relu, cudaStream_t s)
{
	size_t total = m * (size_t)c;
	DLC_DISPATCH(dt, bn_infer_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (T *)y, total, c, gamma,
									     beta, run_mean, run_var, eps, relu));
	return cudaGetLastError();
}

// part = per group sums of (dy', dy'*xhat), dy' = dy masked by ReLU(y).
template <typename T>
__global__ void bn_bwd_stats_k(const T *x, const T *y, const T *dy, size_t m, int c, const float *mean,
			       const float *invstd, int relu, float *part)
{
	int ch = blockIdx.x * BN_TX + threadIdx.x;
	float s1 = 0.0f, s2 = 0.0f;
	if (ch < c) {
		float mu = mean[ch], is = invstd[ch];
		for (size_t r = (size_t)blockIdx.y * BN_TY + threadIdx.y; r < m; r += (size_t)gridDim.y * BN_TY) {
			size_t i = r * c + ch;
			float d = ldf(dy, i);
			if (relu && !(ldf(y, i) > 0.0f))
				d = 0.0f;
			s1 += d;
			s2 += d * (ldf(x, i) - mu) * is;
		}
	}
	bn_block_sum(s1, s2);
	if (threadIdx.y == 0 && ch < c) {
		part[((size_t)blockIdx.y * c + ch) * 2 + 0] = s1;
		part[((size_t)blockIdx.y * c + ch) * 2 + 1] = s2;
	}
}

__global__ void bn_bwd_final_k(int c, int groups, const float *part, float *dgamma, float *dbeta)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= c)
		return;
	double s1 = 0.0, s2 = 0.0;
	for (int gi = 0; gi < groups; gi++) {
		s1 += part[((size_t)gi * c + ch) * 2 + 0];
		s2 += part[((size_t)gi * c + ch) * 2 + 1];
	}
	dbeta[ch] = (float)s1;
	dgamma[ch] = (float)s2;
}

// dx = gamma*invstd*(dy' - dbeta/M - xhat*dgamma/M)
template <typename T>
__global__ void bn_bwd_dx_k(const T *x, const T *y, const T *dy, T *dx, size_t m, int c, const float *gamma,
			    const float *mean, const float *invstd, const float *dgamma, const float *dbeta,
			    int relu, int accumulate)
{
	size_t total = m * (size_t)c;
	float inv_m = 1.0f / (float)m;
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % c);
		float d = ldf(dy, i);
		if (relu && !(ldf(y, i) > 0.0f))
			d = 0.0f;
		float is = invstd[ch];
		float xhat = (ldf(x, i) - mean[ch]) * is;
		float v = gamma[ch] * is * (d - dbeta[ch] * inv_m - xhat * dgamma[ch] * inv_m);
		if (accumulate)
			v += ldf(dx, i);
		stf(dx, i, v);
	}
}

extern "C" cudaError_t dlc_bn_bwd(const void *x, const void *y, const void *dy, void *dx, enum dlc_dtype dt,
				  size_t m, int c, const float *gamma, const float *save_mean,
				  const float *save_invstd, float *dgamma, float *dbeta, int relu, int accumulate,
				  float *part, cudaStream_t s)
{
	int groups = bn_groups(m);
	dim3 grid((c + BN_TX - 1) / BN_TX, groups), block(BN_TX, BN_TY);
	size_t total = m * (size_t)c;
	DLC_DISPATCH(dt,
		bn_bwd_stats_k<T><<<grid, block, 0, s>>>((const T *)x, (const T *)y, (const T *)dy, m, c, save_mean,
							 save_invstd, relu, part);
		bn_bwd_final_k<<<(c + 127) / 128, 128, 0, s>>>(c, groups, part, dgamma, dbeta);
		if (dx)
			bn_bwd_dx_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (const T *)y, (const T *)dy,
										 (T *)dx, m, c, gamma, save_mean, save_invstd,
										 dgamma, dbeta, relu, accumulate));
	return cudaGetLastError();
}
