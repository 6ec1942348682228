#include "config.h"

// Batch norm over NHWC activations, seen as a matrix of M = N*H*W rows and C
// channels.  Per-channel sums are done in two deterministic stages (no
// atomics): a (32 channels x 8 rows) block reduces a strided set of rows into
// one partial per (row group, channel); a finalize kernel adds the partials
// in double.  Forward sums are shifted by the channel's first value, which
// keeps E[x^2]-E[x]^2 accurate when |mean| >> std.
//
// Where C is a multiple of 8 and C/8 divides 256 (every resnet BN: C = 64 to
// 2048), and the tensors are 16-byte aligned, each thread works on 8
// channels with one 16-byte access (bf16/fp16) per row: the reductions as
// (BN_VT threads = C/8 channel groups x 256/(C/8) rows) blocks, the
// elementwise passes with a grid-stride step that is a multiple of C/8, so a
// thread's 8 channels stay the same (their constants are still read per
// pass: at 65536 blocks most threads make one or two).  Measured on the
// H200 (resnet50, batch 256, bf16): one element per thread ran BN at a third
// of the memory bandwidth.
#include "engine/cuda/k_common.cuh"

#define BN_TX 32
#define BN_TY 8
#define BN_VT 256

// The 8-channel kernels apply: c/8 divides BN_VT, pointers aligned.
static int bn_vec(int c, const void *a, const void *b, const void *d)
{
	return c >= 8 && c % 8 == 0 && BN_VT % (c / 8) == 0 && dlc_vec8_ok(a) && dlc_vec8_ok(b) && dlc_vec8_ok(d);
}

// Sums of thread t's 16 partials (s[0..7], s[8..15]) over the BN_VT/cv
// threads of its channel group, in order; the group's thread t < cv writes
// part[(group*C + c0 + k)*2 + {0,1}].
__device__ __forceinline__ void bn_vec_reduce(float *s, int cv, int c, int c0, float *part)
{
	__shared__ float sm[BN_VT][17];
	int t = threadIdx.x;
#pragma unroll
	for (int k = 0; k < 16; k++)
		sm[t][k] = s[k];
	__syncthreads();
	if (t < cv) {
		for (int j = t + cv; j < BN_VT; j += cv)
#pragma unroll
			for (int k = 0; k < 16; k++)
				s[k] += sm[j][k];
#pragma unroll
		for (int k = 0; k < 8; k++) {
			part[((size_t)blockIdx.y * c + c0 + k) * 2 + 0] = s[k];
			part[((size_t)blockIdx.y * c + c0 + k) * 2 + 1] = s[8 + k];
		}
	}
}

// bn_stats_k, 8 channels per thread: grid (1, groups), BN_VT threads.
template <typename T>
__global__ void __launch_bounds__(BN_VT, 4) bn_stats8_k(const T *x, size_t m, int c, float *part)
{
	int cv = c / 8, t = threadIdx.x, rpb = BN_VT / cv, c0 = (t % cv) * 8;
	float k8[8], s[16];
#pragma unroll
	for (int k = 0; k < 16; k++)
		s[k] = 0.0f;
	ld8(x, (size_t)(t % cv), k8);
	size_t rs = (size_t)gridDim.y * rpb;
#pragma unroll 2
	for (size_t r = (size_t)blockIdx.y * rpb + t / cv; r < m; r += rs) {
		float f[8];
		ld8(x, r * cv + t % cv, f);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float d = f[k] - k8[k];
			s[k] += d;
			s[8 + k] += d * d;
		}
	}
	bn_vec_reduce(s, cv, c, c0, part);
}

// bn_bwd_stats_k, 8 channels per thread.
template <typename T>
__global__ void __launch_bounds__(BN_VT, 4) bn_bwd_stats8_k(const T *x, const T *y, const T *dy, size_t m, int c, const float *mean,
				const float *invstd, int relu, float *part)
{
	int cv = c / 8, t = threadIdx.x, rpb = BN_VT / cv, c0 = (t % cv) * 8;
	float mu[8], is[8], s[16];
#pragma unroll
	for (int k = 0; k < 8; k++) {
		mu[k] = mean[c0 + k];
		is[k] = invstd[c0 + k];
		s[k] = s[8 + k] = 0.0f;
	}
	size_t rs = (size_t)gridDim.y * rpb;
#pragma unroll 2
	for (size_t r = (size_t)blockIdx.y * rpb + t / cv; r < m; r += rs) {
		size_t v = r * cv + t % cv;
		float fx[8], fy[8], d[8];
		ld8(dy, v, d);
		ld8(x, v, fx);
		if (relu)
			ld8(y, v, fy);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float dk = relu && !(fy[k] > 0.0f) ? 0.0f : d[k];
			s[k] += dk;
			s[8 + k] += dk * (fx[k] - mu[k]) * is[k];
		}
	}
	bn_vec_reduce(s, cv, c, c0, part);
}

// A grid-stride loop over nv groups of 8 whose step is a multiple of cv:
// the thread's channels c0..c0+7 stay the same; threads past the last
// multiple do nothing.
#define BN_VEC_LOOP(v, nv, cv, c0)                                                          \
	size_t step_ = (size_t)gridDim.x * blockDim.x;                                      \
	step_ -= step_ % (size_t)(cv);                                                      \
	size_t t_ = (size_t)blockIdx.x * blockDim.x + threadIdx.x;                          \
	if (t_ >= step_)                                                                    \
		return;                                                                     \
	int c0 = (int)(t_ % (size_t)(cv)) * 8;                                              \
	for (size_t v = t_; v < (nv); v += step_)

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

// Row groups of the 8-channel reductions: about 32 rows per thread (their
// blocks cover BN_VT/(c/8) rows at a time), at most 2048 groups, so that
// many small blocks keep the GPU busy to the end.
static int bn_groups8(size_t m, int c)
{
	size_t rpb = c >= 8 && c / 8 <= BN_VT ? BN_VT / (size_t)(c / 8) : 1;
	size_t g = (m + rpb * 32 - 1) / (rpb * 32);
	if (g > 2048)
		g = 2048;
	if (g < 1)
		g = 1;
	return (int)g;
}

extern "C" size_t dlc_bn_part_floats(size_t m, int c)
{
	int g = bn_groups(m), g8 = bn_groups8(m, c);
	return (size_t)(g > g8 ? g : g8) * c * 2;
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

// The finalize kernels: block (BN_TX, BN_TY), one channel per x; the BN_TY
// threads of a channel add every BN_TY-th group's partials in double, then
// thread y == 0 adds theirs in order (deterministic).  Returns 0 for the
// threads that must not go on.
__device__ __forceinline__ int bn_final_sum(int c, int groups, const float *part, double *s1, double *s2)
{
	__shared__ double f1[BN_TY][BN_TX], f2[BN_TY][BN_TX];
	int ch = blockIdx.x * BN_TX + threadIdx.x;
	double a = 0.0, b = 0.0;
	if (ch < c)
		for (int gi = threadIdx.y; gi < groups; gi += BN_TY) {
			a += part[((size_t)gi * c + ch) * 2 + 0];
			b += part[((size_t)gi * c + ch) * 2 + 1];
		}
	f1[threadIdx.y][threadIdx.x] = a;
	f2[threadIdx.y][threadIdx.x] = b;
	__syncthreads();
	if (threadIdx.y != 0 || ch >= c)
		return 0;
	for (int k = 1; k < BN_TY; k++) {
		a += f1[k][threadIdx.x];
		b += f2[k][threadIdx.x];
	}
	*s1 = a;
	*s2 = b;
	return 1;
}

template <typename T>
__global__ void bn_stats_final_k(const T *x, size_t m, int c, int groups, const float *part, float *mean,
				 float *invstd, float *run_mean, float *run_var, float momentum, float eps)
{
	int ch = blockIdx.x * BN_TX + threadIdx.x;
	double s1, s2;
	if (!bn_final_sum(c, groups, part, &s1, &s2))
		return;
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

// bn_apply_k / bn_infer_k, 8 channels per thread: y = (x - mean)*a + beta.
template <typename T>
__global__ void bn_affine8_k(const T *x, T *y, size_t nv, int cv, const float *gamma, const float *beta,
			     const float *mean, const float *invstd, const float *rvar, float eps, int relu)
{
	BN_VEC_LOOP(v, nv, cv, c0)
	{
		float f[8];
		ld8(x, v, f);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float is = rvar ? rsqrtf(rvar[c0 + k] + eps) : invstd[c0 + k];
			float o = (f[k] - mean[c0 + k]) * is * gamma[c0 + k] + beta[c0 + k];
			f[k] = relu && o < 0.0f ? 0.0f : o;
		}
		st8(y, v, f);
	}
}

// bn_bwd_dx_k, 8 channels per thread.
template <typename T>
__global__ void bn_bwd_dx8_k(const T *x, const T *y, const T *dy, T *dx, size_t m, int cv, const float *gamma,
			     const float *mean, const float *invstd, const float *dgamma, const float *dbeta, int relu,
			     int accumulate)
{
	float inv_m = 1.0f / (float)m;
	BN_VEC_LOOP(v, m * cv, cv, c0)
	{
		float fx[8], fy[8], d[8], fo[8];
		ld8(dy, v, d);
		ld8(x, v, fx);
		if (relu)
			ld8(y, v, fy);
		if (accumulate)
			ld8(dx, v, fo);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			int ch = c0 + k;
			float dk = relu && !(fy[k] > 0.0f) ? 0.0f : d[k];
			float is = invstd[ch];
			float xhat = (fx[k] - mean[ch]) * is;
			float o = gamma[ch] * is * (dk - dbeta[ch] * inv_m - xhat * dgamma[ch] * inv_m);
			fo[k] = accumulate ? o + fo[k] : o;
		}
		st8(dx, v, fo);
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
	if (bn_vec(c, x, y, NULL))
		DLC_DISPATCH(dt,
			groups = bn_groups8(m, c);
			bn_stats8_k<T><<<dim3(1, groups), BN_VT, 0, s>>>((const T *)x, m, c, part);
			bn_stats_final_k<T><<<(c + BN_TX - 1) / BN_TX, dim3(BN_TX, BN_TY), 0, s>>>((const T *)x, m, c, groups, part, save_mean,
									     save_invstd, run_mean, run_var, momentum, eps);
			bn_affine8_k<T><<<dlc_blocks(total / 8), DLC_THREADS, 0, s>>>(
				(const T *)x, (T *)y, total / 8, c / 8, gamma, beta, save_mean, save_invstd, NULL, 0.0f, relu));
	else
		DLC_DISPATCH(dt,
			bn_stats_k<T><<<grid, block, 0, s>>>((const T *)x, m, c, part);
			bn_stats_final_k<T><<<(c + BN_TX - 1) / BN_TX, dim3(BN_TX, BN_TY), 0, s>>>((const T *)x, m, c, groups, part, save_mean,
									     save_invstd, run_mean, run_var, momentum, eps);
			bn_apply_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (T *)y, total, c, gamma,
										beta, save_mean, save_invstd, relu));
	return cudaGetLastError();
}

extern "C" cudaError_t dlc_bn_fwd_infer(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
					const float *gamma, const float *beta, const float *run_mean,
					const float *run_var, float eps, int relu, cudaStream_t s)
{
	size_t total = m * (size_t)c;
	if (bn_vec(c, x, y, NULL))
		DLC_DISPATCH(dt, bn_affine8_k<T><<<dlc_blocks(total / 8), DLC_THREADS, 0, s>>>(
					 (const T *)x, (T *)y, total / 8, c / 8, gamma, beta, run_mean, NULL, run_var, eps,
					 relu));
	else
		DLC_DISPATCH(dt, bn_infer_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>(
					 (const T *)x, (T *)y, total, c, gamma, beta, run_mean, run_var, eps, relu));
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
	int ch = blockIdx.x * BN_TX + threadIdx.x;
	double s1, s2;
	if (!bn_final_sum(c, groups, part, &s1, &s2))
		return;
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
	if (bn_vec(c, x, y, dy) && dlc_vec8_ok(dx))
		DLC_DISPATCH(dt,
			groups = bn_groups8(m, c);
			bn_bwd_stats8_k<T><<<dim3(1, groups), BN_VT, 0, s>>>((const T *)x, (const T *)y, (const T *)dy, m,
									    c, save_mean, save_invstd, relu, part);
			bn_bwd_final_k<<<(c + BN_TX - 1) / BN_TX, dim3(BN_TX, BN_TY), 0, s>>>(c, groups, part, dgamma, dbeta);
			if (dx)
				bn_bwd_dx8_k<T><<<dlc_blocks(total / 8), DLC_THREADS, 0, s>>>(
					(const T *)x, (const T *)y, (const T *)dy, (T *)dx, m, c / 8, gamma, save_mean,
					save_invstd, dgamma, dbeta, relu, accumulate));
	else
	DLC_DISPATCH(dt,
		bn_bwd_stats_k<T><<<grid, block, 0, s>>>((const T *)x, (const T *)y, (const T *)dy, m, c, save_mean,
							 save_invstd, relu, part);
		bn_bwd_final_k<<<(c + BN_TX - 1) / BN_TX, dim3(BN_TX, BN_TY), 0, s>>>(c, groups, part, dgamma, dbeta);
		if (dx)
			bn_bwd_dx_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (const T *)y, (const T *)dy,
										 (T *)dx, m, c, gamma, save_mean, save_invstd,
										 dgamma, dbeta, relu, accumulate));
	return cudaGetLastError();
}
