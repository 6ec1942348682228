/* One oneDNN op at a time on plain float32 NCHW arrays, for tests and
 * benchmarks.  Each call builds the same layer the network uses (cpu_layers.h),
 * moves the inputs into the blocked layout the network would hold them in
 * (nChw16c, or oneDNN's choice for a convolution reading 3 channels), runs,
 * and moves the results back.  Every call returns 0, or -1 with a message in
 * err.  Shapes as in engine/ref/ref_ops.h. */
#ifndef DLJOB_ENGINE_CPU_CPU_OPS_H
#define DLJOB_ENGINE_CPU_CPU_OPS_H

#include <stddef.h>

/* x (N,Ci,H,W), w (Co,Ci,k,k) -> y (N,Co,Ho,Wo). */
int cpu_conv_forward(const float *x, const float *w, float *y, int n, int ci, int h, int wd,
		     int co, int k, int stride, int pad, char *err, size_t errlen);
/* dy (N,Co,Ho,Wo), w -> dx (N,Ci,H,W). */
int cpu_conv_backward_data(const float *dy, const float *w, float *dx, int n, int ci, int h,
			   int wd, int co, int k, int stride, int pad, char *err, size_t errlen);
/* A convolution's accumulating backward-data (stride 1: 1x1 without
 * padding, or k x k with pad (k-1)/2; stride 2: 3x3 on cpu_wino's stride-2
 * path), as the network runs it where a value has several readers: dx +=
 * conv_bwd_data(dy, w); dx (N,Ci,H,W) is read and written.  algo as cpu_conv_algo; *winograd (if not NULL) says whether the
 * layer's forward runs Winograd.  Fails if the layer cannot do it. */
int cpu_conv_backward_data_acc(const float *dy, const float *w, float *dx, int n, int ci, int h,
			       int wd, int co, int k, int stride, int pad, int algo, int *winograd, char *err,
			       size_t errlen);
/* x, dy -> dw (Co,Ci,k,k). */
int cpu_conv_backward_weights(const float *x, const float *dy, float *dw, int n, int ci, int h,
			      int wd, int co, int k, int stride, int pad, char *err,
			      size_t errlen);
/* Training batch norm (optionally fused with ReLU), forward then backward
 * from dy: y (N,C,H,W), batch mean/var (C, biased), dx, dgamma, dbeta (C). */
int cpu_bn_train(const float *x, const float *gamma, const float *beta, const float *dy,
		 float *y, float *mean, float *var, float *dx, float *dgamma, float *dbeta, int n,
		 int c, int h, int w, int relu, float eps, char *err, size_t errlen);
/* Inference batch norm with the given running statistics. */
int cpu_bn_eval(const float *x, const float *gamma, const float *beta, const float *mean,
		const float *var, float *y, int n, int c, int h, int w, int relu, float eps,
		char *err, size_t errlen);
/* 1 if batch norm on f32 (N,C,H,W) runs the own nChw16c kernels
 * (cpu_bn_blk.c), 0 if oneDNN's primitive, -1 on error. */
int cpu_bn_own_kernels(int n, int c, int h, int w);
/* The network's fused batch norm + residual add (+ ReLU), own kernels
 * only: z = relu(bn(x) + s).  run_mean NULL: training, batch statistics
 * (biased var) into mean/var; else inference with run_mean/run_var. */
int cpu_bn_add(const float *x, const float *gamma, const float *beta, const float *s,
	       const float *run_mean, const float *run_var, float *z, float *mean, float *var,
	       int n, int c, int h, int w, int relu, float eps, char *err, size_t errlen);
/* ReLU forward y and backward dx from dy. */
int cpu_relu(const float *x, const float *dy, float *y, float *dx, int n, int c, int h, int w,
	     char *err, size_t errlen);
/* y = a + b (ReLU'd if relu); dsum = the gradient both inputs receive from dy. */
int cpu_add(const float *a, const float *b, const float *dy, float *y, float *dsum, int n,
	    int c, int h, int w, int relu, char *err, size_t errlen);
/* Max pool forward y and backward dx from dy. */
int cpu_maxpool(const float *x, const float *dy, float *y, float *dx, int n, int c, int h, int w,
		int k, int stride, int pad, char *err, size_t errlen);
/* Global average pool: x (N,C,H,W) -> y (N,C); dx from dy (N,C). */
int cpu_gap(const float *x, const float *dy, float *y, float *dx, int n, int c, int h, int w,
	    char *err, size_t errlen);
/* FC: x (N,C), w (K,C), b (K) -> y (N,K); dx, dw, db from dy (N,K). */
int cpu_fc(const float *x, const float *w, const float *b, const float *dy, float *y, float *dx,
	   float *dw, float *db, int n, int c, int k, char *err, size_t errlen);

/* f32 convolution with algorithm algo (enum dl_conv_algo in
 * engine/backend.h); mode as cpu_conv_bf16 below.  *winograd (if not NULL)
 * says which kernels the layer runs: 0 direct, 1 oneDNN's Winograd, 2
 * cpu_wino's, 3 oneDNN's Winograd with cpu_wino's weight gradient (its
 * wgrad path), 4 direct with the weight gradient over the gathered input
 * (col_dw). */
int cpu_conv_algo(int mode, int algo, const float *x, const float *w, const float *dy,
		  float *out, int n, int ci, int h, int wd, int co, int k, int stride, int pad,
		  int *winograd, char *err, size_t errlen);

/* bf16 mixed precision (the backend's --precision bf16): tensors are
 * converted to bf16 on the way in, kernels accumulate in f32, results come
 * back as f32.  mode 0: forward (x, w -> y), 1: backward data (dy, w -> dx),
 * 2: backward weights (x, dy -> dw, computed in f32). */
int cpu_conv_bf16(int mode, const float *x, const float *w, const float *dy, float *out, int n,
		  int ci, int h, int wd, int co, int k, int stride, int pad, char *err,
		  size_t errlen);
/* cpu_bn_train with bf16 x, y, dy, dx; statistics, gamma, beta and their
 * grads f32. */
int cpu_bn_train_bf16(const float *x, const float *gamma, const float *beta, const float *dy,
		      float *y, float *mean, float *var, float *dx, float *dgamma, float *dbeta,
		      int n, int c, int h, int w, int relu, float eps, char *err, size_t errlen);

#endif
