/* dl_world_open: pick the bootstrap the environment asks for (see
 * world/world_env.c) and hand out the method-independent calls. */
#include "config.h"
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/err.h"
#include "world/world_int.h"

/* dl_comm.broadcast for the engine: every method's comm lives in a dl_world. */
static int comm_broadcast(struct dl_comm *c, int root, void *buf, size_t len, char *err, size_t errlen)
{
	struct dl_world *w = (struct dl_world *)((char *)c - offsetof(struct dl_world, comm));
	return dl_world_broadcast_blob(w, root, buf, len, err, errlen);
}

int dl_world_open(struct dl_world *w, double timeout_s, char *err, size_t errlen)
{
	struct dl_world_env env;
	char e[512];
	int rc = 0;

	dl_world_single(w);
	if (!(timeout_s > 0)) {
		dl_errf(err, errlen, "world: timeout must be positive, not %g s", timeout_s);
		return -1;
	}
	if (dl_world_env(&env, environ, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "world: %s", e);
		return -1;
	}
	if (env.kind == DL_WORLD_SINGLE) {
		w->timeout_s = timeout_s;
		w->comm.broadcast = comm_broadcast;
		return 0;
	}
	if (!env.have_secret)
		fprintf(stderr, "dljob: warning: DLJOB_JOB_SECRET is unset (not started by srun --dl-job with "
			"dljob's SPANK plugin, which sets it in every task), so the rendezvous is "
			"not authenticated: any process that reaches it can join this job\n");
	/* A SIGTERM ends a bootstrap wait at once, naming the rank, instead of
	 * waiting out the timeout. */
	struct sigaction old;
	if (dl_stop_arm(&old) < 0) {
		dl_errf(err, errlen, "world: sigaction: %s", strerror(errno));
		return -1;
	}
	if (env.kind == DL_WORLD_PMIX)
		rc = dl_world_pmix_open(w, &env, timeout_s, e, sizeof(e));
	else
		rc = dl_world_tcp_open(w, &env, timeout_s, e, sizeof(e));
	int sig = dl_stop_disarm(&old);
	if (rc == 0 && sig) {
		/* The signal came after the last wait: the world is up, but the
		 * process was asked to stop. */
		snprintf(e, sizeof(e), "stopped by signal %d while joining the job", sig);
		dl_world_abort(w, e);
		dl_world_close(w);
		rc = -1;
	}
	if (rc < 0) {
		dl_errf(err, errlen, "world (%s): %s", env.kind == DL_WORLD_PMIX ? "pmix" : "tcp", e);
		dl_world_single(w);
		return -1;
	}
	w->timeout_s = timeout_s;
	w->comm.broadcast = comm_broadcast;
	return 0;
}

void dl_world_close(struct dl_world *w)
{
	if (w->ops && w->ops->close)
		w->ops->close(w);
	memset(w, 0, sizeof(*w));
}

void dl_world_abort(struct dl_world *w, const char *why)
{
	if (w->ops && w->ops->abort)
		w->ops->abort(w, why);
}

int dl_world_exchange(struct dl_world *w, const void *mine, size_t len, void *all,
		      char *err, size_t errlen)
{
	if (!w->ops) {
		dl_errf(err, errlen, "world: exchange on a world that is not open");
		return -1;
	}
	return w->ops->exchange(w, mine, len, all, err, errlen);
}

int dl_world_broadcast_blob(struct dl_world *w, int root, void *buf, size_t len,
			    char *err, size_t errlen)
{
	char *all;
	int rv;

	if (root < 0 || root >= w->comm.size) {
		dl_errf(err, errlen, "world: broadcast from rank %d of %d", root, w->comm.size);
		return -1;
	}
	if (w->comm.size == 1)
		return 0;
	all = malloc(len * (size_t)w->comm.size + 1);
	if (!all) {
		dl_errf(err, errlen, "world: out of memory for a %zu-byte broadcast", len);
		return -1;
	}
	rv = dl_world_exchange(w, buf, len, all, err, errlen);
	if (rv == 0)
		memcpy(buf, all + (size_t)root * len, len);
	free(all);
	return rv;
}
