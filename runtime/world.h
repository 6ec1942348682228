/* The job's process group as the runtime sees it: who am I, how many are we,
 * and the collectives the engine uses.  Bootstrap order: PMIx (srun
 * --mpi=pmix), else Slurm's environment with a TCP rendezvous on
 * MASTER_ADDR/MASTER_PORT, else a plain single process. */
#ifndef DLJOB_RUNTIME_WORLD_H
#define DLJOB_RUNTIME_WORLD_H

#include <stddef.h>
#include "engine/comm.h"

struct dl_world {
	struct dl_comm comm;
	const char *method;   /* "single", "pmix", "tcp" */
	void *impl;
};

/* Join the job's process group.  timeout_s bounds every wait for peers.
 * Returns 0, or -1 with one line in err naming what is wrong (e.g. the rank
 * that never arrived). */
int dl_world_open(struct dl_world *w, double timeout_s, char *err, size_t errlen);
void dl_world_close(struct dl_world *w);

#endif
