/* The TCP world: for srun without PMIx, or torchrun-style RANK/WORLD_SIZE/
 * MASTER_ADDR/MASTER_PORT.  Rank 0 listens on MASTER_PORT; everybody joins
 * the star there (runtime/world_star.c) and learns everybody's ring address;
 * then each rank connects to its successor, forming a ring for allreduce:
 * reduce-scatter then allgather, each rank sending and receiving one chunk
 * per step, so every link carries 2(n-1)/n of the buffer.  Every chunk is
 * summed in the same ring order on its way round and then copied, so all
 * ranks end with the same bits.
 * A wait ends with an error if no byte moves for timeout_s, if a ring peer
 * hangs up, or if the star reports a death. */
#include "config.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime/world_int.h"

struct tcp_world {
	struct dl_star star;
	int next_fd, prev_fd; /* ring: send to rank+1, receive from rank-1 */
	double timeout_s;
	unsigned char *tmp;   /* one chunk being received for the reduction */
	size_t tmp_cap;
	int failed;
	char why[512];
};

/* The ring broke at peer: a death reported by the star explains it better
 * (the peer may only have hung up because it learned of a death first), so
 * give the star a moment to say so. */
static int ring_broken(struct tcp_world *t, int peer, const char *what, char *err, size_t errlen)
{
	char name[96], e[512];
	double until = dl_now() + 2.0;
	while (dl_now() < until)
		if (dl_star_pump(&t->star, 50, e, sizeof(e)) < 0) {
			snprintf(err, errlen, "%s", e);
			return -1;
		}
	dl_star_name(&t->star, peer, name, sizeof(name));
	snprintf(err, errlen, "%s died or was killed (its ring connection %s)", name, what);
	dl_star_abort(&t->star, err);
	return -1;
}

/* Move one step: send slen bytes of sbuf to next while receiving rlen bytes
 * from prev into rbuf; on_recv (if any) consumes whole elements as they come. */
typedef void (*consume_fn)(void *dst, const void *src, size_t nbytes);

static int ring_step(struct tcp_world *t, const unsigned char *sbuf, size_t slen,
		     unsigned char *rbuf, size_t rlen, size_t esize, consume_fn on_recv,
		     unsigned char *dst, const char *op, char *err, size_t errlen)
{
	size_t sent = 0, got = 0, used = 0;
	double last = dl_now();
	char e[512];
	int n = t->star.size, me = t->star.rank;

	while (sent < slen || got < rlen) {
		struct pollfd pf[2];
		int np = 0, si = -1, ri = -1;
		if (sent < slen) {
			pf[np] = (struct pollfd){ .fd = t->next_fd, .events = POLLOUT };
			si = np++;
		}
		if (got < rlen) {
			pf[np] = (struct pollfd){ .fd = t->prev_fd, .events = POLLIN };
			ri = np++;
		}
		int r = poll(pf, (nfds_t)np, 50);
		if (r < 0 && errno != EINTR) {
			snprintf(err, errlen, "%s: poll: %s", op, strerror(errno));
			return -1;
		}
		int moved = 0;
		if (si >= 0 && pf[si].revents) {
			ssize_t k = send(t->next_fd, sbuf + sent, slen - sent, MSG_NOSIGNAL);
			if (k > 0) {
				sent += (size_t)k;
				moved = 1;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				return ring_broken(t, (me + 1) % n, errno == EPIPE ? "was closed" :
						   strerror(errno), err, errlen);
			}
		}
		if (ri >= 0 && pf[ri].revents) {
			ssize_t k = recv(t->prev_fd, rbuf + got, rlen - got, 0);
			if (k > 0) {
				got += (size_t)k;
				moved = 1;
				if (on_recv) {
					size_t whole = got - got % esize;
					on_recv(dst + used, rbuf + used, whole - used);
					used = whole;
				}
			} else if (k == 0) {
				return ring_broken(t, (me - 1 + n) % n, "was closed", err, errlen);
			} else if (errno != EAGAIN && errno != EINTR) {
				return ring_broken(t, (me - 1 + n) % n, strerror(errno), err, errlen);
			}
		}
		if (dl_star_pump(&t->star, 0, e, sizeof(e)) < 0) {
			snprintf(err, errlen, "%s", e);
			return -1;
		}
		double now = dl_now();
		if (moved) {
			last = now;
		} else if (now - last > t->timeout_s) {
			/* The ring neighbour may only be waiting for its own: let
			 * rank 0 find the rank that holds everybody up. */
			return dl_star_timeout(&t->star, op, err, errlen);
		}
	}
	return 0;
}

static void add_f32(void *dst, const void *src, size_t nbytes)
{
	float *d = dst;
	const float *s = src;
	for (size_t i = 0; i < nbytes / sizeof(float); i++)
		d[i] += s[i];
}

static void add_f64(void *dst, const void *src, size_t nbytes)
{
	double *d = dst;
	const double *s = src;
	for (size_t i = 0; i < nbytes / sizeof(double); i++)
		d[i] += s[i];
}

/* Chunk c of n elements split p ways: the first n%p chunks get one more. */
static size_t chunk_start(size_t n, int p, int c)
{
	size_t base = n / (size_t)p, rem = n % (size_t)p;
	return (size_t)c * base + ((size_t)c < rem ? (size_t)c : rem);
}

static size_t chunk_len(size_t n, int p, int c)
{
	return n / (size_t)p + ((size_t)c < n % (size_t)p ? 1 : 0);
}

static int ring_allreduce(struct dl_comm *c, void *vbuf, size_t n, size_t esize, consume_fn add,
			  const char *op, char *err, size_t errlen)
{
	struct tcp_world *t = c->impl;
	unsigned char *buf = vbuf;
	int p = c->size, r = c->rank;

	if (t->failed) {
		snprintf(err, errlen, "%s", t->why);
		return -1;
	}
	if (p == 1 || n == 0)
		return 0;
	size_t need = chunk_len(n, p, 0) * esize;
	if (need > t->tmp_cap) {
		unsigned char *nb = realloc(t->tmp, need);
		if (!nb) {
			snprintf(err, errlen, "%s: out of memory for a %zu-byte chunk", op, need);
			return -1;
		}
		t->tmp = nb;
		t->tmp_cap = need;
	}
	/* Reduce-scatter: at step s send chunk r-s, add chunk r-s-1 from prev.
	 * Afterwards rank r holds the full sum of chunk r+1. */
	for (int s = 0; s < p - 1; s++) {
		int sc = ((r - s) % p + p) % p, rc = ((r - s - 1) % p + p) % p;
		if (ring_step(t, buf + chunk_start(n, p, sc) * esize, chunk_len(n, p, sc) * esize,
			      t->tmp, chunk_len(n, p, rc) * esize, esize, add,
			      buf + chunk_start(n, p, rc) * esize, op, err, errlen) < 0)
			goto bad;
	}
	/* Allgather: pass the finished chunks round, received in place. */
	for (int s = 0; s < p - 1; s++) {
		int sc = ((r - s + 1) % p + p) % p, rc = ((r - s) % p + p) % p;
		if (ring_step(t, buf + chunk_start(n, p, sc) * esize, chunk_len(n, p, sc) * esize,
			      buf + chunk_start(n, p, rc) * esize, chunk_len(n, p, rc) * esize, esize,
			      NULL, NULL, op, err, errlen) < 0)
			goto bad;
	}
	return 0;
bad:
	t->failed = 1;
	snprintf(t->why, sizeof(t->why), "%s", err);
	return -1;
}

static int tcp_allreduce_f32(struct dl_comm *c, float *buf, size_t n, char *err, size_t errlen)
{
	return ring_allreduce(c, buf, n, sizeof(float), add_f32, "allreduce", err, errlen);
}

static int tcp_allreduce_f64(struct dl_comm *c, double *buf, size_t n, char *err, size_t errlen)
{
	return ring_allreduce(c, buf, n, sizeof(double), add_f64, "allreduce", err, errlen);
}

static int tcp_barrier(struct dl_comm *c, char *err, size_t errlen)
{
	struct tcp_world *t = c->impl;
	if (t->failed) {
		snprintf(err, errlen, "%s", t->why);
		return -1;
	}
	if (dl_star_barrier(&t->star, t->timeout_s, err, errlen) < 0) {
		dl_star_abort(&t->star, err);
		t->failed = 1;
		snprintf(t->why, sizeof(t->why), "%s", err);
		return -1;
	}
	return 0;
}

static int tcp_exchange(struct dl_world *w, const void *mine, size_t len, void *all,
			char *err, size_t errlen)
{
	struct tcp_world *t = w->impl;
	if (t->failed) {
		snprintf(err, errlen, "%s", t->why);
		return -1;
	}
	if (dl_star_exchange(&t->star, mine, len, all, t->timeout_s, err, errlen) < 0) {
		dl_star_abort(&t->star, err);
		t->failed = 1;
		snprintf(t->why, sizeof(t->why), "%s", err);
		return -1;
	}
	return 0;
}

static void tcp_close(struct dl_world *w)
{
	struct tcp_world *t = w->impl;
	if (!t)
		return;
	if (t->next_fd >= 0)
		close(t->next_fd);
	if (t->prev_fd >= 0)
		close(t->prev_fd);
	dl_star_close(&t->star);
	free(t->tmp);
	free(t);
	w->impl = NULL;
}

static void tcp_abort(struct dl_world *w, const char *why)
{
	struct tcp_world *t = w->impl;
	if (!t || t->failed)
		return;
	dl_star_abort(&t->star, why);
	t->failed = 1;
	snprintf(t->why, sizeof(t->why), "%s", why);
}

static const struct dl_world_ops tcp_ops = { tcp_exchange, tcp_close, tcp_abort };

/* Local rank/size: ranks that share this rank's node name, in rank order. */
static void local_ranks(const struct dl_star *st, int *lr, int *ls)
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
		      char *err, size_t errlen);

int dl_world_tcp_open(struct dl_world *w, const struct dl_world_env *env, double timeout_s,
		      char *err, size_t errlen)
{
	struct tcp_world *t;
	int lfd = -1, rfd = -1, rv = -1, rank = env->rank, size = env->size;
	double deadline = dl_now() + timeout_s;
	char e[512], name[96];
	int32_t id;

	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	t->next_fd = t->prev_fd = -1;
	t->timeout_s = timeout_s;
	/* Rank 0 takes MASTER_PORT first: a port already in use is this job's
	 * problem to report, not a reason to wait. */
	if (rank == 0 && (lfd = dl_listen(AF_INET, env->master_port, e, sizeof(e))) < 0) {
		snprintf(err, errlen, "rank 0 on %s: %s (MASTER_PORT)", env->node, e);
		goto out;
	}
	if ((rfd = dl_listen(AF_INET, 0, e, sizeof(e))) < 0) {
		snprintf(err, errlen, "ring listener: %s", e);
		goto out;
	}
	if (dl_star_open(&t->star, rank, size, lfd, env->master_addr, env->master_port,
			 dl_local_port(rfd), env->node, env->jobkey, deadline, e, sizeof(e)) < 0) {
		snprintf(err, errlen, "%s", e);
		goto out;
	}
	t->star.timeout_s = timeout_s;
	if (lfd >= 0) {
		close(lfd);
		lfd = -1;
	}

	/* Ring: connect to the successor, then accept the predecessor.  A
	 * listener queues the connection even before its owner calls accept, so
	 * nobody waits on anybody here. */
	int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
	double rd = dl_now() + timeout_s;
	t->next_fd = dl_connect_addr(&t->star.peer[next].sa, t->star.peer[next].salen, rd, e, sizeof(e));
	if (t->next_fd < 0) {
		dl_star_name(&t->star, next, name, sizeof(name));
		snprintf(err, errlen, "ring: cannot connect to %s: %s", name, e);
		dl_star_abort(&t->star, err);
		goto out;
	}
	id = (int32_t)rank;
	if (dl_write_full(t->next_fd, &id, sizeof(id), rd, e, sizeof(e)) < 0) {
		dl_star_name(&t->star, next, name, sizeof(name));
		snprintf(err, errlen, "ring: sending to %s: %s", name, e);
		dl_star_abort(&t->star, err);
		goto out;
	}
	for (;;) {
		int fd = dl_accept_until(rfd, rd, e, sizeof(e));
		if (fd == -2) {
			dl_star_name(&t->star, prev, name, sizeof(name));
			snprintf(err, errlen, "ring: %s never connected", name);
			dl_star_abort(&t->star, err);
			goto out;
		}
		if (fd < 0) {
			snprintf(err, errlen, "ring: %s", e);
			dl_star_abort(&t->star, err);
			goto out;
		}
		int32_t who = -1;
		if (dl_read_full(fd, &who, sizeof(who), rd, e, sizeof(e)) == 0 && who == prev) {
			t->prev_fd = fd;
			break;
		}
		close(fd); /* not our predecessor: a stray connection */
	}
	w->method = "tcp";
	w->impl = t;
	w->ops = &tcp_ops;
	w->comm.rank = rank;
	w->comm.size = size;
	local_ranks(&t->star, &w->comm.local_rank, &w->comm.local_size);
	w->comm.allreduce_sum_f32 = tcp_allreduce_f32;
	w->comm.allreduce_sum_f64 = tcp_allreduce_f64;
	w->comm.barrier = tcp_barrier;
	w->comm.impl = t;
	rv = 0;
out:
	if (lfd >= 0)
		close(lfd);
	if (rfd >= 0)
		close(rfd);
	if (rv < 0) {
		if (t->next_fd >= 0)
			close(t->next_fd);
		if (t->prev_fd >= 0)
			close(t->prev_fd);
		dl_star_close(&t->star);
		free(t);
	}
	return rv;
}
