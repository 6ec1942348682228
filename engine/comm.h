/* What the engine needs from the job's process group.  The runtime builds
 * one (single process, or PMIx/TCP bootstrap + MPI/NCCL) and hands it in;
 * the engine never bootstraps anything itself.
 *
 * Calls into one dl_comm are serialized: at most one thread is inside any
 * of its functions at a time (the PMIx world runs MPI_THREAD_SERIALIZED),
 * but it need not be the thread that opened it.  Backends reduce gradients
 * through the engine's communication thread (engine/comm_async.h), which
 * calls allreduce_sum_f32 while compute threads go on. */
#ifndef DLJOB_ENGINE_COMM_H
#define DLJOB_ENGINE_COMM_H

#include <stddef.h>

struct dl_comm {
	int rank, size;             /* global */
	int local_rank, local_size; /* on this node */
	/* In-place sum across all ranks.  Return 0, or -1 with a message in
	 * err (a peer died, timed out, ...): the caller must then stop. */
	int (*allreduce_sum_f32)(struct dl_comm *c, float *buf, size_t n, char *err, size_t errlen);
	int (*allreduce_sum_f64)(struct dl_comm *c, double *buf, size_t n, char *err, size_t errlen);
	int (*barrier)(struct dl_comm *c, char *err, size_t errlen);
	/* len bytes at buf on rank root copied to buf on every rank (all
	 * ranks pass the same root and len), e.g. NCCL's unique id.  Returns
	 * 0 or -1 with a message in err. */
	int (*broadcast)(struct dl_comm *c, int root, void *buf, size_t len, char *err, size_t errlen);
	void *impl;
};

#endif
