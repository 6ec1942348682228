/* Where ranks meet without PMIx: MASTER_ADDR is the first host of the step's
 * node list and MASTER_PORT the first of the step's ports that Slurm
 * reserved (SLURM_STEP_RESV_PORTS, with MpiParams=ports=... in slurm.conf:
 * unique on the node), else a port derived from the job and step ids, so
 * every task (and the SPANK plugin, which exports both) computes the same
 * pair without talking to anyone.  A derived port may be taken on the first
 * node (another job's step, any program): dljob's rank 0 then listens on the
 * next free one of DL_MASTER_PORT_TRIES candidates and every other rank
 * looks for it there, asking each listener for the job's proof
 * (world/world_star.c).  Shared by spank/ and runtime/; the node list is
 * read by common/hostlist.c. */
#ifndef DLJOB_COMMON_MASTER_H
#define DLJOB_COMMON_MASTER_H

#include <stddef.h>

/* Default MASTER_PORT range (PyTorch's customary 29500 and up), below
 * Linux's ephemeral range so no outgoing connection holds the port.
 * Admins may change it with the plugin's master_port_range=. */
#define DL_MASTER_PORT_LO 29500
#define DL_MASTER_PORT_HI 29999

/* MASTER_PORT for step `step` of job `job` inside [lo, hi]; steps of one job
 * that run at the same time get different ports. */
int dl_master_port(unsigned long job, unsigned long step, int lo, int hi);

/* The rendezvous's candidate ports: MASTER_PORT, MASTER_PORT + 1, ...,
 * DL_MASTER_PORT_TRIES in all (fewer when 65535 comes first). */
#define DL_MASTER_PORT_TRIES 16
int dl_master_port_tries(int port);

/* The first port of a SLURM_STEP_RESV_PORTS value ("12000-12001",
 * "12000,12005-12006"), or -1 if it is not such a list of ports in 1-65535. */
int dl_resv_port_first(const char *list);

#endif
