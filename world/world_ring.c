/* A ring of TCP connections for allreduce, built over the star (which gave
 * every rank its successor's address and watches for deaths): reduce-scatter
 * then allgather, each rank sending and receiving one chunk per step, so
 * every link carries 2(n-1)/n of the buffer.  Every chunk is summed in the
 * same ring order on its way round and then copied, so all ranks end with
 * the same bits.  A wait ends with an error if one step (one chunk each way)
 * is not done within timeout_s, however many bytes trickle in meanwhile
 * (then rank 0 finds who holds everybody up), if a ring peer hangs up, or if
 * the star reports a death.  Every ring connection starts with the same
 * challenge-response over the job secret as the star (world_int.h): a
 * stranger cannot become a rank's predecessor or successor.  Used by the TCP world, and by the PMIx world
 * when DLJOB_COLLECTIVES=ring. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/err.h"
#include "world/world_int.h"

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
	dl_errf(err, errlen, "%s", t->st->why);
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
			dl_errf(err, errlen, "%s", e);
			return -1;
		}
	dl_star_name(t->st, peer, name, sizeof(name));
	dl_errf(err, errlen, "%s died or was killed (its ring connection %s)", name, what);
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
	double deadline = dl_now() + t->timeout_s;
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
			dl_errf(err, errlen, "%s: poll: %s", op, strerror(errno));
			return -1;
		}
		if (si >= 0 && pf[si].revents) {
			ssize_t k = send(t->next_fd, sbuf + sent, slen - sent, MSG_NOSIGNAL);
			if (k > 0) {
				sent += (size_t)k;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				return ring_broken(t, (me + 1) % n, errno == EPIPE ? "was closed" :
						   strerror(errno), err, errlen);
			}
		}
		if (ri >= 0 && pf[ri].revents) {
			ssize_t k = recv(t->prev_fd, rbuf + got, rlen - got, 0);
			if (k > 0) {
				got += (size_t)k;
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
			dl_errf(err, errlen, "%s", e);
			return -1;
		}
		if (dl_now() > deadline) {
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
			dl_errf(err, errlen, "%s: out of memory for a %zu-byte chunk", op, need);
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

#define RING_MAGIC 0x646c6a32u /* "dlj2", as the star's */
#define ROLE_RING 2u
#define RING_HELLO_LEN (8 + DL_NONCE_LEN + DL_MAC_LEN)
#define RING_PENDING_MAX 16

/* A connection to this rank's listener, in its handshake. */
struct ring_pending {
	int fd;
	double until;
	size_t got;
	unsigned char nonce[DL_NONCE_LEN];
	uint8_t hello[RING_HELLO_LEN];
};

/* The connection to the successor, in its handshake. */
struct ring_out {
	int state;      /* 0: wait for its greeting, 1: wait for its proof, 2: done */
	size_t got;
	unsigned char theirs[DL_NONCE_LEN], mine[DL_NONCE_LEN];
	uint8_t buf[DL_GREETING_LEN];
};

/* Take pending k out, keeping the others in the order they came, so that
 * pd[0] is always the oldest: a flood of strangers pushes out the
 * connections that had the longest time to say hello, never the
 * predecessor that has just connected (the old swap moved the newest into
 * slot 0, the next victim, so two more strangers pushed out any rank).
 * Returns its fd. */
static int ring_take(struct ring_pending *pd, int *npend, int k)
{
	int fd = pd[k].fd;
	memmove(&pd[k], &pd[k + 1], (size_t)(*npend - k - 1) * sizeof(pd[0]));
	--*npend;
	return fd;
}

static void ring_drop(struct ring_pending *pd, int *npend, int k)
{
	close(ring_take(pd, npend, k));
}

/* Read what is there into buf (up to want bytes): 0, or -1 on EOF/error. */
static int ring_read(int fd, uint8_t *buf, size_t *got, size_t want)
{
	ssize_t n = recv(fd, buf + *got, want - *got, 0);
	if (n > 0) {
		*got += (size_t)n;
		return 0;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	return -1;
}

/* The successor's side of this rank's outgoing connection: greeting in,
 * hello out, proof in.  Returns 0 (progress or done), -2 when the
 * successor closed the connection before its proof (its listener pushed it
 * out among a flood of strangers: connect again), or -1 with err. */
static int ring_out_step(struct dl_ring *t, struct ring_out *o, int next, char *err,
			 size_t errlen)
{
	struct dl_star *st = t->st;
	uint32_t ints[2] = { (uint32_t)st->rank, (uint32_t)st->size };
	char e[256], name[96];
	size_t want = o->state == 0 ? DL_GREETING_LEN : DL_PROOF_LEN;

	dl_star_name(st, next, name, sizeof(name));
	if (ring_read(t->next_fd, o->buf, &o->got, want) < 0) {
		dl_errf(err, errlen, "ring: %s closed the connection during the handshake (%s)",
			 name, o->state == 0 ? "before its greeting" : "before its proof");
		return -2;
	}
	if (o->got < want)
		return 0;
	if (o->state == 0) {
		uint8_t hello[RING_HELLO_LEN];
		if (dl_star_parse_greeting(o->buf, DL_GREETING_LEN, ROLE_RING, o->theirs) < 0) {
			dl_errf(err, errlen, "ring: the program at %s's ring address is not a dljob "
				 "rank (it sent no ring greeting)", name);
			return -1;
		}
		dl_auth_nonce(o->mine);
		dl_put32(hello, RING_MAGIC);
		dl_put32(hello + 4, (uint32_t)st->rank);
		memcpy(hello + 8, o->mine, DL_NONCE_LEN);
		dl_auth_mac(&st->auth, "dljob ring hello", o->theirs, o->mine, ints, 2, NULL, 0,
			    hello + 8 + DL_NONCE_LEN);
		if (dl_write_full(t->next_fd, hello, sizeof(hello), dl_now() + DL_HANDSHAKE_S, e,
				  sizeof(e)) < 0) {
			dl_errf(err, errlen, "ring: sending to %s: %s", name, e);
			return -1;
		}
		o->state = 1;
		o->got = 0;
		return 0;
	}
	if (dl_get32(o->buf) != RING_MAGIC ||
	    !dl_auth_check(&st->auth, "dljob ring proof", o->mine, o->theirs, ints, 2, NULL, 0,
			   o->buf + 4)) {
		dl_errf(err, errlen, "ring: the process at %s's ring address could not prove it "
			 "knows the job secret (a stranger?)", name);
		return -1;
	}
	o->state = 2;
	return 0;
}

/* A complete hello on pending p: 1 if it is the predecessor (proof sent),
 * 0 if a stranger (to drop). */
static int ring_in_hello(struct dl_ring *t, struct ring_pending *p, int prev)
{
	struct dl_star *st = t->st;
	uint8_t proof[DL_PROOF_LEN];
	uint32_t ints[2] = { (uint32_t)prev, (uint32_t)st->size };
	char e[128];

	if (dl_get32(p->hello) != RING_MAGIC || dl_get32(p->hello + 4) != (uint32_t)prev ||
	    !dl_auth_check(&st->auth, "dljob ring hello", p->nonce, p->hello + 8, ints, 2, NULL, 0,
			   p->hello + 8 + DL_NONCE_LEN))
		return 0;
	dl_put32(proof, RING_MAGIC);
	dl_auth_mac(&st->auth, "dljob ring proof", p->hello + 8, p->nonce, ints, 2, NULL, 0,
		    proof + 4);
	return dl_write_full(p->fd, proof, sizeof(proof), dl_now() + 1.0, e, sizeof(e)) == 0;
}

int dl_ring_open(struct dl_star *st, int rfd, double timeout_s, struct dl_comm *c,
		 char *err, size_t errlen)
{
	struct dl_ring *t;
	struct ring_pending pd[RING_PENDING_MAX];
	struct ring_out out;
	struct pollfd pf[RING_PENDING_MAX + 2];
	char e[512], ce[256] = "", name[96], closed_why[256] = "";
	int rank = st->rank, size = st->size, npend = 0, closed = 0;

	t = calloc(1, sizeof(*t));
	if (!t) {
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	t->st = st;
	t->next_fd = t->prev_fd = -1;
	t->timeout_s = timeout_s;
	memset(&out, 0, sizeof(out));

	/* All at once: connect to the successor (its listener is up since
	 * before the table) and do its handshake, again whenever it pushes
	 * this rank out, and the handshakes of whoever connects here, until
	 * the predecessor proves who it is.  The star is watched all along: a
	 * death is named at once. */
	int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
	double rd = dl_now() + timeout_s;
	while (out.state != 2 || t->prev_fd < 0) {
		int np = 0, oi = -1;
		if (t->prev_fd < 0) {
			for (;;) {
				int fd = dl_accept_one(rfd, e, sizeof(e));
				if (fd == -3 && npend > 0) {
					ring_drop(pd, &npend, 0);
					continue;
				}
				if (fd < 0)
					break;
				if (npend == RING_PENDING_MAX)
					ring_drop(pd, &npend, 0);
				struct ring_pending *p = &pd[npend];
				uint8_t g[DL_GREETING_LEN];
				memset(p, 0, sizeof(*p));
				p->fd = fd;
				p->until = dl_now() + DL_HANDSHAKE_S;
				dl_auth_nonce(p->nonce);
				dl_put32(g, RING_MAGIC);
				dl_put32(g + 4, ROLE_RING);
				memcpy(g + 8, p->nonce, DL_NONCE_LEN);
				if (dl_write_full(fd, g, sizeof(g), dl_now() + 1.0, e, sizeof(e)) < 0) {
					close(fd);
					continue;
				}
				npend++;
			}
			pf[np++] = (struct pollfd){ .fd = rfd, .events = POLLIN };
			for (int k = 0; k < npend; k++)
				pf[np++] = (struct pollfd){ .fd = pd[k].fd, .events = POLLIN };
		}
		if (out.state != 2 && t->next_fd < 0) {
			double cd = dl_now() + 0.2;
			t->next_fd = dl_connect_addr(&st->peer[next].sa, st->peer[next].salen,
						     cd < rd ? cd : rd, ce, sizeof(ce));
		}
		if (out.state != 2 && t->next_fd >= 0) {
			oi = np;
			pf[np++] = (struct pollfd){ .fd = t->next_fd, .events = POLLIN };
		}
		if (poll(pf, (nfds_t)np, 20) < 0 && errno != EINTR) {
			dl_errf(err, errlen, "ring: poll: %s", strerror(errno));
			goto bad;
		}
		if (oi >= 0 && pf[oi].revents) {
			int rc = ring_out_step(t, &out, next, err, errlen);
			if (rc == -1)
				goto bad;
			if (rc == -2) {
				/* Pushed out by the successor's listener: connect
				 * again (its first error is kept for the timeout). */
				if (!closed_why[0])
					snprintf(closed_why, sizeof(closed_why), "%s", err);
				closed++;
				close(t->next_fd);
				t->next_fd = -1;
				memset(&out, 0, sizeof(out));
			}
		}
		double now = dl_now();
		for (int k = npend - 1; k >= 0 && t->prev_fd < 0; k--) {
			struct ring_pending *p = &pd[k];
			if (pf[k + 1].revents && ring_read(p->fd, p->hello, &p->got, RING_HELLO_LEN) < 0) {
				ring_drop(pd, &npend, k);
				continue;
			}
			if (p->got == RING_HELLO_LEN) {
				if (ring_in_hello(t, p, prev))
					t->prev_fd = ring_take(pd, &npend, k);
				else
					ring_drop(pd, &npend, k); /* not our predecessor: a stranger */
				continue;
			}
			if (now > p->until)
				ring_drop(pd, &npend, k);
		}
		if (dl_star_pump(st, 0, err, errlen) < 0)
			goto bad;
		if (now >= rd) {
			dl_star_name(st, out.state != 2 ? next : prev, name, sizeof(name));
			if (out.state != 2 && closed)
				dl_errf(err, errlen, "ring: %s closed this rank's connection %d times during "
					 "the handshake (the first: %s; a flood of connections to its ring "
					 "listener?)", name, closed, closed_why);
			else if (out.state != 2 && t->next_fd < 0)
				dl_errf(err, errlen, "ring: cannot connect to %s: %s", name, ce);
			else
				dl_errf(err, errlen, out.state != 2 ? "ring: %s did not answer the handshake" :
					 "ring: %s never connected", name);
			goto bad;
		}
	}
	for (int k = 0; k < npend; k++)
		close(pd[k].fd);
	c->rank = rank;
	c->size = size;
	c->allreduce_sum_f32 = ring_allreduce_f32;
	c->allreduce_sum_f64 = ring_allreduce_f64;
	c->barrier = ring_barrier;
	c->impl = t;
	return 0;
bad:
	for (int k = 0; k < npend; k++)
		close(pd[k].fd);
	dl_star_abort(st, err);
	if (t->next_fd >= 0)
		close(t->next_fd);
	if (t->prev_fd >= 0)
		close(t->prev_fd);
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
