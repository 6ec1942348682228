#include "config.h"

// Layout and dtype conversions at the edges of the network: images in,
// logits out, weight gradients back to torchvision's OIHW.
#include "engine/cuda/k_common.cuh"

// y (N,H,W,cp) = x (N,C,H,W); one thread per output element so writes are
// coalesced (the input side is strided, but it is read once per step).
template <typename T>
__global__ void nchw_to_nhwc_k(const float *x, T *y, int n, int c, int h, int w, int cp, float scale)
{
	size_t total = (size_t)n * h * w * cp;
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % cp);
		size_t pix = i / cp; // n*h*w index
		size_t hw = (size_t)h * w;
		size_t ni = pix / hw, p = pix % hw;
		float v = ch < c ? x[(ni * c + ch) * hw + p] * scale : 0.0f;
		stf(y, i, v);
	}
}

extern "C" cudaError_t dlc_nchw_to_nhwc(const float *x, void *y, enum dlc_dtype dt, int n, int c, int h,
					int w, int cp, cudaStream_t s)
{
	size_t total = (size_t)n * h * w * cp;
	DLC_DISPATCH(dt, nchw_to_nhwc_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>(x, (T *)y, n, c, h, w, cp, 1.0f));
	return cudaGetLastError();
}

extern "C" cudaError_t dlc_nchw_to_nhwc_scaled(const float *x, float scale, void *y, enum dlc_dtype dt,
					       int n, int c, int h, int w, cudaStream_t s)
{
	size_t total = (size_t)n * h * w * c;
	DLC_DISPATCH(dt, nchw_to_nhwc_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>(x, (T *)y, n, c, h, w, c, scale));
	return cudaGetLastError();
}

// nrm: c means, then c inverse stds (device memory, so a captured graph
// reads each step's values).
template <typename T>
__global__ void u8_to_nhwc_k(const uint8_t *x, const float *nrm, T *y, int n, int h, int w, int c, int cp)
{
	size_t total = (size_t)n * h * w * cp;
	DLC_GRID_STRIDE(i, total) {
		int ch = (int)(i % cp);
		size_t pix = i / cp; // n*h*w index
		float v = 0.0f;
		if (ch < c)
			v = ((float)x[pix * c + ch] * (1.0f / 255.0f) - nrm[ch]) * nrm[c + ch];
		stf(y, i, v);
	}
}

extern "C" cudaError_t dlc_u8_to_nhwc(const uint8_t *x, const float *nrm, void *y, enum dlc_dtype dt, int n,
				      int h, int w, int c, int cp, cudaStream_t s)
{
	if (c > cp || c < 1)
		return cudaErrorInvalidValue;
	size_t total = (size_t)n * h * w * cp;
	DLC_DISPATCH(dt, u8_to_nhwc_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>(x, nrm, (T *)y, n, h, w, c, cp));
	return cudaGetLastError();
}

// y (N,C,H,W) fp32 = x (N,H,W,cp); one thread per output element.
template <typename T>
__global__ void nhwc_to_nchw_k(const T *x, float *y, int n, int c, int h, int w, int cp)
{
	size_t hw = (size_t)h * w;
	size_t total = (size_t)n * c * hw;
	DLC_GRID_STRIDE(i, total) {
		size_t p = i % hw;
		size_t nc = i / hw;
		int ch = (int)(nc % c);
		size_t ni = nc / c;
		y[i] = ldf(x, (ni * hw + p) * cp + ch);
	}
}

extern "C" cudaError_t dlc_nhwc_to_nchw(const void *x, enum dlc_dtype dt, float *y, int n, int c, int h,
					int w, int cp, cudaStream_t s)
{
	size_t total = (size_t)n * c * h * w;
	DLC_DISPATCH(dt, nhwc_to_nchw_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)x, y, n, c, h, w, cp));
	return cudaGetLastError();
}

// g (O,I,kh,kw) fp32 = dw (O,kh,kw,ip); padded input channels i..ip-1 dropped.
template <typename T>
__global__ void krsc_to_oihw_k(const T *dw, float *g, int o, int ci, int kh, int kw, int ip)
{
	size_t khw = (size_t)kh * kw;
	size_t total = (size_t)o * ci * khw;
	DLC_GRID_STRIDE(idx, total) {
		size_t r = idx % khw; // kh*kw position
		size_t oi = idx / khw;
		int i = (int)(oi % ci);
		size_t oo = oi / ci;
		g[idx] = ldf(dw, (oo * khw + r) * ip + i);
	}
}

extern "C" cudaError_t dlc_krsc_to_oihw(const void *dw, enum dlc_dtype dt, float *g, int o, int i, int kh,
					int kw, int ip, cudaStream_t s)
{
	size_t total = (size_t)o * i * kh * kw;
	DLC_DISPATCH(dt, krsc_to_oihw_k<T><<<dlc_blocks(total), DLC_THREADS, 0, s>>>((const T *)dw, g, o, i, kh, kw, ip));
	return cudaGetLastError();
}

template <typename T>
__global__ void cast_k(const float *x, T *y, size_t count)
{
	DLC_GRID_STRIDE(i, count) stf(y, i, x[i]);
}

extern "C" cudaError_t dlc_cast_from_f32(const float *x, void *y, enum dlc_dtype dt, size_t count,
					 cudaStream_t s)
{
	DLC_DISPATCH(dt, cast_k<T><<<dlc_blocks(count), DLC_THREADS, 0, s>>>(x, (T *)y, count));
	return cudaGetLastError();
}
