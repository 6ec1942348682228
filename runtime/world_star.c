/* The star: one TCP connection from every rank to rank 0.  It carries the
 * rendezvous (HELLO/TABLE), small collectives (barrier, blob exchange) and
 * the failure protocol:
 *   - a process that dies has its sockets closed by the kernel, so rank 0
 *     sees EOF from exactly the rank that died and sends DEAD("rank 3 (n2)
 *     died ...") to everybody else; if rank 0 dies, everybody sees its EOF;
 *   - a rank that gives up on its own (a timeout) sends DEAD(why) to rank 0,
 *     which passes it on;
 *   - a rank that closes normally sends BYE first, so its EOF is no failure.
 * Messages are read eagerly into a per-peer inbox while any wait polls (so a
 * DEAD is seen even in the middle of an MPI or ring collective), and are
 * consumed in order by whoever expects them. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime/world_int.h"

#define STAR_MAGIC 0x646c6a31u /* "dlj1" */
#define STAR_MSG_MAX (256u << 20) /* a larger header is garbage, not a message */

struct msg_hdr {
	uint32_t type, len;
};

struct hello {
	uint32_t magic, rank, size, ring_port;
	char jobkey[64];
	char node[DL_NODE_MAX];
};

struct table_entry {
	uint32_t family, port;
	uint8_t addr[16];
	char node[DL_NODE_MAX];
};

void dl_star_name(const struct dl_star *st, int rank, char *out, size_t outlen)
{
	if (st && st->peer && rank >= 0 && rank < st->size && st->peer[rank].node[0])
		snprintf(out, outlen, "rank %d (%s)", rank, st->peer[rank].node);
	else
		snprintf(out, outlen, "rank %d", rank);
}

static int inbox_add(struct dl_inbox *in, const void *p, size_t n)
{
	if (in->len + n > in->cap) {
		size_t cap = in->cap ? in->cap : 4096;
		while (cap < in->len + n)
			cap *= 2;
		unsigned char *b = realloc(in->buf, cap);
		if (!b)
			return -1;
		in->buf = b;
		in->cap = cap;
	}
	memcpy(in->buf + in->len, p, n);
	in->len += n;
	return 0;
}

/* Length of the complete message at offset off of the inbox, header
 * included, or 0 if it has not all arrived. */
static size_t inbox_msg_at(const struct dl_inbox *in, size_t off, struct msg_hdr *h)
{
	if (in->len - off < sizeof(*h))
		return 0;
	memcpy(h, in->buf + off, sizeof(*h));
	h->type = ntohl(h->type);
	h->len = ntohl(h->len);
	if (h->len > STAR_MSG_MAX)
		return 0; /* caught by the caller's check of the header alone */
	if (in->len - off < sizeof(*h) + h->len)
		return 0;
	return sizeof(*h) + h->len;
}

/* Raw send of one message, bounded; used also while failing (no pumping). */
static int send_msg(int fd, int type, const void *p, size_t len, double deadline,
		    char *err, size_t errlen)
{
	struct msg_hdr h = { htonl((uint32_t)type), htonl((uint32_t)len) };
	if (dl_write_full(fd, &h, sizeof(h), deadline, err, errlen) < 0)
		return -1;
	if (len && dl_write_full(fd, p, len, deadline, err, errlen) < 0)
		return -1;
	return 0;
}

/* Rank 0: the job is over; tell every other rank (except skip) why. */
static void tell_all(struct dl_star *st, int skip)
{
	char e[128];
	double deadline = dl_now() + 1.0;
	for (int i = 1; i < st->size; i++)
		if (i != skip && st->fd[i] >= 0) /* BYE'd ranks may wait in close */
			(void)send_msg(st->fd[i], DL_MSG_DEAD, st->why, strlen(st->why), deadline,
				       e, sizeof(e));
}

static int fail(struct dl_star *st, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", st->why);
	return -1;
}

/* A peer's connection ended (EOF or reset) without BYE. */
static void peer_lost(struct dl_star *st, int peer, const char *how)
{
	char name[96];
	dl_star_name(st, peer, name, sizeof(name));
	if (st->rank == 0) {
		snprintf(st->why, sizeof(st->why),
			 "%s died or was killed (its connection to rank 0 %s)", name, how);
		st->failed = 1;
		tell_all(st, peer);
	} else {
		snprintf(st->why, sizeof(st->why),
			 "%s died or was killed (its connection %s)", name, how);
		st->failed = 1;
	}
}

/* Look through peer's inbox for BYE and DEAD (they may sit behind messages
 * nobody has asked for yet). */
static void scan(struct dl_star *st, int peer)
{
	struct dl_inbox *in = &st->in[peer];
	size_t off = 0, n;
	struct msg_hdr h;

	while ((n = inbox_msg_at(in, off, &h)) > 0) {
		if (h.type == DL_MSG_BYE) {
			char num[24];
			snprintf(num, sizeof(num), "%.*s", (int)(h.len < 23 ? h.len : 23),
				 (const char *)in->buf + off + sizeof(h));
			st->bye[peer] = 1;
			st->bye_seq[peer] = strtoul(num, NULL, 10);
		} else if (h.type == DL_MSG_STUCK && st->rank == 0) {
			st->stuck[peer] = 1;
			if (!st->stuck_what[0])
				snprintf(st->stuck_what, sizeof(st->stuck_what), "%.*s", (int)h.len,
					 (const char *)in->buf + off + sizeof(h));
		} else if (h.type == DL_MSG_DEAD && !st->failed) {
			int tl = (int)h.len;
			const char *t = (const char *)in->buf + off + sizeof(h);
			if (st->rank == 0) {
				char name[96];
				dl_star_name(st, peer, name, sizeof(name));
				snprintf(st->why, sizeof(st->why), "%s gave up: %.*s", name, tl, t);
				st->failed = 1;
				tell_all(st, peer);
			} else {
				snprintf(st->why, sizeof(st->why), "%.*s", tl, t);
				st->failed = 1;
			}
		}
		off += n;
	}
	if (in->len - off >= sizeof(h) && h.len > STAR_MSG_MAX && !st->failed) {
		char name[96];
		dl_star_name(st, peer, name, sizeof(name));
		snprintf(st->why, sizeof(st->why), "%s sent garbage on the control connection "
			 "(message of %u bytes)", name, h.len);
		st->failed = 1;
		if (st->rank == 0)
			tell_all(st, peer);
	}
}

/* Drain fd of peer into its inbox.  Returns 1 on EOF/reset, 0 otherwise. */
static int drain(struct dl_star *st, int peer, const char **how)
{
	unsigned char b[65536];
	for (;;) {
		ssize_t n = recv(st->fd[peer], b, sizeof(b), 0);
		if (n > 0) {
			if (inbox_add(&st->in[peer], b, (size_t)n) < 0) {
				*how = "overflowed memory";
				return 1;
			}
			continue;
		}
		if (n == 0) {
			*how = "was closed";
			return 1;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINTR)
			continue;
		*how = errno == ECONNRESET ? "was reset" : "failed";
		return 1;
	}
}

static void diagnose(struct dl_star *st);

int dl_star_pump(struct dl_star *st, int timeout_ms, char *err, size_t errlen)
{
	struct pollfd pf[st->size > 0 ? st->size : 1];
	int who[st->size > 0 ? st->size : 1];
	int np = 0;

	if (st->failed)
		return fail(st, err, errlen);
	for (int i = 0; i < st->size; i++) {
		if (i == st->rank || st->fd[i] < 0)
			continue;
		pf[np].fd = st->fd[i];
		pf[np].events = POLLIN;
		pf[np].revents = 0;
		who[np++] = i;
	}
	int r = poll(np ? pf : NULL, (nfds_t)np, timeout_ms);
	if (r < 0 && errno != EINTR) {
		snprintf(err, errlen, "poll: %s", strerror(errno));
		return -1;
	}
	for (int k = 0; k < np && r > 0; k++) {
		int i = who[k];
		const char *how = NULL;
		if (!pf[k].revents)
			continue;
		int eof = drain(st, i, &how);
		scan(st, i);
		if (eof) {
			close(st->fd[i]);
			st->fd[i] = -1;
			if (!st->bye[i] && !st->failed)
				peer_lost(st, i, how);
		}
		if (st->failed)
			return fail(st, err, errlen);
	}
	/* A rank that left after fewer collectives than this rank has entered
	 * is never coming (its BYE may have come while this rank was still in
	 * an earlier collective, so look every time). */
	for (int i = 0; i < st->size && !st->left; i++) {
		if (!st->bye[i] || st->bye_seq[i] >= st->seq)
			continue;
		char name[96];
		dl_star_name(st, i, name, sizeof(name));
		snprintf(st->why, sizeof(st->why), "%s left the job after %lu collectives, "
			 "while rank %d waits in collective %lu (it stopped early: see its own "
			 "error)", name, st->bye_seq[i], st->rank, st->seq);
		st->failed = 1;
		if (st->rank == 0)
			tell_all(st, -1);
		return fail(st, err, errlen);
	}
	if (st->rank == 0 && st->stuck_what[0] && !st->diagnosing) {
		/* Somebody's wait timed out: the job is over; find out who is
		 * to blame before saying so. */
		diagnose(st);
		return fail(st, err, errlen);
	}
	return 0;
}

int dl_star_send(struct dl_star *st, int peer, int type, const void *p, size_t len,
		 double deadline, char *err, size_t errlen)
{
	struct msg_hdr h = { htonl((uint32_t)type), htonl((uint32_t)len) };
	const unsigned char *part[2] = { (const unsigned char *)&h, p };
	size_t plen[2] = { sizeof(h), len };
	char name[96];

	if (st->failed)
		return fail(st, err, errlen);
	if (st->fd[peer] < 0) {
		dl_star_name(st, peer, name, sizeof(name));
		snprintf(err, errlen, "no connection to %s", name);
		return -1;
	}
	for (int k = 0; k < 2; k++) {
		size_t off = 0;
		while (off < plen[k]) {
			ssize_t n = send(st->fd[peer], part[k] + off, plen[k] - off, MSG_NOSIGNAL);
			if (n > 0) {
				off += (size_t)n;
				continue;
			}
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* The reader will see why (EOF) on the next pump. */
				if (dl_star_pump(st, 100, err, errlen) < 0)
					return -1;
				dl_star_name(st, peer, name, sizeof(name));
				snprintf(err, errlen, "sending to %s: %s", name, strerror(errno));
				return -1;
			}
			if (dl_now() >= deadline) {
				dl_star_name(st, peer, name, sizeof(name));
				snprintf(err, errlen, "timed out sending to %s", name);
				return -1;
			}
			/* Keep reading while the peer's buffer is full: two ranks that
			 * send to each other at once must not deadlock. */
			struct pollfd pw = { .fd = st->fd[peer], .events = POLLOUT };
			(void)poll(&pw, 1, 10);
			if (dl_star_pump(st, 0, err, errlen) < 0)
				return -1;
		}
	}
	return 0;
}

int dl_star_recv(struct dl_star *st, int peer, int type, void **p, size_t *len,
		 double deadline, char *err, size_t errlen)
{
	char name[96];
	*p = NULL;
	*len = 0;
	for (;;) {
		struct dl_inbox *in = &st->in[peer];
		struct msg_hdr h;
		size_t n;

		/* A BYE (seen by scan already) may precede a leaving rank's last
		 * messages, e.g. its close barrier. */
		if ((n = inbox_msg_at(in, 0, &h)) > 0 && h.type == DL_MSG_BYE && type != DL_MSG_BYE) {
			memmove(in->buf, in->buf + n, in->len - n);
			in->len -= n;
			continue;
		}
		/* What arrived before a failure is still delivered: the failure
		 * is then reported by the call that really waits on it. */
		if (n > 0 && (int)h.type == type) {
			*p = malloc(h.len ? h.len : 1);
			if (!*p) {
				snprintf(err, errlen, "out of memory for a %u-byte message", h.len);
				return -1;
			}
			memcpy(*p, in->buf + sizeof(h), h.len);
			*len = h.len;
			memmove(in->buf, in->buf + n, in->len - n);
			in->len -= n;
			return 0;
		}
		if (st->failed)
			return fail(st, err, errlen);
		if (n > 0) {
			dl_star_name(st, peer, name, sizeof(name));
			snprintf(err, errlen, "%s sent control message %u where %d was due "
				 "(ranks out of step?)", name, h.type, type);
			return -1;
		}
		double left = deadline - dl_now();
		if (left <= 0) {
			dl_star_name(st, peer, name, sizeof(name));
			snprintf(err, errlen, "timed out waiting for %s", name);
			return -2;
		}
		if (st->fd[peer] < 0) {
			dl_star_name(st, peer, name, sizeof(name));
			snprintf(err, errlen, "%s has closed its connection", name);
			return -1;
		}
		/* On failure, look at the inbox once more: what arrived first
		 * is still delivered. */
		if (dl_star_pump(st, left > 0.2 ? 200 : (int)(left * 1000) + 1, err, errlen) < 0 &&
		    !st->failed)
			return -1;
	}
}

static int setup(struct dl_star *st, int rank, int size, char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	st->rank = rank;
	st->size = size;
	st->fd = malloc(sizeof(int) * (size_t)size);
	st->in = calloc((size_t)size, sizeof(*st->in));
	st->bye = calloc((size_t)size, 1);
	st->bye_seq = calloc((size_t)size, sizeof(*st->bye_seq));
	st->stuck = calloc((size_t)size, 1);
	st->peer = calloc((size_t)size, sizeof(*st->peer));
	if (!st->fd || !st->in || !st->bye || !st->bye_seq || !st->stuck || !st->peer) {
		snprintf(err, errlen, "out of memory for a world of %d ranks", size);
		return -1;
	}
	for (int i = 0; i < size; i++)
		st->fd[i] = -1;
	return 0;
}

static void entry_from(struct table_entry *e, const struct sockaddr_storage *ss, int port,
		       const char *node)
{
	memset(e, 0, sizeof(*e));
	e->family = htonl((uint32_t)ss->ss_family);
	e->port = htonl((uint32_t)port);
	if (ss->ss_family == AF_INET6)
		memcpy(e->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	else
		memcpy(e->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	snprintf(e->node, sizeof(e->node), "%s", node);
}

static void entry_to(struct dl_peer_addr *a, const struct table_entry *e)
{
	memset(a, 0, sizeof(*a));
	if (ntohl(e->family) == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->sa;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)ntohl(e->port));
		memcpy(&s6->sin6_addr, e->addr, 16);
		a->salen = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a->sa;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)ntohl(e->port));
		memcpy(&s4->sin_addr, e->addr, 4);
		a->salen = sizeof(*s4);
	}
	memcpy(a->node, e->node, sizeof(a->node));
	a->node[sizeof(a->node) - 1] = 0;
}

/* "2,3,5" for the first ranks in [1,size) without a connection. */
static void missing_list(const struct dl_star *st, char *out, size_t outlen, int *count)
{
	size_t o = 0;
	*count = 0;
	out[0] = 0;
	for (int i = 1; i < st->size; i++) {
		if (st->fd[i] >= 0)
			continue;
		if (*count < 16 && o < outlen)
			o += (size_t)snprintf(out + o, outlen - o, "%s%d", *count ? "," : "", i);
		else if (*count == 16 && o < outlen)
			o += (size_t)snprintf(out + o, outlen - o, ",...");
		(*count)++;
	}
}

static int open_root(struct dl_star *st, int lfd, int ring_port, const char *node,
		     const char *jobkey, double deadline, char *err, size_t errlen)
{
	struct sockaddr_storage *pa = NULL;
	int *rport = NULL, have = 0, rv = -1;
	struct table_entry *tab = NULL;
	char e[256], name[96];

	pa = calloc((size_t)st->size, sizeof(*pa));
	rport = calloc((size_t)st->size, sizeof(*rport));
	tab = calloc((size_t)st->size, sizeof(*tab));
	if (!pa || !rport || !tab) {
		snprintf(err, errlen, "out of memory for a world of %d ranks", st->size);
		goto out;
	}
	snprintf(st->peer[0].node, sizeof(st->peer[0].node), "%s", node);
	while (have < st->size - 1) {
		struct hello h;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = dl_accept_until(lfd, deadline, e, sizeof(e));
		if (fd == -2) {
			char miss[160];
			int nm;
			missing_list(st, miss, sizeof(miss), &nm);
			snprintf(st->why, sizeof(st->why), "%s %s (of %d) never joined rank 0 (%s) "
				 "before the timeout", nm > 1 ? "ranks" : "rank", miss, st->size, node);
			st->failed = 1;
			tell_all(st, -1);
			goto failed;
		}
		if (fd < 0) {
			snprintf(err, errlen, "rendezvous: %s", e);
			goto out;
		}
		/* A connection that says nothing is a stranger: do not let it stall
		 * the others for long. */
		double hd = dl_now() + 5.0;
		if (dl_read_full(fd, &h, sizeof(h), hd < deadline ? hd : deadline, e, sizeof(e)) < 0 ||
		    ntohl(h.magic) != STAR_MAGIC) {
			close(fd);
			continue;
		}
		h.jobkey[sizeof(h.jobkey) - 1] = 0;
		h.node[sizeof(h.node) - 1] = 0;
		if (strcmp(h.jobkey, jobkey) != 0) {
			close(fd); /* another job's rank, left over on this port */
			continue;
		}
		int r = (int)ntohl(h.rank), sz = (int)ntohl(h.size);
		if (sz != st->size || r <= 0 || r >= st->size || st->fd[r] >= 0) {
			close(fd);
			if (sz != st->size)
				snprintf(st->why, sizeof(st->why), "rank %d (%s) says the world has %d "
					 "ranks, rank 0 (%s) says %d", r, h.node, sz, node, st->size);
			else
				snprintf(st->why, sizeof(st->why), "a process on %s joined as rank %d, "
					 "which is %s", h.node, r,
					 r <= 0 || r >= st->size ? "out of range" : "taken twice");
			st->failed = 1;
			tell_all(st, -1);
			goto failed;
		}
		if (getpeername(fd, (struct sockaddr *)&pa[r], &sl) < 0) {
			snprintf(err, errlen, "getpeername: %s", strerror(errno));
			close(fd);
			goto out;
		}
		st->fd[r] = fd;
		rport[r] = (int)ntohl(h.ring_port);
		snprintf(st->peer[r].node, sizeof(st->peer[r].node), "%s", h.node);
		have++;
	}
	for (int r = 1; r < st->size; r++)
		entry_from(&tab[r], &pa[r], rport[r], st->peer[r].node);
	for (int r = 1; r < st->size; r++) {
		/* Rank 0's own address as rank r reaches it. */
		struct sockaddr_storage me;
		socklen_t ml = sizeof(me);
		if (getsockname(st->fd[r], (struct sockaddr *)&me, &ml) < 0) {
			snprintf(err, errlen, "getsockname: %s", strerror(errno));
			goto out;
		}
		entry_from(&tab[0], &me, ring_port, node);
		if (r == 1)
			entry_to(&st->peer[0], &tab[0]);
		if (dl_star_send(st, r, DL_MSG_TABLE, tab, sizeof(*tab) * (size_t)st->size, deadline,
				 e, sizeof(e)) < 0) {
			dl_star_name(st, r, name, sizeof(name));
			snprintf(err, errlen, "rendezvous: sending the table to %s: %s", name, e);
			goto out;
		}
	}
	for (int r = 1; r < st->size; r++)
		entry_to(&st->peer[r], &tab[r]);
	rv = 0;
	goto out;
failed:
	snprintf(err, errlen, "%s", st->why);
out:
	free(pa);
	free(rport);
	free(tab);
	return rv;
}

int dl_star_open(struct dl_star *st, int rank, int size, int lfd, const char *host, int port,
		 int ring_port, const char *node, const char *jobkey, double deadline,
		 char *err, size_t errlen)
{
	struct hello h;
	void *p = NULL;
	size_t len;
	char e[512];
	int rv = -1;

	if (setup(st, rank, size, err, errlen) < 0)
		return -1;
	if (rank == 0)
		return open_root(st, lfd, ring_port, node, jobkey, deadline, err, errlen);

	int fd = dl_connect_retry(host, port, deadline, e, sizeof(e));
	if (fd < 0) {
		snprintf(err, errlen, "rank %d cannot reach rank 0: %s", rank, e);
		return -1;
	}
	st->fd[0] = fd;
	snprintf(st->peer[0].node, sizeof(st->peer[0].node), "%s", host);
	memset(&h, 0, sizeof(h));
	h.magic = htonl(STAR_MAGIC);
	h.rank = htonl((uint32_t)rank);
	h.size = htonl((uint32_t)size);
	h.ring_port = htonl((uint32_t)ring_port);
	snprintf(h.jobkey, sizeof(h.jobkey), "%s", jobkey);
	snprintf(h.node, sizeof(h.node), "%s", node);
	if (dl_write_full(fd, &h, sizeof(h), deadline, e, sizeof(e)) < 0) {
		snprintf(err, errlen, "rank %d: sending hello to rank 0 at %s:%d: %s", rank, host,
			 port, e);
		goto out;
	}
	/* Rank 0 answers once everybody has arrived, so this waits as long as
	 * rank 0 does, plus a little for its answer to travel. */
	int rc = dl_star_recv(st, 0, DL_MSG_TABLE, &p, &len, deadline + 2.0, e, sizeof(e));
	if (rc == -2) {
		snprintf(err, errlen, "rendezvous at %s:%d: no answer from rank 0 (did it start, and "
			 "is that port free of other programs?)", host, port);
		goto out;
	}
	if (rc < 0) {
		snprintf(err, errlen, "rendezvous at %s:%d: %s", host, port, e);
		goto out;
	}
	if (len != sizeof(struct table_entry) * (size_t)size) {
		snprintf(err, errlen, "rendezvous: rank 0 sent a table of %zu bytes for %d ranks",
			 len, size);
		goto out;
	}
	for (int r = 0; r < size; r++)
		entry_to(&st->peer[r], (const struct table_entry *)p + r);
	rv = 0;
out:
	free(p);
	return rv;
}

int dl_star_barrier(struct dl_star *st, double timeout_s, char *err, size_t errlen)
{
	double deadline = dl_now() + timeout_s;
	void *p = NULL;
	size_t len;
	char e[512];
	int rc;

	if (st->rank != 0) {
		if (dl_star_send(st, 0, DL_MSG_BARRIER, NULL, 0, deadline, e, sizeof(e)) < 0)
			goto bad;
		if ((rc = dl_star_recv(st, 0, DL_MSG_GO, &p, &len, deadline, e, sizeof(e))) < 0)
			goto timeout_or_bad;
		free(p);
		return 0;
	}
	for (int r = 1; r < st->size; r++) {
		if ((rc = dl_star_recv(st, r, DL_MSG_BARRIER, &p, &len, deadline, e, sizeof(e))) < 0)
			goto timeout_or_bad;
		free(p);
	}
	for (int r = 1; r < st->size; r++)
		if (dl_star_send(st, r, DL_MSG_GO, NULL, 0, deadline, e, sizeof(e)) < 0)
			goto bad;
	return 0;
timeout_or_bad:
	if (rc == -2)
		return dl_star_timeout(st, "barrier", err, errlen);
bad:
	snprintf(err, errlen, "barrier: %s", e);
	return -1;
}

int dl_star_exchange(struct dl_star *st, const void *mine, size_t len, void *all,
		     double timeout_s, char *err, size_t errlen)
{
	double deadline = dl_now() + timeout_s;
	void *p = NULL;
	size_t got;
	char e[512], name[96];
	int rv = -1, rc;

	if (st->rank != 0) {
		if (dl_star_send(st, 0, DL_MSG_BLOB, mine, len, deadline, e, sizeof(e)) < 0)
			goto bad;
		if ((rc = dl_star_recv(st, 0, DL_MSG_BLOBS, &p, &got, deadline, e, sizeof(e))) < 0)
			goto timeout_or_bad;
		if (got != len * (size_t)st->size) {
			snprintf(e, sizeof(e), "rank 0 sent %zu bytes, expected %d x %zu", got,
				 st->size, len);
			goto bad;
		}
		memcpy(all, p, got);
		rv = 0;
		goto out;
	}
	memcpy(all, mine, len);
	for (int r = 1; r < st->size; r++) {
		if ((rc = dl_star_recv(st, r, DL_MSG_BLOB, &p, &got, deadline, e, sizeof(e))) < 0)
			goto timeout_or_bad;
		if (got != len) {
			dl_star_name(st, r, name, sizeof(name));
			snprintf(e, sizeof(e), "%s gave %zu bytes, rank 0 gave %zu", name, got, len);
			goto bad;
		}
		memcpy((char *)all + (size_t)r * len, p, len);
		free(p);
		p = NULL;
	}
	for (int r = 1; r < st->size; r++)
		if (dl_star_send(st, r, DL_MSG_BLOBS, all, len * (size_t)st->size, deadline, e,
				 sizeof(e)) < 0)
			goto bad;
	rv = 0;
	goto out;
timeout_or_bad:
	if (rc == -2) {
		(void)dl_star_timeout(st, "exchange", err, errlen);
		goto out;
	}
bad:
	snprintf(err, errlen, "exchange: %s", e);
out:
	free(p);
	return rv;
}

/* How long rank 0 waits for the reports of timed-out waits. */
static double grace(const struct dl_star *st)
{
	double g = 0.25 * st->timeout_s;
	return g < 1.0 ? 1.0 : g > 10.0 ? 10.0 : g;
}

/* Rank 0: some wait timed out.  Wait for the reports of the ranks that are
 * alive and waiting too, then blame those that never reported. */
static void diagnose(struct dl_star *st)
{
	double until = dl_now() + grace(st);
	char e[512], list[256] = "", name[96];
	int nsus = 0;
	size_t o = 0;

	st->diagnosing = 1;
	st->stuck[0] = 1;
	for (;;) {
		int pending = 0;
		for (int i = 1; i < st->size; i++)
			pending += !st->stuck[i] && st->fd[i] >= 0 && !st->bye[i];
		if (!pending || dl_now() >= until)
			break;
		if (dl_star_pump(st, 50, e, sizeof(e)) < 0) {
			st->diagnosing = 0;
			return; /* a death explains it all (why is set, everybody told) */
		}
	}
	st->diagnosing = 0;
	if (st->failed)
		return;
	for (int i = 1; i < st->size; i++) {
		if (st->stuck[i] || st->fd[i] < 0 || st->bye[i])
			continue;
		if (nsus < 8 && o < sizeof(list)) {
			dl_star_name(st, i, name, sizeof(name));
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", nsus ? ", " : "", name);
		} else if (nsus == 8 && o < sizeof(list)) {
			o += (size_t)snprintf(list + o, sizeof(list) - o, ", ...");
		}
		nsus++;
	}
	if (nsus == 0)
		snprintf(st->why, sizeof(st->why), "every rank waited %g s in %s without progress "
			 "(did the ranks call different collectives?)", st->timeout_s, st->stuck_what);
	else
		snprintf(st->why, sizeof(st->why), "%s did not answer for %g s (hung or stopped?) "
			 "while the other ranks waited in %s", list, st->timeout_s, st->stuck_what);
	st->failed = 1;
	tell_all(st, -1);
}

int dl_star_timeout(struct dl_star *st, const char *what, char *err, size_t errlen)
{
	char e[512], name[96];

	if (st->failed)
		return fail(st, err, errlen);
	if (!st->fd) {
		snprintf(err, errlen, "%s: no progress for %g s", what, st->timeout_s);
		return -1;
	}
	if (st->rank == 0) {
		if (!st->stuck_what[0])
			snprintf(st->stuck_what, sizeof(st->stuck_what), "%s", what);
		diagnose(st);
		return fail(st, err, errlen);
	}
	if (st->fd[0] >= 0 &&
	    send_msg(st->fd[0], DL_MSG_STUCK, what, strlen(what), dl_now() + 1.0, e, sizeof(e)) == 0) {
		/* Rank 0 answers within its grace period, unless it is the one
		 * that hangs. */
		double until = dl_now() + 2.0 * grace(st) + 1.0;
		while (dl_now() < until)
			if (dl_star_pump(st, 100, err, errlen) < 0)
				return -1;
	}
	dl_star_name(st, 0, name, sizeof(name));
	snprintf(e, sizeof(e), "%s: no progress for %g s, and %s did not answer either "
		 "(hung or stopped?)", what, st->timeout_s, name);
	dl_star_abort(st, e);
	snprintf(err, errlen, "%s", e);
	return -1;
}

void dl_star_abort(struct dl_star *st, const char *why)
{
	char e[128];
	if (!st->fd || st->failed)
		return; /* the others already know (or told us) */
	snprintf(st->why, sizeof(st->why), "%s", why);
	st->failed = 1;
	if (st->rank == 0) {
		/* Say who gave up: the others read this text verbatim. */
		snprintf(st->why, sizeof(st->why), "rank 0 (%s) gave up: %s", st->peer[0].node, why);
		tell_all(st, -1);
	} else if (st->fd[0] >= 0) {
		(void)send_msg(st->fd[0], DL_MSG_DEAD, why, strlen(why), dl_now() + 1.0, e, sizeof(e));
	}
}

void dl_star_leave(struct dl_star *st)
{
	char e[128], num[24];
	if (!st->fd || st->left || st->failed)
		return;
	st->left = 1;
	snprintf(num, sizeof(num), "%lu", st->seq);
	for (int i = 0; i < st->size; i++)
		if (st->fd[i] >= 0)
			(void)send_msg(st->fd[i], DL_MSG_BYE, num, strlen(num), dl_now() + 1.0, e, sizeof(e));
}

void dl_star_close(struct dl_star *st)
{
	if (!st->fd)
		return;
	dl_star_leave(st);
	for (int i = 0; i < st->size; i++)
		if (st->fd[i] >= 0)
			close(st->fd[i]);
	for (int i = 0; i < st->size; i++)
		free(st->in[i].buf);
	free(st->fd);
	free(st->in);
	free(st->bye);
	free(st->bye_seq);
	free(st->stuck);
	free(st->peer);
	memset(st, 0, sizeof(*st));
}
