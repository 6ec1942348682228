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
 * runs as a single process instead of waiting for tasks that never come.
 * Also DLJOB_COLLECTIVES, DLJOB_WORLD_VERBOSE and Open MPI's parameters
 * (PMIx: dl_ompi_env_parse), SLURMD_NODENAME and DLJOB_JOB_SECRET.  A pure
 * function of the environment array it is given (world/env.h; fuzzed by
 * tests/fuzz/fuzz_env.c). */
#include "config.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "world/env.h"
#include "common/handoff.h"
#include "common/hostlist.h"
#include "common/master.h"
#include "common/optval.h"
#include "world/world_int.h"

/* Values quoted in messages: escaped, cut to this many bytes. */
#define QUOTE_LEN 80

/* 1 if s is 1 to max-1 printable ASCII bytes without blanks: a name that
 * fits its buffer whole and that peers accept (dl_star_parse_hello). */
static int is_name(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n >= max)
		return 0;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7f)
			return 0;
	return 1;
}

static int node_name(char *const *envp, char *out, size_t outlen, char *err, size_t errlen)
{
	const char *n = dl_env_get(envp, "SLURMD_NODENAME");
	char q[QUOTE_LEN];

	/* Slurm's node name, not the host name: several slurmd may share one
	 * host (as in the test cluster), and the node is what an admin greps. */
	if (n && *n) {
		if (!is_name(n, outlen))
			return dl_errf(err, errlen, "SLURMD_NODENAME='%s' is not a node name (printable, no blanks, "
				    "at most %zu bytes)", dl_optval_escape(n, q, sizeof(q)), outlen - 1);
		snprintf(out, outlen, "%s", n);
		return 0;
	}
	char host[256];
	if (gethostname(host, sizeof(host)) < 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	const char *h = is_name(host, outlen) ? host : "unknown-host";
	memcpy(out, h, strlen(h) + 1); /* fits: is_name, and outlen is DL_NODE_MAX */
	return 0;
}

static int tcp_master(struct dl_world_env *e, char *const *envp, int from_slurm, char *err, size_t errlen)
{
	const char *addr = dl_env_get(envp, "MASTER_ADDR");
	long port = 0, jobid = 0, stepid = 0;
	char q[QUOTE_LEN];
	int have;

	if (addr && *addr) {
		if (!is_name(addr, sizeof(e->master_addr)))
			return dl_errf(err, errlen, "MASTER_ADDR='%s' is not a host name or address (printable, no "
				    "blanks, at most %zu bytes)", dl_optval_escape(addr, q, sizeof(q)),
				    sizeof(e->master_addr) - 1);
		snprintf(e->master_addr, sizeof(e->master_addr), "%s", addr);
	} else if (from_slurm) {
		const char *var = "SLURM_STEP_NODELIST", *nl = dl_env_get(envp, var);
		if (!nl || !*nl) {
			var = "SLURM_JOB_NODELIST";
			nl = dl_env_get(envp, var);
		}
		if (!nl || !*nl)
			return dl_errf(err, errlen, "MASTER_ADDR is unset and so are SLURM_STEP_NODELIST "
				    "and SLURM_JOB_NODELIST: cannot tell where rank 0 runs");
		char why[256];
		if (dl_hostlist_first(nl, e->master_addr, sizeof(e->master_addr), why, sizeof(why)) < 0)
			return dl_errf(err, errlen, "%s='%s': not a Slurm node list: %s", var,
				    dl_optval_escape(nl, q, sizeof(q)), why);
	} else {
		return dl_errf(err, errlen, "RANK/WORLD_SIZE are set but MASTER_ADDR is not");
	}

	if ((have = dl_env_long(envp, "MASTER_PORT", 1, 65535, &port, err, errlen)) < 0)
		return -1;
	if (!have) {
		if (!from_slurm)
			return dl_errf(err, errlen, "RANK/WORLD_SIZE are set but MASTER_PORT is not");
		if ((have = dl_env_long(envp, "SLURM_JOB_ID", 0, LONG_MAX, &jobid, err, errlen)) < 0 ||
		    dl_env_long(envp, "SLURM_STEP_ID", 0, LONG_MAX, &stepid, err, errlen) < 0)
			return -1;
		if (!have)
			return dl_errf(err, errlen, "MASTER_PORT and SLURM_JOB_ID are unset");
		/* Every step of a job gets its own port, so back-to-back steps do
		 * not meet each other's leftovers; Slurm's reserved port is the
		 * step's own on the node. */
		const char *resv = dl_env_get(envp, "SLURM_STEP_RESV_PORTS");
		if (resv && *resv) {
			if ((port = dl_resv_port_first(resv)) < 0)
				return dl_errf(err, errlen, "SLURM_STEP_RESV_PORTS='%s' is not a list of ports",
					    dl_optval_escape(resv, q, sizeof(q)));
		} else {
			port = dl_master_port((unsigned long)jobid, (unsigned long)stepid,
					      DL_MASTER_PORT_LO, DL_MASTER_PORT_HI);
		}
	}
	e->master_port = (int)port;
	return 0;
}

/* Which other node takes part: rank 0 needs one to tell whether its
 * listening address must reach beyond this host (world_net.c).  The first
 * host of the step's node list that is not this node, "" when there is
 * none (a one-node step) or the list cannot be parsed; at most
 * OTHER_NODE_TRIES hosts looked at (a list's hosts are distinct, so the
 * second one already differs; the bound is for a hostile list of repeats). */
#define OTHER_NODE_TRIES 16
static void other_node(struct dl_world_env *e, char *const *envp)
{
	const char *nl = dl_env_get(envp, "SLURM_STEP_NODELIST");
	struct dl_hostlist h;
	char why[256];

	e->other_node[0] = '\0';
	if (!nl || !*nl)
		nl = dl_env_get(envp, "SLURM_JOB_NODELIST");
	if (!nl || dl_hostlist_init(&h, nl, why, sizeof(why)) < 0)
		return;
	for (int i = 0; i < OTHER_NODE_TRIES; i++) {
		int rc = dl_hostlist_next(&h, e->other_node, sizeof(e->other_node), why, sizeof(why));

		if (rc == 1 && strcmp(e->other_node, e->node) != 0)
			return;
		if (rc < 1)
			break;
	}
	e->other_node[0] = '\0';
}

/* DLJOB_COLLECTIVES=mpi|ring and DLJOB_WORLD_VERBOSE=0|1 (the PMIx world's;
 * checked in every world, so a typo is never silently ignored). */
static int world_knobs(struct dl_world_env *e, char *const *envp, char *err, size_t errlen)
{
	const char *coll = dl_env_get(envp, "DLJOB_COLLECTIVES");
	char q[QUOTE_LEN];
	long v = 0;

	if (coll && *coll) {
		if (strcmp(coll, "ring") != 0 && strcmp(coll, "mpi") != 0)
			return dl_errf(err, errlen, "DLJOB_COLLECTIVES='%s': expected mpi or ring",
				    dl_optval_escape(coll, q, sizeof(q)));
		e->use_ring = strcmp(coll, "ring") == 0;
	}
	if (dl_env_long(envp, "DLJOB_WORLD_VERBOSE", 0, 1, &v, err, errlen) < 0)
		return -1;
	e->verbose = (int)v;
	return 0;
}

int dl_world_env(struct dl_world_env *e, char *const *envp, char *err, size_t errlen)
{
	const char *force = dl_env_get(envp, "DLJOB_WORLD");
	long rank = 0, size = 1, id;
	const char *rank_var = "RANK", *size_var = "WORLD_SIZE";
	char q[QUOTE_LEN];
	int r1, r2, from_slurm = 0;

	memset(e, 0, sizeof(*e));
	err[0] = 0;
	e->kind = DL_WORLD_SINGLE;
	e->size = 1;
	if (node_name(envp, e->node, sizeof(e->node), err, errlen) < 0 ||
	    world_knobs(e, envp, err, errlen) < 0)
		return -1;
	other_node(e, envp);
	dl_ompi_env_parse(&e->ompi, envp);

	if (force && !*force)
		force = NULL;
	if (force && strcmp(force, "single") != 0 && strcmp(force, "pmix") != 0 && strcmp(force, "tcp") != 0)
		return dl_errf(err, errlen, "DLJOB_WORLD='%s': expected single, pmix or tcp",
			    dl_optval_escape(force, q, sizeof(q)));
	if (force && strcmp(force, "single") == 0)
		return 0;
	if ((force && strcmp(force, "pmix") == 0) ||
	    (!force && dl_env_get(envp, "PMIX_RANK") && dl_env_get(envp, "PMIX_NAMESPACE"))) {
		if (!dl_env_get(envp, "PMIX_NAMESPACE"))
			return dl_errf(err, errlen, "DLJOB_WORLD=pmix but PMIX_NAMESPACE is unset "
				    "(not started by srun --mpi=pmix?)");
		e->kind = DL_WORLD_PMIX;
		/* srun hands the SPANK plugin's secret to every task. */
		return dl_world_env_secret(e, envp, err, errlen);
	}

	/* TCP: torchrun-style variables first, then Slurm's own. */
	if ((r1 = dl_env_long(envp, "RANK", 0, DL_WORLD_MAX - 1, &rank, err, errlen)) < 0 ||
	    (r2 = dl_env_long(envp, "WORLD_SIZE", 1, DL_WORLD_MAX, &size, err, errlen)) < 0)
		return -1;
	if (r1 != r2)
		return dl_errf(err, errlen, "%s is set but %s is not", r1 ? "RANK" : "WORLD_SIZE",
			    r1 ? "WORLD_SIZE" : "RANK");
	if (!r1) {
		if ((r1 = dl_env_long(envp, "SLURM_PROCID", 0, DL_WORLD_MAX - 1, &rank, err, errlen)) < 0 ||
		    (r2 = dl_env_long(envp, "SLURM_STEP_NUM_TASKS", 1, DL_WORLD_MAX, &size, err, errlen)) < 0)
			return -1;
		if (!(r1 && r2)) {
			if (force && strcmp(force, "tcp") == 0)
				return dl_errf(err, errlen, "DLJOB_WORLD=tcp but neither RANK/WORLD_SIZE nor "
					    "SLURM_PROCID/SLURM_STEP_NUM_TASKS are set");
			return 0; /* single */
		}
		from_slurm = 1;
		rank_var = "SLURM_PROCID", size_var = "SLURM_STEP_NUM_TASKS";
	} else {
		/* Under Slurm the node list can stand in for MASTER_ADDR. */
		from_slurm = dl_env_get(envp, "SLURM_JOB_ID") != NULL;
	}
	if (rank >= size)
		return dl_errf(err, errlen, "rank %ld is not below the world size %ld (%s, %s)", rank, size, rank_var,
			    size_var);
	e->rank = (int)rank;
	e->size = (int)size;
	if (size == 1)
		return 0; /* single: no rendezvous needed */
	e->kind = DL_WORLD_TCP;
	if (tcp_master(e, envp, from_slurm, err, errlen) < 0)
		return -1;
	/* Not MASTER_ADDR: ranks that spell it differently ("localhost",
	 * "127.0.0.1") but reach the same listener are the same job. */
	if (dl_env_long(envp, "SLURM_JOB_ID", 0, LONG_MAX, &id, err, errlen) < 0 ||
	    dl_env_long(envp, "SLURM_STEP_ID", 0, LONG_MAX, &id, err, errlen) < 0)
		return -1; /* decimal, so the key below is these numbers */
	{
		const char *j = dl_env_get(envp, "SLURM_JOB_ID"), *s = dl_env_get(envp, "SLURM_STEP_ID");
		snprintf(e->jobkey, sizeof(e->jobkey), "%.20s.%.20s:%d", j && *j ? j : "-",
			 s && *s ? s : "-", e->master_port);
	}
	return dl_world_env_secret(e, envp, err, errlen);
}

int dl_world_env_secret(struct dl_world_env *e, char *const *envp, char *err, size_t errlen)
{
	const char *s = dl_env_get(envp, DL_HANDOFF(JOB_SECRET));
	e->have_secret = 0;
	if (!s)
		return 0;
	/* Never echo the value: it is the job's secret. */
	if (strlen(s) != 2 * DL_SECRET_LEN)
		return dl_errf(err, errlen, "DLJOB_JOB_SECRET must be %d lowercase hex digits, it has %zu "
			    "characters", 2 * DL_SECRET_LEN, strlen(s));
	for (int i = 0; i < DL_SECRET_LEN; i++) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				return dl_errf(err, errlen, "DLJOB_JOB_SECRET must be %d lowercase hex digits "
					    "(character %d is not)", 2 * DL_SECRET_LEN, 2 * i + k + 1);
			v = v * 16 + d;
		}
		e->secret[i] = (unsigned char)v;
	}
	e->have_secret = 1;
	return 0;
}
