#include "config.h"

/* The device-resident training step: input H2D from pinned buffers, forward,
 * loss, backward with bucketed NCCL allreduce, fused SGD, loss D2H, all
 * enqueued without a host sync; optionally captured once as a CUDA graph and
 * replayed (kernel arguments are fixed at capture, so everything that changes
 * per step -- lr, images, labels -- is read from memory the graph copies). */
#include <string.h>

#include "engine/cuda/cuda_internal.h"
#include "engine/cuda/nccl_comm.h"

float *dl_cuda_input_f32(struct dl_backend *b)
{
	return b->h_x;
}

uint8_t *dl_cuda_input_u8(struct dl_backend *b)
{
	return b->h_u8;
}

uint8_t *dl_cuda_input_flip(struct dl_backend *b)
{
	return b->h_flip;
}

int *dl_cuda_labels(struct dl_backend *b)
{
	return b->h_labels;
}

int dl_cuda_set_normalize(struct dl_backend *b, const float *mean, const float *std, int c)
{
	if (c != b->img_c) {
		dlc_failf(b, "cuda backend: normalization for %d channels but the image has %d", c, b->img_c);
		return -1;
	}
	if (c > DLC_MAX_IMG_C) {
		dlc_failf(b, "cuda backend: uint8 input has %d channels, at most %d are supported", c, DLC_MAX_IMG_C);
		return -1;
	}
	for (int i = 0; i < c; i++) {
		if (!(std[i] > 0.0f)) {
			dlc_failf(b, "cuda backend: normalization std[%d] = %g is not positive", i, (double)std[i]);
			return -1;
		}
		b->norm.mean[i] = mean[i];
		b->norm.inv_std[i] = 1.0f / std[i];
	}
	/* the normalization is a kernel argument: a captured graph is stale */
	if (b->graph_exec) {
		cudaGraphExecDestroy(b->graph_exec);
		cudaGraphDestroy(b->graph);
		b->graph_exec = NULL;
		b->graph = NULL;
		b->graph_in = -1;
	}
	return 0;
}

static int drop_graph(struct dl_backend *b)
{
	if (b->graph_exec)
		CK_CUDA(b, cudaGraphExecDestroy(b->graph_exec));
	if (b->graph)
		CK_CUDA(b, cudaGraphDestroy(b->graph));
	b->graph_exec = NULL;
	b->graph = NULL;
	b->graph_in = -1;
	return 0;
}

int dl_cuda_set_sgd(struct dl_backend *b, const struct dl_cuda_sgd *s)
{
	const struct dl_graph *g = b->g;
	if (b->step_pending) {
		dlc_failf(b, "cuda backend: set_sgd while a step is in flight");
		return -1;
	}
	b->sgd = *s;
	for (int i = 0; i < g->n_params; i++)
		b->h_tensors[i].wd = g->params[i].no_decay && !s->decay_bn_and_bias ? 0.0f : s->weight_decay;
	CK_CUDA(b, cudaMemcpyAsync(b->d_tensors, b->h_tensors, (size_t)g->n_params * sizeof(struct dlc_ptensor),
				   cudaMemcpyHostToDevice, b->s));
	CK_CUDA(b, cudaStreamSynchronize(b->s)); /* h_tensors is pageable: keep it stable until copied */
	b->have_sgd = 1;
	return drop_graph(b);
}

static int logits_k(struct dl_backend *b)
{
	const struct dl_graph *g = b->g;
	const struct dl_shape *o = &g->values[g->output];
	if (o->h != 1 || o->w != 1) {
		dlc_failf(b, "cuda backend: the fast path needs (K,1,1) logits, the graph output is (%d,%d,%d)", o->c,
			  o->h, o->w);
		return -1;
	}
	return o->c;
}

/* The loss kernel trusts labels: check them on the host, every step (a
 * replayed graph reads whatever the pinned buffer holds). */
static int check_labels(struct dl_backend *b)
{
	int k = logits_k(b);
	if (k < 0)
		return -1;
	for (int i = 0; i < b->n; i++)
		if (b->h_labels[i] < 0 || b->h_labels[i] >= k) {
			dlc_failf(b, "cuda backend: label %d of sample %d is not in [0,%d)", b->h_labels[i], i, k);
			return -1;
		}
	return 0;
}

/* Everything one training step enqueues on b->s (and b->cs for NCCL). */
static int enqueue_train(struct dl_backend *b, enum dl_cuda_input in)
{
	int k = logits_k(b);
	if (k < 0)
		return -1;
	int world = b->opt.nccl ? dl_nccl_size(b->opt.nccl) : 1;
	CK_CUDA(b, cudaMemcpyAsync(b->d_lr, b->h_lr, sizeof(float), cudaMemcpyHostToDevice, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->d_labels, b->h_labels, (size_t)b->n * sizeof(int), cudaMemcpyHostToDevice, b->s));
	if (dlc_input(b, in) || dlc_forward(b, 1))
		return -1;
	CK_CUDA(b, dlc_xent(b->d_logits, b->d_labels, b->n, k, b->sgd.label_smoothing, b->loss_scale, b->d_dlogits,
			    b->d_loss, b->d_correct, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->h_loss, b->d_loss, (size_t)b->n * sizeof(float), cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->h_correct, b->d_correct, (size_t)b->n * sizeof(int), cudaMemcpyDeviceToHost,
				   b->s));
	if (dlc_backward(b, b->opt.nccl != NULL))
		return -1;
	if (b->opt.nccl && b->n_bk > 0) {
		/* the optimizer needs every bucket summed */
		CK_CUDA(b, cudaEventRecord(b->ev_comm, b->cs));
		CK_CUDA(b, cudaStreamWaitEvent(b->s, b->ev_comm, 0));
	}
	/* mean over ranks and undo the loss scale in the same multiply */
	CK_CUDA(b, dlc_sgd(b->d_tensors, b->d_chunks, b->n_chunks, b->w, b->gr, b->mom, b->d_lr, b->sgd.momentum,
			   1.0f / (b->loss_scale * (float)world), b->sgd.nesterov, 1, b->dt, b->s));
	return 0;
}

static int capture(struct dl_backend *b, enum dl_cuda_input in)
{
	if (drop_graph(b))
		return -1;
	CK_CUDA(b, cudaStreamBeginCapture(b->s, cudaStreamCaptureModeThreadLocal));
	int rv = enqueue_train(b, in);
	cudaGraph_t graph = NULL;
	cudaError_t e = cudaStreamEndCapture(b->s, &graph);
	if (rv)
		goto fail;
	if (e != cudaSuccess) {
		dlc_fail(b, __FILE__, __LINE__, "cudaStreamEndCapture", cudaGetErrorString(e));
		goto fail;
	}
	b->graph = graph;
	CK_CUDA(b, cudaGraphInstantiate(&b->graph_exec, b->graph, 0));
	b->graph_in = (int)in;
	return 0;
fail:
	if (graph)
		cudaGraphDestroy(graph);
	return -1;
}

int dl_cuda_train_step(struct dl_backend *b, enum dl_cuda_input in, float lr)
{
	if (b->step_pending) {
		dlc_failf(b, "cuda backend: train_step before the previous step's result was collected");
		return -1;
	}
	if (!b->have_sgd) {
		dlc_failf(b, "cuda backend: train_step before dl_cuda_set_sgd");
		return -1;
	}
	if (check_labels(b))
		return -1;
	if (in == DL_CUDA_INPUT_RESIDENT && b->steps == 0) {
		dlc_failf(b, "cuda backend: a resident input needs an earlier F32 step");
		return -1;
	}
	*b->h_lr = lr;
	CK_CUDA(b, cudaEventRecord(b->ev_start, b->s));
	/* the first step runs eagerly: cuDNN/cuBLAS finish their lazy setup outside the capture */
	if (b->opt.cuda_graphs && b->steps >= 1) {
		if (b->graph_in != (int)in && capture(b, in))
			return -1;
		CK_CUDA(b, cudaGraphLaunch(b->graph_exec, b->s));
	} else if (enqueue_train(b, in)) {
		return -1;
	}
	CK_CUDA(b, cudaEventRecord(b->ev_done, b->s));
	b->step_pending = 1;
	b->steps++;
	b->g->bn_batches_tracked++;
	return 0;
}

int dl_cuda_eval_step(struct dl_backend *b, enum dl_cuda_input in)
{
	if (b->step_pending) {
		dlc_failf(b, "cuda backend: eval_step before the previous step's result was collected");
		return -1;
	}
	int k = logits_k(b);
	if (k < 0 || check_labels(b))
		return -1;
	CK_CUDA(b, cudaEventRecord(b->ev_start, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->d_labels, b->h_labels, (size_t)b->n * sizeof(int), cudaMemcpyHostToDevice, b->s));
	if (dlc_input(b, in) || dlc_forward(b, 0))
		return -1;
	CK_CUDA(b, dlc_xent(b->d_logits, b->d_labels, b->n, k, 0.0f, 1.0f, NULL, b->d_loss, b->d_correct, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->h_loss, b->d_loss, (size_t)b->n * sizeof(float), cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->h_correct, b->d_correct, (size_t)b->n * sizeof(int), cudaMemcpyDeviceToHost,
				   b->s));
	CK_CUDA(b, cudaEventRecord(b->ev_done, b->s));
	b->step_pending = 2;
	return 0;
}

double dl_cuda_last_step_ms(struct dl_backend *b)
{
	return b->last_ms;
}

int dl_cuda_step_result(struct dl_backend *b, double *loss, int *correct)
{
	if (!b->step_pending) {
		dlc_failf(b, "cuda backend: step_result without a step in flight");
		return -1;
	}
	b->step_pending = 0;
	if (b->opt.nccl) {
		if (dl_nccl_wait_event(b->opt.nccl, b->ev_done, b->err, sizeof b->err))
			return -1;
	} else {
		CK_CUDA(b, cudaEventSynchronize(b->ev_done));
	}
	float ms = 0.0f;
	CK_CUDA(b, cudaEventElapsedTime(&ms, b->ev_start, b->ev_done));
	b->last_ms = ms;
	double sum = 0.0;
	int ok = 0;
	for (int i = 0; i < b->n; i++) {
		sum += b->h_loss[i];
		ok += b->h_correct[i];
	}
	if (loss)
		*loss = sum / b->n;
	if (correct)
		*correct = ok;
	return 0;
}
