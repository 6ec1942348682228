/* Plain C reference ops, float64 everywhere, plain NCHW layouts.  These are
 * the ground truth the oneDNN and CUDA backends are tested against, so they
 * are written for obviousness, not speed.  Shapes: n batch, c channels,
 * h/w spatial; conv/pool output side is (side + 2*pad - k) / stride + 1. */
#ifndef DLJOB_ENGINE_REF_REF_OPS_H
#define DLJOB_ENGINE_REF_REF_OPS_H

#include <stddef.h>

static inline int ref_out_side(int side, int k, int stride, int pad)
{
	return (side + 2 * pad - k) / stride + 1;
}

/* Convolution without bias.  x is (N,Ci,H,W), w is (Co,Ci,k,k), y is (N,Co,Ho,Wo). */
void ref_conv_forward(const double *x, const double *w, double *y, int n, int ci, int h,
		      int wd, int co, int k, int stride, int pad);
/* dx (N,Ci,H,W) = conv^T(dy (N,Co,Ho,Wo), w); dx is overwritten. */
void ref_conv_backward_data(const double *dy, const double *w, double *dx, int n, int ci,
			    int h, int wd, int co, int k, int stride, int pad);
/* dw (Co,Ci,k,k) = sum over batch of dy (x) x; dw is overwritten. */
void ref_conv_backward_weights(const double *x, const double *dy, double *dw, int n, int ci,
			       int h, int wd, int co, int k, int stride, int pad);

/* Batch norm, training: normalizes x (N,C,HW) with the batch mean and the
 * biased variance; mean/var (C) receive those statistics (var biased). */
void ref_bn_forward_train(const double *x, const double *gamma, const double *beta,
			  double *y, double *mean, double *var, int n, int c, int hw, double eps);
/* The statistics of ref_bn_forward_train alone (the same bits): the fused
 * layout computes y where it is read (ref_bn_forward_eval with them). */
void ref_bn_stats(const double *x, double *mean, double *var, int n, int c, int hw);
/* A BN+ReLU's backward mask without its output: dy = 0 where
 * ref_bn_forward_eval's y (the same bits) is not > 0, in place. */
void ref_bn_relu_mask(const double *x, const double *gamma, const double *beta, const double *mean,
		      const double *var, double *dy, int n, int c, int hw, double eps);
/* torch's running update: r = (1-m) r + m stat, with the unbiased variance
 * (biased var * count/(count-1)). */
void ref_bn_update_running(double *run_mean, double *run_var, const double *mean,
			   const double *var, int c, size_t count, double momentum);
/* Batch norm, inference: y = gamma (x - mean) / sqrt(var + eps) + beta. */
void ref_bn_forward_eval(const double *x, const double *gamma, const double *beta,
			 const double *mean, const double *var, double *y, int n, int c,
			 int hw, double eps);
/* Backward of the training forward (mean/var are the batch statistics it
 * saved): dx (N,C,HW), dgamma/dbeta (C), all overwritten. */
void ref_bn_backward(const double *x, const double *dy, const double *gamma,
		     const double *mean, const double *var, double *dx, double *dgamma,
		     double *dbeta, int n, int c, int hw, double eps);

/* y = max(x, 0), count elements (y may alias x). */
void ref_relu_forward(const double *x, double *y, size_t count);
/* dx = dy where y > 0 else 0; y is the forward output (dx may alias dy). */
void ref_relu_backward(const double *y, const double *dy, double *dx, size_t count);
/* How close the ReLU's decisions on x came to going the other way: the
 * smallest |x| over count values, divided by their root mean square
 * (INFINITY for none or all zero).  Tests use it to tell a mask that float32
 * rounding may decide either way from a wrong one. */
double ref_relu_margin(const double *x, size_t count);

/* y = a + b (y may alias a or b). */
void ref_add_forward(const double *a, const double *b, double *y, size_t count);

/* Max pooling with -inf padding (torch semantics).  x (N,C,H,W) -> y (N,C,Ho,Wo). */
void ref_maxpool_forward(const double *x, double *y, int n, int c, int h, int wd, int k,
			 int stride, int pad);
/* dx (N,C,H,W), overwritten: each dy goes to the first maximum of its window. */
void ref_maxpool_backward(const double *x, const double *dy, double *dx, int n, int c, int h,
			  int wd, int k, int stride, int pad);
/* The same for a max pool's choices: over every window whose maximum is
 * above 0 (a window of a ReLU's zeros sends its gradient to a zero, which
 * the ReLU's backward drops whichever it is), the gap between the
 * maximum and the next value, divided by x's root mean square. */
double ref_maxpool_margin(const double *x, int n, int c, int h, int wd, int k, int stride, int pad);

/* Global average pool: x (N,C,HW) -> y (N,C). */
void ref_gap_forward(const double *x, double *y, int n, int c, int hw);
/* dx (N,C,HW) = dy (N,C) / HW, overwritten. */
void ref_gap_backward(const double *dy, double *dx, int n, int c, int hw);

/* Fully connected: x (N,C), w (K,C), b (K) -> y (N,K) = x w^T + b. */
void ref_fc_forward(const double *x, const double *w, const double *b, double *y, int n,
		    int c, int k);
/* dx (N,C) = dy w, overwritten. */
void ref_fc_backward_data(const double *dy, const double *w, double *dx, int n, int c, int k);
/* dw (K,C) = dy^T x, db (K) = sum over batch of dy; both overwritten. */
void ref_fc_backward_weights(const double *x, const double *dy, double *dw, double *db, int n,
			     int c, int k);

#endif
