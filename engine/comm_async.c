#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/comm_async.h"
#include "engine/optim.h"

#define ALIGN_FLOATS 16

struct bucket {
	size_t off, n;   /* floats of flat; the last bucket includes the 2 tail floats */
	size_t ngrad;    /* of which gradients (divided by the rank count) */
	int n_params, n_ready;
};

struct dl_reducer {
	struct dl_comm *comm;   /* NULL: one rank */
	float *flat;            /* flat_mem rounded up to 64 bytes */
	void *flat_mem;
	size_t n_grad;          /* gradient floats; flat has n_grad + 2 */
	size_t *off;            /* per param: offset of its slice */
	int *bucket_of;         /* per param */
	struct bucket *b;
	int n_buckets;
	int next_send;          /* buckets [0, next_send) were queued */
	int *ready;             /* per param: marked this step */
	/* Shared with the communication thread, under mu. */
	pthread_t thread;
	int have_thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int queued;             /* buckets [0, queued) handed to the thread this step */
	int done;               /* buckets [0, done) reduced */
	int quit, failed;
	double comm_s, t_first;
	char err[256];
};

double dl_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *comm_thread(void *arg)
{
	struct dl_reducer *r = arg;
	float inv = 1.0f / (float)r->comm->size;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->quit && r->done >= r->queued)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->quit)
			break;
		int k = r->done;
		int failed = r->failed;
		pthread_mutex_unlock(&r->mu);
		const struct bucket *bk = &r->b[k];
		char err[256] = "";
		double t0 = dl_now_s(), t1 = t0;
		int rc = 0;
		if (!failed) {
			rc = r->comm->allreduce_sum_f32(r->comm, r->flat + bk->off, bk->n, err, sizeof(err));
			/* Each rank's gradient is d(mean over its batch); the mean
			 * over the global batch is the average of those. */
			float *g = r->flat + bk->off;
			for (size_t j = 0; rc == 0 && j < bk->ngrad; j++)
				g[j] *= inv;
			t1 = dl_now_s();
		}
		pthread_mutex_lock(&r->mu);
		if (!failed) {
			if (k == 0)
				r->t_first = t0;
			r->comm_s += t1 - t0;
		}
		if (rc < 0 && !r->failed) {
			r->failed = 1;
			snprintf(r->err, sizeof(r->err), "gradient allreduce (bucket %d of %d): %s", k + 1,
				 r->n_buckets, err);
		}
		r->done = k + 1;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

struct dl_reducer *dl_reducer_create(struct dl_comm *comm, const size_t *count, const int *order, int n,
				     size_t bucket_bytes, char *err, size_t errlen)
{
	struct dl_reducer *r = calloc(1, sizeof(*r));
	if (!r) {
		dl_errf(err, errlen, "out of memory for the gradient reducer");
		return NULL;
	}
	r->comm = comm && comm->size > 1 ? comm : NULL;
	if (bucket_bytes == 0)
		bucket_bytes = DL_BUCKET_BYTES_DEFAULT;
	size_t bucket_floats = bucket_bytes / sizeof(float);
	if (bucket_floats == 0)
		bucket_floats = 1;
	/* A small first bucket (unless asked for one bucket): communication
	 * starts after the last layers' backward, not after 25 MiB of it. */
	size_t first_floats = bucket_bytes == SIZE_MAX || bucket_bytes < DL_FIRST_BUCKET_BYTES
				      ? bucket_floats
				      : DL_FIRST_BUCKET_BYTES / sizeof(float);
	r->off = calloc((size_t)n + 1, sizeof(size_t));
	r->bucket_of = calloc((size_t)n + 1, sizeof(int));
	r->ready = calloc((size_t)n + 1, sizeof(int));
	r->b = calloc((size_t)n + 1, sizeof(*r->b));
	if (!r->off || !r->bucket_of || !r->ready || !r->b)
		goto oom;
	/* Lay the params out in backward order and cut buckets: a bucket is
	 * closed once it holds bucket_bytes or more. */
	size_t off = 0;
	int nb = 0;
	for (int k = 0; k < n; k++) {
		int i = order[k];
		if (i < 0 || i >= n || r->ready[i]) {
			dl_errf(err, errlen, "%s:%d: reducer order is not a permutation (entry %d = %d)", __FILE__,
				 __LINE__, k, i);
			dl_reducer_destroy(r);
			return NULL;
		}
		r->ready[i] = 1;
		struct bucket *bk = &r->b[nb];
		/* Every slice 64-byte aligned, as oneDNN's kernels want the
		 * gradients they write (the gaps are zero and stay zero). */
		off = (off + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
		if (bk->n_params == 0)
			bk->off = off;
		r->off[i] = off;
		r->bucket_of[i] = nb;
		bk->n_params++;
		off += count[i];
		bk->ngrad = off - bk->off;
		if (bk->ngrad >= (nb == 0 ? first_floats : bucket_floats) && k + 1 < n)
			nb++;
	}
	r->n_buckets = n > 0 ? nb + 1 : 1;
	r->n_grad = off;
	struct bucket *last = &r->b[r->n_buckets - 1];
	if (last->n_params == 0)
		last->off = off;
	last->n = last->ngrad + 2;
	for (int k = 0; k + 1 < r->n_buckets; k++)
		r->b[k].n = r->b[k].ngrad;
	/* calloc, not aligned_alloc + memset: the pages stay untouched until
	 * backward writes them (a memset here raised the peak RSS, touching
	 * 100 MB while setup's temporaries were still live). */
	r->flat_mem = calloc((r->n_grad + 2) * sizeof(float) + 64, 1);
	if (!r->flat_mem)
		goto oom;
	r->flat = (float *)(((uintptr_t)r->flat_mem + 63) & ~(uintptr_t)63);
	memset(r->ready, 0, (size_t)n * sizeof(int));
	if (r->comm) {
		int e;
		if ((e = pthread_mutex_init(&r->mu, NULL)) != 0 || (e = pthread_cond_init(&r->cv, NULL)) != 0 ||
		    (e = pthread_create(&r->thread, NULL, comm_thread, r)) != 0) {
			dl_errf(err, errlen, "cannot start the communication thread: %s", strerror(e));
			dl_reducer_destroy(r);
			return NULL;
		}
		r->have_thread = 1;
	}
	return r;
oom:
	dl_errf(err, errlen, "out of memory for the gradient reducer");
	dl_reducer_destroy(r);
	return NULL;
}

void dl_reducer_destroy(struct dl_reducer *r)
{
	if (!r)
		return;
	if (r->have_thread) {
		pthread_mutex_lock(&r->mu);
		r->quit = 1;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->thread, NULL);
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
	}
	free(r->flat_mem);
	free(r->off);
	free(r->bucket_of);
	free(r->ready);
	free(r->b);
	free(r);
}

void dl_reducer_graph_order(const struct dl_graph *g, int *order)
{
	int k = 0;
	for (int p = 0; p < g->n_params; p++) {
		int used = 0;
		for (int i = 0; i < g->n_nodes && !used; i++)
			used = g->nodes[i].param[0] == p || g->nodes[i].param[1] == p;
		if (!used)
			order[k++] = p;
	}
	for (int i = g->n_nodes - 1; i >= 0; i--)
		for (int j = 0; j < 2; j++) {
			int p = g->nodes[i].param[j];
			int dup = p < 0 || p >= g->n_params;
			for (int q = 0; q < k && !dup; q++)
				dup = order[q] == p;
			if (!dup)
				order[k++] = p;
		}
}

float *dl_reducer_grad(struct dl_reducer *r, int i)
{
	return r->flat + r->off[i];
}

float *dl_reducer_grads(struct dl_reducer *r, size_t *n)
{
	*n = r->n_grad;
	return r->flat;
}

void dl_reducer_begin(struct dl_reducer *r, float loss, int stop)
{
	for (int k = 0; k < r->n_buckets; k++)
		r->b[k].n_ready = 0;
	r->next_send = 0;
	r->flat[r->n_grad] = loss;
	r->flat[r->n_grad + 1] = stop ? 1.0f : 0.0f;
	if (r->have_thread) {
		pthread_mutex_lock(&r->mu);
		/* After a failed step buckets may still be in flight: let them
		 * end before their counters are reused. */
		while (r->done < r->queued)
			pthread_cond_wait(&r->cv, &r->mu);
		r->queued = r->done = 0;
		r->comm_s = r->t_first = 0;
		pthread_mutex_unlock(&r->mu);
	}
}

/* Hand the complete buckets at the front to the thread, in order. */
static int send_ready(struct dl_reducer *r, int all, char *err, size_t errlen)
{
	int k = r->next_send;
	while (k < r->n_buckets && (all || r->b[k].n_ready == r->b[k].n_params))
		k++;
	if (k == r->next_send || !r->have_thread) {
		r->next_send = k;
		return 0;
	}
	r->next_send = k;
	pthread_mutex_lock(&r->mu);
	int failed = r->failed;
	if (failed)
		dl_errf(err, errlen, "%s", r->err);
	r->queued = k;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return failed ? -1 : 0;
}

int dl_reducer_ready(struct dl_reducer *r, int i, char *err, size_t errlen)
{
	struct bucket *bk = &r->b[r->bucket_of[i]];
	if (++bk->n_ready < bk->n_params || r->bucket_of[i] != r->next_send)
		return 0;
	return send_ready(r, 0, err, errlen);
}

int dl_reducer_finish(struct dl_reducer *r, double *loss, int *stop, struct dl_reduce_times *t, char *err,
		      size_t errlen)
{
	double t_end = dl_now_s();
	memset(t, 0, sizeof(*t));
	t->t_backward_end = t_end;
	if (!r->have_thread) {
		*loss = r->flat[r->n_grad];
		*stop = r->flat[r->n_grad + 1] > 0;
		return 0;
	}
	if (send_ready(r, 1, err, errlen) < 0)
		return -1;
	pthread_mutex_lock(&r->mu);
	while (r->done < r->n_buckets)
		pthread_cond_wait(&r->cv, &r->mu);
	int failed = r->failed;
	if (failed)
		dl_errf(err, errlen, "%s", r->err);
	t->comm_s = r->comm_s;
	t->t_first_start = r->t_first;
	pthread_mutex_unlock(&r->mu);
	t->exposed_s = dl_now_s() - t_end;
	t->n_buckets = r->n_buckets;
	if (failed)
		return -1;
	*loss = (double)r->flat[r->n_grad] / r->comm->size;
	*stop = r->flat[r->n_grad + 1] > 0;
	return 0;
}

int dl_reducer_finish_step(struct dl_reducer *r, const struct dl_optim_config *o, const struct dl_sgd_param *sgd,
			   int n, double lr, long *steps, double t0, struct dl_step_result *res, char *err,
			   size_t errlen)
{
	struct dl_reduce_times rt;
	size_t ng;
	if (dl_reducer_finish(r, &res->loss, &res->stop, &rt, err, errlen) < 0)
		return -1;
	const float *grads = dl_reducer_grads(r, &ng);
	res->nonfinite = !isfinite(lr) || !isfinite(res->loss) || !dl_all_finite(grads, ng);
	if (!res->nonfinite) {
		dl_sgd_step(o, sgd, n, lr, *steps == 0, NULL);
		(*steps)++;
	}
	res->comm_s = rt.comm_s;
	res->exposed_comm_s = rt.exposed_s;
	res->t_first_bucket_start = rt.t_first_start;
	res->t_backward_end = rt.t_backward_end;
	res->n_buckets = rt.n_buckets;
	res->compute_s = dl_now_s() - t0 - rt.exposed_s;
	return 0;
}
