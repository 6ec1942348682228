/* A ring of TCP connections for allreduce, built over the star (which gave
 * every rank its successor's address and watches for deaths): reduce-scatter
 * then allgather, each rank sending and receiving one chunk per step, so
 * every link carries 2(n-1)/n of the buffer.  Every chunk is summed in the
 * same ring order on its way round and then copied, so all ranks end with
 * the same bits.  A wait ends with an error if no byte moves for timeout_s
 * (then rank 0 finds who holds everybody up), if a ring peer hangs up, or if
 * the star reports a death.  Used by the TCP world, and by the PMIx world
 * when DLJOB_COLLECTIVES=ring. */
#include "config.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime/world_int.h"

struct dl_ring {
	struct dl_star *st;   /* not owned: the world's star */
	int next_fd, prev_fd; /* send to rank+1, receive from rank-1 */
	double timeout_s;
	unsigned char *tmp;   /* one chunk being received for the reduction */
	size_t tmp_cap;
};

static int failed(const struct dl_ring *t, char *err, size_t errlen)
{
	if (!t->st->failed)
		return 0;
	snprintf(err, errlen, "%s", t->st->why);
	return 1;
}

/* The ring broke at peer: a death reported by the star explains it better
 * (the peer may only have hung up because it learned of a death first), so
 * give the star a moment to say so. */
static int ring_broken(struct dl_ring *t, int peer, const char *what, char *err, size_t errlen)
{
	char name[96], e[512];
	double until = dl_now() + 2.0;
	while (dl_now() < until)
		if (dl_star_pump(t->st, 50, e, sizeof(e)) < 0) {
			snprintf(err, errlen, "%s", e);
			return -1;
		}
	dl_star_name(t->st, peer, name, sizeof(name));
	snprintf(err, errlen, "%s died or was killed (its ring connection %s)", name, what);
	dl_star_abort(t->st, err);
	return -1;
}

/* Move one step: send slen bytes of sbuf to next while receiving rlen bytes
 * from prev into rbuf; on_recv (if any) consumes whole elements as they come. */
typedef void (*consume_fn)(void *dst, const void *src, size_t nbytes);

static int ring_step(struct dl_ring *t, const unsigned char *sbuf, size_t slen,
		     unsigned char *rbuf, size_t rlen, size_t esize, consume_fn on_recv,
		     unsigned char *dst, const char *op, char *err, size_t errlen)
{
	size_t sent = 0, got = 0, used = 0;
	double last = dl_now();
	char e[512];
	int n = t->st->size, me = t->st->rank;

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
		if (dl_star_pump(t->st, 0, e, sizeof(e)) < 0) {
			snprintf(err, errlen, "%s", e);
			return -1;
		}
		double now = dl_now();
		if (moved) {
			last = now;
		} else if (now - last > t->timeout_s) {
			/* The ring neighbour may only be waiting for its own: let
			 * rank 0 find the rank that holds everybody up. */
			return dl_star_timeout(t->st, op, err, errlen);
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
	struct dl_ring *t = c->impl;
	unsigned char *buf = vbuf;
	int p = c->size, r = c->rank;

	t->st->seq++;
	if (failed(t, err, errlen))
		return -1;
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
	dl_star_abort(t->st, err); /* no-op if the star already knows */
	return -1;
}

static int ring_allreduce_f32(struct dl_comm *c, float *buf, size_t n, char *err, size_t errlen)
{
	return ring_allreduce(c, buf, n, sizeof(float), add_f32, "allreduce", err, errlen);
}

static int ring_allreduce_f64(struct dl_comm *c, double *buf, size_t n, char *err, size_t errlen)
{
	return ring_allreduce(c, buf, n, sizeof(double), add_f64, "allreduce", err, errlen);
}

static int ring_barrier(struct dl_comm *c, char *err, size_t errlen)
{
	struct dl_ring *t = c->impl;
	t->st->seq++;
	if (failed(t, err, errlen))
		return -1;
	if (dl_star_barrier(t->st, t->timeout_s, err, errlen) < 0) {
		dl_star_abort(t->st, err);
		return -1;
	}
	return 0;
}

int dl_ring_open(struct dl_star *st, int rfd, double timeout_s, struct dl_comm *c,
		 char *err, size_t errlen)
{
	struct dl_ring *t;
	char e[512], name[96];
	int rank = st->rank, size = st->size;
	int32_t id;

	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	t->st = st;
	t->next_fd = t->prev_fd = -1;
	t->timeout_s = timeout_s;

	/* Connect to the successor, then accept the predecessor.  A listener
	 * queues the connection even before its owner calls accept, so nobody
	 * waits on anybody here. */
	int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
	double rd = dl_now() + timeout_s;
	t->next_fd = dl_connect_addr(&st->peer[next].sa, st->peer[next].salen, rd, e, sizeof(e));
	if (t->next_fd < 0) {
		dl_star_name(st, next, name, sizeof(name));
		snprintf(err, errlen, "ring: cannot connect to %s: %s", name, e);
		goto bad;
	}
	id = (int32_t)rank;
	if (dl_write_full(t->next_fd, &id, sizeof(id), rd, e, sizeof(e)) < 0) {
		dl_star_name(st, next, name, sizeof(name));
		snprintf(err, errlen, "ring: sending to %s: %s", name, e);
		goto bad;
	}
	for (;;) {
		int fd = dl_accept_until(rfd, rd, e, sizeof(e));
		if (fd == -2) {
			dl_star_name(st, prev, name, sizeof(name));
			snprintf(err, errlen, "ring: %s never connected", name);
			goto bad;
		}
		if (fd < 0) {
			snprintf(err, errlen, "ring: %s", e);
			goto bad;
		}
		int32_t who = -1;
		if (dl_read_full(fd, &who, sizeof(who), rd, e, sizeof(e)) == 0 && who == prev) {
			t->prev_fd = fd;
			break;
		}
		close(fd); /* not our predecessor: a stray connection */
	}
	c->rank = rank;
	c->size = size;
	c->allreduce_sum_f32 = ring_allreduce_f32;
	c->allreduce_sum_f64 = ring_allreduce_f64;
	c->barrier = ring_barrier;
	c->impl = t;
	return 0;
bad:
	dl_star_abort(st, err);
	if (t->next_fd >= 0)
		close(t->next_fd);
	free(t);
	return -1;
}

void dl_ring_close(struct dl_ring *t)
{
	if (!t)
		return;
	if (t->next_fd >= 0)
		close(t->next_fd);
	if (t->prev_fd >= 0)
		close(t->prev_fd);
	free(t->tmp);
	free(t);
}
