#include "config.h"

// The optimizer step on the GPU, after the gradients are reduced: per-chunk
// sums (LARS norms, finite check), one block that decides the step (finite?
// trust ratios, fp16 loss scale), then the fused multi-tensor SGD that also
// rewrites each tensor's working copy (bf16/fp16/fp32, in the layout the
// convolutions want).  All sums are in a fixed order: deterministic.
#include "engine/cuda/k_common.cuh"

#define OPT_THREADS 256

// Sum (a, b) and OR bad over the block, in a fixed tree order; thread 0 gets it.
__device__ void block_sum2(double &a, double &b, int &bad)
{
	__shared__ double sa[OPT_THREADS], sb[OPT_THREADS];
	__shared__ int sbad[OPT_THREADS];
	sa[threadIdx.x] = a;
	sb[threadIdx.x] = b;
	sbad[threadIdx.x] = bad;
	__syncthreads();
	for (int o = OPT_THREADS / 2; o > 0; o >>= 1) {
		if ((int)threadIdx.x < o) {
			sa[threadIdx.x] += sa[threadIdx.x + o];
			sb[threadIdx.x] += sb[threadIdx.x + o];
			sbad[threadIdx.x] |= sbad[threadIdx.x + o];
		}
		__syncthreads();
	}
	a = sa[0];
	b = sb[0];
	bad = sbad[0];
}

__global__ void grad_stats_k(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, const float *w,
			     const float *g, const struct dlc_optdev *st, float world, struct dlc_part *part)
{
	struct dlc_chunk ck = chunks[blockIdx.x];
	const struct dlc_ptensor t = tensors[ck.tensor];
	float inv = 1.0f / (st->scale * world);
	double w2 = 0.0, g2 = 0.0;
	int bad = 0;
	for (size_t j = ck.start + threadIdx.x; j < ck.start + (size_t)ck.len; j += blockDim.x) {
		float wv = w[t.off + j], gv = g[t.off + j] * inv;
		bad |= !isfinite(gv);
		w2 += (double)wv * wv;
		g2 += (double)gv * gv;
	}
	block_sum2(w2, g2, bad);
	if (threadIdx.x == 0) {
		part[blockIdx.x].w2 = w2;
		part[blockIdx.x].g2 = g2;
		part[blockIdx.x].bad = bad;
	}
}

extern "C" cudaError_t dlc_grad_stats(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks,
				      int n_chunks, const float *w, const float *g, const struct dlc_optdev *st,
				      float world, struct dlc_part *part, cudaStream_t s)
{
	if (n_chunks <= 0)
		return cudaSuccess;
	grad_stats_k<<<n_chunks, OPT_THREADS, 0, s>>>(tensors, chunks, w, g, st, world, part);
	return cudaGetLastError();
}

__global__ void optim_finalize_k(const struct dlc_ptensor *tensors, int n_tensors, const struct dlc_part *part,
				 int n_chunks, const float *g, const struct dlc_ctl *ctl, struct dlc_optdev *st,
				 float *trust, float world, float lars_eta, int dynamic, int interval)
{
	int bad = 0;
	for (int c = threadIdx.x; c < n_chunks; c += blockDim.x)
		bad |= part[c].bad;
	if (threadIdx.x == 0)
		bad |= !isfinite(g[0]);
	bad = __syncthreads_or(bad) ? DLC_BAD_GRAD : 0;
	if (!isfinite(ctl->lr))
		bad |= DLC_BAD_LR;
	for (int t = threadIdx.x; t < n_tensors; t += blockDim.x) {
		const struct dlc_ptensor *p = &tensors[t];
		double tr = 1.0;
		if (p->lars) {
			double w2 = 0.0, g2 = 0.0;
			for (int c = p->chunk0; c < p->chunk0 + p->nchunk; c++) {
				w2 += part[c].w2;
				g2 += part[c].g2;
			}
			tr = dlc_lars_trust(w2, g2, (double)lars_eta, p->wd_d);
		}
		trust[t] = (float)tr;
	}
	if (threadIdx.x == 0) {
		float scale = st->scale;
		st->inv = 1.0f / (scale * world);
		st->bad = bad;
		st->loss_sum = g[0];
		st->stop_sum = g[1];
		if (dynamic) {
			int good = st->good;
			dlc_scale_update(&scale, &good, bad & DLC_BAD_GRAD, interval);
			st->scale = scale;
			st->good = good;
		}
	}
}

extern "C" cudaError_t dlc_optim_finalize(const struct dlc_ptensor *tensors, int n_tensors,
					  const struct dlc_part *part, int n_chunks, const float *g,
					  const struct dlc_ctl *ctl, struct dlc_optdev *st, float *trust, float world,
					  float lars_eta, int dynamic, int interval, cudaStream_t s)
{
	optim_finalize_k<<<1, OPT_THREADS, 0, s>>>(tensors, n_tensors, part, n_chunks, g, ctl, st, trust, world,
						    lars_eta, dynamic, interval);
	return cudaGetLastError();
}

// The working copy of element j of tensor t.
template <typename T>
__device__ __forceinline__ void store_work(const struct dlc_ptensor &t, size_t j, float wv)
{
	T *work = (T *)t.work;
	if (t.map == DLC_MAP_PLAIN) {
		stf(work, j, wv);
	} else if (t.map == DLC_MAP_OIHW_KRSC) {
		// j = (o*I + i)*kh*kw + r  ->  (o*kh*kw + r)*ip + i
		size_t khw = (size_t)t.kh * t.kw;
		size_t r = j % khw, oi = j / khw;
		size_t i = oi % (size_t)t.i, o = oi / (size_t)t.i;
		stf(work, (o * khw + r) * (size_t)t.ip + i, wv);
	}
}

template <typename T>
__global__ void sgd_k(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, float *w, const float *g,
		      float *m, const struct dlc_ctl *ctl, const struct dlc_optdev *st, const float *trust,
		      float momentum, int nesterov)
{
	if (st->bad)
		return; // the step is not applied anywhere
	struct dlc_chunk ck = chunks[blockIdx.x];
	const struct dlc_ptensor t = tensors[ck.tensor];
	const float lr = ctl->lr, inv = st->inv, tr = trust[ck.tensor];
	const int first = ctl->first, has_buf = momentum > 0.0f;
	for (size_t j = ck.start + threadIdx.x; j < ck.start + (size_t)ck.len; j += blockDim.x) {
		size_t idx = t.off + j;
		float mv = has_buf ? m[idx] : 0.0f;
		float wv = dlc_sgd_elem(w[idx], g[idx] * inv, &mv, t.wd, tr, momentum, lr, nesterov, has_buf, first);
		w[idx] = wv;
		if (has_buf)
			m[idx] = mv;
		store_work<T>(t, j, wv);
	}
}

extern "C" cudaError_t dlc_sgd(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, int n_chunks,
			       float *w, const float *g, float *m, const struct dlc_ctl *ctl,
			       const struct dlc_optdev *st, const float *trust, float momentum, int nesterov,
			       enum dlc_dtype dt, cudaStream_t s)
{
	if (n_chunks <= 0)
		return cudaSuccess;
	DLC_DISPATCH(dt, sgd_k<T><<<n_chunks, DLC_THREADS, 0, s>>>(tensors, chunks, w, g, m, ctl, st, trust, momentum,
								   nesterov));
	return cudaGetLastError();
}

template <typename T>
__global__ void refresh_k(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, const float *w)
{
	struct dlc_chunk ck = chunks[blockIdx.x];
	const struct dlc_ptensor t = tensors[ck.tensor];
	for (size_t j = ck.start + threadIdx.x; j < ck.start + (size_t)ck.len; j += blockDim.x)
		store_work<T>(t, j, w[t.off + j]);
}

extern "C" cudaError_t dlc_refresh_work(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks,
					int n_chunks, const float *w, enum dlc_dtype dt, cudaStream_t s)
{
	if (n_chunks <= 0)
		return cudaSuccess;
	DLC_DISPATCH(dt, refresh_k<T><<<n_chunks, DLC_THREADS, 0, s>>>(tensors, chunks, w));
	return cudaGetLastError();
}

__global__ void loss_slots_k(const float *loss, int n, const struct dlc_ctl *ctl, float *slots)
{
	double sum = 0.0;
	for (int i = 0; i < n; i++)
		sum += loss[i];
	slots[0] = (float)(sum / n);
	slots[1] = ctl->stop;
}

extern "C" cudaError_t dlc_loss_slots(const float *loss, int n, const struct dlc_ctl *ctl, float *slots,
				      cudaStream_t s)
{
	loss_slots_k<<<1, 1, 0, s>>>(loss, n, ctl, slots);
	return cudaGetLastError();
}
