/* The job's process group as the runtime sees it: who am I, how many are we,
 * and the collectives the engine uses.  Bootstrap order: PMIx (srun
 * --mpi=pmix), else Slurm's environment with a TCP rendezvous on
 * MASTER_ADDR/MASTER_PORT, else a plain single process.
 *
 * Environment: DLJOB_WORLD=single|pmix|tcp forces a method;
 * DLJOB_COLLECTIVES=mpi|ring picks the PMIx world's collectives (default
 * mpi: Open MPI; ring: the TCP ring of the TCP world, no MPI_Init);
 * DLJOB_WORLD_VERBOSE=1 prints the PMIx start-up phases on stderr.
 *
 * Failures: every wait for peers is bounded by the timeout.  A rank that
 * dies, hangs or leaves early is named ("rank 3 (n2) died or was killed",
 * "... did not answer for 300 s", "... left the job after 12 collectives")
 * on every other rank, in about a second for deaths and departures.  After
 * any call returned -1 the world is broken: later collectives fail at once
 * with the same message, and the caller should close it and exit non-zero. */
#ifndef DLJOB_WORLD_H
#define DLJOB_WORLD_H

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

/* Join the job's process group.  timeout_s bounds every wait for peers; a
 * SIGTERM during the wait ends it at once (the caller's SIGTERM handler, if
 * any, is called too).  The TCP rendezvous and ring are authenticated with
 * DLJOB_JOB_SECRET (see world/world_int.h; without it, one warning line on
 * stderr).  Returns 0, or -1 with one line in err naming what is wrong (e.g.
 * the rank that never arrived). */
int dl_world_open(struct dl_world *w, double timeout_s, char *err, size_t errlen);
/* Leave the job.  A rank that closes while others still wait in a
 * collective makes them fail at once, naming it; with PMIx + MPI a healthy
 * close waits (bounded) for every rank before MPI_Finalize. */
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
