/* Where ranks meet without PMIx: MASTER_ADDR is the first host of the step's
 * node list and MASTER_PORT a port derived from the job and step ids, so
 * every task (and the SPANK plugin, which exports both) computes the same
 * pair without talking to anyone.  Shared by spank/ and runtime/. */
#ifndef DLJOB_RUNTIME_MASTER_H
#define DLJOB_RUNTIME_MASTER_H

#include <stddef.h>

/* Default MASTER_PORT range (PyTorch's customary 29500 and up), below
 * Linux's ephemeral range so no outgoing connection holds the port.
 * Admins may change it with the plugin's master_port_range=. */
#define DL_MASTER_PORT_LO 29500
#define DL_MASTER_PORT_HI 29999

/* First host of a Slurm compressed host list: "n1", "n[1-2],x",
 * "gpu[007-010,12]-ib" -> "gpu007", "r[1-2]n[3-4]" -> "r1n3".  Returns 0,
 * or -1 if the list is empty, malformed or the name does not fit. */
int dl_hostlist_first(const char *list, char *out, size_t outlen);

/* MASTER_PORT for step `step` of job `job` inside [lo, hi]; steps of one job
 * that run at the same time get different ports. */
int dl_master_port(unsigned long job, unsigned long step, int lo, int hi);

#endif
