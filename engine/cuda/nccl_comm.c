#include "config.h"

/* NCCL communicator with bounded waits.  The communicator is created
 * non-blocking (ncclConfig_t.blocking = 0) so even ncclCommInitRankConfig
 * returns at once and is polled like every later operation: a peer that never
 * arrives or dies mid-allreduce becomes an error line and ncclCommAbort, not
 * a hang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* nccl.h declares ncclGroupStart() etc. without (void) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "common/err.h"
#include "engine/cuda/nccl_comm.h"

struct dl_nccl {
	ncclComm_t comm;
	int rank, size;
	double timeout_s;
	int aborted;
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nap(void)
{
	struct timespec t = { 0, 100000 }; /* 100 us: cheap against a step of tens of ms */
	nanosleep(&t, NULL);
}

static void abort_comm(struct dl_nccl *c)
{
	if (!c->aborted) {
		ncclCommAbort(c->comm);
		c->aborted = 1;
	}
}

/* Poll until NCCL's async state is no longer in progress (init, or a
 * non-blocking enqueue).  Returns 0, or -1 with err after aborting. */
static int wait_ready(struct dl_nccl *c, const char *what, char *err, size_t errlen)
{
	double deadline = now_s() + c->timeout_s;
	for (;;) {
		ncclResult_t st;
		ncclResult_t r = ncclCommGetAsyncError(c->comm, &st);
		if (r != ncclSuccess) {
			dl_errf(err, errlen, "nccl: %s: ncclCommGetAsyncError: %s", what, ncclGetErrorString(r));
			abort_comm(c);
			return -1;
		}
		if (st == ncclSuccess)
			return 0;
		if (st != ncclInProgress) {
			dl_errf(err, errlen, "nccl: %s failed on rank %d of %d: %s (%s)", what, c->rank, c->size,
				 ncclGetErrorString(st), ncclGetLastError(c->comm));
			abort_comm(c);
			return -1;
		}
		if (now_s() > deadline) {
			dl_errf(err, errlen, "nccl: %s on rank %d of %d timed out after %.0f s (a peer is gone or stuck); communicator aborted",
				 what, c->rank, c->size, c->timeout_s);
			abort_comm(c);
			return -1;
		}
		nap();
	}
}

struct dl_nccl *dl_nccl_create(int rank, int size, dl_blob_bcast_fn bcast, void *ctx, double timeout_s,
			       char *err, size_t errlen)
{
	ncclUniqueId id;
	struct dl_nccl *c = NULL;
	if (size < 1 || rank < 0 || rank >= size || (size > 1 && !bcast)) {
		dl_errf(err, errlen, "nccl: bad rank %d / size %d or no broadcast callback", rank, size);
		return NULL;
	}
	memset(&id, 0, sizeof id);
	if (rank == 0) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess) {
			dl_errf(err, errlen, "nccl: ncclGetUniqueId: %s", ncclGetErrorString(r));
			return NULL;
		}
	}
	if (size > 1 && bcast(ctx, &id, sizeof id, err, errlen))
		return NULL;
	c = calloc(1, sizeof *c);
	if (!c) {
		dl_errf(err, errlen, "nccl: out of memory");
		return NULL;
	}
	c->rank = rank;
	c->size = size;
	c->timeout_s = timeout_s > 0 ? timeout_s : 600.0;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclResult_t r = ncclCommInitRankConfig(&c->comm, size, id, rank, &cfg);
	if (r != ncclSuccess && r != ncclInProgress) {
		dl_errf(err, errlen, "nccl: ncclCommInitRankConfig (rank %d of %d): %s", rank, size, ncclGetErrorString(r));
		free(c);
		return NULL;
	}
	if (wait_ready(c, "communicator init", err, errlen)) {
		/* wait_ready aborted the communicator, which frees it */
		free(c);
		return NULL;
	}
	return c;
}

int dl_nccl_rank(const struct dl_nccl *c)
{
	return c->rank;
}

int dl_nccl_size(const struct dl_nccl *c)
{
	return c->size;
}

int dl_nccl_allreduce_f32(struct dl_nccl *c, float *buf, size_t n, cudaStream_t s, char *err, size_t errlen)
{
	if (c->aborted) {
		dl_errf(err, errlen, "nccl: allreduce on an aborted communicator");
		return -1;
	}
	ncclResult_t r = ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, c->comm, s);
	if (r == ncclInProgress)
		return wait_ready(c, "allreduce enqueue", err, errlen);
	if (r != ncclSuccess) {
		dl_errf(err, errlen, "nccl: ncclAllReduce of %zu floats: %s", n, ncclGetErrorString(r));
		abort_comm(c);
		return -1;
	}
	return 0;
}

int dl_nccl_wait_event(struct dl_nccl *c, cudaEvent_t ev, char *err, size_t errlen)
{
	if (c->aborted) {
		dl_errf(err, errlen, "nccl: waiting on an aborted communicator");
		return -1;
	}
	double deadline = now_s() + c->timeout_s;
	for (;;) {
		cudaError_t e = cudaEventQuery(ev);
		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady) {
			dl_errf(err, errlen, "nccl: waiting for the step: %s", cudaGetErrorString(e));
			abort_comm(c);
			return -1;
		}
		/* not an error, but do not let it stay the runtime's last error:
		 * the backend checks cudaGetLastError() after this wait and after
		 * every kernel launch (torch clears it the same way) */
		(void)cudaGetLastError();
		ncclResult_t st;
		ncclResult_t r = ncclCommGetAsyncError(c->comm, &st);
		if (r != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
			dl_errf(err, errlen, "nccl: allreduce failed on rank %d of %d: %s", c->rank, c->size,
				 ncclGetErrorString(r != ncclSuccess ? r : st));
			abort_comm(c);
			return -1;
		}
		if (now_s() > deadline) {
			dl_errf(err, errlen, "nccl: step on rank %d of %d not done after %.0f s (a peer is gone or stuck); communicator aborted",
				 c->rank, c->size, c->timeout_s);
			abort_comm(c);
			return -1;
		}
		nap();
	}
}

void dl_nccl_destroy(struct dl_nccl *c)
{
	if (!c)
		return;
	if (!c->aborted) {
		/* finalize flushes outstanding work; bounded like everything else */
		char err[256];
		ncclResult_t r = ncclCommFinalize(c->comm);
		if (r != ncclSuccess && r != ncclInProgress)
			abort_comm(c);
		else if (wait_ready(c, "finalize", err, sizeof err))
			fprintf(stderr, "%s\n", err); /* wait_ready aborted it */
		if (!c->aborted)
			ncclCommDestroy(c->comm);
	}
	free(c);
}
