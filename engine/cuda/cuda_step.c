#include "config.h"

/* One training step (dl_backend_ops.train_step) and one evaluation batch.
 *
 * Host <-> device per train step: the batch, its labels and a 16-byte
 * control block (lr, stop request) in; a 24-byte result (loss and stop
 * summed over ranks, the non-finite flag, the loss scale) out; one wait.
 * Everything between runs on the device: input conversion, forward, loss,
 * backward with the NCCL bucket reductions on their own stream, the finite
 * check, LARS and the update (enqueue_train).  That device part is captured
 * as a CUDA graph on the second step (the first, eager one lets cuDNN and
 * cuBLAS finish their lazy set-up) and replayed; its kernels read every
 * per-step value from device memory that the copies outside the graph fill.
 * If capture or instantiation fails, one warning and eager launches from
 * then on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cuda/cuda_internal.h"
#include "engine/loss.h"

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The loss kernel indexes by label: check them on the host. */
static int check_batch(struct dl_backend *b, const struct dl_batch *in, int rows)
{
	if (!in || !in->labels || !in->x == !in->x_u8) {
		dl_errf(b->err, sizeof b->err, "cuda backend: a batch needs labels and exactly one of x and x_u8");
		return -1;
	}
	for (int i = 0; i < rows; i++)
		if (in->labels[i] < 0 || in->labels[i] >= b->k) {
			dl_errf(b->err, sizeof b->err,
				"cuda backend: label %d of sample %d is not in [0,%d)", in->labels[i], i, b->k);
			return -1;
		}
	if (in->x_u8) {
		if (!in->mean || !in->std) {
			dl_errf(b->err, sizeof b->err, "cuda backend: a uint8 batch needs mean and std");
			return -1;
		}
		for (int c = 0; c < b->img_c; c++) {
			if (!(in->std[c] > 0.0f) || !isfinite(in->std[c]) || !isfinite(in->mean[c])) {
				dl_errf(b->err, sizeof b->err,
					"cuda backend: normalization std[%d] = %g, mean[%d] = %g: std must be positive and both finite",
					c, (double)in->std[c], c, (double)in->mean[c]);
				return -1;
			}
			b->h_norm[c] = in->mean[c];
			b->h_norm[b->img_c + c] = 1.0f / in->std[c];
		}
	}
	return 0;
}

/* Copy the batch (all n rows) and rows' labels (zero past `rows`) to the device. */
static int copy_batch(struct dl_backend *b, const struct dl_batch *in, int rows, int reuse_x)
{
	memcpy(b->h_labels, in->labels, (size_t)rows * sizeof(int));
	memset(b->h_labels + rows, 0, (size_t)(b->n - rows) * sizeof(int));
	CK_CUDA(b, cudaMemcpyAsync(b->d_labels, b->h_labels, (size_t)b->n * sizeof(int), cudaMemcpyHostToDevice, b->s));
	if (in->x) {
		if (!reuse_x)
			CK_CUDA(b, cudaMemcpyAsync(b->d_x, in->x, b->x_count * sizeof(float), cudaMemcpyHostToDevice, b->s));
	} else {
		CK_CUDA(b, cudaMemcpyAsync(b->d_norm, b->h_norm, 2 * (size_t)b->img_c * sizeof(float),
					   cudaMemcpyHostToDevice, b->s));
		CK_CUDA(b, cudaMemcpyAsync(b->d_u8, in->x_u8, b->x_count, cudaMemcpyHostToDevice, b->s));
	}
	return 0;
}

/* The device part of one train step, on b->s (and b->cs): capturable. */
static int enqueue_train(struct dl_backend *b, enum dlc_input kind)
{
	const struct dl_optim_config *oc = &b->opt.optim;
	if (dlc_prof_mark(b, 0) || dlc_input(b, kind) || dlc_forward(b, 1))
		return -1;
	CK_CUDA(b, dlc_xent(b->d_logits, b->d_labels, b->n, b->k, (float)b->opt.label_smoothing, &b->d_opt->scale,
			    b->d_dlogits, b->d_loss, b->d_top, b->s));
	/* this rank's mean loss and stop request into the slots that ride in the last bucket */
	CK_CUDA(b, dlc_loss_slots(b->d_loss, b->n, b->d_ctl, b->gr, b->s));
	if (dlc_backward(b))
		return -1;
	if (b->nccl) {
		/* the update needs every bucket summed */
		CK_CUDA(b, cudaEventRecord(b->ev_join, b->cs));
		CK_CUDA(b, cudaStreamWaitEvent(b->s, b->ev_join, 0));
	}
	CK_CUDA(b, dlc_grad_stats(b->d_tensors, b->d_chunks, b->n_chunks, b->w, b->gr, b->d_opt, b->world, b->part,
				  b->s));
	CK_CUDA(b, dlc_optim_finalize(b->d_tensors, b->g->n_params, b->part, b->n_chunks, b->gr, b->d_ctl, b->d_opt,
				      b->trust, b->world, (float)oc->lars_eta, b->dt == DLC_F16,
				      DL_FP16_GROWTH_INTERVAL, b->s));
	CK_CUDA(b, dlc_sgd(b->d_tensors, b->d_chunks, b->n_chunks, b->w, b->gr, b->mom, b->d_ctl, b->d_opt, b->trust,
			   (float)oc->momentum, oc->nesterov, b->dt, b->s));
	return dlc_prof_mark(b, 3 + 2 * b->g->n_nodes);
}

static void drop_graph(struct dl_backend *b)
{
	if (b->graph_exec)
		cudaGraphExecDestroy(b->graph_exec);
	if (b->graph)
		cudaGraphDestroy(b->graph);
	b->graph_exec = NULL;
	b->graph = NULL;
	b->graph_in = -1;
}

/* With several ranks, whether a step's NCCL calls are graph-captured must
 * be the same on every rank (NCCL's rule for captured collectives): the
 * ranks sum their "capture failed" flags once, eagerly on the NCCL stream,
 * and all fall back if any failed.  Returns the number of ranks whose
 * capture failed, or -1 on a communication error. */
static int agree_on_capture(struct dl_backend *b, int failed)
{
	if (!b->nccl || b->world <= 1.0f)
		return failed;
	*b->h_flag = failed ? 1.0f : 0.0f;
	CK_CUDA(b, cudaMemcpyAsync(b->d_flag, b->h_flag, sizeof(float), cudaMemcpyHostToDevice, b->cs));
	if (dl_nccl_allreduce_f32(b->nccl, b->d_flag, 1, b->cs, b->err, sizeof b->err))
		return -1;
	CK_CUDA(b, cudaMemcpyAsync(b->h_flag, b->d_flag, sizeof(float), cudaMemcpyDeviceToHost, b->cs));
	CK_CUDA(b, cudaEventRecord(b->ev_join, b->cs));
	if (dl_nccl_wait_event(b->nccl, b->ev_join, b->err, sizeof b->err))
		return -1;
	return (int)(*b->h_flag + 0.5f);
}

/* Capture enqueue_train(kind) into b->graph_exec.  0: captured; 1: capture
 * failed (here or on another rank), warned, eager from now on; -1: an
 * error no step can run after. */
static int capture(struct dl_backend *b, enum dlc_input kind)
{
	char why[sizeof b->err] = "";
	cudaGraph_t graph = NULL;
	int failed = 1;
	drop_graph(b);
	cudaError_t e = cudaStreamBeginCapture(b->s, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess) {
		snprintf(why, sizeof why, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
	} else {
		b->capturing = 1;
		int rv = b->test.fail_capture ? -1 : enqueue_train(b, kind);
		b->capturing = 0;
		if (rv)
			snprintf(why, sizeof why, "%s", b->test.fail_capture ? "test: capture made to fail" : b->err);
		e = cudaStreamEndCapture(b->s, &graph);
		if (!rv && e != cudaSuccess)
			snprintf(why, sizeof why, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
		if (!rv && e == cudaSuccess) {
			e = cudaGraphInstantiate(&b->graph_exec, graph, 0);
			if (e != cudaSuccess) {
				b->graph_exec = NULL;
				snprintf(why, sizeof why, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
			} else {
				b->graph = graph;
				graph = NULL;
				failed = 0;
			}
		}
	}
	if (graph)
		cudaGraphDestroy(graph);
	if (failed) {
		(void)cudaGetLastError(); /* capture errors are not sticky: clear them */
		enum cudaStreamCaptureStatus st_s = cudaStreamCaptureStatusNone, st_c = cudaStreamCaptureStatusNone;
		if (cudaStreamIsCapturing(b->s, &st_s) != cudaSuccess || cudaStreamIsCapturing(b->cs, &st_c) != cudaSuccess ||
		    st_s != cudaStreamCaptureStatusNone || st_c != cudaStreamCaptureStatusNone) {
			dl_errf(b->err, sizeof b->err,
				"cuda backend: CUDA graph capture failed (%s) and left a stream capturing", why);
			return -1;
		}
	}
	int n_failed = agree_on_capture(b, failed);
	if (n_failed < 0)
		return -1;
	if (n_failed == 0) {
		b->graph_in = (int)kind;
		return 0;
	}
	drop_graph(b);
	if (!failed)
		snprintf(why, sizeof why, "it failed on %d other rank%s", n_failed, n_failed == 1 ? "" : "s");
	fprintf(stderr, "dljob: cuda backend: CUDA graph capture failed (%s); launching every step eagerly\n", why);
	b->graph_off = 1;
	return 1;
}

/* Wait for ev_done: polling NCCL's error state (with its timeout) when
 * there are reductions, so a dead peer is an error, not a hang. */
static int wait_done(struct dl_backend *b)
{
	if (b->nccl)
		return dl_nccl_wait_event(b->nccl, b->ev_done, b->err, sizeof b->err);
	CK_CUDA(b, cudaEventSynchronize(b->ev_done));
	return 0;
}

static double elapsed_ms(cudaEvent_t a, cudaEvent_t z, int *ok)
{
	float ms = 0.0f;
	if (cudaEventElapsedTime(&ms, a, z) != cudaSuccess) {
		(void)cudaGetLastError();
		*ok = 0;
		return 0.0;
	}
	return (double)ms;
}

/* After a failed step: wait (boundedly) until the compute stream has
 * finished reading the caller's batch, which the caller is about to reuse
 * or free.  The error in b->err stands. */
static void drain(struct dl_backend *b)
{
	char keep[sizeof b->err];
	memcpy(keep, b->err, sizeof keep);
	if (cudaEventRecord(b->ev_done, b->s) == cudaSuccess) {
		double t_end = now_s() + 10.0;
		while (cudaEventQuery(b->ev_done) == cudaErrorNotReady && now_s() < t_end) {
			struct timespec t = { 0, 1000000 };
			nanosleep(&t, NULL);
		}
	}
	(void)cudaGetLastError();
	memcpy(b->err, keep, sizeof keep);
}

static int train_step(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
		      struct dl_step_result *res);

int dlc_train_step(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
		   struct dl_step_result *res)
{
	if (dlc_use_device(b) || check_batch(b, in, b->n))
		return -1;
	if (train_step(b, in, lr, stop_request, res)) {
		drain(b);
		return -1;
	}
	return 0;
}

static int train_step(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
		      struct dl_step_result *res)
{
	enum dlc_input kind = in->x ? DLC_IN_F32 : DLC_IN_U8;
	double t0 = now_s();
	b->h_ctl->lr = (float)lr;
	b->h_ctl->stop = stop_request ? 1.0f : 0.0f;
	b->h_ctl->first = b->steps == 0;
	CK_CUDA(b, cudaEventRecord(b->ev_start, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->d_ctl, b->h_ctl, sizeof *b->h_ctl, cudaMemcpyHostToDevice, b->s));
	if (copy_batch(b, in, b->n, b->resident && kind == DLC_IN_F32 && b->steps_run > 0))
		return -1;
	b->last_graph = 0;
	int eager = 1;
	if (!b->graph_off && b->steps_run >= 1) {
		int c = b->graph_in == (int)kind ? 0 : capture(b, kind);
		if (c < 0)
			return -1;
		if (c == 0) {
			CK_CUDA(b, cudaGraphLaunch(b->graph_exec, b->s));
			b->last_graph = 1;
			eager = 0;
		}
	}
	if (eager && enqueue_train(b, kind))
		return -1;
	CK_CUDA(b, cudaMemcpyAsync(b->h_opt, b->d_opt, sizeof *b->h_opt, cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaEventRecord(b->ev_done, b->s));
	b->steps_run++;
	b->have_step = 1;
	if (wait_done(b))
		return -1;
	CK_CUDA(b, cudaGetLastError());
	dlc_prof_collect(b);

	const struct dlc_optdev *o = b->h_opt;
	b->bn_tracked++;
	if (!o->bad)
		b->steps++;
	memset(res, 0, sizeof *res);
	res->loss = (double)o->loss_sum / b->world;
	res->stop = o->stop_sum > 0.0f;
	res->nonfinite = o->bad != 0;
	/* fp16 skips a step whose gradients overflowed and goes on; a bad lr is the trainer's to stop on */
	res->skipped = o->bad == DLC_BAD_GRAD && b->dt == DLC_F16;
	int ok = 1;
	double total = elapsed_ms(b->ev_start, b->ev_done, &ok);
	b->last_ms = total;
	if (b->nccl) {
		double bwd = elapsed_ms(b->ev_start, b->ev_bwd_end, &ok);
		double c0 = elapsed_ms(b->ev_start, b->ev_comm_start, &ok);
		double c1 = elapsed_ms(b->ev_start, b->ev_comm_end, &ok);
		double exposed = c1 > bwd ? c1 - bwd : 0.0;
		res->n_buckets = b->n_bk;
		if (ok) {
			res->comm_s = (c1 - c0) * 1e-3;
			res->exposed_comm_s = exposed * 1e-3;
			res->compute_s = (total - exposed) * 1e-3;
			/* on the host clock, taking the step's start as the GPU's */
			res->t_first_bucket_start = t0 + c0 * 1e-3;
			res->t_backward_end = t0 + bwd * 1e-3;
		}
	} else if (ok) {
		res->compute_s = total * 1e-3;
	}
	if (!ok) /* the events gave no times (should not happen): the host's view */
		res->compute_s = now_s() - t0;
	return 0;
}

int dlc_eval_step(struct dl_backend *b, const struct dl_batch *in, int n_valid, int *pred, struct dl_eval_result *res)
{
	if (n_valid < 0 || n_valid > b->n) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: eval batch of %d valid rows, the backend was made for %d", n_valid, b->n);
		return -1;
	}
	if (dlc_use_device(b) || check_batch(b, in, n_valid))
		return -1;
	memset(res, 0, sizeof *res);
	b->have_step = 0; /* the logits are no longer the last train step's */
	if (n_valid == 0)
		return 0;
	CK_CUDA(b, cudaEventRecord(b->ev_start, b->s));
	if (copy_batch(b, in, n_valid, 0) || dlc_input(b, in->x ? DLC_IN_F32 : DLC_IN_U8) || dlc_forward(b, 0)) {
		drain(b);
		return -1;
	}
	CK_CUDA(b, dlc_xent(b->d_logits, b->d_labels, b->n, b->k, 0.0f, NULL, NULL, b->d_loss, b->d_top, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->h_loss, b->d_loss, (size_t)n_valid * sizeof(float), cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->h_top, b->d_top, (size_t)n_valid * sizeof(int), cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaEventRecord(b->ev_done, b->s));
	CK_CUDA(b, cudaEventSynchronize(b->ev_done));
	CK_CUDA(b, cudaGetLastError());
	int ok = 1;
	b->last_ms = elapsed_ms(b->ev_start, b->ev_done, &ok);
	for (int i = 0; i < n_valid; i++) {
		res->loss_sum += b->h_loss[i];
		res->top1 += b->h_top[i] & 1;
		res->top5 += (b->h_top[i] >> 1) & 1;
	}
	if (pred) { /* dljob eval's confusion matrix: the logits to the host */
		float *lg = malloc((size_t)n_valid * (size_t)b->k * sizeof(float));
		if (!lg) {
			dl_errf(b->err, sizeof b->err, "cuda backend: out of memory for %d x %d logits", n_valid, b->k);
			return -1;
		}
		cudaError_t ce = cudaMemcpy(lg, b->d_logits, (size_t)n_valid * (size_t)b->k * sizeof(float),
					    cudaMemcpyDeviceToHost);
		if (ce != cudaSuccess) {
			free(lg);
			dl_errf(b->err, sizeof b->err, "cuda backend: copying the logits: %s", cudaGetErrorString(ce));
			return -1;
		}
		dl_argmax_rows(lg, n_valid, b->k, pred);
		free(lg);
	}
	return 0;
}

int dlc_last_step_out(struct dl_backend *b, float *logits)
{
	struct dl_graph *g = b->g;
	if (!b->have_step) {
		dl_errf(b->err, sizeof b->err, "cuda backend: last_step_out needs a train_step just before it");
		return -1;
	}
	if (dlc_use_device(b))
		return -1;
	if (logits)
		CK_CUDA(b, cudaMemcpyAsync(logits, b->d_logits, b->out_count * sizeof(float), cudaMemcpyDeviceToHost, b->s));
	for (int i = 0; i < g->n_params; i++)
		if (g->params[i].grad)
			CK_CUDA(b, cudaMemcpyAsync(g->params[i].grad, b->gr + b->p_off[i], g->params[i].count * sizeof(float),
						   cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaStreamSynchronize(b->s));
	/* the sums over ranks times the loss scale -> the averaged gradients the update used */
	float inv = b->h_opt->inv;
	for (int i = 0; i < g->n_params; i++)
		for (size_t j = 0; g->params[i].grad && j < g->params[i].count; j++)
			g->params[i].grad[j] *= inv;
	return 0;
}

double dl_cuda_loss_scale(struct dl_backend *b)
{
	struct dlc_optdev o;
	if (dlc_use_device(b) || cudaMemcpyAsync(&o, b->d_opt, sizeof o, cudaMemcpyDeviceToHost, b->s) != cudaSuccess ||
	    cudaStreamSynchronize(b->s) != cudaSuccess)
		return NAN;
	return o.scale;
}

int dl_cuda_last_step_graphed(struct dl_backend *b)
{
	return b->last_graph;
}

double dl_cuda_last_step_ms(struct dl_backend *b)
{
	return b->last_ms;
}

void dl_cuda_set_resident_input(struct dl_backend *b, int on)
{
	b->resident = on;
}
