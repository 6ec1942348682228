/* The job's process group as the runtime sees it: who am I, how many are we,
 * and the collectives the engine uses.  Bootstrap order: PMIx (srun
 * --mpi=pmix), else Slurm's environment with a TCP rendezvous on
 * MASTER_ADDR/MASTER_PORT, else a plain single process.
 *
 * DLJOB_WORLD=single|pmix|tcp in the environment forces one method. */
#ifndef DLJOB_RUNTIME_WORLD_H
#define DLJOB_RUNTIME_WORLD_H

#include <stddef.h>
#include "engine/comm.h"

struct dl_world_ops;

struct dl_world {
	struct dl_comm comm;
	const char *method;   /* "single", "pmix", "tcp" */
	void *impl;
	/* Added by the bootstrap: */
	const struct dl_world_ops *ops; /* method's exchange/close */
	double timeout_s;               /* bound of every wait for peers */
};

/* Join the job's process group.  timeout_s bounds every wait for peers.
 * Returns 0, or -1 with one line in err naming what is wrong (e.g. the rank
 * that never arrived). */
int dl_world_open(struct dl_world *w, double timeout_s, char *err, size_t errlen);
void dl_world_close(struct dl_world *w);

/* All-gather of a small blob (e.g. the NCCL unique id): every rank gives len
 * bytes in mine, and gets all size*len bytes, rank r's at all + r*len.
 * len must be the same on every rank.  Collective; bounded by the timeout.
 * Returns 0, or -1 with one line in err (a peer died, timed out, ...). */
int dl_world_exchange(struct dl_world *w, const void *mine, size_t len, void *all,
		      char *err, size_t errlen);

/* Broadcast len bytes of buf from rank root to every rank's buf.  Collective;
 * meant for small blobs (it is built on dl_world_exchange). */
int dl_world_broadcast_blob(struct dl_world *w, int root, void *buf, size_t len,
			    char *err, size_t errlen);

/* This rank gives up (e.g. its loss is NaN): tell the others why, so they
 * fail at once with that message instead of timing out; later collectives
 * fail, and dl_world_close does not wait for anybody. */
void dl_world_abort(struct dl_world *w, const char *why);

/* A process group of one, without looking at the environment. */
void dl_world_single(struct dl_world *w);

#endif
