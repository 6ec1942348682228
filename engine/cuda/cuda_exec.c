#include "config.h"

/* Running the graph: input conversion, forward and backward over the nodes
 * in topological order, all enqueued on the backend's compute stream. */
#include <string.h>

#include "engine/cuda/cuda_internal.h"

/* The image value (N,H,W,cp) in the working dtype from the batch already on
 * the device: d_x (N,C,H,W) fp32, or d_u8 (N,H,W,C) normalized with d_norm. */
int dlc_input(struct dl_backend *b, enum dlc_input in)
{
	const struct dl_shape *xs = &b->g->values[b->g->input];
	struct dlc_value *x = &b->val[b->g->input];
	if (in == DLC_IN_F32)
		CK_CUDA(b, dlc_nchw_to_nhwc(b->d_x, x->act, b->dt, b->n, xs->c, xs->h, xs->w, x->cp, b->s));
	else
		CK_CUDA(b, dlc_u8_to_nhwc(b->d_u8, b->d_norm, x->act, b->dt, b->n, xs->h, xs->w, xs->c, x->cp, b->s));
	return 0;
}

int dlc_record(struct dl_backend *b, cudaEvent_t ev, cudaStream_t st)
{
	/* inside a capture a plain record only orders streams; the external
	 * flag makes it a real event node, so timing works on replays too */
	if (b->capturing)
		CK_CUDA(b, cudaEventRecordWithFlags(ev, st, cudaEventRecordExternal));
	else
		CK_CUDA(b, cudaEventRecord(ev, st));
	return 0;
}

int dlc_forward(struct dl_backend *b, int train)
{
	const struct dl_graph *g = b->g;
	for (int i = 0; i < g->n_nodes; i++) {
		const struct dl_node *d = &g->nodes[i];
		struct dlc_value *x = &b->val[d->in[0]], *y = &b->val[d->out];
		size_t m = (size_t)b->n * x->h * x->w;
		if (train && dlc_prof_mark(b, 1 + i))
			return -1;
		switch (d->kind) {
		case DL_NODE_CONV:
			if (dlc_conv_fwd(b, i))
				return -1;
			break;
		case DL_NODE_BN: {
			const float *gamma = b->w + b->p_off[d->param[0]], *beta = b->w + b->p_off[d->param[1]];
			float *rm = b->bufs + b->b_off[d->buffer[0]], *rv = b->bufs + b->b_off[d->buffer[1]];
			/* a BN its residual add applies (dlc_plan_bn_add) only makes its statistics */
			if (train)
				CK_CUDA(b, dlc_bn_fwd_train(x->act, b->node[i].apply_by >= 0 ? NULL : y->act, b->dt, m, x->c,
							    gamma, beta, b->node[i].mean,
							    b->node[i].invstd, rm, rv, g->bn_momentum, g->bn_eps, d->relu,
							    b->bn_part, b->s));
			else
				CK_CUDA(b, dlc_bn_fwd_infer(x->act, y->act, b->dt, m, x->c, gamma, beta, rm, rv, g->bn_eps,
							    d->relu, b->s));
			break;
		}
		case DL_NODE_RELU:
			CK_CUDA(b, dlc_add_relu(x->act, NULL, y->act, b->dt, y->elems, 1, b->s));
			break;
		case DL_NODE_ADD:
			if (train && (b->node[i].bn_in[0] >= 0 || b->node[i].bn_in[1] >= 0)) {
				/* where the add applies a BN, its input is that BN's input */
				struct dlc_bn_affine a[2];
				const struct dlc_bn_affine *bn[2] = { NULL, NULL };
				const void *in[2];
				for (int k = 0; k < 2; k++) {
					int j = b->node[i].bn_in[k];
					in[k] = b->val[j >= 0 ? g->nodes[j].in[0] : d->in[k]].act;
					if (j < 0)
						continue;
					a[k] = (struct dlc_bn_affine){ b->w + b->p_off[g->nodes[j].param[0]],
								       b->w + b->p_off[g->nodes[j].param[1]], b->node[j].mean,
								       b->node[j].invstd };
					bn[k] = &a[k];
				}
				CK_CUDA(b, dlc_bn_add(in[0], bn[0], in[1], bn[1], y->act, b->dt, m, y->c, d->relu, b->s));
			} else
				CK_CUDA(b, dlc_add_relu(x->act, b->val[d->in[1]].act, y->act, b->dt, y->elems, d->relu, b->s));
			break;
		case DL_NODE_MAXPOOL:
			CK_CUDA(b, dlc_maxpool_fwd(x->act, y->act, b->node[i].arg, b->dt, b->n, x->h, x->w, x->c, y->h, y->w,
						   d->kernel, d->stride, d->pad, b->s));
			break;
		case DL_NODE_GAP:
			CK_CUDA(b, dlc_gap_fwd(x->act, y->act, b->dt, b->n, x->h * x->w, x->c, b->s));
			break;
		case DL_NODE_FC:
			if (dlc_fc_fwd(b, i))
				return -1;
			break;
		}
	}
	if (train && dlc_prof_mark(b, 1 + g->n_nodes))
		return -1;
	/* logits (N, C*H*W) fp32 in torch's order; an FC output is already there */
	const struct dlc_value *o = &b->val[g->output];
	if (o->act)
		CK_CUDA(b, dlc_nhwc_to_nchw(o->act, b->dt, b->d_logits, b->n, o->c, o->h, o->w, o->cp, b->s));
	return 0;
}

/* The buckets node i completed go to NCCL on their own stream while
 * backward continues: cs waits for an event recorded after node i. */
static int launch_buckets(struct dl_backend *b, int i)
{
	for (int k = 0; k < b->node[i].n_ready; k++) {
		int bi = b->node[i].ready[k];
		CK_CUDA(b, cudaEventRecord(b->ev_bk[bi], b->s));
		CK_CUDA(b, cudaStreamWaitEvent(b->cs, b->ev_bk[bi], 0));
		if (bi == 0 && dlc_record(b, b->ev_comm_start, b->cs))
			return -1;
		if (dl_nccl_allreduce_f32(b->nccl, b->gr + b->bk[bi].off, b->bk[bi].count, b->cs, b->err,
					  sizeof b->err))
			return -1;
		if (bi == b->n_bk - 1 && dlc_record(b, b->ev_comm_end, b->cs))
			return -1;
	}
	return 0;
}

/* Backward from b->d_dlogits (already scaled by the loss scale), reducing
 * each bucket as soon as its gradients are written (when there is NCCL);
 * ends with ev_bwd_end recorded on s. */
int dlc_backward(struct dl_backend *b)
{
	const struct dl_graph *g = b->g;
	for (int v = 0; v < g->n_values; v++)
		b->val[v].grad_set = 0;
	struct dlc_value *o = &b->val[g->output];
	if (o->act) {
		CK_CUDA(b, dlc_nchw_to_nhwc_scaled(b->d_dlogits, 1.0f, o->grad, b->dt, b->n, o->c, o->h, o->w, b->s));
		o->grad_set = 1;
	}
	for (int i = g->n_nodes - 1; i >= 0; i--) {
		const struct dl_node *d = &g->nodes[i];
		struct dlc_value *x = &b->val[d->in[0]], *y = &b->val[d->out];
		size_t m = (size_t)b->n * x->h * x->w;
		if (dlc_prof_mark(b, 2 + 2 * g->n_nodes - 1 - i))
			return -1;
		if (d->kind != DL_NODE_FC && !y->grad_set) {
			/* nothing consumed this value: its gradient is zero */
			CK_CUDA(b, cudaMemsetAsync(y->grad, 0, y->elems * b->esize, b->s));
			y->grad_set = 1;
		}
		switch (d->kind) {
		case DL_NODE_CONV:
			if (dlc_conv_bwd(b, i))
				return -1;
			break;
		case DL_NODE_BN:
			CK_CUDA(b, dlc_bn_bwd(x->act, y->grad, x->grad, b->dt, m, x->c, b->w + b->p_off[d->param[0]],
					      b->w + b->p_off[d->param[1]], b->node[i].mean, b->node[i].invstd,
					      b->gr + b->p_off[d->param[0]], b->gr + b->p_off[d->param[1]], d->relu,
					      x->grad_set, b->bn_part, b->s));
			x->grad_set = x->grad != NULL;
			break;
		case DL_NODE_RELU:
			if (x->grad) {
				CK_CUDA(b, dlc_add_bwd(y->grad, y->act, x->grad, x->grad_set, NULL, 0, b->dt, y->elems, b->s));
				x->grad_set = 1;
			}
			break;
		case DL_NODE_ADD: {
			/* both inputs' gradients in one pass; a value added to itself
			 * takes the pass twice, the second adding to the first */
			struct dlc_value *a0 = &b->val[d->in[0]], *a1 = &b->val[d->in[1]];
			const void *mask = d->relu ? y->act : NULL;
			if (a0 == a1) {
				CK_CUDA(b, dlc_add_bwd(y->grad, mask, a0->grad, a0->grad_set, NULL, 0, b->dt, y->elems, b->s));
				CK_CUDA(b, dlc_add_bwd(y->grad, mask, a0->grad, a0->grad != NULL, NULL, 0, b->dt, y->elems,
						       b->s));
			} else
				CK_CUDA(b, dlc_add_bwd(y->grad, mask, a0->grad, a0->grad_set, a1->grad, a1->grad_set, b->dt,
						       y->elems, b->s));
			a0->grad_set |= a0->grad != NULL;
			a1->grad_set |= a1->grad != NULL;
			break;
		}
		case DL_NODE_MAXPOOL:
			if (x->grad) {
				CK_CUDA(b, dlc_maxpool_bwd(y->grad, b->node[i].arg, x->grad, b->dt, b->n, x->h, x->w, x->c,
							   y->h, y->w, d->kernel, d->stride, d->pad, x->grad_set, b->s));
				x->grad_set = 1;
			}
			break;
		case DL_NODE_GAP:
			if (x->grad) {
				CK_CUDA(b, dlc_gap_bwd(y->grad, x->grad, b->dt, b->n, x->h * x->w, x->c, x->grad_set, b->s));
				x->grad_set = 1;
			}
			break;
		case DL_NODE_FC:
			if (dlc_fc_bwd(b, i))
				return -1;
			break;
		}
		if (b->nccl && i == 0 && dlc_record(b, b->ev_bwd_end, b->s))
			return -1;
		if (b->nccl && launch_buckets(b, i))
			return -1;
	}
	if (!b->nccl && dlc_record(b, b->ev_bwd_end, b->s))
		return -1;
	return dlc_prof_mark(b, 2 + 2 * g->n_nodes);
}
