#include "config.h"

// Fused multi-tensor SGD with momentum and weight decay over the flat fp32
// master weights, writing each tensor's working copy (bf16/fp16/fp32, in the
// layout the convolutions want) in the same pass: one launch per step.
#include "engine/cuda/k_common.cuh"

template <typename T>
__global__ void sgd_k(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, float *w, const float *g,
		      float *m, const float *lr_p, float momentum, float grad_scale, int nesterov, int update)
{
	struct dlc_chunk ck = chunks[blockIdx.x];
	const struct dlc_ptensor t = tensors[ck.tensor];
	float lr = update ? *lr_p : 0.0f;
	T *work = (T *)t.work;
	size_t khw = (size_t)t.kh * t.kw;
	for (size_t j = ck.start + threadIdx.x; j < ck.start + (size_t)ck.len; j += blockDim.x) {
		size_t idx = t.off + j;
		float wv = w[idx];
		if (update) {
			// torch.optim.SGD: d = g + wd*w; buf = momentum*buf + d; w -= lr*(nesterov ? d + momentum*buf : buf)
			float d = g[idx] * grad_scale + t.wd * wv;
			float mv = momentum * m[idx] + d;
			m[idx] = mv;
			wv -= lr * (nesterov ? d + momentum * mv : mv);
			w[idx] = wv;
		}
		if (t.map == DLC_MAP_PLAIN) {
			stf(work, j, wv);
		} else if (t.map == DLC_MAP_OIHW_KRSC) {
			// j = (o*I + i)*kh*kw + r  ->  (o*kh*kw + r)*ip + i
			size_t r = j % khw, oi = j / khw;
			size_t i = oi % (size_t)t.i, o = oi / (size_t)t.i;
			stf(work, (o * khw + r) * (size_t)t.ip + i, wv);
		}
	}
}

extern "C" cudaError_t dlc_sgd(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, int n_chunks,
			       float *w, const float *g, float *m, const float *lr, float momentum, float grad_scale,
			       int nesterov, int update, enum dlc_dtype dt, cudaStream_t s)
{
	if (n_chunks <= 0)
		return cudaSuccess;
	DLC_DISPATCH(dt, sgd_k<T><<<n_chunks, DLC_THREADS, 0, s>>>(tensors, chunks, w, g, m, lr, momentum, grad_scale,
								   nesterov, update));
	return cudaGetLastError();
}
