/* How this process joins its job, read from the environment:
 *   DLJOB_WORLD=single|pmix|tcp                 forces a method;
 *   PMIX_RANK + PMIX_NAMESPACE                  srun --mpi=pmix: PMIx;
 *   RANK + WORLD_SIZE (+ MASTER_ADDR/PORT)      torchrun style (the SPANK
 *                                               plugin exports these): TCP;
 *   SLURM_PROCID + SLURM_STEP_NUM_TASKS         any srun step: TCP, with
 *                                               MASTER_ADDR the step's first
 *                                               node, MASTER_PORT Slurm's
 *                                               reserved port, else from the ids;
 *   otherwise                                   a single process.
 * A batch script itself has SLURM_PROCID=0 but no SLURM_STEP_NUM_TASKS, so it
 * runs as a single process instead of waiting for tasks that never come. */
#include "config.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime/master.h"
#include "runtime/world_int.h"


static int env_int(const char *name, long lo, long hi, long *out, char *err, size_t errlen)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return 0;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		snprintf(err, errlen, "%s='%s' is not an integer in [%ld, %ld]", name, s, lo, hi);
		return -1;
	}
	*out = v;
	return 1;
}

static void node_name(char *out, size_t outlen)
{
	const char *n = getenv("SLURMD_NODENAME");
	/* Slurm's node name, not the host name: several slurmd may share one
	 * host (as in the test cluster), and the node is what an admin greps. */
	if (n && *n) {
		snprintf(out, outlen, "%s", n);
		return;
	}
	if (gethostname(out, outlen) < 0)
		snprintf(out, outlen, "unknown-host");
	out[outlen - 1] = 0;
}

static int tcp_master(struct dl_world_env *e, int from_slurm, char *err, size_t errlen)
{
	const char *addr = getenv("MASTER_ADDR");
	long port = 0, jobid = 0, stepid = 0;
	int have;

	if (addr && *addr) {
		snprintf(e->master_addr, sizeof(e->master_addr), "%s", addr);
	} else if (from_slurm) {
		const char *nl = getenv("SLURM_STEP_NODELIST");
		if (!nl || !*nl)
			nl = getenv("SLURM_JOB_NODELIST");
		if (!nl || !*nl) {
			snprintf(err, errlen, "MASTER_ADDR is unset and so are SLURM_STEP_NODELIST "
				 "and SLURM_JOB_NODELIST: cannot tell where rank 0 runs");
			return -1;
		}
		if (dl_hostlist_first(nl, e->master_addr, sizeof(e->master_addr)) < 0) {
			snprintf(err, errlen, "cannot parse the node list '%s'", nl);
			return -1;
		}
	} else {
		snprintf(err, errlen, "RANK/WORLD_SIZE are set but MASTER_ADDR is not");
		return -1;
	}

	if ((have = env_int("MASTER_PORT", 1, 65535, &port, err, errlen)) < 0)
		return -1;
	if (!have) {
		if (!from_slurm) {
			snprintf(err, errlen, "RANK/WORLD_SIZE are set but MASTER_PORT is not");
			return -1;
		}
		if (env_int("SLURM_JOB_ID", 0, LONG_MAX, &jobid, err, errlen) <= 0 ||
		    env_int("SLURM_STEP_ID", 0, LONG_MAX, &stepid, err, errlen) < 0) {
			if (!err[0])
				snprintf(err, errlen, "MASTER_PORT and SLURM_JOB_ID are unset");
			return -1;
		}
		/* Every step of a job gets its own port, so back-to-back steps do
		 * not meet each other's leftovers; Slurm's reserved port is the
		 * step's own on the node. */
		const char *resv = getenv("SLURM_STEP_RESV_PORTS");
		if (resv && *resv) {
			if ((port = dl_resv_port_first(resv)) < 0) {
				snprintf(err, errlen, "SLURM_STEP_RESV_PORTS='%.64s' is not a list of "
					 "ports", resv);
				return -1;
			}
		} else {
			port = dl_master_port((unsigned long)jobid, (unsigned long)stepid,
					      DL_MASTER_PORT_LO, DL_MASTER_PORT_HI);
		}
	}
	e->master_port = (int)port;
	return 0;
}

int dl_world_env(struct dl_world_env *e, char *err, size_t errlen)
{
	const char *force = getenv("DLJOB_WORLD");
	long rank = 0, size = 1;
	int r1, r2, from_slurm = 0;

	memset(e, 0, sizeof(*e));
	err[0] = 0;
	e->kind = DL_WORLD_SINGLE;
	e->size = 1;
	node_name(e->node, sizeof(e->node));

	if (force && *force && strcmp(force, "single") != 0 && strcmp(force, "pmix") != 0 &&
	    strcmp(force, "tcp") != 0) {
		snprintf(err, errlen, "DLJOB_WORLD='%s': expected single, pmix or tcp", force);
		return -1;
	}
	if (force && strcmp(force, "single") == 0)
		return 0;
	if ((force && strcmp(force, "pmix") == 0) ||
	    (!(force && *force) && getenv("PMIX_RANK") && getenv("PMIX_NAMESPACE"))) {
		if (!getenv("PMIX_NAMESPACE")) {
			snprintf(err, errlen, "DLJOB_WORLD=pmix but PMIX_NAMESPACE is unset "
				 "(not started by srun --mpi=pmix?)");
			return -1;
		}
		e->kind = DL_WORLD_PMIX;
		/* srun hands the SPANK plugin's secret to every task. */
		return dl_world_env_secret(e, err, errlen);
	}

	/* TCP: torchrun-style variables first, then Slurm's own. */
	if ((r1 = env_int("RANK", 0, DL_WORLD_MAX - 1, &rank, err, errlen)) < 0 ||
	    (r2 = env_int("WORLD_SIZE", 1, DL_WORLD_MAX, &size, err, errlen)) < 0)
		return -1;
	if (r1 != r2) {
		snprintf(err, errlen, "%s is set but %s is not", r1 ? "RANK" : "WORLD_SIZE",
			 r1 ? "WORLD_SIZE" : "RANK");
		return -1;
	}
	if (!r1) {
		if ((r1 = env_int("SLURM_PROCID", 0, DL_WORLD_MAX - 1, &rank, err, errlen)) < 0 ||
		    (r2 = env_int("SLURM_STEP_NUM_TASKS", 1, DL_WORLD_MAX, &size, err, errlen)) < 0)
			return -1;
		if (!(r1 && r2)) {
			if (force && strcmp(force, "tcp") == 0) {
				snprintf(err, errlen, "DLJOB_WORLD=tcp but neither RANK/WORLD_SIZE nor "
					 "SLURM_PROCID/SLURM_STEP_NUM_TASKS are set");
				return -1;
			}
			return 0; /* single */
		}
		from_slurm = 1;
	} else {
		/* Under Slurm the node list can stand in for MASTER_ADDR. */
		from_slurm = getenv("SLURM_JOB_ID") != NULL;
	}
	if (rank >= size) {
		snprintf(err, errlen, "rank %ld is not below the world size %ld", rank, size);
		return -1;
	}
	e->rank = (int)rank;
	e->size = (int)size;
	if (size == 1)
		return 0; /* single: no rendezvous needed */
	e->kind = DL_WORLD_TCP;
	if (tcp_master(e, from_slurm, err, errlen) < 0)
		return -1;
	{
		/* Not MASTER_ADDR: ranks that spell it differently ("localhost",
		 * "127.0.0.1") but reach the same listener are the same job. */
		const char *j = getenv("SLURM_JOB_ID"), *s = getenv("SLURM_STEP_ID");
		snprintf(e->jobkey, sizeof(e->jobkey), "%.20s.%.20s:%d", j ? j : "-", s ? s : "-",
			 e->master_port);
	}
	return dl_world_env_secret(e, err, errlen);
}

int dl_world_env_secret(struct dl_world_env *e, char *err, size_t errlen)
{
	const char *s = getenv("DLJOB_JOB_SECRET");
	e->have_secret = 0;
	if (!s)
		return 0;
	/* Never echo the value: it is the job's secret. */
	if (strlen(s) != 2 * DL_SECRET_LEN) {
		snprintf(err, errlen, "DLJOB_JOB_SECRET must be %d lowercase hex digits, it has %zu "
			 "characters", 2 * DL_SECRET_LEN, strlen(s));
		return -1;
	}
	for (int i = 0; i < DL_SECRET_LEN; i++) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0) {
				snprintf(err, errlen, "DLJOB_JOB_SECRET must be %d lowercase hex digits "
					 "(character %d is not)", 2 * DL_SECRET_LEN, 2 * i + k + 1);
				return -1;
			}
			v = v * 16 + d;
		}
		e->secret[i] = (unsigned char)v;
	}
	e->have_secret = 1;
	return 0;
}
