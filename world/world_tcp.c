/* The TCP world: for srun without PMIx, or torchrun-style RANK/WORLD_SIZE/
 * MASTER_ADDR/MASTER_PORT.  Rank 0 listens on MASTER_PORT (or, when it is
 * taken, the next free one of DL_MASTER_PORT_TRIES ports); everybody joins
 * the star there (world/world_star.c), learning everybody's ring address,
 * and the collectives run on a ring (world/world_ring.c). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/err.h"
#include "common/master.h"
#include "world/world_int.h"

struct tcp_world {
	struct dl_star star;
	struct dl_ring *ring;
	double timeout_s;
};

static int tcp_exchange(struct dl_world *w, const void *mine, size_t len, void *all,
			char *err, size_t errlen)
{
	struct tcp_world *t = w->impl;
	t->star.seq++;
	if (t->star.failed) {
		dl_errf(err, errlen, "%s", t->star.why);
		return -1;
	}
	if (dl_star_exchange(&t->star, mine, len, all, t->timeout_s, err, errlen) < 0) {
		dl_star_abort(&t->star, err);
		return -1;
	}
	return 0;
}

static void tcp_close(struct dl_world *w)
{
	struct tcp_world *t = w->impl;
	if (!t)
		return;
	dl_ring_close(t->ring);
	dl_star_close(&t->star);
	free(t);
	w->impl = NULL;
}

static void tcp_abort(struct dl_world *w, const char *why)
{
	struct tcp_world *t = w->impl;
	if (t)
		dl_star_abort(&t->star, why);
}

static const struct dl_world_ops tcp_ops = { tcp_exchange, tcp_close, tcp_abort };

void dl_star_local_ranks(const struct dl_star *st, int *lr, int *ls)
{
	*lr = 0;
	*ls = 0;
	for (int i = 0; i < st->size; i++) {
		if (strcmp(st->peer[i].node, st->peer[st->rank].node) != 0)
			continue;
		if (i < st->rank)
			(*lr)++;
		(*ls)++;
	}
}

int dl_world_tcp_open(struct dl_world *w, const struct dl_world_env *env, double timeout_s,
		      char *err, size_t errlen)
{
	struct tcp_world *t;
	struct dl_auth auth;
	int lfd = -1, rfd = -1, rv = -1, rank = env->rank, size = env->size;
	double deadline = dl_now() + timeout_s;
	char e[512], note[768];

	if (dl_auth_init(&auth, env->secret, env->have_secret, env->jobkey, err, errlen) < 0)
		return -1;
	t = calloc(1, sizeof(*t));
	if (!t) {
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	t->timeout_s = timeout_s;
	/* Rank 0 listens on MASTER_ADDR's address only (or, when this host maps
	 * it to loopback and the job has another host, on the address through
	 * which this host reaches it), on the first free
	 * candidate port: one taken by another job's step or any program is
	 * skipped (the others try the same candidates in the same order and
	 * know this job's rank 0 by its proof). */
	int tries = dl_master_port_tries(env->master_port), port = env->master_port;
	for (int k = 0; rank == 0 && lfd < 0; k++) {
		if (k == tries) {
			dl_errf(err, errlen, "rank 0 on %s: MASTER_ADDR=%s: MASTER_PORT=%d and the "
				 "next %d ports are all in use (%s)", env->node, env->master_addr,
				 env->master_port, tries - 1, e);
			goto out;
		}
		port = env->master_port + k;
		lfd = dl_listen_host("MASTER_ADDR", env->master_addr, port, env->other_node, note,
				     sizeof(note), e, sizeof(e));
		if (lfd == -1) {
			dl_errf(err, errlen, "rank 0 on %s: MASTER_ADDR=%s MASTER_PORT=%d: %s",
				 env->node, env->master_addr, port, e);
			goto out;
		}
		if (lfd >= 0 && note[0])
			fprintf(stderr, "dljob: note: rank 0 on %s: %s\n", env->node, note);
		if (lfd >= 0 && k > 0)
			fprintf(stderr, "dljob: note: rank 0 on %s: MASTER_PORT=%d is in use, so "
				"the rendezvous is on port %d\n", env->node, env->master_port, port);
	}
	/* A rank on rank 0's host whose /etc/hosts maps MASTER_ADDR to
	 * loopback goes where rank 0 listens, off loopback. */
	char at[256];
	if (rank > 0)
		(void)dl_connect_host(env->master_addr, env->other_node, at, sizeof(at));
	else
		snprintf(at, sizeof(at), "%s", env->master_addr);
	if (dl_star_open(&t->star, rank, size, lfd, at, env->master_port, tries,
			 &rfd, env->node, &auth, deadline, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "%s", e);
		goto out;
	}
	t->star.timeout_s = timeout_s;
	if (lfd >= 0) {
		close(lfd);
		lfd = -1;
	}
	if (dl_ring_open(&t->star, rfd, timeout_s, &w->comm, err, errlen) < 0)
		goto out;
	t->ring = w->comm.impl;
	w->method = "tcp";
	w->impl = t;
	w->ops = &tcp_ops;
	dl_star_local_ranks(&t->star, &w->comm.local_rank, &w->comm.local_size);
	rv = 0;
out:
	if (lfd >= 0)
		close(lfd);
	if (rfd >= 0)
		close(rfd);
	if (rv < 0) {
		dl_star_close(&t->star);
		free(t);
	}
	return rv;
}
