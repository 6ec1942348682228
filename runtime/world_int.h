/* Internals shared by the world methods (runtime/world_*.c): environment
 * detection, socket helpers and the "star", a TCP connection from every rank
 * to rank 0 that carries the rendezvous, small control messages and, above
 * all, failure detection: a process that dies closes its sockets, so rank 0
 * learns at once which rank is gone and tells everybody else. */
#ifndef DLJOB_RUNTIME_WORLD_INT_H
#define DLJOB_RUNTIME_WORLD_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "runtime/world.h"

struct dl_world_ops {
	int (*exchange)(struct dl_world *w, const void *mine, size_t len, void *all,
			char *err, size_t errlen);
	void (*close)(struct dl_world *w);
	void (*abort)(struct dl_world *w, const char *why);
};

/* ---- environment (world_env.c) ---- */

enum dl_world_kind { DL_WORLD_SINGLE, DL_WORLD_PMIX, DL_WORLD_TCP };

#define DL_NODE_MAX 64

struct dl_world_env {
	enum dl_world_kind kind;
	int rank, size;            /* TCP only; PMIx asks its server */
	char master_addr[256];     /* TCP: where rank 0 listens */
	int master_port;
	char node[DL_NODE_MAX];    /* this node's name: SLURMD_NODENAME, else hostname */
	char jobkey[64];           /* tells this job's rendezvous from a stale one */
};

/* Decide how to join from the environment.  Returns 0, or -1 with one line
 * naming the bad variable in err. */
int dl_world_env(struct dl_world_env *e, char *err, size_t errlen);

/* The first host name of a Slurm hostlist ("n[01-04,7],gpu1" -> "n01").
 * Returns 0, or -1 if it cannot be parsed or does not fit in out. */

/* ---- sockets and time (world_net.c) ---- */

double dl_now(void);          /* monotonic seconds */
int dl_set_nonblock(int fd);
/* Listen on port (0: any) of every address of family af.  Returns the fd,
 * or -1 with err. */
int dl_listen(int af, int port, char *err, size_t errlen);
int dl_local_port(int fd);
/* Connect to host:port, retrying refused/unreachable until deadline.
 * Returns a non-blocking fd, or -1 with err. */
int dl_connect_retry(const char *host, int port, double deadline, char *err, size_t errlen);
/* Connect to a resolved address (retrying until deadline). */
int dl_connect_addr(const struct sockaddr_storage *sa, socklen_t salen, double deadline,
		    char *err, size_t errlen);
/* Accept one connection on a listening fd before deadline: a non-blocking
 * fd, -2 on timeout, -1 with err on error. */
int dl_accept_until(int lfd, double deadline, char *err, size_t errlen);
/* Write/read exactly len bytes on a non-blocking fd before deadline.
 * Return 0, or -1 with err ("peer closed", "timed out", errno). */
int dl_write_full(int fd, const void *buf, size_t len, double deadline, char *err, size_t errlen);
int dl_read_full(int fd, void *buf, size_t len, double deadline, char *err, size_t errlen);

/* ---- the star (world_star.c) ---- */

enum dl_star_msg {
	DL_MSG_HELLO = 1,  /* rank -> 0: who I am */
	DL_MSG_TABLE,      /* 0 -> rank: everybody's address and node */
	DL_MSG_DEAD,       /* 0 -> rank, or rank -> 0: the job is over, text says why */
	DL_MSG_BLOB,       /* rank -> 0: my part of an exchange */
	DL_MSG_BLOBS,      /* 0 -> rank: everybody's parts */
	DL_MSG_BARRIER,    /* rank -> 0: I reached the barrier */
	DL_MSG_GO,         /* 0 -> rank: everybody reached it */
	DL_MSG_BYE,        /* either way: I close normally, my EOF is no failure */
	DL_MSG_STUCK,      /* rank -> 0: my wait timed out (text: in what) */
};

struct dl_peer_addr {
	struct sockaddr_storage sa; /* with the port of its ring listener */
	socklen_t salen;
	char node[DL_NODE_MAX];
};

struct dl_inbox {
	unsigned char *buf;
	size_t len, cap;
};

struct dl_star {
	int rank, size;
	int *fd;                 /* rank 0: fd[i] to rank i; others: fd[0] to rank 0 */
	struct dl_inbox *in;     /* bytes read from fd[i], not yet consumed */
	unsigned char *bye;      /* peer said BYE: its EOF is expected */
	unsigned long *bye_seq;  /* ... after this many collectives */
	unsigned long seq;       /* collectives this rank has entered */
	int left;                /* this rank said BYE */
	unsigned char *stuck;    /* rank 0: peer reported a timed-out wait */
	char stuck_what[160];    /* rank 0: what the first report said */
	double timeout_s;        /* the world's timeout, for the verdicts */
	int diagnosing;          /* rank 0 is collecting STUCK reports */
	struct dl_peer_addr *peer; /* everybody's node (and ring address) */
	int failed;              /* the job is over: every call fails with why */
	char why[512];
};

/* Join the star.  Rank 0 passes the listening socket lfd (master); the others
 * pass master host/port.  ring_port is this rank's ring listener (0: none).
 * Rank 0 waits for all size-1 others until deadline and names the missing
 * ones.  On success st->peer[] holds every rank's node and ring address. */
int dl_star_open(struct dl_star *st, int rank, int size, int lfd, const char *host, int port,
		 int ring_port, const char *node, const char *jobkey, double deadline,
		 char *err, size_t errlen);
/* Read what has arrived (waiting up to timeout_ms) and notice deaths.
 * Returns 0, or -1 with err once the job is known to be over. */
int dl_star_pump(struct dl_star *st, int timeout_ms, char *err, size_t errlen);
int dl_star_send(struct dl_star *st, int peer, int type, const void *p, size_t len,
		 double deadline, char *err, size_t errlen);
/* Receive the next message from peer, which must be of type; *p is malloc'ed
 * (caller frees), *len its length. */
int dl_star_recv(struct dl_star *st, int peer, int type, void **p, size_t *len,
		 double deadline, char *err, size_t errlen);
/* Collectives over the star (rank 0 gathers and answers). */
int dl_star_barrier(struct dl_star *st, double timeout_s, char *err, size_t errlen);
int dl_star_exchange(struct dl_star *st, const void *mine, size_t len, void *all,
		     double timeout_s, char *err, size_t errlen);
/* A wait of this rank ("what": "allreduce", ...) saw no progress for the
 * timeout.  Find out who is not answering: every rank whose wait times out
 * reports to rank 0, which waits a grace period for the reports and names
 * the ranks that never sent one (hung, stopped, or stuck elsewhere).
 * Returns -1 with that verdict in err; the job is then over for everybody. */
int dl_star_timeout(struct dl_star *st, const char *what, char *err, size_t errlen);
/* This rank gives up: tell the others why (rank 0 tells all, the others tell
 * rank 0, which passes it on).  Best effort, bounded. */
void dl_star_abort(struct dl_star *st, const char *why);
/* This rank is done (normally, or because it failed on its own): say BYE
 * with the number of collectives it entered, so ranks still waiting in a
 * later collective fail at once, naming it, instead of timing out. */
void dl_star_leave(struct dl_star *st);
/* Close: BYE to peers (unless said, or the job failed), close sockets. */
void dl_star_close(struct dl_star *st);
/* Local rank/size: the ranks whose node name is this rank's, in rank order. */
void dl_star_local_ranks(const struct dl_star *st, int *lr, int *ls);
/* "rank 3 (n2)" */
void dl_star_name(const struct dl_star *st, int rank, char *out, size_t outlen);

/* ---- the ring (world_ring.c) ---- */

struct dl_ring;
/* Build the allreduce ring over an open star whose table holds every rank's
 * ring port; rfd is this rank's ring listener.  Sets c's rank, size,
 * collectives and impl (the ring). */
int dl_ring_open(struct dl_star *st, int rfd, double timeout_s, struct dl_comm *c,
		 char *err, size_t errlen);
void dl_ring_close(struct dl_ring *r);

/* ---- the methods ---- */

int dl_world_pmix_open(struct dl_world *w, const struct dl_world_env *env, double timeout_s,
		       char *err, size_t errlen);
int dl_world_tcp_open(struct dl_world *w, const struct dl_world_env *env, double timeout_s,
		      char *err, size_t errlen);

#endif
