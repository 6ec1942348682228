#include "config.h"

/* The "cuda" backend: create() plans every device buffer (activations,
 * gradients, parameters, optimizer state, cuDNN/cuBLAS workspace) and makes
 * one cudaMalloc; no step allocates.  This file holds create/destroy, the
 * graph<->device copies and the dl_backend_ops entry points; the fast path
 * (device-resident training) is in cuda_step.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_host.h"
#include "engine/cuda/cuda_internal.h"
#include "engine/cuda/nccl_comm.h"

#define ARENA_ALIGN 256
#define BLAS_WS_BYTES (32u << 20) /* cuBLAS's recommended workspace on Hopper */

void dlc_fail(struct dl_backend *b, const char *file, int line, const char *call, const char *why)
{
	snprintf(b->err, sizeof b->err, "%s:%d: %s: %s", file, line, call, why);
}

void dlc_failf(struct dl_backend *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->err, sizeof b->err, fmt, ap);
	va_end(ap);
}

int dlc_plan(struct dl_backend *b, void **slot, size_t bytes)
{
	if (b->n_plan == b->cap_plan) {
		int cap = b->cap_plan ? 2 * b->cap_plan : 256;
		void ***s = realloc(b->plan_slot, (size_t)cap * sizeof *s);
		if (!s)
			goto oom;
		b->plan_slot = s;
		size_t *z = realloc(b->plan_bytes, (size_t)cap * sizeof *z);
		if (!z)
			goto oom;
		b->plan_bytes = z;
		b->cap_plan = cap;
	}
	b->plan_slot[b->n_plan] = slot;
	b->plan_bytes[b->n_plan] = bytes;
	b->n_plan++;
	return 0;
oom:
	dlc_failf(b, "cuda backend: out of host memory planning the arena");
	return -1;
}

void dl_cuda_default_options(struct dl_cuda_options *o)
{
	memset(o, 0, sizeof *o);
	o->precision = DL_CUDA_BF16;
	o->conv_find = 1;
	o->workspace_limit = (size_t)1 << 30;
	o->bucket_bytes = (size_t)25 << 20;
	const char *p = getenv("DLJOB_CUDA_PRECISION");
	if (p && strcmp(p, "fp32") == 0)
		o->precision = DL_CUDA_FP32;
	else if (p && strcmp(p, "fp16") == 0)
		o->precision = DL_CUDA_FP16;
	p = getenv("DLJOB_CUDA_GRAPHS");
	o->cuda_graphs = p && strcmp(p, "1") == 0;
	p = getenv("DLJOB_CUDA_CONV_ALGO");
	if (p && strcmp(p, "heuristic") == 0)
		o->conv_find = 0;
	p = getenv("DLJOB_CUDA_POISON");
	o->poison = p && strcmp(p, "1") == 0;
	o->device = -1;
}

int dl_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

/* The device for this process: explicit, DLJOB_CUDA_DEVICE, or the local
 * rank when several GPUs are visible (one process per GPU). */
int dl_cuda_select_device(int dev, char *err, size_t errlen)
{
	int ndev = dl_cuda_device_count();
	const char *why = "the caller";
	if (ndev < 1) {
		snprintf(err, errlen, "cuda backend: no CUDA device is visible (cudaGetDeviceCount)");
		return -1;
	}
	if (dev < 0) {
		static const char *const vars[] = { "DLJOB_CUDA_DEVICE", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
						    "LOCAL_RANK" };
		for (size_t i = 0; i < sizeof vars / sizeof vars[0] && dev < 0; i++) {
			const char *v = getenv(vars[i]);
			char *end;
			if (!v || !*v || (i > 0 && ndev < 2))
				continue;
			long x = strtol(v, &end, 10);
			if (*end || x < 0) {
				snprintf(err, errlen, "cuda backend: %s=%s is not a device number", vars[i], v);
				return -1;
			}
			dev = i == 0 ? (int)x : (int)(x % ndev);
			why = vars[i];
		}
	}
	if (dev < 0 && cudaGetDevice(&dev) != cudaSuccess) {
		snprintf(err, errlen, "cuda backend: cudaGetDevice failed");
		return -1;
	}
	if (dev >= ndev) {
		snprintf(err, errlen, "cuda backend: device %d (from %s) but only %d visible", dev, why, ndev);
		return -1;
	}
	cudaError_t e = cudaSetDevice(dev);
	if (e != cudaSuccess) {
		snprintf(err, errlen, "cuda backend: cudaSetDevice(%d): %s", dev, cudaGetErrorString(e));
		return -1;
	}
	return dev;
}

/* Which node writes the gradient of each param (-1: none), checking that
 * no param is used twice (its gradient would be overwritten). */
static int param_writers(struct dl_backend *b, int *writer)
{
	const struct dl_graph *g = b->g;
	for (int p = 0; p < g->n_params; p++)
		writer[p] = -1;
	for (int i = 0; i < g->n_nodes; i++)
		for (int k = 0; k < 2; k++) {
			int p = g->nodes[i].param[k];
			if (p < 0)
				continue;
			if (writer[p] >= 0) {
				dlc_failf(b, "cuda backend: param %s is used by nodes %d and %d (shared weights are not supported)",
					  g->params[p].name, writer[p], i);
				return -1;
			}
			writer[p] = i;
		}
	return 0;
}

/* Structural checks: everything the kernels below assume. */
static int check_graph(struct dl_backend *b)
{
	const struct dl_graph *g = b->g;
	if (g->n_values < 1 || g->input != 0 || g->output < 0 || g->output >= g->n_values) {
		dlc_failf(b, "cuda backend: graph has bad input %d / output %d of %d values", g->input, g->output,
			  g->n_values);
		return -1;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		int nin = d->kind == DL_NODE_ADD ? 2 : 1;
		if (d->out <= 0 || d->out >= g->n_values) {
			dlc_failf(b, "cuda backend: node %d: bad output value %d", i, d->out);
			return -1;
		}
		for (int k = 0; k < nin; k++) {
			int v = d->in[k];
			if (v < 0 || v >= g->n_values) {
				dlc_failf(b, "cuda backend: node %d: bad input value %d", i, v);
				return -1;
			}
			if (v == g->input && d->kind != DL_NODE_CONV && b->val[v].cp != b->val[v].c) {
				dlc_failf(b, "cuda backend: node %d reads the image directly; only a convolution may (image channels are padded)", i);
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
			dlc_failf(b, "cuda backend: node %d: input and output shapes differ", i);
			return -1;
		}
		if (d->kind == DL_NODE_MAXPOOL &&
		    (d->kernel < 1 || d->stride < 1 || d->pad < 0 || d->pad >= d->kernel || ys->c != xs->c ||
		     ys->h != (xs->h + 2 * d->pad - d->kernel) / d->stride + 1 ||
		     ys->w != (xs->w + 2 * d->pad - d->kernel) / d->stride + 1)) {
			dlc_failf(b, "cuda backend: max-pool node %d: output (%d,%d,%d) does not follow from its input", i,
				  ys->c, ys->h, ys->w);
			return -1;
		}
		if (d->kind == DL_NODE_GAP && (ys->c != xs->c || ys->h != 1 || ys->w != 1)) {
			dlc_failf(b, "cuda backend: GAP node %d: output is not (%d,1,1)", i, xs->c);
			return -1;
		}
		int np = d->kind == DL_NODE_CONV ? 1 : (d->kind == DL_NODE_BN || d->kind == DL_NODE_FC) ? 2 : 0;
		for (int k = 0; k < np; k++)
			if (d->param[k] < 0 || d->param[k] >= g->n_params) {
				dlc_failf(b, "cuda backend: node %d: bad param index %d", i, d->param[k]);
				return -1;
			}
		if (d->kind == DL_NODE_BN)
			for (int k = 0; k < 2; k++)
				if (d->buffer[k] < 0 || d->buffer[k] >= g->n_buffers ||
				    g->buffers[d->buffer[k]].count != (size_t)xs->c ||
				    g->params[d->param[k]].count != (size_t)xs->c) {
					dlc_failf(b, "cuda backend: BN node %d: gamma/beta or running buffer %d is not %d long", i,
						  d->buffer[k], xs->c);
					return -1;
				}
		if (d->kind == DL_NODE_MAXPOOL && d->kernel * d->kernel > 255) {
			dlc_failf(b, "cuda backend: max-pool node %d: kernel %d too large", i, d->kernel);
			return -1;
		}
		if (d->kind == DL_NODE_FC) {
			const struct dl_shape *x = &g->values[d->in[0]];
			const struct dl_tensor_f32 *w = &g->params[d->param[0]];
			if (d->out != g->output || x->h != 1 || x->w != 1 || w->ndim != 2 || w->dims[1] != x->c ||
			    g->values[d->out].c != w->dims[0] || g->params[d->param[1]].count != (size_t)w->dims[0]) {
				dlc_failf(b, "cuda backend: FC node %d must map (C,1,1) to the graph output (K,1,1) with weight (K,C)", i);
				return -1;
			}
		}
	}
	return 0;
}

static int upload(struct dl_backend *b)
{
	const struct dl_graph *g = b->g;
	for (int i = 0; i < g->n_params; i++)
		CK_CUDA(b, cudaMemcpyAsync(b->w + b->p_off[i], g->params[i].data, g->params[i].count * sizeof(float),
					   cudaMemcpyHostToDevice, b->s));
	for (int i = 0; i < g->n_buffers; i++)
		CK_CUDA(b, cudaMemcpyAsync(b->bufs + b->b_off[i], g->buffers[i].data, g->buffers[i].count * sizeof(float),
					   cudaMemcpyHostToDevice, b->s));
	return dlc_refresh_work(b);
}

int dl_cuda_load_graph(struct dl_backend *b)
{
	if (upload(b))
		return -1;
	CK_CUDA(b, cudaMemsetAsync(b->mom, 0, b->n_flat * sizeof(float), b->s));
	CK_CUDA(b, cudaStreamSynchronize(b->s));
	return 0;
}

int dl_cuda_store_graph(struct dl_backend *b, float **mom)
{
	const struct dl_graph *g = b->g;
	for (int i = 0; i < g->n_params; i++) {
		CK_CUDA(b, cudaMemcpyAsync(g->params[i].data, b->w + b->p_off[i], g->params[i].count * sizeof(float),
					   cudaMemcpyDeviceToHost, b->s));
		if (mom && mom[i])
			CK_CUDA(b, cudaMemcpyAsync(mom[i], b->mom + b->p_off[i], g->params[i].count * sizeof(float),
						   cudaMemcpyDeviceToHost, b->s));
	}
	for (int i = 0; i < g->n_buffers; i++)
		CK_CUDA(b, cudaMemcpyAsync(g->buffers[i].data, b->bufs + b->b_off[i],
					   g->buffers[i].count * sizeof(float), cudaMemcpyDeviceToHost, b->s));
	CK_CUDA(b, cudaStreamSynchronize(b->s));
	return 0;
}

void dl_cuda_memory(struct dl_backend *b, size_t *arena_bytes, size_t *device_bytes)
{
	if (arena_bytes)
		*arena_bytes = b->arena_bytes;
	if (device_bytes)
		*device_bytes = b->device_bytes;
}

/* Allreduce buckets of about bucket_bytes over params taken from the last
 * (whose grads backward produces first); each is launched after the node
 * that completes it, i.e. the lowest-numbered node writing one of its params. */
static int plan_buckets(struct dl_backend *b, const int *writer)
{
	const struct dl_graph *g = b->g;
	b->bk = calloc((size_t)g->n_params + 1, sizeof *b->bk);
	int *done_by = calloc((size_t)g->n_params + 1, sizeof *done_by);
	int *count = calloc((size_t)g->n_nodes + 1, sizeof *count);
	int rv = -1;
	if (!b->bk || !done_by || !count) {
		dlc_failf(b, "cuda backend: out of host memory planning allreduce buckets");
		goto out;
	}
	int hi = g->n_params - 1;
	while (hi >= 0) {
		int lo = hi, node = writer[hi];
		size_t bytes = g->params[hi].count * sizeof(float);
		while (lo > 0 && bytes < b->opt.bucket_bytes) {
			lo--;
			bytes += g->params[lo].count * sizeof(float);
		}
		for (int p = lo; p <= hi; p++)
			if (writer[p] >= 0 && (node < 0 || writer[p] < node))
				node = writer[p];
		struct dlc_bucket *k = &b->bk[b->n_bk];
		k->off = b->p_off[lo];
		k->count = b->p_off[hi] + g->params[hi].count - b->p_off[lo];
		done_by[b->n_bk] = node < 0 ? 0 : node;
		count[done_by[b->n_bk]]++;
		b->n_bk++;
		hi = lo - 1;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		if (!count[i])
			continue;
		b->node[i].ready = calloc((size_t)count[i], sizeof(int));
		if (!b->node[i].ready) {
			dlc_failf(b, "cuda backend: out of host memory planning allreduce buckets");
			goto out;
		}
	}
	for (int k = 0; k < b->n_bk; k++) {
		struct dlc_node *nd = &b->node[done_by[k]];
		nd->ready[nd->n_ready++] = k;
	}
	b->ev_bk = calloc((size_t)b->n_bk, sizeof *b->ev_bk);
	if (!b->ev_bk) {
		dlc_failf(b, "cuda backend: out of host memory");
		goto out;
	}
	rv = 0;
out:
	free(done_by);
	free(count);
	return rv;
}

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static int setup(struct dl_backend *b)
{
	struct dl_graph *g = b->g;
	int n = b->n;
	int *writer;
	int rv = -1;
	size_t free0 = 0, free1 = 0, total = 0;

	switch (b->opt.precision) {
	case DL_CUDA_FP32:
		b->dt = DLC_F32, b->esize = 4, b->cudnn_dt = CUDNN_DATA_FLOAT, b->blas_dt = CUDA_R_32F;
		break;
	case DL_CUDA_BF16:
		b->dt = DLC_BF16, b->esize = 2, b->cudnn_dt = CUDNN_DATA_BFLOAT16, b->blas_dt = CUDA_R_16BF;
		break;
	case DL_CUDA_FP16:
		b->dt = DLC_F16, b->esize = 2, b->cudnn_dt = CUDNN_DATA_HALF, b->blas_dt = CUDA_R_16F;
		break;
	default:
		dlc_failf(b, "cuda backend: unknown precision %d", (int)b->opt.precision);
		return -1;
	}
	b->loss_scale = b->opt.loss_scale > 0 ? b->opt.loss_scale : b->dt == DLC_F16 ? 1024.0f : 1.0f;
	b->graph_in = -1;
	if (dl_cuda_select_device(b->opt.device, b->err, sizeof b->err) < 0)
		return -1;
	CK_CUDA(b, cudaMemGetInfo(&free0, &total));
	CK_CUDA(b, cudaStreamCreateWithFlags(&b->s, cudaStreamNonBlocking));
	CK_CUDA(b, cudaStreamCreateWithFlags(&b->cs, cudaStreamNonBlocking));
	CK_CUDNN(b, cudnnCreate(&b->cudnn));
	b->have_cudnn = 1;
	CK_CUDNN(b, cudnnSetStream(b->cudnn, b->s));
	CK_CUBLAS(b, cublasCreate(&b->blas));
	b->have_blas = 1;
	CK_CUBLAS(b, cublasSetStream(b->blas, b->s));
	/* fp32 checks: no TF32 in the classifier either */
	CK_CUBLAS(b, cublasSetMathMode(b->blas, b->dt == DLC_F32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));

	b->val = calloc((size_t)g->n_values, sizeof *b->val);
	b->node = calloc((size_t)g->n_nodes + 1, sizeof *b->node);
	b->algos = calloc((size_t)g->n_nodes + 1, sizeof *b->algos);
	b->p_off = calloc((size_t)g->n_params + 1, sizeof *b->p_off);
	b->b_off = calloc((size_t)g->n_buffers + 1, sizeof *b->b_off);
	b->h_tensors = calloc((size_t)g->n_params + 1, sizeof *b->h_tensors);
	writer = b->writer = calloc((size_t)g->n_params + 1, sizeof *writer);
	if (!b->val || !b->node || !b->algos || !b->p_off || !b->b_off || !b->h_tensors || !writer) {
		dlc_failf(b, "cuda backend: out of host memory");
		goto out;
	}
	for (int v = 0; v < g->n_values; v++) {
		struct dlc_value *x = &b->val[v];
		x->c = g->values[v].c, x->h = g->values[v].h, x->w = g->values[v].w;
		/* tensor cores want channels in multiples of 8: pad the image (3 -> 8) */
		x->cp = v == g->input && x->c % 8 ? (x->c + 7) / 8 * 8 : x->c;
		x->elems = (size_t)n * x->h * x->w * x->cp;
	}
	if (check_graph(b) || param_writers(b, writer))
		goto out;
	b->img_c = g->values[g->input].c;
	if (b->img_c > DLC_MAX_IMG_C) {
		dlc_failf(b, "cuda backend: image has %d channels, at most %d supported", b->img_c, DLC_MAX_IMG_C);
		goto out;
	}

	/* flat parameter arrays, each tensor 256-byte aligned */
	for (int i = 0; i < g->n_params; i++) {
		b->p_off[i] = b->n_flat;
		b->n_flat = align_up(b->n_flat + g->params[i].count, 64);
	}
	for (int i = 0; i < g->n_buffers; i++) {
		b->b_off[i] = b->n_bflat;
		b->n_bflat += g->buffers[i].count;
	}
	if (dlc_plan(b, (void **)&b->w, b->n_flat * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->gr, b->n_flat * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->mom, b->n_flat * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->bufs, (b->n_bflat + 1) * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->d_lr, sizeof(float)))
		goto out;

	/* working copies: conv weights KRSC with padded input channels, FC weight as is */
	for (int i = 0; i < g->n_params; i++) {
		struct dlc_ptensor *t = &b->h_tensors[i];
		t->off = b->p_off[i];
		t->count = g->params[i].count;
		t->map = DLC_MAP_NONE;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		if (d->kind == DL_NODE_CONV) {
			const struct dl_tensor_f32 *p = &g->params[d->param[0]];
			struct dlc_ptensor *t = &b->h_tensors[d->param[0]];
			if (p->ndim != 4) {
				dlc_failf(b, "cuda backend: conv weight %s is not 4-d", p->name);
				goto out;
			}
			t->map = DLC_MAP_OIHW_KRSC;
			t->o = p->dims[0], t->i = p->dims[1], t->kh = p->dims[2], t->kw = p->dims[3];
			t->ip = b->val[d->in[0]].cp;
			if (dlc_plan(b, &t->work, (size_t)t->o * t->kh * t->kw * t->ip * b->esize))
				goto out;
		} else if (d->kind == DL_NODE_FC) {
			struct dlc_ptensor *t = &b->h_tensors[d->param[0]];
			t->map = DLC_MAP_PLAIN;
			if (dlc_plan(b, &t->work, t->count * b->esize))
				goto out;
		}
	}

	/* activations and their gradients; the classifier writes fp32 logits directly */
	size_t part = 0;
	for (int v = 0; v < g->n_values; v++) {
		int fc_out = 0;
		for (int i = 0; i < g->n_nodes; i++)
			if (g->nodes[i].out == v && g->nodes[i].kind == DL_NODE_FC)
				fc_out = 1;
		if (fc_out)
			continue;
		if (dlc_plan(b, &b->val[v].act, b->val[v].elems * b->esize))
			goto out;
		if (v != g->input && dlc_plan(b, &b->val[v].grad, b->val[v].elems * b->esize))
			goto out;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		const struct dlc_value *x = &b->val[d->in[0]], *y = &b->val[d->out];
		if (d->kind == DL_NODE_CONV) {
			if (dlc_conv_setup(b, i))
				goto out;
		} else if (d->kind == DL_NODE_BN) {
			size_t m = (size_t)n * x->h * x->w, p = dlc_bn_part_floats(m, x->c);
			part = p > part ? p : part;
			if (dlc_plan(b, (void **)&b->node[i].mean, (size_t)x->c * sizeof(float)) ||
			    dlc_plan(b, (void **)&b->node[i].invstd, (size_t)x->c * sizeof(float)))
				goto out;
		} else if (d->kind == DL_NODE_MAXPOOL) {
			if (dlc_plan(b, (void **)&b->node[i].arg, y->elems))
				goto out;
		} else if (d->kind == DL_NODE_FC) {
			if (dlc_plan(b, &b->node[i].dl_work, (size_t)n * y->c * b->esize))
				goto out;
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
		dlc_failf(b, "cuda backend: out of host memory");
		goto out;
	}
	b->n_chunks = 0;
	for (int i = 0; i < g->n_params; i++)
		for (size_t s = 0; s < b->h_tensors[i].count; s += DLC_CHUNK) {
			struct dlc_chunk *c = &b->h_chunks[b->n_chunks++];
			size_t left = b->h_tensors[i].count - s;
			c->tensor = i;
			c->start = s;
			c->len = (int)(left < DLC_CHUNK ? left : DLC_CHUNK);
		}
	b->blas_ws_bytes = BLAS_WS_BYTES;
	if (dlc_plan(b, (void **)&b->bn_part, (part + 1) * sizeof(float)) ||
	    dlc_plan(b, &b->ws, b->ws_bytes + 1) ||
	    dlc_plan(b, &b->blas_ws, b->blas_ws_bytes) ||
	    dlc_plan(b, (void **)&b->d_x, b->x_count * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->d_u8, b->x_count) ||
	    dlc_plan(b, (void **)&b->d_flip, (size_t)n) ||
	    dlc_plan(b, (void **)&b->d_labels, (size_t)n * sizeof(int)) ||
	    dlc_plan(b, (void **)&b->d_logits, b->out_count * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->d_dlogits, b->out_count * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->d_loss, (size_t)n * sizeof(float)) ||
	    dlc_plan(b, (void **)&b->d_correct, (size_t)n * sizeof(int)) ||
	    dlc_plan(b, (void **)&b->d_tensors, ((size_t)g->n_params + 1) * sizeof(struct dlc_ptensor)) ||
	    dlc_plan(b, (void **)&b->d_chunks, ((size_t)b->n_chunks + 1) * sizeof(struct dlc_chunk)))
		goto out;

	/* the one allocation */
	for (int k = 0; k < b->n_plan; k++)
		b->arena_bytes += align_up(b->plan_bytes[k], ARENA_ALIGN);
	if (cudaMalloc(&b->arena, b->arena_bytes) != cudaSuccess) {
		dlc_failf(b, "cuda backend: cannot allocate %.2f GiB of device memory for batch %d (%.2f GiB free)",
			  (double)b->arena_bytes / (1 << 30), n, (double)free0 / (1 << 30));
		b->arena = NULL;
		goto out;
	}
	{
		size_t off = 0;
		for (int k = 0; k < b->n_plan; k++) {
			*b->plan_slot[k] = (char *)b->arena + off;
			off += align_up(b->plan_bytes[k], ARENA_ALIGN);
		}
	}
	/* zero: padded channels of the image and of its conv weights must stay 0.
	 * Everything goes on b->s: a non-blocking stream does not wait for work
	 * that plain cudaMemset/cudaMemcpy put on the legacy default stream. */
	CK_CUDA(b, cudaMemsetAsync(b->arena, 0, b->arena_bytes, b->s));
	if (b->opt.poison) {
		CK_CUDA(b, cudaMemsetAsync(b->d_logits, 0xff, b->out_count * sizeof(float), b->s));
		for (int i = 0; i < g->n_nodes; i++)
			if (b->node[i].mean) {
				size_t c = (size_t)b->val[g->nodes[i].in[0]].c * sizeof(float);
				CK_CUDA(b, cudaMemsetAsync(b->node[i].mean, 0xff, c, b->s));
				CK_CUDA(b, cudaMemsetAsync(b->node[i].invstd, 0xff, c, b->s));
			}
	}
	if (b->opt.poison)
		for (int v = 0; v < g->n_values; v++) {
			/* 0xff bytes are NaN in fp32, bf16 and fp16 */
			if (b->val[v].act && v != g->input)
				CK_CUDA(b, cudaMemsetAsync(b->val[v].act, 0xff, b->val[v].elems * b->esize, b->s));
			if (b->val[v].grad)
				CK_CUDA(b, cudaMemsetAsync(b->val[v].grad, 0xff, b->val[v].elems * b->esize, b->s));
		}
	CK_CUDA(b, cudaMemcpyAsync(b->d_tensors, b->h_tensors, (size_t)g->n_params * sizeof(struct dlc_ptensor),
				   cudaMemcpyHostToDevice, b->s));
	CK_CUDA(b, cudaMemcpyAsync(b->d_chunks, b->h_chunks, (size_t)b->n_chunks * sizeof(struct dlc_chunk),
				   cudaMemcpyHostToDevice, b->s));
	CK_CUBLAS(b, cublasSetWorkspace(b->blas, b->blas_ws, b->blas_ws_bytes));

	/* pinned host edges */
	CK_CUDA(b, cudaMallocHost((void **)&b->h_x, b->x_count * sizeof(float)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_u8, b->x_count));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_flip, (size_t)n));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_labels, (size_t)n * sizeof(int)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_logits, b->out_count * sizeof(float)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_loss, (size_t)n * sizeof(float)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_correct, (size_t)n * sizeof(int)));
	CK_CUDA(b, cudaMallocHost((void **)&b->h_lr, sizeof(float)));
	memset(b->h_flip, 0, (size_t)n);
	memset(b->h_labels, 0, (size_t)n * sizeof(int));

	if (b->opt.nccl && plan_buckets(b, writer))
		goto out;
	b->have_events = 1; /* destroy() frees whichever were made */
	for (int k = 0; k < b->n_bk; k++)
		CK_CUDA(b, cudaEventCreateWithFlags(&b->ev_bk[k], cudaEventDisableTiming));
	CK_CUDA(b, cudaEventCreateWithFlags(&b->ev_comm, cudaEventDisableTiming));
	CK_CUDA(b, cudaEventCreate(&b->ev_start));
	CK_CUDA(b, cudaEventCreate(&b->ev_done));

	{
		/* torchvision's ImageNet normalization for RGB, 0.5/0.5 otherwise */
		static const float mean3[3] = { 0.485f, 0.456f, 0.406f }, std3[3] = { 0.229f, 0.224f, 0.225f };
		for (int c = 0; c < DLC_MAX_IMG_C; c++) {
			b->norm.mean[c] = b->img_c == 3 && c < 3 ? mean3[c] : 0.5f;
			b->norm.inv_std[c] = 1.0f / (b->img_c == 3 && c < 3 ? std3[c] : 0.5f);
		}
	}
	if (dl_cuda_load_graph(b))
		goto out;
	CK_CUDA(b, cudaMemGetInfo(&free1, &total));
	b->device_bytes = free0 > free1 ? free0 - free1 : 0;
	rv = 0;
out:
	return rv;
}

static void destroy(struct dl_backend *b)
{
	if (!b)
		return;
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
		if (b->ev_comm)
			cudaEventDestroy(b->ev_comm);
		if (b->ev_start)
			cudaEventDestroy(b->ev_start);
		if (b->ev_done)
			cudaEventDestroy(b->ev_done);
	}
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
	cudaFreeHost(b->h_x);
	cudaFreeHost(b->h_u8);
	cudaFreeHost(b->h_flip);
	cudaFreeHost(b->h_labels);
	cudaFreeHost(b->h_logits);
	cudaFreeHost(b->h_loss);
	cudaFreeHost(b->h_correct);
	cudaFreeHost(b->h_lr);
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
	free(b->plan_slot);
	free(b->plan_bytes);
	free(b);
}

struct dl_backend *dl_cuda_create(struct dl_graph *g, int n, const struct dl_cuda_options *o, char *err,
				  size_t errlen)
{
	if (!g || n < 1) {
		snprintf(err, errlen, "cuda backend: bad graph or batch size %d", n);
		return NULL;
	}
	struct dl_backend *b = calloc(1, sizeof *b);
	if (!b) {
		snprintf(err, errlen, "cuda backend: out of host memory");
		return NULL;
	}
	b->g = g;
	b->n = n;
	if (o)
		b->opt = *o;
	else
		dl_cuda_default_options(&b->opt);
	if (b->opt.workspace_limit == 0)
		b->opt.workspace_limit = (size_t)1 << 30;
	if (b->opt.bucket_bytes == 0)
		b->opt.bucket_bytes = (size_t)25 << 20;
	if (setup(b)) {
		snprintf(err, errlen, "%s", b->err);
		destroy(b);
		return NULL;
	}
	return b;
}

/* ---- dl_backend_ops ----
 * The training-step interface (engine/backend.h) is implemented for CUDA
 * on branch engine-cuda (issue 14); until it lands, create() refuses. */

static struct dl_backend *ops_create(struct dl_graph *g, int n, const struct dl_backend_opts *o, char *err,
				     size_t errlen)
{
	snprintf(err, errlen, "cuda backend: the training-step interface is not implemented in this build yet "
		 "(use --backend cpu)");
	return NULL;
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
	.destroy = ops_destroy,
	.error = ops_error,
	.host_alloc = dl_cuda_host_alloc,
	.host_free = dl_cuda_host_free,
};
