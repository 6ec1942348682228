/* Internals of the CUDA backend shared by its C files: the backend struct,
 * the per-node runtime state and the error macros. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_INTERNAL_H
#define DLJOB_ENGINE_CUDA_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_kernels.h"

/* Record "file:line: call: reason" in b->err; the caller returns -1. */
void dlc_fail(struct dl_backend *b, const char *file, int line, const char *call, const char *why);
void dlc_failf(struct dl_backend *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CK_CUDA(b, call)                                                                       \
	do {                                                                                   \
		cudaError_t e_ = (call);                                                       \
		if (e_ != cudaSuccess) {                                                       \
			dlc_fail((b), __FILE__, __LINE__, #call, cudaGetErrorString(e_));      \
			return -1;                                                             \
		}                                                                              \
	} while (0)
#define CK_CUDNN(b, call)                                                                      \
	do {                                                                                   \
		cudnnStatus_t e_ = (call);                                                     \
		if (e_ != CUDNN_STATUS_SUCCESS) {                                              \
			dlc_fail((b), __FILE__, __LINE__, #call, cudnnGetErrorString(e_));     \
			return -1;                                                             \
		}                                                                              \
	} while (0)
#define CK_CUBLAS(b, call)                                                                     \
	do {                                                                                   \
		cublasStatus_t e_ = (call);                                                    \
		if (e_ != CUBLAS_STATUS_SUCCESS) {                                             \
			dlc_fail((b), __FILE__, __LINE__, #call, cublasGetStatusString(e_));   \
			return -1;                                                             \
		}                                                                              \
	} while (0)

struct dlc_value {
	int c, h, w;    /* per sample, as in the graph */
	int cp;         /* channels as stored: the image is padded to a multiple of 8 */
	size_t elems;   /* n*h*w*cp */
	void *act;      /* (N,H,W,cp) in the working dtype */
	void *grad;     /* same shape; NULL when no gradient flows into this value */
	int grad_set;   /* backward: grad already holds a contribution this step */
};

struct dlc_conv {
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	int ip;         /* input channels as stored (>= graph's) */
	void *dw;       /* weight gradient (Co,kh,kw,ip) in the working dtype */
};

struct dlc_algo {
	int key[10];            /* n, ip, h, w, co, k, stride, pad, ho, wo */
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	int have_bwd_data;
};

struct dlc_node {
	struct dlc_conv conv;
	float *mean, *invstd;   /* BN: batch statistics saved for backward */
	uint8_t *arg;           /* MAXPOOL: winner index per output */
	void *dl_work;          /* FC: dlogits in the working dtype (N,K) */
	int *ready;             /* buckets whose grads are complete after this node's backward */
	int n_ready;
};

struct dlc_bucket {
	size_t off, count;      /* slice of the flat grad array */
};

struct dl_backend {
	struct dl_graph *g;
	int n;
	struct dl_cuda_options opt;
	enum dlc_dtype dt;
	size_t esize;           /* bytes per working element */
	cudnnDataType_t cudnn_dt;
	cudaDataType_t blas_dt;
	char err[512];

	cudaStream_t s;         /* compute */
	cudaStream_t cs;        /* NCCL */
	cudnnHandle_t cudnn;
	cublasHandle_t blas;
	int have_cudnn, have_blas;

	/* the arena: one cudaMalloc, carved by the planner */
	void *arena;
	size_t arena_bytes, device_bytes;
	struct dlc_algo *algos; /* chosen cuDNN algorithms by shape, so equal convs search once */
	int n_algos;
	void ***plan_slot;
	size_t *plan_bytes;
	int n_plan, cap_plan;

	struct dlc_value *val;
	struct dlc_node *node;

	/* parameters: flat fp32 arrays, tensor i at p_off[i]; writer[i]: node writing its grad */
	int *writer;
	size_t *p_off, n_flat;
	float *w, *gr, *mom;
	size_t *b_off, n_bflat;
	float *bufs;            /* BN running buffers, device copy */
	struct dlc_ptensor *h_tensors, *d_tensors;
	struct dlc_chunk *h_chunks, *d_chunks;
	int n_chunks;
	float *d_lr;            /* device copy of the step's lr (read by the SGD kernel) */
	float *h_lr;            /* pinned */

	void *ws;               /* cuDNN workspace */
	size_t ws_bytes;
	void *blas_ws;
	size_t blas_ws_bytes;
	float *bn_part;         /* BN reduction partials */

	/* edges */
	float *d_x;             /* (N,C,H,W) fp32 */
	uint8_t *d_u8, *d_flip; /* (N,H,W,C) uint8, (N) */
	int *d_labels;
	float *d_logits, *d_dlogits; /* (N,K) fp32 */
	float *d_loss;          /* (N) */
	int *d_correct;         /* (N) */
	float *h_x, *h_logits, *h_loss;
	uint8_t *h_u8, *h_flip;
	int *h_labels, *h_correct;
	size_t x_count, out_count; /* per batch */
	struct dlc_norm norm;
	int img_c;

	/* fast path */
	struct dl_cuda_sgd sgd;
	int have_sgd;
	float loss_scale;
	struct dlc_bucket *bk;
	int n_bk;
	cudaEvent_t *ev_bk;     /* one per bucket: grads complete on s */
	cudaEvent_t ev_comm;    /* all allreduces done on cs */
	cudaEvent_t ev_start;   /* step enqueued (timing) */
	cudaEvent_t ev_done;    /* step finished (timing) */
	double last_ms;
	int have_events;
	int step_pending;       /* 0 none, 1 train, 2 eval */
	int last_train;         /* ops path: the last forward() was a training one */
	long steps;
	cudaGraph_t graph;
	cudaGraphExec_t graph_exec;
	int graph_in;           /* input kind the graph was captured with, -1 none */
};

/* cuda_backend.c: reserve bytes of the arena for *slot (set when it is allocated) */
int dlc_plan(struct dl_backend *b, void **slot, size_t bytes);
/* cuda_conv.c */
int dlc_conv_setup(struct dl_backend *b, int node);
int dlc_conv_fwd(struct dl_backend *b, int node);
int dlc_conv_bwd(struct dl_backend *b, int node);
void dlc_conv_free(struct dlc_conv *c);
/* cuda_fc.c */
int dlc_fc_fwd(struct dl_backend *b, int node);
int dlc_fc_bwd(struct dl_backend *b, int node);
/* cuda_exec.c */
int dlc_input(struct dl_backend *b, enum dl_cuda_input in);
int dlc_forward(struct dl_backend *b, int train);
int dlc_backward(struct dl_backend *b, int allreduce);
int dlc_refresh_work(struct dl_backend *b);

#endif
