/* Bucketed gradient reduction on the engine's communication thread, for the
 * backends whose gradients live in host memory (cpu, ref).
 *
 * The reducer lays out one flat float32 buffer that the backend's backward
 * writes its gradients into directly (no copy, one rank or many):
 *
 *   flat = grad[order[0]] | grad[order[1]] | ... | grad[order[n-1]] | loss | stop
 *
 * order is the order in which backward finishes the parameters (last layer
 * first).  Consecutive parameters are grouped into buckets of about
 * bucket_bytes (the first of at most DL_FIRST_BUCKET_BYTES, engine/backend.h);
 * the last bucket also carries the two floats (the rank's
 * loss and its stop request), so every rank learns the global loss and
 * whether anyone asked to stop in the same collective.  When backward marks
 * the last parameter of a bucket ready, the bucket goes to the
 * communication thread, which sums it across ranks in place
 * (dl_comm.allreduce_sum_f32, buckets strictly in order) and divides its
 * gradients by the rank count, while backward goes on.  With one rank
 * there is no thread and nothing is reduced or copied.
 *
 * While a step is in flight (begin .. finish) only the communication thread
 * calls into the dl_comm; outside it, the caller may. */
#ifndef DLJOB_ENGINE_COMM_ASYNC_H
#define DLJOB_ENGINE_COMM_ASYNC_H

#include <stddef.h>
#include "engine/comm.h"
#include "engine/graph.h"

struct dl_reducer;
struct dl_optim_config;
struct dl_sgd_param;
struct dl_step_result;

/* CLOCK_MONOTONIC seconds: the clock of every phase timer of a step. */
double dl_now_s(void);

/* Times of one step's reduction (seconds; t_* CLOCK_MONOTONIC, 0 if none). */
struct dl_reduce_times {
	double comm_s;          /* sum of the bucket reductions' durations */
	double exposed_s;       /* finish() waiting for reductions after backward ended */
	double t_first_start;   /* first bucket's reduction started */
	double t_backward_end;  /* finish() was called */
	int n_buckets;
};

/* n params with count[i] floats each; order (n entries) a permutation of
 * 0..n-1, the order backward finishes them.  comm NULL or of size 1: no
 * reduction.  bucket_bytes 0: DL_BUCKET_BYTES_DEFAULT (engine/backend.h).
 * NULL with one line in err on failure. */
struct dl_reducer *dl_reducer_create(struct dl_comm *comm, const size_t *count, const int *order, int n,
				     size_t bucket_bytes, char *err, size_t errlen);
void dl_reducer_destroy(struct dl_reducer *r);
/* g's params in the order a backward pass over g's nodes finishes them
 * (nodes last to first, a node's params together), params no node uses
 * first (their gradient is zero from the start).  order has n_params
 * entries. */
void dl_reducer_graph_order(const struct dl_graph *g, int *order);
/* Param i's gradient slice in the flat buffer (count[i] floats). */
float *dl_reducer_grad(struct dl_reducer *r, int i);
/* All gradients, in flat order, and how many floats they are. */
float *dl_reducer_grads(struct dl_reducer *r, size_t *n);
/* Start a step: the rank's loss and stop request ride in the last bucket. */
void dl_reducer_begin(struct dl_reducer *r, float loss, int stop);
/* Param i's gradient is final; sends every bucket that is complete.
 * Returns 0, or -1 with err if the communication thread already failed. */
int dl_reducer_ready(struct dl_reducer *r, int i, char *err, size_t errlen);
/* Backward ended: send what is left, wait for every bucket.  loss: the
 * mean over ranks; stop: some rank asked.  Returns 0 or -1 with err (a
 * peer died or timed out: the caller must stop). */
int dl_reducer_finish(struct dl_reducer *r, double *loss, int *stop, struct dl_reduce_times *t, char *err,
		      size_t errlen);
/* The end of a host backend's train_step (cpu, ref), after its backward:
 * dl_reducer_finish, then unless lr, the global loss or a gradient is not
 * finite (res->nonfinite) the SGD update over sgd[0..n) (*steps counts the
 * updates applied; the first initialises momentum), and res's loss, stop
 * and phase times.  t0: dl_now_s() when the step began.  Returns 0, or -1
 * with err as dl_reducer_finish. */
int dl_reducer_finish_step(struct dl_reducer *r, const struct dl_optim_config *o, const struct dl_sgd_param *sgd,
			   int n, double lr, long *steps, double t0, struct dl_step_result *res, char *err,
			   size_t errlen);

#endif
