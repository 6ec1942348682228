/* C-callable launchers for the CUDA backend's own kernels (engine/cuda/k_*.cu).
 * Every activation tensor on the GPU is NHWC in the backend's working dtype
 * (fp32, bf16 or fp16); statistics, parameters and gradients of parameters
 * are fp32.  Each launcher enqueues on `s` and returns cudaGetLastError(), so
 * a bad launch configuration is reported at the call site. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_KERNELS_H
#define DLJOB_ENGINE_CUDA_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dlc_dtype { DLC_F32 = 0, DLC_BF16 = 1, DLC_F16 = 2 };

/* Max input channels the uint8 entry point normalizes (RGB, RGBA, gray). */
#define DLC_MAX_IMG_C 8

/* One parameter tensor as the optimizer kernel sees it: a slice of the flat
 * fp32 master/grad/momentum arrays, and where its working copy lives. */
struct dlc_ptensor {
	size_t off;       /* first element in the flat arrays */
	size_t count;     /* elements */
	float wd;         /* weight decay for this tensor (0 when it is not decayed) */
	int map;          /* DLC_MAP_* */
	int o, i, kh, kw, ip; /* DLC_MAP_OIHW_KRSC: (O,I,kh,kw) -> (O,kh,kw,ip), ip >= i */
	void *work;       /* working copy in the backend dtype, NULL for DLC_MAP_NONE */
};
enum { DLC_MAP_NONE = 0, DLC_MAP_PLAIN = 1, DLC_MAP_OIHW_KRSC = 2 };

/* A block-sized piece of one tensor, so one launch covers all tensors. */
struct dlc_chunk {
	int tensor;
	int len;
	size_t start; /* element offset inside the tensor */
};
#define DLC_CHUNK 16384

/* Fused SGD over every chunk (torch.optim.SGD semantics, dampening 0):
 *   d = g*grad_scale + wd*w;  m = momentum*m + d;  w -= lr*(nesterov ? d + momentum*m : m)
 * then the working copy of w is rewritten in its layout.  lr is read from
 * device memory (*lr) so a captured CUDA graph picks up each step's value.
 * update=0 only rewrites the working copies from w (after an upload). */
cudaError_t dlc_sgd(const struct dlc_ptensor *tensors, const struct dlc_chunk *chunks, int n_chunks,
		    float *w, const float *g, float *m, const float *lr, float momentum,
		    float grad_scale, int nesterov, int update, enum dlc_dtype dt, cudaStream_t s);

/* x (N,C,H,W) fp32 -> y (N,H,W,cp) dtype, channels c..cp-1 zero. */
cudaError_t dlc_nchw_to_nhwc(const float *x, void *y, enum dlc_dtype dt, int n, int c, int h, int w,
			     int cp, cudaStream_t s);
struct dlc_norm { float mean[DLC_MAX_IMG_C], inv_std[DLC_MAX_IMG_C]; };
/* x (N,H,W,C) uint8 -> y (N,H,W,cp) dtype: (x/255 - mean)*inv_std, mirrored
 * horizontally for samples with flip[n] != 0 (flip may be NULL). c <= DLC_MAX_IMG_C. */
cudaError_t dlc_u8_to_nhwc(const uint8_t *x, const uint8_t *flip, struct dlc_norm nrm, void *y,
			   enum dlc_dtype dt, int n, int h, int w, int c, int cp, cudaStream_t s);
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
 * 1/sqrt(var+eps); running stats updated with momentum and unbiased var. */
cudaError_t dlc_bn_fwd_train(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
			     const float *gamma, const float *beta, float *save_mean, float *save_invstd,
			     float *run_mean, float *run_var, float momentum, float eps, int relu,
			     float *part, cudaStream_t s);
cudaError_t dlc_bn_fwd_infer(const void *x, void *y, enum dlc_dtype dt, size_t m, int c,
			     const float *gamma, const float *beta, const float *run_mean,
			     const float *run_var, float eps, int relu, cudaStream_t s);
/* Backward.  y is the forward output (only read when relu: the ReLU mask).
 * dgamma/dbeta (fp32) are overwritten; dx is written, or added to when
 * accumulate (dx may be NULL: no input gradient wanted). */
cudaError_t dlc_bn_bwd(const void *x, const void *y, const void *dy, void *dx, enum dlc_dtype dt,
		       size_t m, int c, const float *gamma, const float *save_mean,
		       const float *save_invstd, float *dgamma, float *dbeta, int relu, int accumulate,
		       float *part, cudaStream_t s);

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
/* dx = (y == NULL || y > 0) ? dy : 0, or dx += that when accumulate. */
cudaError_t dlc_relu_bwd(const void *dy, const void *y, void *dx, enum dlc_dtype dt, size_t count,
			 int accumulate, cudaStream_t s);

/* logits (N,K) fp32 += bias (K). */
cudaError_t dlc_bias_add(float *logits, const float *bias, int n, int k, cudaStream_t s);
/* db (K) = sum over n of dlogits (N,K). */
cudaError_t dlc_bias_grad(const float *dlogits, float *db, int n, int k, cudaStream_t s);
/* Softmax cross-entropy with label smoothing ls (torch semantics, mean over
 * the batch).  loss[i] = per-sample loss, correct[i] = 1 when the arg max
 * is labels[i] (ties: lowest index).  dlogits = scale * d(mean loss)/dlogits
 * (dlogits may be NULL). */
cudaError_t dlc_xent(const float *logits, const int *labels, int n, int k, float ls, float scale,
		     float *dlogits, float *loss, int *correct, cudaStream_t s);
#ifdef __cplusplus
}
#endif

#endif
