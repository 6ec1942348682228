#include "config.h"

/* The "cuda" backend: create() checks the graph, picks the device, plans
 * every device buffer (activations, gradients, parameters, optimizer state,
 * cuDNN/cuBLAS workspace) and makes one cudaMalloc; no step allocates.
 * This file holds create/destroy, the state copies at the boundaries
 * (state_in/state_out), pinned host memory and the dl_backend_ops table;
 * the step itself is in cuda_step.c, the graph walk in cuda_exec.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "engine/cuda/cuda_internal.h"

#define FP16_INIT_SCALE 65536.0f /* torch.cuda.amp.GradScaler's init_scale */
#define NCCL_TIMEOUT_S 600.0

/* Where the arena buffer (what, idx) of cuda_arena.h is kept; NULL for
 * none (a bad tag: the plan and this table disagree). */
static void **arena_slot(struct dl_backend *b, int what, int idx)
{
	switch (what) {
	case DLC_A_W: return (void **)&b->w;
	case DLC_A_GR: return (void **)&b->gr;
	case DLC_A_MOM: return (void **)&b->mom;
	case DLC_A_BUFS: return (void **)&b->bufs;
	case DLC_A_CTL: return (void **)&b->d_ctl;
	case DLC_A_OPT: return (void **)&b->d_opt;
	case DLC_A_TRUST: return (void **)&b->trust;
	case DLC_A_WORK: return idx >= 0 && idx < b->g->n_params ? &b->h_tensors[idx].work : NULL;
	case DLC_A_ACT: return idx >= 0 && idx < b->g->n_values ? &b->val[idx].act : NULL;
	case DLC_A_GRAD: return idx >= 0 && idx < b->g->n_values ? &b->val[idx].grad : NULL;
	case DLC_A_DW: return idx >= 0 && idx < b->g->n_nodes ? &b->node[idx].conv.dw : NULL;
	case DLC_A_MEAN: return idx >= 0 && idx < b->g->n_nodes ? (void **)&b->node[idx].mean : NULL;
	case DLC_A_INVSTD: return idx >= 0 && idx < b->g->n_nodes ? (void **)&b->node[idx].invstd : NULL;
	case DLC_A_ARG: return idx >= 0 && idx < b->g->n_nodes ? (void **)&b->node[idx].arg : NULL;
	case DLC_A_DLWORK: return idx >= 0 && idx < b->g->n_nodes ? &b->node[idx].dl_work : NULL;
	case DLC_A_BNPART: return (void **)&b->bn_part;
	case DLC_A_WS: return &b->ws;
	case DLC_A_BLASWS: return &b->blas_ws;
	case DLC_A_X: return (void **)&b->d_x;
	case DLC_A_U8: return (void **)&b->d_u8;
	case DLC_A_NORM: return (void **)&b->d_norm;
	case DLC_A_LABELS: return (void **)&b->d_labels;
	case DLC_A_LOGITS: return (void **)&b->d_logits;
	case DLC_A_DLOGITS: return (void **)&b->d_dlogits;
	case DLC_A_LOSS: return (void **)&b->d_loss;
	case DLC_A_TOP: return (void **)&b->d_top;
	case DLC_A_FLAG: return (void **)&b->d_flag;
	case DLC_A_PART: return (void **)&b->part;
	case DLC_A_TENSORS: return (void **)&b->d_tensors;
	case DLC_A_CHUNKS: return (void **)&b->d_chunks;
	}
	return NULL;
}

int dl_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

/* The device named by `name` (dl_backend_opts.device: index or PCI bus id
 * among the visible devices; NULL: device 0).  Returns its index, or -1
 * with err.  Makes no device current. */
static int find_device(const char *name, char *err, size_t errlen)
{
	int ndev = 0, dev = 0;
	int kind = dlc_parse_device(name, &dev);
	if (kind < 0) {
		dl_errf(err, errlen, "cuda backend: GPU '%s' is neither a device index nor a PCI bus id", name);
		return -1;
	}
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev < 1) {
		dl_errf(err, errlen, "cuda backend: no CUDA device is visible (cudaGetDeviceCount: %s)",
			 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return -1;
	}
	if (kind == 1) {
		e = cudaDeviceGetByPCIBusId(&dev, name);
		if (e != cudaSuccess) {
			dl_errf(err, errlen, "cuda backend: no visible CUDA device has PCI bus id %s (%s)", name,
				 cudaGetErrorString(e));
			return -1;
		}
	}
	if (dev >= ndev) {
		dl_errf(err, errlen, "cuda backend: GPU %s, but only %d CUDA device%s visible", name ? name : "0", ndev,
			 ndev == 1 ? " is" : "s are");
		return -1;
	}
	return dev;
}

/* find_device's device, made current on this thread. */
static int select_device(const char *name, char *err, size_t errlen)
{
	int dev = find_device(name, err, errlen);
	if (dev < 0)
		return -1;
	cudaError_t e = cudaSetDevice(dev);
	if (e != cudaSuccess) {
		dl_errf(err, errlen, "cuda backend: cudaSetDevice(%d): %s", dev, cudaGetErrorString(e));
		return -1;
	}
	return dev;
}

int dl_cuda_auto_precision(const char *device, char *msg, size_t msglen)
{
	int dev = find_device(device, msg, msglen), major = 0, minor = 0;
	if (dev < 0)
		return -1;
	cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
	if (e != cudaSuccess)
		return dl_errf(msg, msglen, "cuda backend: the compute capability of GPU %d: %s", dev,
			       cudaGetErrorString(e));
	int p = dlc_auto_precision(major);
	snprintf(msg, msglen, "GPU %d, compute capability %d.%d: %s", dev, major, minor,
		 p == DL_BF16 ? "bf16 tensor cores" : p == DL_FP16 ? "fp16 tensor cores, no bf16 ones" : "no tensor cores");
	return p;
}

void *dl_cuda_host_alloc(size_t bytes, void *ctx)
{
	char err[256];
	void *p = NULL;
	/* cudaHostAlloc opens a context on the current device: make that the
	 * device this process trains on */
	if (select_device((const char *)ctx, err, sizeof err) < 0) {
		fprintf(stderr, "dljob: pinned host memory: %s\n", err);
		return NULL;
	}
	/* portable: pinned for every context, whichever thread copies from it */
	cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
	if (e != cudaSuccess) {
		fprintf(stderr, "dljob: %s:%d: cudaHostAlloc(%zu bytes): %s\n", __FILE__, __LINE__, bytes,
			cudaGetErrorString(e));
		return NULL;
	}
	return p;
}

void dl_cuda_host_free(void *p, void *ctx)
{
	(void)ctx;
	if (!p)
		return;
	cudaError_t e = cudaFreeHost(p);
	if (e != cudaSuccess)
		fprintf(stderr, "dljob: %s:%d: cudaFreeHost: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));
}

/* Structural checks: everything the kernels below assume. */
static int check_graph(struct dl_backend *b)
{
	const struct dl_graph *g = b->g;
	if (g->n_values < 1 || g->input != 0 || g->output < 0 || g->output >= g->n_values) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: graph has bad input %d / output %d of %d values", g->input, g->output,
			g->n_values);
		return -1;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int nin = d->kind == DL_NODE_ADD ? 2 : 1;
		if (d->out <= 0 || d->out >= g->n_values) {
			dl_errf(b->err, sizeof b->err, "cuda backend: node %d: bad output value %d", i, d->out);
			return -1;
		}
		for (int k = 0; k < nin; k++) {
			int v = d->in[k];
			if (v < 0 || v >= g->n_values) {
				dl_errf(b->err, sizeof b->err, "cuda backend: node %d: bad input value %d", i, v);
				return -1;
			}
			if (v == g->input && d->kind != DL_NODE_CONV && b->val[v].cp != b->val[v].c) {
				dl_errf(b->err, sizeof b->err,
					"cuda backend: node %d reads the image directly; only a convolution may (image channels are padded)", i);
				return -1;
			}
		}
		/* shapes the elementwise kernels assume */
		const struct dl_shape *xs = &g->values[d->in[0]], *ys = &g->values[d->out];
		int same = xs->c == ys->c && xs->h == ys->h && xs->w == ys->w;
		if (d->kind == DL_NODE_ADD) {
			const struct dl_shape *x2 = &g->values[d->in[1]];
			same = same && x2->c == ys->c && x2->h == ys->h && x2->w == ys->w;
		}
		if ((d->kind == DL_NODE_BN || d->kind == DL_NODE_RELU || d->kind == DL_NODE_ADD) && !same) {
			dl_errf(b->err, sizeof b->err, "cuda backend: node %d: input and output shapes differ", i);
			return -1;
		}
		if (d->kind == DL_NODE_MAXPOOL &&
		    (d->kernel < 1 || d->stride < 1 || d->pad < 0 || d->pad >= d->kernel || ys->c != xs->c ||
		     ys->h != (xs->h + 2 * d->pad - d->kernel) / d->stride + 1 ||
		     ys->w != (xs->w + 2 * d->pad - d->kernel) / d->stride + 1)) {
			dl_errf(b->err, sizeof b->err,
				"cuda backend: max-pool node %d: output (%d,%d,%d) does not follow from its input", i,
				ys->c, ys->h, ys->w);
			return -1;
		}
		if (d->kind == DL_NODE_GAP && (ys->c != xs->c || ys->h != 1 || ys->w != 1)) {
			dl_errf(b->err, sizeof b->err, "cuda backend: GAP node %d: output is not (%d,1,1)", i, xs->c);
			return -1;
		}
		int np = d->kind == DL_NODE_CONV ? 1 : (d->kind == DL_NODE_BN || d->kind == DL_NODE_FC) ? 2 : 0;
		for (int k = 0; k < np; k++)
			if (d->param[k] < 0 || d->param[k] >= g->n_params) {
				dl_errf(b->err, sizeof b->err,
					"cuda backend: node %d: bad param index %d", i, d->param[k]);
				return -1;
			}
		if (d->kind == DL_NODE_BN)
			for (int k = 0; k < 2; k++)
				if (d->buffer[k] < 0 || d->buffer[k] >= g->n_buffers ||
				    g->buffers[d->buffer[k]].count != (size_t)xs->c ||
				    g->params[d->param[k]].count != (size_t)xs->c) {
					dl_errf(b->err, sizeof b->err,
						"cuda backend: BN node %d: gamma/beta or running buffer %d is not %d long", i,
						d->buffer[k], xs->c);
					return -1;
				}
		if (d->kind == DL_NODE_MAXPOOL && d->kernel * d->kernel > 255) {
			dl_errf(b->err, sizeof b->err,
				"cuda backend: max-pool node %d: kernel %d too large", i, d->kernel);
			return -1;
		}
		if (d->kind == DL_NODE_FC) {
			const struct dl_shape *x = &g->values[d->in[0]];
			const struct dl_tensor_f32 *w = &g->params[d->param[0]];
			if (d->out != g->output || x->h != 1 || x->w != 1 || w->ndim != 2 || w->dims[1] != x->c ||
			    g->values[d->out].c != w->dims[0] || g->params[d->param[1]].count != (size_t)w->dims[0]) {
				dl_errf(b->err, sizeof b->err,
					"cuda backend: FC node %d must map (C,1,1) to the graph output (K,1,1) with weight (K,C)", i);
				return -1;
			}
		}
	}
	return 0;
}

/* Graph -> device: params, buffers, momentum (zero without st or when no
 * step was taken), step count, the loss scale (fp16: st's when it has one,
 * else the initial scale; 1 otherwise), then the working copies.
 * Synchronous. */
static int load_state(struct dl_backend *b, const struct dl_optim_state *st)
{
	const struct dl_graph *g = b->g;
	if (st && st->n != 0 && st->n != (size_t)g->n_params) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: optimizer state has %zu momentum buffers, the model %d params", st->n,
			g->n_params);
		return -1;
	}
	for (size_t i = 0; st && i < st->n; i++)
		if (st->mom[i].count != g->params[i].count) {
			dl_errf(b->err, sizeof b->err,
				"cuda backend: momentum buffer %s has %zu values, param %s %zu", st->mom[i].name,
				st->mom[i].count, g->params[i].name, g->params[i].count);
			return -1;
		}
	for (int i = 0; i < g->n_params; i++)
		CK_CUDA(b, cudaMemcpyAsync(b->w + b->p_off[i], g->params[i].data, g->params[i].count * sizeof(float),
					   cudaMemcpyHostToDevice, b->s));
	for (int i = 0; i < g->n_buffers; i++)
		CK_CUDA(b, cudaMemcpyAsync(b->bufs + b->b_off[i], g->buffers[i].data, g->buffers[i].count * sizeof(float),
					   cudaMemcpyHostToDevice, b->s));
	CK_CUDA(b, cudaMemsetAsync(b->mom, 0, b->n_flat * sizeof(float), b->s));
	long steps = st ? st->steps : 0;
	if (steps > 0)
		for (size_t i = 0; i < st->n; i++)
			CK_CUDA(b, cudaMemcpyAsync(b->mom + b->p_off[i], st->mom[i].data, st->mom[i].count * sizeof(float),
						   cudaMemcpyHostToDevice, b->s));
	/* h_opt mirrors d_opt between steps (each step copies it back) */
	b->h_opt->scale = 1.0f;
	b->h_opt->good = 0;
	if (b->dt == DLC_F16) {
		int have = st && st->loss_scale > 0;
		b->h_opt->scale = have ? (float)st->loss_scale : FP16_INIT_SCALE;
		b->h_opt->good = have && st->loss_scale_good > 0 && st->loss_scale_good < DL_FP16_GROWTH_INTERVAL
					 ? (int)st->loss_scale_good
					 : 0;
	}
	CK_CUDA(b, cudaMemcpyAsync(b->d_opt, b->h_opt, sizeof *b->h_opt, cudaMemcpyHostToDevice, b->s));
	CK_CUDA(b, dlc_refresh_work(b->d_tensors, b->d_chunks, b->n_chunks, b->w, b->dt, b->s));
	/* the copies above read pageable memory: wait before the caller may change it */
	CK_CUDA(b, cudaStreamSynchronize(b->s));
	b->steps = steps < 0 ? 0 : steps;
	b->bn_tracked = g->bn_batches_tracked;
	return 0;
}

static int ops_state_in(struct dl_backend *b, const struct dl_optim_state *st)
{
	if (dlc_use_device(b))
		return -1;
	return load_state(b, st);
}

static int ops_state_out(struct dl_backend *b, struct dl_optim_state *st)
{
	struct dl_graph *g = b->g;
	if (dlc_use_device(b))
		return -1;
	if (st && st->n != 0 && st->n != (size_t)g->n_params) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: optimizer state has room for %zu momentum buffers, the model has %d params",
			st->n, g->n_params);
		return -1;
	}
	for (int i = 0; i < g->n_params; i++) {
		CK_CUDA(b, cudaMemcpyAsync(g->params[i].data, b->w + b->p_off[i], g->params[i].count * sizeof(float),
					   cudaMemcpyDeviceToHost, b->s));
		if (st && st->n && st->mom[i].count == g->params[i].count)
			CK_CUDA(b, cudaMemcpyAsync(st->mom[i].data, b->mom + b->p_off[i], g->params[i].count * sizeof(float),
						   cudaMemcpyDeviceToHost, b->s));
	}
	for (int i = 0; i < g->n_buffers; i++)
		CK_CUDA(b, cudaMemcpyAsync(g->buffers[i].data, b->bufs + b->b_off[i],
					   g->buffers[i].count * sizeof(float), cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->h_opt, b->d_opt, sizeof *b->h_opt, cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaStreamSynchronize(b->s));
	g->bn_batches_tracked = b->bn_tracked;
	if (st) {
		st->steps = b->steps;
		/* fp16 only: another precision has no dynamic scale to keep */
		st->loss_scale = b->dt == DLC_F16 ? b->h_opt->scale : 0;
		st->loss_scale_good = b->dt == DLC_F16 ? b->h_opt->good : 0;
	}
	return 0;
}

void dl_cuda_memory(struct dl_backend *b, size_t *arena_bytes, size_t *device_bytes)
{
	if (arena_bytes)
		*arena_bytes = b->arena_bytes;
	if (device_bytes)
		*device_bytes = b->device_bytes;
}

size_t dl_cuda_workspace_bytes(struct dl_backend *b)
{
	return b->ws_bytes;
}

/* Buckets and, per node, the buckets to launch after its backward. */
static int plan_reduction(struct dl_backend *b)
{
	const struct dl_graph *g = b->g;
	int *count = calloc((size_t)g->n_nodes + 1, sizeof *count);
	int rv = -1;
	if (!count) {
		dl_errf(b->err, sizeof b->err, "cuda backend: out of host memory planning the reduction");
		return -1;
	}
	if (dlc_plan_buckets(g, b->writer, b->p_off, b->opt.bucket_bytes, &b->bk, &b->n_bk, b->err, sizeof b->err))
		goto out;
	for (int k = 0; k < b->n_bk; k++)
		count[b->bk[k].done_by]++;
	for (int i = 0; i < g->n_nodes; i++) {
		if (!count[i])
			continue;
		b->node[i].ready = calloc((size_t)count[i], sizeof(int));
		if (!b->node[i].ready) {
			dl_errf(b->err, sizeof b->err, "cuda backend: out of host memory planning the reduction");
			goto out;
		}
	}
	for (int k = 0; k < b->n_bk; k++) {
		struct dlc_node *nd = &b->node[b->bk[k].done_by];
		nd->ready[nd->n_ready++] = k;
	}
	b->ev_bk = calloc((size_t)b->n_bk + 1, sizeof *b->ev_bk);
	if (!b->ev_bk) {
		dl_errf(b->err, sizeof b->err, "cuda backend: out of host memory");
		goto out;
	}
	rv = 0;
out:
	free(count);
	return rv;
}

static int comm_bcast(void *ctx, void *buf, size_t len, char *err, size_t errlen)
{
	struct dl_comm *c = ctx;
	return c->broadcast(c, 0, buf, len, err, errlen);
}

static int setup(struct dl_backend *b)
{
	struct dl_graph *g = b->g;
	int n = b->n;
	size_t free0 = 0, free1 = 0, total = 0;

	switch (b->opt.precision) {
	case DL_FP32:
		b->dt = DLC_F32, b->esize = 4, b->cudnn_dt = CUDNN_DATA_FLOAT, b->blas_dt = CUDA_R_32F;
		break;
	case DL_BF16:
		b->dt = DLC_BF16, b->esize = 2, b->cudnn_dt = CUDNN_DATA_BFLOAT16, b->blas_dt = CUDA_R_16BF;
		break;
	case DL_FP16:
		b->dt = DLC_F16, b->esize = 2, b->cudnn_dt = CUDNN_DATA_HALF, b->blas_dt = CUDA_R_16F;
		break;
	default:
		dl_errf(b->err, sizeof b->err, "cuda backend: unknown precision %d", (int)b->opt.precision);
		return -1;
	}
	b->graph_in = -1;
	b->graph_off = b->test.no_graphs || b->test.profile;
	b->device = select_device(b->opt.device, b->err, sizeof b->err);
	if (b->device < 0)
		return -1;
	dlc_clear_stale_error();
	CK_CUDA(b, cudaMemGetInfo(&free0, &total));
	b->ws_limit = free0 / 8;
	b->ws_limit = b->ws_limit < WORKSPACE_MIN ? WORKSPACE_MIN : b->ws_limit > WORKSPACE_MAX ? WORKSPACE_MAX : b->ws_limit;
	CK_CUDA(b, cudaStreamCreateWithFlags(&b->s, cudaStreamNonBlocking));
	CK_CUDA(b, cudaStreamCreateWithFlags(&b->cs, cudaStreamNonBlocking));
	CK_CUDNN(b, cudnnCreate(&b->cudnn));
	b->have_cudnn = 1;
	CK_CUDNN(b, cudnnSetStream(b->cudnn, b->s));
	CK_CUBLAS(b, cublasCreate(&b->blas));
	b->have_blas = 1;
	CK_CUBLAS(b, cublasSetStream(b->blas, b->s));
	/* fp32: no TF32 in the classifier either */
	CK_CUBLAS(b, cublasSetMathMode(b->blas, b->dt == DLC_F32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));

	b->val = calloc((size_t)g->n_values, sizeof *b->val);
	b->node = calloc((size_t)g->n_nodes + 1, sizeof *b->node);
	b->algos = calloc((size_t)g->n_nodes + 1, sizeof *b->algos);
	b->p_off = calloc((size_t)g->n_params + 1, sizeof *b->p_off);
	b->b_off = calloc((size_t)g->n_buffers + 1, sizeof *b->b_off);
	b->h_tensors = calloc((size_t)g->n_params + 1, sizeof *b->h_tensors);
	b->writer = calloc((size_t)g->n_params + 1, sizeof *b->writer);
	if (!b->val || !b->node || !b->algos || !b->p_off || !b->b_off || !b->h_tensors || !b->writer) {
		dl_errf(b->err, sizeof b->err, "cuda backend: out of host memory");
		return -1;
	}
	for (int v = 0; v < g->n_values; v++) {
		struct dlc_value *x = &b->val[v];
		x->c = g->values[v].c, x->h = g->values[v].h, x->w = g->values[v].w;
		/* tensor cores want channels in multiples of 8: pad the image (3 -> 8) */
		x->cp = v == g->input && x->c % 8 ? (x->c + 7) / 8 * 8 : x->c;
		x->elems = (size_t)n * x->h * x->w * x->cp;
	}
	if (check_graph(b) || dlc_param_writers(g, b->writer, b->err, sizeof b->err))
		return -1;
	int *apply_by = malloc((size_t)g->n_nodes * sizeof *apply_by + 1);
	if (!apply_by) {
		dl_errf(b->err, sizeof b->err, "cuda backend: out of host memory");
		return -1;
	}
	dlc_plan_bn_add(g, apply_by);
	for (int i = 0; i < g->n_nodes; i++)
		b->node[i].bn_in[0] = b->node[i].bn_in[1] = -1;
	for (int i = 0; i < g->n_nodes; i++) {
		int j = b->node[i].apply_by = apply_by[i];
		if (j >= 0)
			b->node[j].bn_in[g->nodes[j].in[0] == g->nodes[i].out ? 0 : 1] = i;
	}
	free(apply_by);
	b->img_c = g->values[g->input].c;
	b->k = g->values[g->output].c;
	if (g->values[g->output].h != 1 || g->values[g->output].w != 1) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: the graph output must be (K,1,1) logits, it is (%d,%d,%d)", b->k,
			g->values[g->output].h, g->values[g->output].w);
		return -1;
	}

	dlc_plan_flat(g, b->p_off, &b->n_flat);
	for (int i = 0; i < g->n_buffers; i++) {
		b->b_off[i] = b->n_bflat;
		b->n_bflat += g->buffers[i].count;
	}

	/* per tensor: decay, LARS, working copy (conv weights KRSC with padded input channels, FC as is) */
	const struct dl_optim_config *oc = &b->opt.optim;
	for (int i = 0; i < g->n_params; i++) {
		struct dlc_ptensor *t = &b->h_tensors[i];
		int decay = !g->params[i].no_decay || oc->decay_bn_and_bias;
		t->off = b->p_off[i];
		t->count = g->params[i].count;
		t->wd = decay ? (float)oc->weight_decay : 0.0f;
		t->wd_d = decay ? oc->weight_decay : 0.0;
		t->lars = oc->lars && decay;
		t->map = DLC_MAP_NONE;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		if (d->kind == DL_NODE_CONV) {
			const struct dl_tensor_f32 *p = &g->params[d->param[0]];
			struct dlc_ptensor *t = &b->h_tensors[d->param[0]];
			if (p->ndim != 4) {
				dl_errf(b->err, sizeof b->err, "cuda backend: conv weight %s is not 4-d", p->name);
				return -1;
			}
			t->map = DLC_MAP_OIHW_KRSC;
			t->o = p->dims[0], t->i = p->dims[1], t->kh = p->dims[2], t->kw = p->dims[3];
			t->ip = b->val[d->in[0]].cp;
		} else if (d->kind == DL_NODE_FC) {
			b->h_tensors[d->param[0]].map = DLC_MAP_PLAIN;
		}
	}

	size_t part = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		const struct dlc_value *x = &b->val[d->in[0]];
		if (d->kind == DL_NODE_CONV) {
			if (dlc_conv_setup(b, i))
				return -1;
		} else if (d->kind == DL_NODE_BN) {
			size_t m = (size_t)n * x->h * x->w, p = dlc_bn_part_floats(m, x->c);
			part = p > part ? p : part;
		}
	}
	const struct dl_shape *xs = &g->values[g->input], *os = &g->values[g->output];
	b->x_count = (size_t)n * xs->c * xs->h * xs->w;
	b->out_count = (size_t)n * os->c * os->h * os->w;
	for (int i = 0; i < g->n_params; i++)
		for (size_t s = 0; s < b->h_tensors[i].count; s += DLC_CHUNK)
			b->n_chunks++;
	b->h_chunks = calloc((size_t)b->n_chunks + 1, sizeof *b->h_chunks);
	if (!b->h_chunks) {
		dl_errf(b->err, sizeof b->err, "cuda backend: out of host memory");
		return -1;
	}
	b->n_chunks = 0;
	for (int i = 0; i < g->n_params; i++) {
		b->h_tensors[i].chunk0 = b->n_chunks;
		for (size_t s = 0; s < b->h_tensors[i].count; s += DLC_CHUNK) {
			struct dlc_chunk *c = &b->h_chunks[b->n_chunks++];
			size_t left = b->h_tensors[i].count - s;
			c->tensor = i;
			c->start = s;
			c->len = (int)(left < DLC_CHUNK ? left : DLC_CHUNK);
		}
		b->h_tensors[i].nchunk = b->n_chunks - b->h_tensors[i].chunk0;
	}
	b->blas_ws_bytes = DLC_BLAS_WS_BYTES;
	/* the one allocation, planned by lifetime (cuda_arena.h): buffers
	 * never live at the same time share memory */
	struct dlc_arena_in ain = { .n = n, .esize = b->esize, .ws_bytes = b->ws_bytes, .bn_part_floats = part };
	if (dlc_arena_plan(g, &ain, &b->mp, b->err, sizeof b->err))
		return -1;
	b->arena_bytes = b->mp.total;
	if (cudaMalloc(&b->arena, b->arena_bytes) != cudaSuccess) {
		dl_errf(b->err, sizeof b->err,
			"cuda backend: cannot allocate %.2f GiB of device memory for batch %d (%.2f GiB free)",
			(double)b->arena_bytes / (1 << 30), n, (double)free0 / (1 << 30));
		b->arena = NULL;
		return -1;
	}
	for (int k = 0; k < b->mp.n; k++) {
		void **slot = arena_slot(b, b->mp.b[k].what, b->mp.b[k].idx);
		if (!slot) {
			dl_errf(b->err, sizeof b->err,
				"cuda backend: arena buffer %d has a bad tag %d.%d", k, b->mp.b[k].what,
				b->mp.b[k].idx);
			return -1;
		}
		*slot = (char *)b->arena + b->mp.b[k].off;
	}
	/* zero: padded channels of the image and of its conv weights, and the
	 * gaps of the flat arrays, must stay 0.  Everything goes on b->s: a
	 * non-blocking stream does not wait for work that plain
	 * cudaMemset/cudaMemcpy put on the legacy default stream. */
	CK_CUDA(b, cudaMemsetAsync(b->arena, 0, b->arena_bytes, b->s));
	if (b->test.poison) {
		/* 0xff bytes are NaN in fp32, bf16 and fp16: every read must follow a write */
		CK_CUDA(b, cudaMemsetAsync(b->d_logits, 0xff, b->out_count * sizeof(float), b->s));
		for (int i = 0; i < g->n_nodes; i++)
			if (b->node[i].mean) {
				size_t c = (size_t)b->val[g->nodes[i].in[0]].c * sizeof(float);
				CK_CUDA(b, cudaMemsetAsync(b->node[i].mean, 0xff, c, b->s));
				CK_CUDA(b, cudaMemsetAsync(b->node[i].invstd, 0xff, c, b->s));
			}
		for (int v = 0; v < g->n_values; v++) {
			if (b->val[v].act && v != g->input)
				CK_CUDA(b, cudaMemsetAsync(b->val[v].act, 0xff, b->val[v].elems * b->esize, b->s));
			if (b->val[v].grad)
				CK_CUDA(b, cudaMemsetAsync(b->val[v].grad, 0xff, b->val[v].elems * b->esize, b->s));
		}
	}
	CK_CUBLAS(b, cublasSetWorkspace(b->blas, b->blas_ws, b->blas_ws_bytes));

	/* pinned host edges */
	CK_CUDA(b, cudaMallocHost((void **)&b->h_ctl, sizeof *b->h_ctl));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_opt, sizeof *b->h_opt));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_norm, 2 * (size_t)b->img_c * sizeof(float)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_labels, (size_t)n * sizeof(int)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_loss, (size_t)n * sizeof(float)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_top, (size_t)n * sizeof(int)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_flag, sizeof(float)));
	memset(b->h_ctl, 0, sizeof *b->h_ctl);
	memset(b->h_opt, 0, sizeof *b->h_opt); /* the loss scale: load_state below */
	CK_CUDA(b, cudaMemcpyAsync(b->d_tensors, b->h_tensors, (size_t)g->n_params * sizeof(struct dlc_ptensor),
				   cudaMemcpyHostToDevice, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->d_chunks, b->h_chunks, (size_t)b->n_chunks * sizeof(struct dlc_chunk),
				   cudaMemcpyHostToDevice, b->s));

	/* reduction: NCCL from the engine's comm (its broadcast spreads the id) */
	struct dl_comm *c = b->opt.comm;
	b->world = 1.0f;
	if ((c && c->size > 1) || b->test.force_nccl) {
		if (c && c->size > 1 && !c->broadcast) {
			dl_errf(b->err, sizeof b->err,
				"cuda backend: the process group has no broadcast to spread NCCL's unique id");
			return -1;
		}
		b->nccl = c && c->size > 1 ? dl_nccl_create(c->rank, c->size, comm_bcast, c, NCCL_TIMEOUT_S, b->err,
							    sizeof b->err)
					   : dl_nccl_create(0, 1, NULL, NULL, NCCL_TIMEOUT_S, b->err, sizeof b->err);
		if (!b->nccl)
			return -1;
		b->world = (float)dl_nccl_size(b->nccl);
		if (plan_reduction(b))
			return -1;
	}
	b->have_events = 1; /* destroy() frees whichever were made */
	for (int k = 0; k < b->n_bk; k++)
		CK_CUDA(b, cudaEventCreateWithFlags(&b->ev_bk[k], cudaEventDisableTiming));
	CK_CUDA(b, cudaEventCreateWithFlags(&b->ev_join, cudaEventDisableTiming));
	CK_CUDA(b, cudaEventCreate(&b->ev_start));
	CK_CUDA(b, cudaEventCreate(&b->ev_bwd_end));
	CK_CUDA(b, cudaEventCreate(&b->ev_comm_start));
	CK_CUDA(b, cudaEventCreate(&b->ev_comm_end));
	CK_CUDA(b, cudaEventCreate(&b->ev_done));
	if (dlc_prof_init(b))
		return -1;

	if (load_state(b, NULL))
		return -1;
	CK_CUDA(b, cudaMemGetInfo(&free1, &total));
	b->device_bytes = free0 > free1 ? free0 - free1 : 0;
	return 0;
}

static void destroy(struct dl_backend *b)
{
	if (!b)
		return;
	if (b->device >= 0)
		cudaSetDevice(b->device);
	if (b->s)
		cudaStreamSynchronize(b->s);
	if (b->cs)
		cudaStreamSynchronize(b->cs);
	if (b->graph_exec)
		cudaGraphExecDestroy(b->graph_exec);
	if (b->graph)
		cudaGraphDestroy(b->graph);
	if (b->have_events) {
		for (int k = 0; k < b->n_bk; k++)
			if (b->ev_bk[k])
				cudaEventDestroy(b->ev_bk[k]);
		cudaEvent_t *evs[] = { &b->ev_join, &b->ev_start, &b->ev_bwd_end, &b->ev_comm_start, &b->ev_comm_end,
				       &b->ev_done };
		for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
			if (*evs[i])
				cudaEventDestroy(*evs[i]);
	}
	dlc_prof_free(b);
	dl_nccl_destroy(b->nccl);
	if (b->node)
		for (int i = 0; i < b->g->n_nodes; i++) {
			dlc_conv_free(&b->node[i].conv);
			free(b->node[i].ready);
		}
	if (b->have_cudnn)
		cudnnDestroy(b->cudnn);
	if (b->have_blas)
		cublasDestroy(b->blas);
	if (b->arena)
		cudaFree(b->arena);
	cudaFreeHost(b->h_ctl);
	cudaFreeHost(b->h_opt);
	cudaFreeHost(b->h_norm);
	cudaFreeHost(b->h_labels);
	cudaFreeHost(b->h_loss);
	cudaFreeHost(b->h_top);
	cudaFreeHost(b->h_flag);
	if (b->s)
		cudaStreamDestroy(b->s);
	if (b->cs)
		cudaStreamDestroy(b->cs);
	free(b->val);
	free(b->node);
	free(b->algos);
	free(b->p_off);
	free(b->b_off);
	free(b->h_tensors);
	free(b->h_chunks);
	free(b->writer);
	free(b->bk);
	free(b->ev_bk);
	dl_mp_free(&b->mp);
	free(b);
}

/* Options the cuda backend cannot honour are refused by name. */
static int check_opts(const struct dl_backend_opts *o, char *err, size_t errlen)
{
	if (o->precision != DL_FP32 && o->precision != DL_BF16 && o->precision != DL_FP16) {
		dl_errf(err, errlen, "precision %d is not supported by the cuda backend (fp32, bf16 or fp16)",
			 (int)o->precision);
		return -1;
	}
	if (o->conv_algo != DL_CONV_AUTO) {
		dl_errf(err, errlen, "--conv-algo %s is not supported by the cuda backend (auto only: cuDNN chooses)",
			 o->conv_algo == DL_CONV_DIRECT ? "direct" : o->conv_algo == DL_CONV_WINOGRAD ? "winograd" : "?");
		return -1;
	}
	if (!(o->label_smoothing >= 0.0 && o->label_smoothing < 1.0)) {
		dl_errf(err, errlen, "cuda backend: label smoothing %g is not in [0,1)", o->label_smoothing);
		return -1;
	}
	if (o->device && strlen(o->device) >= 64) {
		dl_errf(err, errlen, "cuda backend: device name too long");
		return -1;
	}
	return dl_optim_config_check(&o->optim, err, errlen);
}

struct dl_backend *dl_cuda_create_test(struct dl_graph *g, int n, const struct dl_backend_opts *o,
				       const struct dl_cuda_test_opts *t, char *err, size_t errlen)
{
	struct dl_backend_opts def;
	if (!o) {
		memset(&def, 0, sizeof def);
		o = &def;
	}
	if (!g || n < 1) {
		dl_errf(err, errlen, "cuda backend: bad graph or batch size %d", n);
		return NULL;
	}
	if (check_opts(o, err, errlen))
		return NULL;
	struct dl_backend *b = calloc(1, sizeof *b);
	if (!b) {
		dl_errf(err, errlen, "cuda backend: out of host memory");
		return NULL;
	}
	b->g = g;
	b->n = n;
	b->device = -1;
	b->opt = *o;
	if (o->device) {
		snprintf(b->device_name, sizeof b->device_name, "%s", o->device);
		b->opt.device = b->device_name;
	}
	if (t)
		b->test = *t;
	if (setup(b)) {
		dl_errf(err, errlen, "%s", b->err);
		destroy(b);
		return NULL;
	}
	return b;
}

static struct dl_backend *ops_create(struct dl_graph *g, int n, const struct dl_backend_opts *o, char *err,
				     size_t errlen)
{
	return dl_cuda_create_test(g, n, o, NULL, err, errlen);
}

static int ops_train_step(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
			  struct dl_step_result *res)
{
	return dlc_train_step(b, in, lr, stop_request, res);
}

static int ops_eval_step(struct dl_backend *b, const struct dl_batch *in, int n_valid, int *pred,
			 struct dl_eval_result *res)
{
	return dlc_eval_step(b, in, n_valid, pred, res);
}

static int ops_last_step_out(struct dl_backend *b, float *logits)
{
	return dlc_last_step_out(b, logits);
}

static void ops_destroy(struct dl_backend *b)
{
	destroy(b);
}

static const char *ops_error(struct dl_backend *b)
{
	return b->err;
}

const struct dl_backend_ops dl_backend_cuda = {
	.name = "cuda",
	.takes_u8 = 1,
	.create = ops_create,
	.train_step = ops_train_step,
	.eval_step = ops_eval_step,
	.state_out = ops_state_out,
	.state_in = ops_state_in,
	.last_step_out = ops_last_step_out,
	.destroy = ops_destroy,
	.error = ops_error,
	.host_alloc = dl_cuda_host_alloc,
	.host_free = dl_cuda_host_free,
	.device_count = dl_cuda_device_count,
	.auto_precision = dl_cuda_auto_precision,
};
