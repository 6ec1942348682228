/* Internals of the CUDA backend shared by its C files: the backend struct,
 * the per-node runtime state and the error macros. */
#ifndef DLJOB_ENGINE_CUDA_CUDA_INTERNAL_H
#define DLJOB_ENGINE_CUDA_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/cuda/cuda_arena.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_plan.h"
#include "engine/cuda/cuda_test.h"
#include "engine/cuda/nccl_comm.h"

/* Most cuDNN workspace one convolution may use: an eighth of the device
 * memory free at create(), at least WORKSPACE_MIN and at most WORKSPACE_MAX
 * (b->ws_limit).  One workspace serves every convolution.  A fixed 1 GiB
 * was too small for fp32 at large batches: cuDNN's fast backward
 * algorithms for resnet50's widest 1x1 convolutions need more, and the
 * ones that fit took much of the step (tests/bench/RESULTS.md, "fp32 and
 * fp16 beside PyTorch, and the cuDNN workspace limit"). */
#define WORKSPACE_MIN ((size_t)1 << 30)
#define WORKSPACE_MAX ((size_t)8 << 30)

/* Record "file:line: call: reason" in b->err; the caller returns -1. */
void dlc_fail(struct dl_backend *b, const char *file, int line, const char *call, const char *why);

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

/* The three directions of a convolution (index of dlc_conv.cd and .math). */
enum dlc_dir { DLC_FWD = 0, DLC_BWD_DATA = 1, DLC_BWD_FILTER = 2, DLC_NDIR = 3 };

struct dlc_conv {
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	/* one convolution descriptor per direction, same geometry: each carries
	 * the math type its direction's algorithm was chosen with, which its
	 * workspace query and its call then use */
	cudnnConvolutionDescriptor_t cd[DLC_NDIR];
	cudnnMathType_t math[DLC_NDIR];
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	int has_dx;     /* backward data runs (the input is not the image) */
	int ip;         /* input channels as stored (>= graph's) */
	void *dw;       /* weight gradient (Co,kh,kw,ip) in the working dtype */
};

/* Chosen per shape: each algorithm with the mathType of the cudnnFind/Get
 * entry it came from. */
struct dlc_algo {
	int key[10];            /* n, ip, h, w, co, k, stride, pad, ho, wo */
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	cudnnMathType_t math[DLC_NDIR];
	int have_bwd_data;
};

struct dlc_node {
	struct dlc_conv conv;
	float *mean, *invstd;   /* BN: batch statistics saved for backward */
	uint8_t *arg;           /* MAXPOOL: winner index per output */
	void *dl_work;          /* FC: dlogits in the working dtype (N,K) */
	int apply_by;           /* BN: the ADD node that applies its normalization in training
				   (dlc_plan_bn_add), or -1: it writes its own output */
	int bn_in[2];           /* ADD: the BN node whose normalization it applies to input k, or -1 */
	int *ready;             /* buckets to reduce once this node's backward has run */
	int n_ready;
};

struct dl_backend {
	struct dl_graph *g;
	int n;
	struct dl_backend_opts opt;
	struct dl_cuda_test_opts test;
	char device_name[64];   /* opt.device as given (opt.device points here) */
	int device;             /* CUDA device index */
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
	int warned_find;        /* cudnnFind failed once: heuristics from then on */

	/* the arena: one cudaMalloc, carved by the lifetime plan (cuda_arena.h) */
	void *arena;
	size_t arena_bytes, device_bytes;
	struct dl_mp mp;
	struct dlc_algo *algos; /* chosen cuDNN algorithms by shape, so equal convs search once */
	int n_algos;

	struct dlc_value *val;
	struct dlc_node *node;

	/* parameters: flat fp32 arrays (cuda_plan.h), tensor i at p_off[i] */
	int *writer;
	size_t *p_off, n_flat;
	float *w, *gr, *mom;    /* masters, gradients (slots first), momentum */
	size_t *b_off, n_bflat;
	float *bufs;            /* BN running buffers */
	struct dlc_ptensor *h_tensors, *d_tensors;
	struct dlc_chunk *h_chunks, *d_chunks;
	int n_chunks;
	struct dlc_part *part;  /* per chunk */
	float *trust;           /* per tensor */
	struct dlc_ctl *d_ctl, *h_ctl;       /* per-step values (h_ctl pinned) */
	struct dlc_optdev *d_opt, *h_opt;    /* device optimizer state, its pinned copy after a step */

	void *ws;               /* cuDNN workspace */
	size_t ws_bytes;
	size_t ws_limit; /* most workspace one convolution may use (WORKSPACE_MIN..MAX) */
	void *blas_ws;
	size_t blas_ws_bytes;
	float *bn_part;         /* BN reduction partials */

	/* edges */
	float *d_x;             /* (N,C,H,W) fp32 */
	uint8_t *d_u8;          /* (N,H,W,C) uint8 */
	float *d_norm, *h_norm; /* C means then C inverse stds (h_norm pinned) */
	int *d_labels, *h_labels; /* (N); h_labels pinned */
	float *d_logits, *d_dlogits; /* (N,K) fp32 */
	float *d_loss, *h_loss; /* (N) per-sample loss; h_loss pinned */
	int *d_top, *h_top;     /* (N) top-1/top-5 bits */
	float *d_flag, *h_flag; /* one float for the ranks' agreement on the graph (h_flag pinned) */
	size_t x_count, out_count; /* per batch */
	int img_c, k;

	/* reduction across ranks */
	struct dl_nccl *nccl;   /* NULL: one rank, nothing reduced */
	float world;
	struct dlc_bucket *bk;
	int n_bk;
	cudaEvent_t *ev_bk;     /* one per bucket: its gradients are complete on s */
	cudaEvent_t ev_join;    /* all reductions done on cs */
	/* timing (CUDA events with timing) */
	cudaEvent_t ev_start, ev_bwd_end, ev_comm_start, ev_comm_end, ev_done;
	int have_events;
	double last_ms;

	/* CUDA graph of the device part of a train step, per input kind */
	cudaGraph_t graph;
	cudaGraphExec_t graph_exec;
	int graph_in;           /* input kind it was captured with, -1 none */
	int graph_off;          /* capture failed once (warned) or disabled: eager from then on */
	int capturing;
	int last_graph;         /* the last train step replayed the graph */

	long steps;             /* optimizer steps applied */
	long steps_run;         /* train steps run (applied or not) */
	int64_t bn_tracked;     /* num_batches_tracked */
	int have_step;          /* a train step ran (last_step_out) */
	int resident;           /* bench: F32 steps reuse d_x */

	/* test hook profile (cuda_prof.c): events at every boundary of an eager step */
	cudaEvent_t *pev;
	double *pms;            /* ms between mark k and k+1, summed over prof_steps */
	int n_pev, prof_marked, prof_steps;
};

enum dlc_input { DLC_IN_F32 = 0, DLC_IN_U8 = 1 };

/* Make b's device current on this thread. */
int dlc_use_device(struct dl_backend *b);
/* Drop an error an earlier runtime call left on this thread (cuda_err.c). */
void dlc_clear_stale_error(void);
/* cuda_prof.c (test hook profile; no-ops without it) */
int dlc_prof_init(struct dl_backend *b);
int dlc_prof_mark(struct dl_backend *b, int k);
void dlc_prof_collect(struct dl_backend *b);
void dlc_prof_free(struct dl_backend *b);
/* cuda_conv.c */
int dlc_conv_setup(struct dl_backend *b, int node);
int dlc_conv_fwd(struct dl_backend *b, int node);
int dlc_conv_bwd(struct dl_backend *b, int node);
void dlc_conv_free(struct dlc_conv *c);
/* cuda_fc.c */
int dlc_fc_fwd(struct dl_backend *b, int node);
int dlc_fc_bwd(struct dl_backend *b, int node);
/* cuda_exec.c: the device input value from d_x / d_u8, forward, and
 * backward with the bucket reductions launched as their gradients complete */
int dlc_input(struct dl_backend *b, enum dlc_input in);
int dlc_forward(struct dl_backend *b, int train);
int dlc_backward(struct dl_backend *b);
/* Event record that also works inside a stream capture (as an event node). */
int dlc_record(struct dl_backend *b, cudaEvent_t ev, cudaStream_t st);
/* cuda_step.c */
int dlc_train_step(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
		   struct dl_step_result *res);
int dlc_eval_step(struct dl_backend *b, const struct dl_batch *in, int n_valid, int *pred, struct dl_eval_result *res);
int dlc_last_step_out(struct dl_backend *b, float *logits);

#endif
