#include "config.h"

// Batch norm over NHWC activations, seen as a matrix of M = N*H*W rows and C
// channels.  Per-channel sums are done in two deterministic stages (no
// atomics): blocks reduce a strided set of rows into one partial per (row
// group, channel); a finalize kernel (one block per channel) adds a
// channel's partials in double, in a fixed order.  Forward sums are shifted
// by the channel's first value, which keeps E[x^2]-E[x]^2 accurate when
// |mean| >> std.
//
// The output is y = (x - mean)*scale + beta with scale = gamma*invstd, in
// exactly that rounding (bn_out) everywhere: backward recomputes the ReLU
// mask from x instead of reading y, and gets the forward's sign bit for bit.
//
// Where C is a multiple of 8 and C/8 divides 256 (every resnet BN: C = 64 to
// 2048), and the tensors are 16-byte aligned, each thread works on 8
// channels with one 16-byte access (bf16/fp16) per row.  The grids are
// sized to what the GPU holds at once (dlc_resident), and every loop steps
// by a multiple of C/8, so a thread's 8 channels never change: it loads
// their constants once, not per row: one element per thread, or the
// constants read per row, left BN well below the memory bandwidth
// (tests/bench/RESULTS.md, "Batch norm at the memory bandwidth, ...").
#include "engine/cuda/k_common.cuh"

#define BN_TX 32
#define BN_TY 8
#define BN_VT 256

// The 8-channel kernels apply: c/8 divides BN_VT, pointers aligned.
static int bn_vec(int c, const void *a, const void *b, const void *d)
{
	return c >= 8 && c % 8 == 0 && BN_VT % (c / 8) == 0 && dlc_vec8_ok(a) && dlc_vec8_ok(b) && dlc_vec8_ok(d);
}

// The one affine form of the output (and of the ReLU mask in backward).
__device__ __forceinline__ float bn_scale(float gamma, float invstd)
{
	return __fmul_rn(gamma, invstd);
}
__device__ __forceinline__ float bn_out(float x, float mean, float scale, float beta)
{
	return __fmaf_rn(__fsub_rn(x, mean), scale, beta);
}

// Sums of thread t's 16 partials (s[0..7], s[8..15]) over the threads of
// its channel group (t, t + cv, t + 2cv, ...), in a fixed order: first
// across the warp by shuffles (lanes l, l + cv, ... when cv < 32), then
// across the block's warps through shared memory.  Thread t < cv writes
// part[(blockIdx.y*C + c0 + k)*2 + {0,1}].
__device__ __forceinline__ void bn_vec_reduce(float *s, int cv, int c, int c0, float *part)
{
	__shared__ float sm[BN_VT][17];
	int t = threadIdx.x, lane = t % 32;
	for (int o = 16; o >= cv; o >>= 1)
#pragma unroll
		for (int k = 0; k < 16; k++)
			s[k] += __shfl_down_sync(0xffffffffu, s[k], o);
	if (lane < cv)
#pragma unroll
		for (int k = 0; k < 16; k++)
			sm[t][k] = s[k];
	__syncthreads();
	if (t < cv) {
		int stride = cv < 32 ? 32 : cv;
		for (int j = t + stride; j < BN_VT; j += stride)
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

// Row groups of the 8-channel reductions: at least 8 rows per thread, at
// most the blocks the GPU holds at once (per, blocks per SM, from the
// occupancy of the kernel; 8 = the most any 256-thread kernel gets).
static int bn_groups8(size_t m, int c, int per)
{
	size_t rpb = c >= 8 && c / 8 <= BN_VT ? BN_VT / (size_t)(c / 8) : 1;
	size_t g = (m + rpb * 8 - 1) / (rpb * 8), cap = (size_t)dlc_sm_count() * (size_t)per;
	if (g > cap)
		g = cap;
	if (g < 1)
		g = 1;
	return (int)g;
}

// Row groups for M rows of the one-channel-per-thread path: about 128 rows
// per thread, at most 512 groups.
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
	int g = bn_groups(m), g8 = bn_groups8(m, c, 8);
	return (size_t)(g > g8 ? g : g8) * c * 2;
}

// Forward statistics, 8 channels per thread: grid (1, groups), BN_VT
// threads; part as bn_vec_reduce.  Two rows in flight per thread.
template <typename T>
__global__ void __launch_bounds__(BN_VT) bn_stats8_k(const T *x, size_t m, int c, float *part)
{
	int cv = c / 8, t = threadIdx.x, rpb = BN_VT / cv, cg = t % cv;
	float k8[8], s[16];
#pragma unroll
	for (int k = 0; k < 16; k++)
		s[k] = 0.0f;
	ld8(x, (size_t)cg, k8);
	size_t rs = (size_t)gridDim.y * rpb, r = (size_t)blockIdx.y * rpb + t / cv;
	for (; r + rs < m; r += 2 * rs) {
		float f[8], g[8];
		ld8(x, r * cv + cg, f);
		ld8(x, (r + rs) * cv + cg, g);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float d = f[k] - k8[k], e = g[k] - k8[k];
			s[k] += d + e;
			s[8 + k] += d * d + e * e;
		}
	}
	if (r < m) {
		float f[8];
		ld8(x, r * cv + cg, f);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float d = f[k] - k8[k];
			s[k] += d;
			s[8 + k] += d * d;
		}
	}
	bn_vec_reduce(s, cv, c, cg * 8, part);
}

// Backward statistics, 8 channels per thread: sums of dy' and of
// dy'*(x - mean), dy' = dy masked by the ReLU (recomputed from x).
template <typename T>
__global__ void __launch_bounds__(BN_VT) bn_bwd_stats8_k(const T *x, const T *dy, size_t m, int c, const float *gamma,
							 const float *beta, const float *mean, const float *invstd,
							 int relu, float *part)
{
	int cv = c / 8, t = threadIdx.x, rpb = BN_VT / cv, cg = t % cv, c0 = cg * 8;
	float mu[8], sc[8], be[8], s[16];
#pragma unroll
	for (int k = 0; k < 8; k++) {
		mu[k] = mean[c0 + k];
		sc[k] = bn_scale(gamma[c0 + k], invstd[c0 + k]);
		be[k] = beta[c0 + k];
		s[k] = s[8 + k] = 0.0f;
	}
	size_t rs = (size_t)gridDim.y * rpb;
#pragma unroll 2
	for (size_t r = (size_t)blockIdx.y * rpb + t / cv; r < m; r += rs) {
		size_t v = r * cv + cg;
		float fx[8], d[8];
		ld8(dy, v, d);
		ld8(x, v, fx);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float dk = relu && !(bn_out(fx[k], mu[k], sc[k], be[k]) > 0.0f) ? 0.0f : d[k];
			s[k] += dk;
			s[8 + k] += dk * (fx[k] - mu[k]);
		}
	}
	bn_vec_reduce(s, cv, c, c0, part);
}

// One channel per thread (any C): part[(group*C + c)*2 + {0,1}] = sums over
// the group's rows of (x-K, (x-K)^2), K = x[0,c].
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

// part = per group sums of (dy', dy'*(x - mean)), one channel per thread.
template <typename T>
__global__ void bn_bwd_stats_k(const T *x, const T *dy, size_t m, int c, const float *gamma, const float *beta,
			       const float *mean, const float *invstd, int relu, float *part)
{
	int ch = blockIdx.x * BN_TX + threadIdx.x;
	float s1 = 0.0f, s2 = 0.0f;
	if (ch < c) {
		float mu = mean[ch], sc = bn_scale(gamma[ch], invstd[ch]), be = beta[ch];
		for (size_t r = (size_t)blockIdx.y * BN_TY + threadIdx.y; r < m; r += (size_t)gridDim.y * BN_TY) {
			size_t i = r * c + ch;
			float d = ldf(dy, i), xv = ldf(x, i);
			if (relu && !(bn_out(xv, mu, sc, be) > 0.0f))
				d = 0.0f;
			s1 += d;
			s2 += d * (xv - mu);
		}
	}
	bn_block_sum(s1, s2);
	if (threadIdx.y == 0 && ch < c) {
		part[((size_t)blockIdx.y * c + ch) * 2 + 0] = s1;
		part[((size_t)blockIdx.y * c + ch) * 2 + 1] = s2;
	}
}

// The finalize kernels: one block of BN_VT threads per channel (grid C).
// Thread t adds groups t, t + BN_VT, ... in double; a shuffle tree adds each
// warp's lanes and thread 0 the warps' sums, in a fixed order
// (deterministic).  A block per channel, not a warp: the partials are few
// per channel (at most 8 per multiprocessor), so the kernel is latency
// bound and wants every load of a channel in flight at once.  Returns 1 to
// thread 0, which has the sums.
__device__ __forceinline__ int bn_final_sum(int c, int groups, const float *part, double *s1, double *s2)
{
	__shared__ double w1[BN_VT / 32], w2[BN_VT / 32];
	int ch = blockIdx.x, t = threadIdx.x;
	double a = 0.0, b = 0.0;
	const float2 *p2 = reinterpret_cast<const float2 *>(part);
	for (int gi = t; gi < groups; gi += BN_VT) {
		float2 p = p2[(size_t)gi * c + ch];
		a += p.x;
		b += p.y;
	}
	for (int o = 16; o > 0; o >>= 1) {
		a += __shfl_down_sync(0xffffffffu, a, o);
		b += __shfl_down_sync(0xffffffffu, b, o);
	}
	if (t % 32 == 0) {
		w1[t / 32] = a;
		w2[t / 32] = b;
	}
	__syncthreads();
	if (t != 0)
		return 0;
	for (int k = 1; k < BN_VT / 32; k++) {
		a += w1[k];
		b += w2[k];
	}
	*s1 = a;
	*s2 = b;
	return 1;
}

template <typename T>
__global__ void __launch_bounds__(BN_VT) bn_stats_final_k(const T *x, size_t m, int c, int groups, const float *part,
							  float *mean, float *invstd, float *run_mean, float *run_var,
							  float momentum, float eps)
{
	double s1, s2;
	int ch = blockIdx.x;
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

// dbeta = sum dy', dgamma = invstd * sum dy'*(x - mean).
__global__ void __launch_bounds__(BN_VT) bn_bwd_final_k(int c, int groups, const float *part, const float *invstd,
							float *dgamma, float *dbeta)
{
	double s1, s2;
	int ch = blockIdx.x;
	if (!bn_final_sum(c, groups, part, &s1, &s2))
		return;
	dbeta[ch] = (float)s1;
	dgamma[ch] = (float)(s2 * (double)invstd[ch]);
}

// y = bn_out(x), then ReLU; the inference form takes its invstd from the
// running variance.  One element per thread (any C).
template <typename T>
__global__ void bn_apply_k(const T *x, T *y, size_t total, int c, const float *gamma, const float *beta,
			   const float *mean, const float *invstd, const float *rvar, float eps, int relu)
{
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % c);
		float is = rvar ? rsqrtf(rvar[ch] + eps) : invstd[ch];
		float v = bn_out(ldf(x, i), mean[ch], bn_scale(gamma[ch], is), beta[ch]);
		stf(y, i, relu && v < 0.0f ? 0.0f : v);
	}
}

// The start and the step of a grid-stride loop over groups of 8 whose step
// is a multiple of cv (cv divides BN_VT = blockDim.x): the thread's
// channels c0..c0+7 stay the same.
#define BN_VEC_START(t_, step_, c0, cv)                                  \
	size_t step_ = (size_t)gridDim.x * blockDim.x;                   \
	size_t t_ = (size_t)blockIdx.x * blockDim.x + threadIdx.x;       \
	int c0 = (int)(t_ % (size_t)(cv)) * 8

// The same, 8 channels per thread, constants loaded once per thread; two
// groups in flight.
template <typename T>
__global__ void __launch_bounds__(BN_VT) bn_apply8_k(const T *x, T *y, size_t nv, int cv, const float *gamma,
						     const float *beta, const float *mean, const float *invstd,
						     const float *rvar, float eps, int relu)
{
	BN_VEC_START(v, step, c0, cv);
	float mu[8], sc[8], be[8];
#pragma unroll
	for (int k = 0; k < 8; k++) {
		float is = rvar ? rsqrtf(rvar[c0 + k] + eps) : invstd[c0 + k];
		mu[k] = mean[c0 + k];
		sc[k] = bn_scale(gamma[c0 + k], is);
		be[k] = beta[c0 + k];
	}
	for (; v + step < nv; v += 2 * step) {
		float f[8], g[8];
		ld8(x, v, f);
		ld8(x, v + step, g);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float o = bn_out(f[k], mu[k], sc[k], be[k]), p = bn_out(g[k], mu[k], sc[k], be[k]);
			f[k] = relu && o < 0.0f ? 0.0f : o;
			g[k] = relu && p < 0.0f ? 0.0f : p;
		}
		st8(y, v, f);
		st8(y, v + step, g);
	}
	if (v < nv) {
		float f[8];
		ld8(x, v, f);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float o = bn_out(f[k], mu[k], sc[k], be[k]);
			f[k] = relu && o < 0.0f ? 0.0f : o;
		}
		st8(y, v, f);
	}
}

// The residual add with the normalization of the BN(s) that feed it
// applied on the way in: y = ReLU(bn_out(a) + bn_out(b)), an input without a
// BN taking mean 0, scale 1, beta 0 (bn_out is then exact: x itself).  The
// BN's own output is never written nor read back: two passes over the
// add's tensor saved per fused BN.  8 channels per thread, constants loaded
// once per thread.
template <typename T>
__global__ void __launch_bounds__(BN_VT) bn_add8_k(const T *a, const T *b, T *y, size_t nv, int cv,
						   struct dlc_bn_affine A, struct dlc_bn_affine B, int relu)
{
	BN_VEC_START(v, step, c0, cv);
	float ma[8], sa[8], ba[8], mb[8], sb[8], bb[8];
#pragma unroll
	for (int k = 0; k < 8; k++) {
		int ch = c0 + k;
		ma[k] = A.gamma ? A.mean[ch] : 0.0f;
		sa[k] = A.gamma ? bn_scale(A.gamma[ch], A.invstd[ch]) : 1.0f;
		ba[k] = A.gamma ? A.beta[ch] : 0.0f;
		mb[k] = B.gamma ? B.mean[ch] : 0.0f;
		sb[k] = B.gamma ? bn_scale(B.gamma[ch], B.invstd[ch]) : 1.0f;
		bb[k] = B.gamma ? B.beta[ch] : 0.0f;
	}
	for (; v < nv; v += step) {
		float fa[8], fb[8];
		ld8(a, v, fa);
		ld8(b, v, fb);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float o = bn_out(fa[k], ma[k], sa[k], ba[k]) + bn_out(fb[k], mb[k], sb[k], bb[k]);
			fa[k] = relu && o < 0.0f ? 0.0f : o;
		}
		st8(y, v, fa);
	}
}

extern "C" cudaError_t dlc_bn_add(const void *a, const struct dlc_bn_affine *A, const void *b,
				  const struct dlc_bn_affine *B, void *y, enum dlc_dtype dt, size_t m, int c, int relu,
				  cudaStream_t s)
{
	static const struct dlc_bn_affine none = { NULL, NULL, NULL, NULL };
	size_t nv = m * (size_t)c / 8;
	if (!bn_vec(c, a, b, y))
		return cudaErrorInvalidValue;
	DLC_DISPATCH(dt, bn_add8_k<T><<<dlc_resident(bn_add8_k<T>, BN_VT, nv), BN_VT, 0, s>>>(
				 (const T *)a, (const T *)b, (T *)y, nv, c / 8, A ? *A : none, B ? *B : none, relu));
	return cudaGetLastError();
}

// dx = scale*(dy' - dbeta/M - (x - mean)*invstd*dgamma/M), or dx += that.
template <typename T>
__global__ void bn_bwd_dx_k(const T *x, const T *dy, T *dx, size_t m, int c, const float *gamma, const float *beta,
			    const float *mean, const float *invstd, const float *dgamma, const float *dbeta,
			    int relu, int accumulate)
{
	size_t total = m * (size_t)c;
	float inv_m = 1.0f / (float)m;
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % c);
		float sc = bn_scale(gamma[ch], invstd[ch]), xv = ldf(x, i), d = ldf(dy, i);
		if (relu && !(bn_out(xv, mean[ch], sc, beta[ch]) > 0.0f))
			d = 0.0f;
		float v = sc * (d - dbeta[ch] * inv_m - (xv - mean[ch]) * (invstd[ch] * dgamma[ch] * inv_m));
		if (accumulate)
			v += ldf(dx, i);
		stf(dx, i, v);
	}
}

// The same, 8 channels per thread, constants loaded once per thread.
template <typename T>
__global__ void __launch_bounds__(BN_VT) bn_bwd_dx8_k(const T *x, const T *dy, T *dx, size_t nv, int cv, size_t m,
						      const float *gamma, const float *beta, const float *mean,
						      const float *invstd, const float *dgamma, const float *dbeta,
						      int relu, int accumulate)
{
	BN_VEC_START(v, step, c0, cv);
	float inv_m = 1.0f / (float)m;
	float mu[8], sc[8], be[8], kb[8], kc[8];
#pragma unroll
	for (int k = 0; k < 8; k++) {
		int ch = c0 + k;
		mu[k] = mean[ch];
		sc[k] = bn_scale(gamma[ch], invstd[ch]);
		be[k] = beta[ch];
		kb[k] = dbeta[ch] * inv_m;
		kc[k] = invstd[ch] * dgamma[ch] * inv_m;
	}
	for (; v < nv; v += step) {
		float fx[8], d[8], fo[8];
		ld8(dy, v, d);
		ld8(x, v, fx);
		if (accumulate)
			ld8(dx, v, fo);
#pragma unroll
		for (int k = 0; k < 8; k++) {
			float dk = relu && !(bn_out(fx[k], mu[k], sc[k], be[k]) > 0.0f) ? 0.0f : d[k];
			float o = sc[k] * (dk - kb[k] - (fx[k] - mu[k]) * kc[k]);
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
	size_t total = m * (size_t)c;
	unsigned fin = (unsigned)c;
	if (bn_vec(c, x, y, NULL))
		DLC_DISPATCH(dt,
			int groups = bn_groups8(m, c, dlc_per_sm(bn_stats8_k<T>, BN_VT));
			bn_stats8_k<T><<<dim3(1, groups), BN_VT, 0, s>>>((const T *)x, m, c, part);
			bn_stats_final_k<T><<<fin, BN_VT, 0, s>>>((const T *)x, m, c, groups, part, save_mean, save_invstd,
								   run_mean, run_var, momentum, eps);
			if (y)
				bn_apply8_k<T><<<dlc_resident(bn_apply8_k<T>, BN_VT, total / 8), BN_VT, 0, s>>>(
					(const T *)x, (T *)y, total / 8, c / 8, gamma, beta, save_mean, save_invstd, NULL, 0.0f,
					relu));
	else
		DLC_DISPATCH(dt,
			int groups = bn_groups(m);
			bn_stats_k<T><<<dim3((c + BN_TX - 1) / BN_TX, groups), dim3(BN_TX, BN_TY), 0, s>>>((const T *)x, m, c,
													    part);
			bn_stats_final_k<T><<<fin, BN_VT, 0, s>>>((const T *)x, m, c, groups, part, save_mean, save_invstd,
								   run_mean, run_var, momentum, eps);
			if (y)
				bn_apply_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (T *)y, total, c, gamma,
											beta, save_mean, save_invstd, NULL, 0.0f,
											relu));
	return cudaGetLastError();
}

extern "C" cudaError_t dlc_bn_fwd_infer(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
					const float *gamma, const float *beta, const float *run_mean,
					const float *run_var, float eps, int relu, cudaStream_t s)
{
	size_t total = m * (size_t)c;
	if (bn_vec(c, x, y, NULL))
		DLC_DISPATCH(dt, bn_apply8_k<T><<<dlc_resident(bn_apply8_k<T>, BN_VT, total / 8), BN_VT, 0, s>>>(
					 (const T *)x, (T *)y, total / 8, c / 8, gamma, beta, run_mean, NULL, run_var, eps,
					 relu));
	else
		DLC_DISPATCH(dt, bn_apply_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>(
					 (const T *)x, (T *)y, total, c, gamma, beta, run_mean, NULL, run_var, eps, relu));
	return cudaGetLastError();
}

extern "C" cudaError_t dlc_bn_bwd(const void *x, const void *dy, void *dx, enum dlc_dtype dt, size_t m, int c,
				  const float *gamma, const float *beta, const float *save_mean,
				  const float *save_invstd, float *dgamma, float *dbeta, int relu, int accumulate,
				  float *part, cudaStream_t s)
{
	size_t total = m * (size_t)c;
	unsigned fin = (unsigned)c;
	if (bn_vec(c, x, dy, dx))
		DLC_DISPATCH(dt,
			int groups = bn_groups8(m, c, dlc_per_sm(bn_bwd_stats8_k<T>, BN_VT));
			bn_bwd_stats8_k<T><<<dim3(1, groups), BN_VT, 0, s>>>((const T *)x, (const T *)dy, m, c, gamma, beta,
									    save_mean, save_invstd, relu, part);
			bn_bwd_final_k<<<fin, BN_VT, 0, s>>>(c, groups, part, save_invstd, dgamma, dbeta);
			if (dx)
				bn_bwd_dx8_k<T><<<dlc_resident(bn_bwd_dx8_k<T>, BN_VT, total / 8), BN_VT, 0, s>>>(
					(const T *)x, (const T *)dy, (T *)dx, total / 8, c / 8, m, gamma, beta, save_mean,
					save_invstd, dgamma, dbeta, relu, accumulate));
	else
		DLC_DISPATCH(dt,
			int groups = bn_groups(m);
			bn_bwd_stats_k<T><<<dim3((c + BN_TX - 1) / BN_TX, groups), dim3(BN_TX, BN_TY), 0, s>>>(
				(const T *)x, (const T *)dy, m, c, gamma, beta, save_mean, save_invstd, relu, part);
			bn_bwd_final_k<<<fin, BN_VT, 0, s>>>(c, groups, part, save_invstd, dgamma, dbeta);
			if (dx)
				bn_bwd_dx_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>(
					(const T *)x, (const T *)dy, (T *)dx, m, c, gamma, beta, save_mean, save_invstd, dgamma,
					dbeta, relu, accumulate));
	return cudaGetLastError();
}
