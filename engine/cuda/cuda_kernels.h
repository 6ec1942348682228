/* C-callable launchers for the CUDA backend's own kernels (engine/cuda/k_*.cu).
 * Every activation tensor on the GPU is NHWC in the backend's working dtype
 * (fp32, bf16 or fp16); statistics, parameters and gradients of parameters
 * are fp32.  Each launcher enqueues on `s` and returns cudaGetLastError(), so
 * a bad launch configuration is reported at the call site. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_KERNELS_H
#define DLJOB_ENGINE_CUDA_CUDA_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the update's arithmetic, shared by the kernels and the CPU test
 * (tests/gpu/test_cuda_plan.c checks it against dl_sgd_step) ---- */
#ifdef __CUDACC__
#define DLC_HD __host__ __device__ __forceinline__
#else
#define DLC_HD static inline
#endif

/* One element of torch.optim.SGD (dampening 0) as dl_sgd_step (optim.h)
 * does it, in float: d = g + wd*w; d *= trust; buf = first ? d :
 * mu*buf + d; d = nesterov ? d + mu*buf : buf; returns w - lr*d.  has_buf
 * is momentum > 0; *m is the momentum buffer (untouched without one). */
DLC_HD float dlc_sgd_elem(float w, float g, float *m, float wd, float trust, float mu, float lr, int nesterov,
			  int has_buf, int first)
{
	float d = g;
	if (wd != 0.0f)
		d = d + wd * w;
	if (trust != 1.0f)
		d = d * trust;
	if (has_buf) {
		float b = first ? d : mu * *m + d;
		*m = b;
		d = nesterov ? d + mu * b : b;
	}
	return w - lr * d;
}

/* LARS trust ratio from the squared norms (double): eta*|w|/(|g|+wd*|w|),
 * 1 when either norm is 0. */
DLC_HD double dlc_lars_trust(double w2, double g2, double eta, double wd)
{
	double wn = sqrt(w2), gn = sqrt(g2);
	return wn > 0 && gn > 0 ? eta * wn / (gn + wd * wn) : 1.0;
}

/* fp16 dynamic loss scale after one step (torch.cuda.amp.GradScaler with
 * backoff 0.5, growth 2): halve on a non-finite step, double after
 * `interval` clean steps in a row, but never to inf (as torch's
 * _amp_update_scale: an inf scale would make every later step non-finite,
 * and halving inf stays inf). */
DLC_HD void dlc_scale_update(float *scale, int *good, int bad, int interval)
{
	if (bad) {
		*scale *= 0.5f;
		*good = 0;
	} else if (++*good >= interval) {
		float grown = *scale * 2.0f;
		if (isfinite(grown))
			*scale = grown;
		*good = 0;
	}
}

/* Per-chunk sums for LARS and the finite check of the averaged gradients
 * g*inv (inv = 1/(st->scale*world)); part[chunk]. */
cudaError_t dlc_grad_stats(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, int n_chunks,
			   const float *w, const float *g, const struct dlc_optdev *st, float world,
			   struct dlc_part *part, cudaStream_t s);
/* One block: st->bad (DLC_BAD_GRAD: any chunk or the loss slot g[0] not
 * finite; DLC_BAD_LR: ctl->lr not finite), st->inv, st->loss_sum/stop_sum
 * (from the slots), each tensor's LARS trust ratio (1 when it is not
 * LARS-scaled), then the loss scale update when dynamic (fp16; only
 * DLC_BAD_GRAD halves it). */
cudaError_t dlc_optim_finalize(const struct dlc_ptensor *tensors, int n_tensors, const struct dlc_part *part,
			       int n_chunks, const float *g, const struct dlc_ctl *ctl, struct dlc_optdev *st,
			       float *trust, float world, float lars_eta, int dynamic, int interval, cudaStream_t s);
/* The update of every chunk (dlc_sgd_elem with g*st->inv), skipped
 * entirely when st->bad, then the working copies rewritten from w. */
cudaError_t dlc_sgd(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, int n_chunks, float *w,
		    const float *g, float *m, const struct dlc_ctl *ctl, const struct dlc_optdev *st,
		    const float *trust, float momentum, int nesterov, enum dlc_dtype dt, cudaStream_t s);
/* Only rewrite the working copies from w (after create or state_in). */
cudaError_t dlc_refresh_work(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, int n_chunks,
			     const float *w, enum dlc_dtype dt, cudaStream_t s);
/* slots[0] = mean of loss[0..n), slots[1] = ctl->stop (one block, in order). */
cudaError_t dlc_loss_slots(const float *loss, int n, const struct dlc_ctl *ctl, float *slots, cudaStream_t s);

/* x (N,C,H,W) fp32 -> y (N,H,W,cp) dtype, channels c..cp-1 zero. */
cudaError_t dlc_nchw_to_nhwc(const float *x, void *y, enum dlc_dtype dt, int n, int c, int h, int w,
			     int cp, cudaStream_t s);
/* x (N,H,W,C) uint8 -> y (N,H,W,cp) dtype: (x/255 - nrm[ch])*nrm[c+ch], i.e.
 * nrm (device memory) holds c means then c inverse stds; channels c..cp-1 zero. */
cudaError_t dlc_u8_to_nhwc(const uint8_t *x, const float *nrm, void *y, enum dlc_dtype dt, int n, int h, int w,
			   int c, int cp, cudaStream_t s);
/* x (N,H,W,C) dtype -> y (N,C,H,W) fp32 (first c of cp channels). */
cudaError_t dlc_nhwc_to_nchw(const void *x, enum dlc_dtype dt, float *y, int n, int c, int h, int w,
			     int cp, cudaStream_t s);
/* y (N,H,W,C) dtype = x (N,C,H,W) fp32 * scale (gradient entering the net). */
cudaError_t dlc_nchw_to_nhwc_scaled(const float *x, float scale, void *y, enum dlc_dtype dt, int n,
				    int c, int h, int w, cudaStream_t s);
/* g (O,I,kh,kw) fp32 = dw (O,kh,kw,ip) dtype (weight gradient back to torch layout). */
cudaError_t dlc_krsc_to_oihw(const void *dw, enum dlc_dtype dt, float *g, int o, int i, int kh, int kw,
			     int ip, cudaStream_t s);
/* y dtype = x fp32, count elements. */
cudaError_t dlc_cast_from_f32(const float *x, void *y, enum dlc_dtype dt, size_t count, cudaStream_t s);

/* Batch norm over NHWC viewed as (M rows, C channels), M = N*H*W.
 * part: scratch of dlc_bn_part_floats(M, C) floats. */
size_t dlc_bn_part_floats(size_t m, int c);
/* Training forward: batch mean/biased var for normalization; saves mean and
 * 1/sqrt(var+eps); running stats updated with momentum and unbiased var.
 * y NULL: the statistics only (the consumer applies them: dlc_bn_add). */
cudaError_t dlc_bn_fwd_train(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
			     const float *gamma, const float *beta, float *save_mean, float *save_invstd,
			     float *run_mean, float *run_var, float momentum, float eps, int relu,
			     float *part, cudaStream_t s);
cudaError_t dlc_bn_fwd_infer(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
			     const float *gamma, const float *beta, const float *run_mean,
			     const float *run_var, float eps, int relu, cudaStream_t s);
/* Backward.  The ReLU mask (relu) is recomputed from x with the forward's
 * own rounding, so the forward output is not read.  dgamma/dbeta (fp32)
 * are overwritten; dx is written, or added to when accumulate (dx may be
 * NULL: no input gradient wanted). */
cudaError_t dlc_bn_bwd(const void *x, const void *dy, void *dx, enum dlc_dtype dt, size_t m, int c,
		       const float *gamma, const float *beta, const float *save_mean, const float *save_invstd,
		       float *dgamma, float *dbeta, int relu, int accumulate, float *part, cudaStream_t s);

/* A BN's normalization as its consumer applies it: bn_out(x) =
 * (x - mean)*(gamma*invstd) + beta, per channel (all NULL: x as it is). */
struct dlc_bn_affine {
	const float *gamma, *beta, *mean, *invstd;
};
/* y = ReLU(A(a) + B(b)) (ReLU when relu), A/B the normalization of a BN
 * whose output the add consumes (dlc_plan_bn_add) or NULL: the input as it
 * is.  8 channels per thread only: C % 8 == 0, C/8 divides 256, every
 * pointer 16-byte aligned (else cudaErrorInvalidValue). */
cudaError_t dlc_bn_add(const void *a, const struct dlc_bn_affine *A, const void *b, const struct dlc_bn_affine *B,
		       void *y, enum dlc_dtype dt, size_t m, int c, int relu, cudaStream_t s);

/* Max pool, torch semantics (padding never wins; first max in window order).
 * x (N,H,W,C) -> y (N,Ho,Wo,C), arg (N,Ho,Wo,C) index of the max in the window. */
cudaError_t dlc_maxpool_fwd(const void *x, void *y, uint8_t *arg, enum dlc_dtype dt, int n, int h, int w,
			    int c, int ho, int wo, int k, int stride, int pad, cudaStream_t s);
cudaError_t dlc_maxpool_bwd(const void *dy, const uint8_t *arg, void *dx, enum dlc_dtype dt, int n, int h,
			    int w, int c, int ho, int wo, int k, int stride, int pad, int accumulate,
			    cudaStream_t s);
/* Global average pool: x (N,HW,C) -> y (N,C); backward dx (+)= dy/HW. */
cudaError_t dlc_gap_fwd(const void *x, void *y, enum dlc_dtype dt, int n, int hw, int c, cudaStream_t s);
cudaError_t dlc_gap_bwd(const void *dy, void *dx, enum dlc_dtype dt, int n, int hw, int c, int accumulate,
			cudaStream_t s);

/* y = a + b (b may be NULL), then ReLU when relu.  Elementwise, count elements. */
cudaError_t dlc_add_relu(const void *a, const void *b, void *y, enum dlc_dtype dt, size_t count, int relu,
			 cudaStream_t s);
/* Backward of dlc_add_relu (and of a lone ReLU: b absent): dy' = (y == NULL
 * || y > 0) ? dy : 0 is written to ga and to gb, or added to them (acc_a,
 * acc_b); either may be NULL (no gradient wanted).  One pass over dy, y. */
cudaError_t dlc_add_bwd(const void *dy, const void *y, void *ga, int acc_a, void *gb, int acc_b,
			enum dlc_dtype dt, size_t count, cudaStream_t s);

/* logits (N,K) fp32 += bias (K). */
cudaError_t dlc_bias_add(float *logits, const float *bias, int n, int k, cudaStream_t s);
/* db (K) = sum over n of dlogits (N,K). */
cudaError_t dlc_bias_grad(const float *dlogits, float *db, int n, int k, cudaStream_t s);
/* Softmax cross-entropy with label smoothing ls (torch semantics, mean over
 * the batch).  loss[i] = per-sample loss; top[i] = bit 0: label is the top-1,
 * bit 1: among the top min(5,k) (ties count against the label, as
 * dl_softmax_xent).  dlogits = (*scale) * d(mean loss)/dlogits (dlogits and
 * scale may be NULL: no gradient). */
cudaError_t dlc_xent(const float *logits, const int *labels, int n, int k, float ls, const float *scale,
		     float *dlogits, float *loss, int *top, cudaStream_t s);
#ifdef __cplusplus
}
#endif

#endif
