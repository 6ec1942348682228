/* The PMIx world: for tasks started by srun --mpi=pmix.  Rank, size and the
 * local rank come from the PMIx server in slurmstepd; blobs (the NCCL unique
 * id, later) travel by PMIx_Put/Commit/Fence/Get; the CPU collectives are
 * Open MPI's, which bootstraps over the same PMIx server (or, with
 * DLJOB_COLLECTIVES=ring, the TCP ring of world/world_ring.c).
 *
 * MPI has no timeouts and no way to cancel a collective, so every MPI wait
 * is a non-blocking call polled against a deadline, and next to MPI every
 * rank keeps a TCP connection to rank 0 (the star, world/world_star.c):
 * when a process dies its connection closes, rank 0 tells everybody which
 * rank it was, and the survivors leave their wait with that message instead
 * of hanging in MPI.  After a failure MPI_Finalize is skipped (it would wait
 * for the dead), and the caller exits non-zero.
 *
 * Before anything of MPI starts, the world names Open MPI's TCP interface
 * (world/world_ompi.c) unless the user or the site did. */
#include "config.h"
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pmix.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/err.h"
#include "world/world_int.h"

#define HUB_LEN 128 /* "host port" of rank 0's star listener */

struct pmix_world {
	pmix_proc_t me;
	struct dl_star star;
	MPI_Comm comm;
	int mpi_up;
	double timeout_s;
	unsigned seq;            /* exchange number: keys must not repeat */
	pmix_info_t fence_info;  /* must outlive a fence that timed out */
	atomic_int fence_done;
	atomic_int fence_status;
	int fence_pending;       /* a fence never finished: impl must not be freed */
	struct dl_ring *ring;    /* DLJOB_COLLECTIVES=ring: collectives without MPI */
	struct dl_ompi_if tcp_if; /* Open MPI's TCP interface: who chose which */
	int failed;
	char why[512];
};

/* MPI_Init_thread and MPI_Finalize cannot be bounded from outside: a
 * watchdog thread waits beside them, and if the call has not returned by the
 * deadline (or a SIGTERM came), it names the stage, tells rank 0 (the star
 * is idle while the main thread is inside MPI) and ends the process. */
struct watchdog {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, started;
	double deadline;
	const char *stage;
	struct dl_star *st; /* NULL: nobody to tell */
	int rank;
};

static void *watchdog_main(void *arg)
{
	struct watchdog *wd = arg;
	char msg[256];
	pthread_mutex_lock(&wd->mu);
	while (!wd->done) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		(void)pthread_cond_timedwait(&wd->cv, &wd->mu, &ts);
		if (wd->done || (dl_now() < wd->deadline && !dl_stopped()))
			continue;
		if (dl_stopped())
			snprintf(msg, sizeof(msg), "rank %d was stopped by signal %d inside %s",
				 wd->rank, dl_stopped(), wd->stage);
		else
			snprintf(msg, sizeof(msg), "rank %d: %s did not return within the timeout "
				 "(a rank hung or died inside MPI?)", wd->rank, wd->stage);
		fprintf(stderr, "dljob: %s\n", msg);
		if (wd->st)
			dl_star_abort(wd->st, msg);
		_exit(1);
	}
	pthread_mutex_unlock(&wd->mu);
	return NULL;
}

static void watchdog_start(struct watchdog *wd, const char *stage, double timeout_s,
			   struct dl_star *st, int rank)
{
	pthread_condattr_t ca;
	memset(wd, 0, sizeof(*wd));
	wd->stage = stage;
	wd->deadline = dl_now() + timeout_s;
	wd->st = st;
	wd->rank = rank;
	pthread_mutex_init(&wd->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wd->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* Without the thread the call is unbounded, as before: say so. */
	int rc = pthread_create(&wd->th, NULL, watchdog_main, wd);
	if (rc != 0)
		fprintf(stderr, "dljob: rank %d: no watchdog for %s (%s)\n", rank, stage,
			strerror(rc));
	else
		wd->started = 1;
}

static void watchdog_stop(struct watchdog *wd)
{
	pthread_mutex_lock(&wd->mu);
	wd->done = 1;
	pthread_cond_signal(&wd->cv);
	pthread_mutex_unlock(&wd->mu);
	if (wd->started)
		pthread_join(wd->th, NULL);
	pthread_cond_destroy(&wd->cv);
	pthread_mutex_destroy(&wd->mu);
}

static void fence_cb(pmix_status_t status, void *cbdata)
{
	struct pmix_world *p = cbdata;
	atomic_store(&p->fence_status, (int)status);
	atomic_store(&p->fence_done, 1);
}

static int give_up(struct pmix_world *p, const char *msg, char *err, size_t errlen)
{
	dl_errf(err, errlen, "%s", msg);
	if (!p->failed) {
		p->failed = 1;
		snprintf(p->why, sizeof(p->why), "%s", msg);
		dl_star_abort(&p->star, msg);
	}
	return -1;
}

/* Put mine under a fresh key, fence with data collection, read everybody's.
 * The fence is polled against the deadline while the star (once up) watches
 * for deaths. */
static int pmix_allgather(struct pmix_world *p, int size, const void *mine, size_t len, void *all,
			  char *err, size_t errlen)
{
	char key[64], msg[512];
	pmix_value_t v;
	pmix_status_t rc;
	double deadline = dl_now() + p->timeout_s;
	int star_up = p->star.fd != NULL;

	snprintf(key, sizeof(key), "dljob.x%u", p->seq++);
	memset(&v, 0, sizeof(v));
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = (char *)mine;
	v.data.bo.size = len;
	if ((rc = PMIx_Put(PMIX_GLOBAL, key, &v)) != PMIX_SUCCESS ||
	    (rc = PMIx_Commit()) != PMIX_SUCCESS) {
		snprintf(msg, sizeof(msg), "PMIx_Put/Commit of %s: %s", key, PMIx_Error_string(rc));
		return give_up(p, msg, err, errlen);
	}
	atomic_store(&p->fence_done, 0);
	p->fence_pending = 1;
	rc = PMIx_Fence_nb(NULL, 0, &p->fence_info, 1, fence_cb, p);
	if (rc != PMIX_SUCCESS) {
		p->fence_pending = 0;
		snprintf(msg, sizeof(msg), "PMIx_Fence: %s", PMIx_Error_string(rc));
		return give_up(p, msg, err, errlen);
	}
	while (!atomic_load(&p->fence_done)) {
		if (star_up) {
			if (dl_star_pump(&p->star, 2, msg, sizeof(msg)) < 0)
				return give_up(p, msg, err, errlen);
		} else {
			usleep(1000);
			if (dl_stopped()) {
				snprintf(msg, sizeof(msg), "stopped by signal %d while joining the job",
					 dl_stopped());
				return give_up(p, msg, err, errlen);
			}
		}
		if (dl_now() > deadline) {
			if (star_up) {
				(void)dl_star_timeout(&p->star, "exchange (PMIx fence)", msg, sizeof(msg));
			} else {
				snprintf(msg, sizeof(msg), "PMIx fence: not every rank arrived within %g s",
					 p->timeout_s);
			}
			return give_up(p, msg, err, errlen);
		}
	}
	p->fence_pending = 0;
	if ((rc = atomic_load(&p->fence_status)) != PMIX_SUCCESS) {
		snprintf(msg, sizeof(msg), "PMIx fence failed: %s", PMIx_Error_string(rc));
		return give_up(p, msg, err, errlen);
	}
	for (int r = 0; r < size; r++) {
		pmix_proc_t who;
		pmix_value_t *got = NULL;
		PMIX_PROC_LOAD(&who, p->me.nspace, (pmix_rank_t)r);
		rc = PMIx_Get(&who, key, NULL, 0, &got);
		if (rc != PMIX_SUCCESS || !got || got->type != PMIX_BYTE_OBJECT ||
		    got->data.bo.size != len) {
			snprintf(msg, sizeof(msg), "PMIx_Get of %s from rank %d: %s", key, r,
				 rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "wrong type or size");
			if (got)
				PMIX_VALUE_RELEASE(got);
			return give_up(p, msg, err, errlen);
		}
		memcpy((char *)all + (size_t)r * len, got->data.bo.bytes, len);
		PMIX_VALUE_RELEASE(got);
	}
	return 0;
}

static int pmix_exchange(struct dl_world *w, const void *mine, size_t len, void *all,
			 char *err, size_t errlen)
{
	struct pmix_world *p = w->impl;
	if (p->failed) {
		dl_errf(err, errlen, "%s", p->why);
		return -1;
	}
	if (w->comm.size == 1) {
		memmove(all, mine, len);
		return 0;
	}
	p->star.seq++;
	return pmix_allgather(p, w->comm.size, mine, len, all, err, errlen);
}

/* Wait for an MPI request, watching the star, until the deadline. */
static int mpi_wait(struct pmix_world *p, MPI_Request *req, const char *op, char *err, size_t errlen)
{
	double deadline = dl_now() + p->timeout_s;
	char msg[512];
	for (long it = 0;; it++) {
		int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS) {
			char es[MPI_MAX_ERROR_STRING];
			int el = 0;
			MPI_Error_string(rc, es, &el);
			snprintf(msg, sizeof(msg), "%s: MPI error: %s", op, es);
			return give_up(p, msg, err, errlen);
		}
		if (done)
			return 0;
		/* Open MPI moves a non-blocking collective only inside MPI calls:
		 * keep calling MPI_Test (a sleep here halves the bandwidth), look
		 * at the star now and then, and yield the CPU once the wait is
		 * long (the other ranks are still computing). */
		if (it % 32 != 31)
			continue;
		if (dl_star_pump(&p->star, 0, msg, sizeof(msg)) < 0)
			return give_up(p, msg, err, errlen);
		double now = dl_now();
		if (now > deadline - p->timeout_s + 0.01)
			sched_yield();
		if (now > deadline) {
			(void)dl_star_timeout(&p->star, op, msg, sizeof(msg));
			return give_up(p, msg, err, errlen);
		}
	}
}

static int mpi_allreduce(struct dl_comm *c, void *buf, size_t n, MPI_Datatype dt, size_t esize,
			 char *err, size_t errlen)
{
	struct pmix_world *p = c->impl;
	p->star.seq++;
	if (p->failed) {
		dl_errf(err, errlen, "%s", p->why);
		return -1;
	}
	/* MPI counts are int: go in slices. */
	for (size_t off = 0; off < n;) {
		size_t k = n - off > (size_t)(INT_MAX / 2) ? (size_t)(INT_MAX / 2) : n - off;
		MPI_Request req;
		int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * esize, (int)k, dt, MPI_SUM,
					p->comm, &req);
		if (rc != MPI_SUCCESS) {
			char es[MPI_MAX_ERROR_STRING], msg[512];
			int el = 0;
			MPI_Error_string(rc, es, &el);
			snprintf(msg, sizeof(msg), "allreduce: MPI_Iallreduce: %s", es);
			return give_up(p, msg, err, errlen);
		}
		if (mpi_wait(p, &req, "allreduce", err, errlen) < 0)
			return -1;
		off += k;
	}
	return 0;
}

static int pmix_allreduce_f32(struct dl_comm *c, float *buf, size_t n, char *err, size_t errlen)
{
	return mpi_allreduce(c, buf, n, MPI_FLOAT, sizeof(float), err, errlen);
}

static int pmix_allreduce_f64(struct dl_comm *c, double *buf, size_t n, char *err, size_t errlen)
{
	return mpi_allreduce(c, buf, n, MPI_DOUBLE, sizeof(double), err, errlen);
}

static int pmix_barrier(struct dl_comm *c, char *err, size_t errlen)
{
	struct pmix_world *p = c->impl;
	MPI_Request req;
	p->star.seq++;
	if (p->failed) {
		dl_errf(err, errlen, "%s", p->why);
		return -1;
	}
	if (MPI_Ibarrier(p->comm, &req) != MPI_SUCCESS)
		return give_up(p, "barrier: MPI_Ibarrier failed", err, errlen);
	return mpi_wait(p, &req, "barrier", err, errlen);
}

static void pmix_close(struct dl_world *w)
{
	struct pmix_world *p = w->impl;
	char e[512];
	if (!p)
		return;
	/* Everybody must be here before MPI_Finalize, which would wait forever
	 * for a rank that died after the last collective. */
	if (p->star.failed)
		p->failed = 1;
	/* BYE first: ranks still waiting in a collective this rank never
	 * entered then fail at once instead of at their timeout. */
	dl_star_leave(&p->star);
	if (!p->failed && p->star.fd && dl_star_barrier(&p->star, p->timeout_s, e, sizeof(e)) < 0) {
		fprintf(stderr, "dljob: leaving the job: %s\n", e);
		dl_star_abort(&p->star, e);
		p->failed = 1;
	}
	dl_ring_close(p->ring);
	if (p->mpi_up) {
		if (!p->failed) {
			struct watchdog wd;
			watchdog_start(&wd, "MPI_Finalize", p->timeout_s, NULL, p->star.rank);
			MPI_Comm_free(&p->comm);
			MPI_Finalize();
			watchdog_stop(&wd);
		}
	}
	dl_star_close(&p->star);
	if (!p->failed)
		PMIx_Finalize(NULL, 0);
	if (!p->fence_pending)
		free(p);
	w->impl = NULL;
}

static void pmix_abort(struct dl_world *w, const char *why)
{
	struct pmix_world *p = w->impl;
	char e[512];
	if (p)
		(void)give_up(p, why, e, sizeof(e));
}

static const struct dl_world_ops pmix_ops = { pmix_exchange, pmix_close, pmix_abort };

int dl_world_pmix_open(struct dl_world *w, const struct dl_world_env *env, double timeout_s,
		       char *err, size_t errlen)
{
	struct pmix_world *p;
	pmix_proc_t wild;
	pmix_value_t *val = NULL;
	pmix_status_t rc;
	char *hubs = NULL, hub[HUB_LEN], host[256], e[512];
	int lfd = -1, rfd = -1, rv = -1, size, local_rank, local_size;
	bool collect = true;
	/* DLJOB_WORLD_VERBOSE=1: phase timings on stderr (launch latency). */
	int verbose = env->verbose;
	double t0 = dl_now(), t_init = 0, t_fence = 0, t_star = 0;
	/* DLJOB_COLLECTIVES=ring: the TCP ring instead of Open MPI (faster to
	 * start, and in our measurements faster over TCP). */
	int use_ring = env->use_ring;

	p = calloc(1, sizeof(*p));
	if (!p) {
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	p->timeout_s = timeout_s;
	p->comm = MPI_COMM_NULL;
	PMIX_INFO_LOAD(&p->fence_info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	/* Before PMIx_Init starts its thread (setenv beside a getenv is a
	 * race) and before MPI_Init reads Open MPI's parameters. */
	if (!use_ring)
		dl_ompi_tcp_if(&env->ompi, env->other_node, env->node, &p->tcp_if);

	if ((rc = PMIx_Init(&p->me, NULL, 0)) != PMIX_SUCCESS) {
		dl_errf(err, errlen, "PMIx_Init: %s (PMIX_RANK is set: was this started by "
			 "srun --mpi=pmix?)", PMIx_Error_string(rc));
		goto out;
	}
	t_init = dl_now();
	PMIX_PROC_LOAD(&wild, p->me.nspace, PMIX_RANK_WILDCARD);
	if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val)) != PMIX_SUCCESS || !val) {
		dl_errf(err, errlen, "PMIx_Get(PMIX_JOB_SIZE): %s", PMIx_Error_string(rc));
		goto out;
	}
	size = (int)val->data.uint32;
	PMIX_VALUE_RELEASE(val);
	val = NULL;
	if ((rc = PMIx_Get(&p->me, PMIX_LOCAL_RANK, NULL, 0, &val)) != PMIX_SUCCESS || !val) {
		dl_errf(err, errlen, "PMIx_Get(PMIX_LOCAL_RANK): %s", PMIx_Error_string(rc));
		goto out;
	}
	local_rank = (int)val->data.uint16;
	PMIX_VALUE_RELEASE(val);
	val = NULL;
	if ((rc = PMIx_Get(&wild, PMIX_LOCAL_SIZE, NULL, 0, &val)) != PMIX_SUCCESS || !val) {
		dl_errf(err, errlen, "PMIx_Get(PMIX_LOCAL_SIZE): %s", PMIx_Error_string(rc));
		goto out;
	}
	local_size = (int)val->data.uint32;
	PMIX_VALUE_RELEASE(val);
	val = NULL;
	int rank = (int)p->me.rank;
	if (size < 1 || size > DL_WORLD_MAX || rank < 0 || rank >= size || local_rank >= local_size) {
		dl_errf(err, errlen, "PMIx gave rank %d, size %d, local rank %d of %d: inconsistent",
			 rank, size, local_rank, local_size);
		goto out;
	}

	if (size == 1) {
		/* Alone: nothing to reduce, so no MPI (its start costs ~0.5 s). */
		dl_world_single(w);
		w->method = "pmix";
		w->impl = p;
		w->ops = &pmix_ops;
		w->comm.impl = p;
		rv = 0;
		goto out;
	}

	/* The star's hub address travels by PMIx (trusted: it is the
	 * resource manager's): rank 0 listens on any port of its host name's
	 * address (not every interface; when /etc/hosts maps the name to
	 * loopback and the step has another host, on the address through which
	 * this host reaches it) and publishes that address as numbers, so the
	 * others connect where it listens whatever their resolver says. */
	memset(hub, 0, sizeof(hub));
	if (rank == 0) {
		struct sockaddr_storage me;
		socklen_t ml = sizeof(me);
		char note[768], at[INET6_ADDRSTRLEN];
		if (gethostname(host, sizeof(host)) < 0) {
			dl_errf(err, errlen, "gethostname failed");
			goto out;
		}
		host[sizeof(host) - 1] = 0;
		if ((lfd = dl_listen_host("the host name", host, 0, env->other_node, note,
					  sizeof(note), e, sizeof(e))) < 0) {
			dl_errf(err, errlen, "rank 0: %s", e);
			goto out;
		}
		if (note[0])
			fprintf(stderr, "dljob: note: rank 0 on %s: %s\n", env->node, note);
		if (getsockname(lfd, (struct sockaddr *)&me, &ml) < 0) {
			dl_errf(err, errlen, "rank 0: getsockname: %s", strerror(errno));
			goto out;
		}
		dl_addr_text((struct sockaddr *)&me, at, sizeof(at));
		snprintf(hub, sizeof(hub), "%s %d", at, dl_local_port(lfd));
	}
	hubs = malloc((size_t)size * HUB_LEN);
	if (!hubs) {
		dl_errf(err, errlen, "out of memory for %d ranks", size);
		goto out;
	}
	if (pmix_allgather(p, size, hub, HUB_LEN, hubs, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "rank %d: %s", rank, e);
		goto out;
	}
	t_fence = dl_now();
	int hub_port = 0;
	hubs[HUB_LEN - 1] = 0;
	if (sscanf(hubs, "%255s %d", host, &hub_port) != 2) {
		dl_errf(err, errlen, "rank 0 published a bad address '%.100s'", hubs);
		goto out;
	}
	char jobkey[64];
	struct dl_auth auth;
	snprintf(jobkey, sizeof(jobkey), "pmix:%.40s", p->me.nspace);
	/* The secret comes from the environment: srun hands the SPANK
	 * plugin's DLJOB_JOB_SECRET to every task of the step. */
	if (dl_auth_init(&auth, env->secret, env->have_secret, jobkey, err, errlen) < 0)
		goto out;
	if (dl_star_open(&p->star, rank, size, lfd, host, hub_port, 1, use_ring ? &rfd : NULL,
			 env->node, &auth, dl_now() + timeout_s, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "%s", e);
		goto out;
	}
	p->star.timeout_s = timeout_s;
	t_star = dl_now();

	if (use_ring) {
		if (dl_ring_open(&p->star, rfd, timeout_s, &w->comm, err, errlen) < 0)
			goto out;
		p->ring = w->comm.impl;
		if (verbose)
			fprintf(stderr, "dljob: world pmix rank %d: PMIx_Init %.3f s, fence %.3f s, "
				"star %.3f s, ring %.3f s\n", rank, t_init - t0, t_fence - t_init,
				t_star - t_fence, dl_now() - t_star);
		w->method = "pmix";
		w->impl = p;
		w->ops = &pmix_ops;
		w->comm.local_rank = local_rank;
		w->comm.local_size = local_size;
		rv = 0;
		goto out;
	}

	if (verbose && rank == 0)
		fprintf(stderr, "dljob: world pmix rank 0: Open MPI's TCP interface: %s\n",
			p->tcp_if.note);
	/* Open MPI finds the same PMIx server (and our PMIx_Init is counted).
	 * SERIALIZED: collectives may come from any one thread at a time. */
	int provided, mr = -1, ms = -1, irc;
	struct watchdog wd;
	watchdog_start(&wd, "MPI_Init_thread", timeout_s, &p->star, rank);
	irc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
	watchdog_stop(&wd);
	if (irc != MPI_SUCCESS) {
		dl_errf(err, errlen, "MPI_Init_thread failed");
		dl_star_abort(&p->star, err);
		goto out;
	}
	p->mpi_up = 1;
	/* Errors must come back to us, not abort the process with MPI's text. */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &mr);
	MPI_Comm_size(MPI_COMM_WORLD, &ms);
	if (mr != rank || ms != size) {
		dl_errf(err, errlen, "MPI says rank %d of %d, PMIx says %d of %d", mr, ms, rank, size);
		dl_star_abort(&p->star, err);
		goto out;
	}
	/* The duplicate is the ranks' first exchange over Open MPI's own
	 * connections (MPI_Init_thread only spoke to PMIx): polled against the
	 * deadline like every collective, since it never returns when those
	 * connections cannot come up (an interface with the same address on
	 * every node, such as docker0, that Open MPI takes for the way to a
	 * peer). */
	MPI_Request dup_req;
	if (MPI_Comm_idup(MPI_COMM_WORLD, &p->comm, &dup_req) != MPI_SUCCESS) {
		dl_errf(err, errlen, "MPI_Comm_idup failed");
		dl_star_abort(&p->star, err);
		goto out;
	}
	if (mpi_wait(p, &dup_req, "MPI_Comm_idup", e, sizeof(e)) < 0) {
		/* All alive and waiting (rank 0's diagnosis in world_star.c):
		 * not a rank's fault but the network's. */
		if (strstr(e, DL_STAR_ALL_WAITED))
			dl_errf(err, errlen, "Open MPI's connections between the ranks did not come "
				 "up in %g s (every rank waited in MPI_Comm_idup, their first exchange "
				 "over them): name the interface that joins the nodes in "
				 "OMPI_MCA_btl_tcp_if_include, or set DLJOB_COLLECTIVES=ring; TCP "
				 "interface: %s", timeout_s, p->tcp_if.note);
		else
			dl_errf(err, errlen, "%s", e);
		goto out;
	}
	MPI_Comm_set_errhandler(p->comm, MPI_ERRORS_RETURN);

	if (verbose)
		fprintf(stderr, "dljob: world pmix rank %d: PMIx_Init %.3f s, fence %.3f s, star %.3f s, "
			"MPI_Init %.3f s\n", rank, t_init - t0, t_fence - t_init, t_star - t_fence,
			dl_now() - t_star);
	w->method = "pmix";
	w->impl = p;
	w->ops = &pmix_ops;
	w->comm.rank = rank;
	w->comm.size = size;
	w->comm.local_rank = local_rank;
	w->comm.local_size = local_size;
	w->comm.allreduce_sum_f32 = pmix_allreduce_f32;
	w->comm.allreduce_sum_f64 = pmix_allreduce_f64;
	w->comm.barrier = pmix_barrier;
	w->comm.impl = p;
	rv = 0;
out:
	free(hubs);
	if (lfd >= 0)
		close(lfd);
	if (rfd >= 0)
		close(rfd);
	if (rv < 0) {
		/* A failed start: the process is about to exit non-zero; leave MPI
		 * and PMIx as they are rather than wait in their finalize. */
		dl_star_close(&p->star);
		if (!p->fence_pending)
			free(p);
	}
	return rv;
}
