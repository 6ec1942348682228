#include "config.h"

/* The classifier: logits (N,K) fp32 = x (N,C) . W^T + b through cublasGemmEx
 * (working-dtype inputs, fp32 accumulate and output).  cuBLAS is
 * column-major, so a row-major (R,C) matrix is passed as its (C,R)
 * transpose; the comments give the column-major products. */
#include "engine/cuda/cuda_internal.h"

int dlc_fc_fwd(struct dl_backend *b, int i)
{
	const struct dl_node *d = &b->g->nodes[i];
	const struct dlc_value *x = &b->val[d->in[0]];
	int k = b->g->params[d->param[0]].dims[0], c = x->c;
	const float one = 1.0f, zero = 0.0f;
	/* logits^T (K,N) = op_T(W^T stored (C,K)) . x^T stored (C,N) */
	CK_CUBLAS(b, cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, b->n, c, &one, b->h_tensors[d->param[0]].work,
				  b->blas_dt, c, x->act, b->blas_dt, c, &zero, b->d_logits, CUDA_R_32F, k,
				  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	CK_CUDA(b, dlc_bias_add(b->d_logits, b->w + b->p_off[d->param[1]], b->n, k, b->s));
	return 0;
}

/* From b->d_dlogits (N,K) fp32: db, dW into the flat fp32 grads, dx added to
 * the input's gradient. */
int dlc_fc_bwd(struct dl_backend *b, int i)
{
	const struct dl_node *d = &b->g->nodes[i];
	struct dlc_value *x = &b->val[d->in[0]];
	int k = b->g->params[d->param[0]].dims[0], c = x->c;
	void *dl = b->node[i].dl_work;
	const float one = 1.0f, zero = 0.0f;
	CK_CUDA(b, dlc_cast_from_f32(b->d_dlogits, dl, b->dt, (size_t)b->n * k, b->s));
	CK_CUDA(b, dlc_bias_grad(b->d_dlogits, b->gr + b->p_off[d->param[1]], b->n, k, b->s));
	/* dW^T (C,K) = x^T stored (C,N) . op_T(dl^T stored (K,N)) */
	CK_CUBLAS(b, cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_T, c, k, b->n, &one, x->act, b->blas_dt, c, dl,
				  b->blas_dt, k, &zero, b->gr + b->p_off[d->param[0]], CUDA_R_32F, c,
				  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	if (x->grad) {
		/* dx^T (C,N) = W^T stored (C,K) . dl^T stored (K,N) */
		CK_CUBLAS(b, cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, c, b->n, k, &one,
					  b->h_tensors[d->param[0]].work, b->blas_dt, c, dl, b->blas_dt, k,
					  x->grad_set ? &one : &zero, x->grad, b->blas_dt, c, CUBLAS_COMPUTE_32F,
					  CUBLAS_GEMM_DEFAULT));
		x->grad_set = 1;
	}
	return 0;
}
