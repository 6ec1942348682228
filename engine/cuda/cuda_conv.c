#include "config.h"

/* Convolutions through cuDNN's legacy API, NHWC tensors and KRSC filters in
 * the working dtype with fp32 accumulation.  Algorithms are chosen once per
 * shape at create() (timed with cudnnFind*; by heuristics if that fails) and
 * cached, each with the math type it was found with, which the convolution
 * descriptor of its direction carries from then on (set at create() only:
 * nothing changes a descriptor while a step is captured).  The cuDNN graph
 * API (runtime fusion of conv+BN stats) is future work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_internal.h"

void dlc_conv_free(struct dlc_conv *c)
{
	if (c->xd)
		cudnnDestroyTensorDescriptor(c->xd);
	if (c->yd)
		cudnnDestroyTensorDescriptor(c->yd);
	if (c->wd)
		cudnnDestroyFilterDescriptor(c->wd);
	for (int d = 0; d < DLC_NDIR; d++)
		if (c->cd[d])
			cudnnDestroyConvolutionDescriptor(c->cd[d]);
	memset(c, 0, sizeof *c);
}

/* Math types.  cudnnFind and cudnnGet_v7 search what the descriptor's math
 * type permits and report, per entry, the mathType the algorithm was timed
 * (or rated) with; the caller must set that mathType on the descriptor for
 * the workspace query and the call, else cuDNN may run that algorithm's
 * other, slower kernel (torch: Note [behavior of cudnnFind and cudnnGet],
 * aten/src/ATen/native/cudnn/Conv_v7.cpp, sets perf.mathType before every
 * call).  So the search starts from search_math() and each direction then
 * runs with its own descriptor set to its entry's mathType.
 *
 * fp32 must not silently run in TF32: since cuDNN 8, CUDNN_DEFAULT_MATH
 * permits TF32 tensor cores on Ampere and later, only CUDNN_FMA_MATH rules
 * them out.  With the FMA descriptor Find and Get report FMA for every fp32
 * entry (torch asserts exactly that: ASSERT_CORRECT_PRECISION in
 * Conv_v7.cpp); math_ok() refuses anything else all the same.  bf16/fp16
 * take tensor op, default or FMA entries, never ..._ALLOW_CONVERSION (the
 * search does not permit it; it would down-convert tensors). */
static cudnnMathType_t search_math(const struct dl_backend *b)
{
	return b->dt == DLC_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

static int math_ok(const struct dl_backend *b, cudnnMathType_t m)
{
	if (b->dt == DLC_F32)
		return m == CUDNN_FMA_MATH;
	return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_DEFAULT_MATH || m == CUDNN_FMA_MATH;
}

/* cudnnFind (timed) unless the test hooks ask for heuristics; when Find
 * fails (it allocates and runs every candidate, which can fail on a busy
 * or small GPU) warn once and use cuDNN's heuristics for every
 * convolution from then on. */
static int use_find(struct dl_backend *b)
{
	return !b->test.heuristic && !b->warned_find;
}

/* cudnnFind allocates and runs every candidate algorithm: Find itself, or a
 * candidate it skipped, can run out of device memory and so leave
 * cudaErrorMemoryAllocation as the CUDA runtime's last error on this
 * thread.  That error is not sticky, but every kernel launcher returns
 * cudaGetLastError(), so the first launch after create() would report it
 * as its own failure (and the heuristic fallback below would never run a
 * step).  Clear it after every Find. */
static cudnnStatus_t after_find(cudnnStatus_t st)
{
	(void)cudaGetLastError();
	return st;
}

/* Test hook (fail_find): fail as a Find that ran out of memory does,
 * including the runtime error a failed cudaMalloc leaves behind. */
static cudnnStatus_t fake_failed_find(void)
{
	void *p = NULL;
	if (cudaMalloc(&p, (size_t)1 << 62) == cudaSuccess)
		cudaFree(p);
	return CUDNN_STATUS_INTERNAL_ERROR;
}

static void find_failed(struct dl_backend *b, const char *what, cudnnStatus_t st)
{
	if (!b->warned_find)
		fprintf(stderr, "dljob: cuda backend: %s failed (%s); choosing convolution algorithms by cuDNN's heuristics\n",
			what, b->test.fail_find ? "test: made to fail" : cudnnGetErrorString(st));
	b->warned_find = 1;
}

/* Test hook gemm_only: the direct GEMM-type algorithms alone (forward
 * IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM; backward ALGO_0, ALGO_1 and
 * filter ALGO_3), whose fp32 error is that of plain dot products, so an
 * error the test sees with them is the backend's own, not the larger one
 * of Winograd or FFT algorithms that Find may choose. */
static int gemm_algo(enum dlc_dir dir, int algo)
{
	switch (dir) {
	case DLC_FWD:
		return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
		       algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
	case DLC_BWD_DATA:
		return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
	default:
		return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
		       algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
	}
}

/* Whether a perf entry may be chosen: it succeeded, fits the workspace
 * limit, has an allowed math type (and, with the gemm_only hook, is a GEMM
 * algorithm; with the deterministic hook, a deterministic one).  Pass 0
 * (test hook other_math only) takes only entries whose math type differs
 * from the search's, pass 1 only entries of the search's math type, pass 2
 * any.  So bf16/fp16 take the fastest tensor-op algorithm wherever cuDNN
 * has one: cudnnFind's timings are noisy, and a default-math algorithm it
 * ranks first now and then makes the whole step slower (tests/bench/
 * RESULTS.md, "Batch norm at the memory bandwidth, ..."). */
static int usable(const struct dl_backend *b, enum dlc_dir dir, int algo, cudnnStatus_t st, size_t memory,
		  cudnnMathType_t m, cudnnDeterminism_t det, int pass)
{
	return st == CUDNN_STATUS_SUCCESS && memory <= b->ws_limit && math_ok(b, m) &&
	       (pass == 0 ? m != search_math(b) : pass == 1 ? m == search_math(b) : 1) &&
	       (!b->test.gemm_only || gemm_algo(dir, algo)) &&
	       (!b->test.deterministic || det == CUDNN_DETERMINISTIC);
}

/* The first usable entry of a perf list, pass by pass: its algorithm and math type. */
#define PICK(dir, perf, got, algo, math)                                                                   \
	do {                                                                                               \
		for (int p_ = b->test.other_math ? 0 : 1; p_ < 3; p_ += b->test.other_math ? 2 : 1)       \
			for (int i_ = 0; i_ < (got); i_++)                                                 \
				if (usable(b, (dir), (int)(perf)[i_].algo, (perf)[i_].status, (perf)[i_].memory, \
					   (perf)[i_].mathType, (perf)[i_].determinism, p_)) {       \
					*(algo) = (perf)[i_].algo;                                         \
					*(math) = (perf)[i_].mathType;                                     \
					return 0;                                                          \
				}                                                                          \
	} while (0)

/* Each choose_* searches on its direction's descriptor, still at search_math(). */
static int choose_fwd(struct dl_backend *b, struct dlc_conv *c, cudnnConvolutionFwdAlgo_t *algo,
		      cudnnMathType_t *math)
{
	cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	int got = 0;
	if (use_find(b)) {
		cudnnStatus_t st = after_find(b->test.fail_find ? fake_failed_find()
			: cudnnFindConvolutionForwardAlgorithm(b->cudnn, c->xd, c->wd, c->cd[DLC_FWD], c->yd,
							       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
		if (st == CUDNN_STATUS_SUCCESS)
			PICK(DLC_FWD, perf, got, algo, math);
		else
			find_failed(b, "cudnnFindConvolutionForwardAlgorithm", st);
	}
	CK_CUDNN(b, cudnnGetConvolutionForwardAlgorithm_v7(b->cudnn, c->xd, c->wd, c->cd[DLC_FWD], c->yd,
							   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
	PICK(DLC_FWD, perf, got, algo, math);
	dl_errf(b->err, sizeof b->err,
		"cuda backend: cuDNN has no forward algorithm for this convolution within %zu bytes of workspace",
		b->ws_limit);
	return -1;
}

static int choose_bwd_data(struct dl_backend *b, struct dlc_conv *c, cudnnConvolutionBwdDataAlgo_t *algo,
			   cudnnMathType_t *math)
{
	cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	int got = 0;
	if (use_find(b)) {
		cudnnStatus_t st = after_find(b->test.fail_find ? fake_failed_find()
			: cudnnFindConvolutionBackwardDataAlgorithm(b->cudnn, c->wd, c->yd, c->cd[DLC_BWD_DATA], c->xd,
								    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
		if (st == CUDNN_STATUS_SUCCESS)
			PICK(DLC_BWD_DATA, perf, got, algo, math);
		else
			find_failed(b, "cudnnFindConvolutionBackwardDataAlgorithm", st);
	}
	CK_CUDNN(b, cudnnGetConvolutionBackwardDataAlgorithm_v7(b->cudnn, c->wd, c->yd, c->cd[DLC_BWD_DATA], c->xd,
								CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
	PICK(DLC_BWD_DATA, perf, got, algo, math);
	dl_errf(b->err, sizeof b->err,
		"cuda backend: cuDNN has no backward-data algorithm for this convolution within %zu bytes of workspace",
		b->ws_limit);
	return -1;
}

static int choose_bwd_filter(struct dl_backend *b, struct dlc_conv *c, cudnnConvolutionBwdFilterAlgo_t *algo,
			     cudnnMathType_t *math)
{
	cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	int got = 0;
	if (use_find(b)) {
		cudnnStatus_t st = after_find(b->test.fail_find ? fake_failed_find()
			: cudnnFindConvolutionBackwardFilterAlgorithm(b->cudnn, c->xd, c->yd, c->cd[DLC_BWD_FILTER], c->wd,
								      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
		if (st == CUDNN_STATUS_SUCCESS)
			PICK(DLC_BWD_FILTER, perf, got, algo, math);
		else
			find_failed(b, "cudnnFindConvolutionBackwardFilterAlgorithm", st);
	}
	CK_CUDNN(b, cudnnGetConvolutionBackwardFilterAlgorithm_v7(b->cudnn, c->xd, c->yd, c->cd[DLC_BWD_FILTER], c->wd,
								  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
	PICK(DLC_BWD_FILTER, perf, got, algo, math);
	dl_errf(b->err, sizeof b->err,
		"cuda backend: cuDNN has no backward-filter algorithm for this convolution within %zu bytes of workspace",
		b->ws_limit);
	return -1;
}

/* Descriptors, algorithms and the arena space (dw, workspace) of conv node i. */
int dlc_conv_setup(struct dl_backend *b, int i)
{
	const struct dl_node *d = &b->g->nodes[i];
	struct dlc_conv *c = &b->node[i].conv;
	const struct dlc_value *x = &b->val[d->in[0]], *y = &b->val[d->out];
	const struct dl_tensor_f32 *wt = &b->g->params[d->param[0]];
	int k = d->kernel;
	if (wt->ndim != 4 || wt->dims[0] != y->c || wt->dims[1] != x->c || wt->dims[2] != k || wt->dims[3] != k) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: conv node %d: weight %s is not (%d,%d,%d,%d)", i, wt->name, y->c, x->c, k, k);
		return -1;
	}
	c->ip = x->cp;
	CK_CUDNN(b, cudnnCreateTensorDescriptor(&c->xd));
	CK_CUDNN(b, cudnnCreateTensorDescriptor(&c->yd));
	CK_CUDNN(b, cudnnCreateFilterDescriptor(&c->wd));
	CK_CUDNN(b, cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NHWC, b->cudnn_dt, b->n, x->cp, x->h, x->w));
	CK_CUDNN(b, cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NHWC, b->cudnn_dt, b->n, y->cp, y->h, y->w));
	CK_CUDNN(b, cudnnSetFilter4dDescriptor(c->wd, b->cudnn_dt, CUDNN_TENSOR_NHWC, y->c, c->ip, k, k));
	/* one descriptor per direction, all at search_math() until the algorithms are chosen */
	for (int dir = 0; dir < DLC_NDIR; dir++) {
		CK_CUDNN(b, cudnnCreateConvolutionDescriptor(&c->cd[dir]));
		CK_CUDNN(b, cudnnSetConvolution2dDescriptor(c->cd[dir], d->pad, d->pad, d->stride, d->stride, 1, 1,
							    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
		CK_CUDNN(b, cudnnSetConvolutionMathType(c->cd[dir], search_math(b)));
	}
	int on, oc, oh, ow;
	CK_CUDNN(b, cudnnGetConvolution2dForwardOutputDim(c->cd[DLC_FWD], c->xd, c->wd, &on, &oc, &oh, &ow));
	if (on != b->n || oc != y->c || oh != y->h || ow != y->w) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: conv node %d: cuDNN output (%d,%d,%d,%d) but the graph says (%d,%d,%d,%d)",
			i, on, oc, oh, ow, b->n, y->c, y->h, y->w);
		return -1;
	}
	int need_dx = d->in[0] != b->g->input; /* no gradient for the image */
	int key[10] = { b->n, c->ip, x->h, x->w, y->c, k, d->stride, d->pad, y->h, y->w };
	struct dlc_algo *a = NULL;
	for (int j = 0; j < b->n_algos; j++)
		if (memcmp(b->algos[j].key, key, sizeof key) == 0 && (b->algos[j].have_bwd_data || !need_dx))
			a = &b->algos[j];
	if (!a) {
		a = &b->algos[b->n_algos];
		memset(a, 0, sizeof *a);
		memcpy(a->key, key, sizeof key);
		if (choose_fwd(b, c, &a->fwd, &a->math[DLC_FWD]) ||
		    choose_bwd_filter(b, c, &a->bwd_filter, &a->math[DLC_BWD_FILTER]))
			return -1;
		if (need_dx) {
			if (choose_bwd_data(b, c, &a->bwd_data, &a->math[DLC_BWD_DATA]))
				return -1;
			a->have_bwd_data = 1;
		}
		b->n_algos++;
	}
	c->fwd = a->fwd;
	c->bwd_filter = a->bwd_filter;
	c->bwd_data = a->bwd_data;
	c->has_dx = need_dx;
	/* each direction's descriptor from now on carries its algorithm's math
	 * type: the workspace queries below and every call (also inside a graph
	 * capture, where the descriptor is only read) run with it */
	for (int dir = 0; dir < DLC_NDIR; dir++) {
		if (dir == DLC_BWD_DATA && !need_dx)
			continue;
		c->math[dir] = a->math[dir];
		CK_CUDNN(b, cudnnSetConvolutionMathType(c->cd[dir], c->math[dir]));
	}
	size_t ws = 0, t;
	CK_CUDNN(b, cudnnGetConvolutionForwardWorkspaceSize(b->cudnn, c->xd, c->wd, c->cd[DLC_FWD], c->yd, c->fwd,
							    &t));
	ws = t > ws ? t : ws;
	CK_CUDNN(b, cudnnGetConvolutionBackwardFilterWorkspaceSize(b->cudnn, c->xd, c->yd, c->cd[DLC_BWD_FILTER], c->wd,
								   c->bwd_filter, &t));
	ws = t > ws ? t : ws;
	if (need_dx) {
		CK_CUDNN(b, cudnnGetConvolutionBackwardDataWorkspaceSize(b->cudnn, c->wd, c->yd, c->cd[DLC_BWD_DATA], c->xd,
									 c->bwd_data, &t));
		ws = t > ws ? t : ws;
	}
	if (ws > b->ws_bytes)
		b->ws_bytes = ws;
	return 0; /* c->dw: in the arena plan (cuda_arena.c) */
}

int dlc_conv_fwd(struct dl_backend *b, int i)
{
	const struct dl_node *d = &b->g->nodes[i];
	struct dlc_conv *c = &b->node[i].conv;
	const float one = 1.0f, zero = 0.0f;
	CK_CUDNN(b, cudnnConvolutionForward(b->cudnn, &one, c->xd, b->val[d->in[0]].act, c->wd,
					    b->h_tensors[d->param[0]].work, c->cd[DLC_FWD], c->fwd, b->ws, b->ws_bytes,
					    &zero, c->yd, b->val[d->out].act));
	return 0;
}

/* dW into the flat fp32 grad (OIHW); dX added to the input's gradient. */
int dlc_conv_bwd(struct dl_backend *b, int i)
{
	const struct dl_node *d = &b->g->nodes[i];
	struct dlc_conv *c = &b->node[i].conv;
	struct dlc_value *x = &b->val[d->in[0]], *y = &b->val[d->out];
	const struct dl_tensor_f32 *wt = &b->g->params[d->param[0]];
	const float one = 1.0f, zero = 0.0f;
	CK_CUDNN(b, cudnnConvolutionBackwardFilter(b->cudnn, &one, c->xd, x->act, c->yd, y->grad, c->cd[DLC_BWD_FILTER],
						   c->bwd_filter, b->ws, b->ws_bytes, &zero, c->wd, c->dw));
	CK_CUDA(b, dlc_krsc_to_oihw(c->dw, b->dt, b->gr + b->p_off[d->param[0]], wt->dims[0], wt->dims[1],
				    wt->dims[2], wt->dims[3], c->ip, b->s));
	if (x->grad) {
		CK_CUDNN(b, cudnnConvolutionBackwardData(b->cudnn, &one, c->wd, b->h_tensors[d->param[0]].work, c->yd,
							 y->grad, c->cd[DLC_BWD_DATA], c->bwd_data, b->ws, b->ws_bytes,
							 x->grad_set ? &one : &zero, c->xd, x->grad));
		x->grad_set = 1;
	}
	return 0;
}

int dl_cuda_conv_math(struct dl_backend *b, int node, int dir, int *set, int *chosen)
{
	if (!b || node < 0 || node >= b->g->n_nodes || b->g->nodes[node].kind != DL_NODE_CONV || dir < 0 ||
	    dir >= DLC_NDIR)
		return -1;
	const struct dlc_conv *c = &b->node[node].conv;
	cudnnMathType_t m;
	if (!c->cd[dir] || (dir == DLC_BWD_DATA && !c->has_dx) ||
	    cudnnGetConvolutionMathType(c->cd[dir], &m) != CUDNN_STATUS_SUCCESS)
		return -1;
	*set = (int)m;
	*chosen = (int)c->math[dir];
	return 0;
}
