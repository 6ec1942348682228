#include "config.h"

// Max pool and global average pool over NHWC activations.
#include <string.h>

#include "engine/cuda/k_common.cuh"

// Where element v of an (N,H,W,C) tensor sits (C may count groups of 8):
// *ch its channel, *x its column, *y its row; returns its image.
__host__ __device__ __forceinline__ size_t nhwc_pos(size_t v, int c, int w, int h, int *ch, int *x, int *y)
{
	*ch = (int)(v % (size_t)c);
	size_t r = v / (size_t)c;
	*x = (int)(r % (size_t)w);
	r /= (size_t)w;
	*y = (int)(r % (size_t)h);
	return r / (size_t)h;
}

// The outputs [*o0, *o1] (of n_out along one axis) whose windows hold input
// position i: o*stride - pad <= i <= o*stride - pad + k - 1.
__host__ __device__ __forceinline__ void pool_windows(int i, int k, int stride, int pad, int n_out, int *o0, int *o1)
{
	int t = i + pad - k + 1, last = (i + pad) / stride;
	*o0 = t <= 0 ? 0 : (t + stride - 1) / stride;
	*o1 = last < n_out - 1 ? last : n_out - 1;
}

// One thread per output element; arg records which window position won so
// backward can route the gradient without re-reading x.
template <typename T>
__global__ void maxpool_fwd_k(const T *x, T *y, uint8_t *arg, int n, int h, int w, int c, int ho, int wo,
			      int k, int stride, int pad)
{
	size_t total = (size_t)n * ho * wo * c;
	DLC_GRID_STRIDE(i, total) {
		int ch, ow, oh;
		size_t ni = nhwc_pos(i, c, wo, ho, &ch, &ow, &oh);
		float best = -INFINITY;
		int bi = 0, first = 1;
		for (int a = 0; a < k; a++) {
			int ih = oh * stride - pad + a;
			if (ih < 0 || ih >= h)
				continue;
			for (int b = 0; b < k; b++) {
				int iw = ow * stride - pad + b;
				if (iw < 0 || iw >= w)
					continue;
				float v = ldf(x, ((ni * h + ih) * w + iw) * c + ch);
				// the first in-bounds position wins ties, as in torch
				if (first || v > best) {
					best = v;
					bi = a * k + b;
					first = 0;
				}
			}
		}
		stf(y, i, best);
		arg[i] = (uint8_t)bi;
	}
}

// The same, 8 channels per thread (C % 8 == 0, 16-byte aligned x and y,
// 8-byte aligned arg): v indexes groups of 8 of y, arg's 8 bytes in one
// access.
template <typename T>
__global__ void maxpool_fwd8_k(const T *x, T *y, uint8_t *arg, int n, int h, int w, int cv, int ho, int wo, int k,
			       int stride, int pad)
{
	size_t nv = (size_t)n * ho * wo * cv;
	DLC_GRID_STRIDE(v, nv) {
		int cg, ow, oh;
		size_t ni = nhwc_pos(v, cv, wo, ho, &cg, &ow, &oh);
		float best[8];
		uint8_t bi[8];
		int first = 1;
		for (int a = 0; a < k; a++) {
			int ih = oh * stride - pad + a;
			if (ih < 0 || ih >= h)
				continue;
			for (int b = 0; b < k; b++) {
				int iw = ow * stride - pad + b;
				if (iw < 0 || iw >= w)
					continue;
				float f[8];
				ld8(x, ((ni * h + ih) * w + iw) * cv + cg, f);
#pragma unroll
				for (int j = 0; j < 8; j++)
					if (first || f[j] > best[j]) {
						best[j] = f[j];
						bi[j] = (uint8_t)(a * k + b);
					}
				first = 0;
			}
		}
		if (first) // no window position inside x: torch gives -inf
#pragma unroll
			for (int j = 0; j < 8; j++) {
				best[j] = -INFINITY;
				bi[j] = 0;
			}
		st8(y, v, best);
		uint2 u;
		memcpy(&u, bi, 8);
		reinterpret_cast<uint2 *>(arg)[v] = u;
	}
}

extern "C" cudaError_t dlc_maxpool_fwd(const void *x, void *y, uint8_t *arg, enum dlc_dtype dt, int n, int h,
				       int w, int c, int ho, int wo, int k, int stride, int pad, cudaStream_t s)
{
	if (k * k > 255)
		return cudaErrorInvalidValue;
	size_t total = (size_t)n * ho * wo * c;
	if (c % 8 == 0 && dlc_vec8_ok(x) && dlc_vec8_ok(y) && ((uintptr_t)arg & 7) == 0)
		DLC_DISPATCH(dt, maxpool_fwd8_k<T><<<dlc_blocks(total / 8), DLC_THREADS, 0, s>>>(
					 (const T *)x, (T *)y, arg, n, h, w, c / 8, ho, wo, k, stride, pad));
	else
		DLC_DISPATCH(dt, maxpool_fwd_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (T *)y, arg, n, h, w,
									      c, ho, wo, k, stride, pad));
	return cudaGetLastError();
}

// One thread per input element: gather the gradient of every window that
// contains it and chose it (no atomics, deterministic).
template <typename T>
__global__ void maxpool_bwd_k(const T *dy, const uint8_t *arg, T *dx, int n, int h, int w, int c, int ho,
			      int wo, int k, int stride, int pad, int accumulate)
{
	size_t total = (size_t)n * h * w * c;
	DLC_GRID_STRIDE(i, total) {
		int ch, iw, ih, oh0, oh1, ow0, ow1;
		size_t ni = nhwc_pos(i, c, w, h, &ch, &iw, &ih);
		pool_windows(ih, k, stride, pad, ho, &oh0, &oh1);
		pool_windows(iw, k, stride, pad, wo, &ow0, &ow1);
		float acc = 0.0f;
		for (int oh = oh0; oh <= oh1; oh++)
			for (int ow = ow0; ow <= ow1; ow++) {
				size_t o = ((ni * ho + oh) * wo + ow) * c + ch;
				int pos = (ih - (oh * stride - pad)) * k + (iw - (ow * stride - pad));
				if (arg[o] == pos)
					acc += ldf(dy, o);
			}
		if (accumulate)
			acc += ldf(dx, i);
		stf(dx, i, acc);
	}
}

// The same, 8 channels per thread (alignment as maxpool_fwd8_k).
template <typename T>
__global__ void maxpool_bwd8_k(const T *dy, const uint8_t *arg, T *dx, int n, int h, int w, int cv, int ho, int wo,
			       int k, int stride, int pad, int accumulate)
{
	size_t nv = (size_t)n * h * w * cv;
	DLC_GRID_STRIDE(v, nv) {
		int cg, iw, ih, oh0, oh1, ow0, ow1;
		size_t ni = nhwc_pos(v, cv, w, h, &cg, &iw, &ih);
		pool_windows(ih, k, stride, pad, ho, &oh0, &oh1);
		pool_windows(iw, k, stride, pad, wo, &ow0, &ow1);
		float acc[8];
#pragma unroll
		for (int j = 0; j < 8; j++)
			acc[j] = 0.0f;
		for (int oh = oh0; oh <= oh1; oh++)
			for (int ow = ow0; ow <= ow1; ow++) {
				size_t o = ((ni * ho + oh) * wo + ow) * cv + cg;
				int pos = (ih - (oh * stride - pad)) * k + (iw - (ow * stride - pad));
				uint2 u = reinterpret_cast<const uint2 *>(arg)[o];
				uint8_t bi[8];
				memcpy(bi, &u, 8);
				float d[8];
				ld8(dy, o, d);
#pragma unroll
				for (int j = 0; j < 8; j++)
					if (bi[j] == pos)
						acc[j] += d[j];
			}
		if (accumulate) {
			float f[8];
			ld8(dx, v, f);
#pragma unroll
			for (int j = 0; j < 8; j++)
				acc[j] += f[j];
		}
		st8(dx, v, acc);
	}
}

extern "C" cudaError_t dlc_maxpool_bwd(const void *dy, const uint8_t *arg, void *dx, enum dlc_dtype dt, int n,
				       int h, int w, int c, int ho, int wo, int k, int stride, int pad,
				       int accumulate, cudaStream_t s)
{
	size_t total = (size_t)n * h * w * c;
	if (c % 8 == 0 && dlc_vec8_ok(dy) && dlc_vec8_ok(dx) && ((uintptr_t)arg & 7) == 0)
		DLC_DISPATCH(dt, maxpool_bwd8_k<T><<<dlc_blocks(total / 8), DLC_THREADS, 0, s>>>(
					 (const T *)dy, arg, (T *)dx, n, h, w, c / 8, ho, wo, k, stride, pad, accumulate));
	else
		DLC_DISPATCH(dt, maxpool_bwd_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)dy, arg, (T *)dx, n, h, w,
									      c, ho, wo, k, stride, pad, accumulate));
	return cudaGetLastError();
}

// y (N,C) = mean over HW of x (N,HW,C); one thread per (n,c), reads coalesced over c.
template <typename T>
__global__ void gap_fwd_k(const T *x, T *y, int n, int hw, int c)
{
	size_t total = (size_t)n * c;
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % c);
		size_t ni = i / c;
		float acc = 0.0f;
		for (int p = 0; p < hw; p++)
			acc += ldf(x, ((size_t)ni * hw + p) * c + ch);
		stf(y, i, acc / (float)hw);
	}
}

extern "C" cudaError_t dlc_gap_fwd(const void *x, void *y, enum dlc_dtype dt, int n, int hw, int c,
				   cudaStream_t s)
{
	size_t total = (size_t)n * c;
	DLC_DISPATCH(dt, gap_fwd_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, (T *)y, n, hw, c));
	return cudaGetLastError();
}

template <typename T>
__global__ void gap_bwd_k(const T *dy, T *dx, int n, int hw, int c, int accumulate)
{
	size_t total = (size_t)n * hw * c;
	float inv = 1.0f / (float)hw;
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % c);
		size_t ni = i / ((size_t)hw * c);
		float v = ldf(dy, ni * c + ch) * inv;
		if (accumulate)
			v += ldf(dx, i);
		stf(dx, i, v);
	}
}

extern "C" cudaError_t dlc_gap_bwd(const void *dy, void *dx, enum dlc_dtype dt, int n, int hw, int c,
				   int accumulate, cudaStream_t s)
{
	size_t total = (size_t)n * hw * c;
	DLC_DISPATCH(dt, gap_bwd_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)dy, (T *)dx, n, hw, c,
									  accumulate));
	return cudaGetLastError();
}
