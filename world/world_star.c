/* The star: one TCP connection from every rank to rank 0.  It carries the
 * rendezvous (handshake, TABLE), small collectives (barrier, blob exchange)
 * and the failure protocol:
 *   - a process that dies has its sockets closed by the kernel, so rank 0
 *     sees EOF from exactly the rank that died and sends DEAD("rank 3 (n2)
 *     died ...") to everybody else; if rank 0 dies, everybody sees its EOF;
 *   - a rank that gives up on its own (a timeout) sends DEAD(why) to rank 0,
 *     which passes it on;
 *   - a rank that closes normally sends BYE first, so its EOF is no failure.
 * Every connection starts with a mutual challenge-response over the job
 * secret (world_int.h, world_auth.c): rank 0 serves all pending connections
 * at once and drops any that cannot prove the secret, send garbage or stay
 * silent; a rank drops a "rank 0" that cannot prove it.  After the
 * handshake messages are neither encrypted nor authenticated (see dljob(1)).
 * Messages are read eagerly into a per-peer inbox while any wait polls (so a
 * DEAD is seen even in the middle of an MPI or ring collective), and are
 * consumed in order by whoever expects them. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/err.h"
#include "world/world_int.h"

#define STAR_MAGIC 0x646c6a32u /* "dlj2" */
#define ROLE_STAR 1u
#define PENDING_MAX 64        /* rank 0: handshakes in progress at once */
#define LINGER_S 3.0          /* rank 0, failed set-up: tell late ranks why */

struct msg_hdr {
	uint32_t type, len;
};

void dl_wire_text(char *out, size_t outlen, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t o = 0;
	if (!outlen)
		return;
	for (size_t i = 0; i < n && s[i] && o + 1 < outlen; i++)
		out[o++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	out[o] = 0;
}

void dl_star_name(const struct dl_star *st, int rank, char *out, size_t outlen)
{
	if (st && st->peer && rank >= 0 && rank < st->size && st->peer[rank].node[0])
		snprintf(out, outlen, "rank %d (%s)", rank, st->peer[rank].node);
	else
		snprintf(out, outlen, "rank %d", rank);
}

long dl_star_parse_msg(const uint8_t *buf, size_t len, uint32_t *type, uint32_t *plen)
{
	if (len < sizeof(struct msg_hdr))
		return 0;
	*type = dl_get32(buf);
	*plen = dl_get32(buf + 4);
	if (*type < DL_MSG_TABLE || *type > DL_MSG_LAST || *plen > DL_STAR_MSG_MAX)
		return -1;
	if (len - sizeof(struct msg_hdr) < *plen)
		return 0;
	return (long)(sizeof(struct msg_hdr) + *plen);
}

int dl_star_parse_greeting(const uint8_t *buf, size_t len, uint32_t role,
			   unsigned char nonce[DL_NONCE_LEN])
{
	if (len != DL_GREETING_LEN || dl_get32(buf) != STAR_MAGIC || dl_get32(buf + 4) != role)
		return -1;
	memcpy(nonce, buf + 8, DL_NONCE_LEN);
	return 0;
}

int dl_star_parse_hello(const uint8_t *buf, size_t len, struct dl_hello_view *h, char *err,
			size_t errlen)
{
	if (len != DL_HELLO_LEN) {
		dl_errf(err, errlen, "hello of %zu bytes, not %d", len, DL_HELLO_LEN);
		return -1;
	}
	memset(h, 0, sizeof(*h));
	if (dl_get32(buf) != STAR_MAGIC) {
		dl_errf(err, errlen, "not a dljob hello");
		return -1;
	}
	h->rank = dl_get32(buf + 4);
	h->size = dl_get32(buf + 8);
	h->ring_port = dl_get32(buf + 12);
	dl_wire_text(h->node, sizeof(h->node), buf + 16, DL_NODE_MAX);
	memcpy(h->nonce, buf + 16 + DL_NODE_MAX, DL_NONCE_LEN);
	memcpy(h->mac, buf + 16 + DL_NODE_MAX + DL_NONCE_LEN, DL_MAC_LEN);
	if (h->ring_port > 65535) {
		dl_errf(err, errlen, "ring port %u", h->ring_port);
		return -1;
	}
	return 0;
}

int dl_star_parse_table(const uint8_t *buf, size_t len, int size, struct dl_peer_addr *peers,
			char *err, size_t errlen)
{
	if (size < 1 || size > DL_WORLD_MAX || len != (size_t)DL_TABLE_ENTRY_LEN * (size_t)size) {
		dl_errf(err, errlen, "a table of %zu bytes for %d ranks", len, size);
		return -1;
	}
	for (int r = 0; r < size; r++) {
		const uint8_t *e = buf + (size_t)r * DL_TABLE_ENTRY_LEN;
		struct dl_peer_addr *a = &peers[r];
		uint32_t fam = dl_get32(e), port = dl_get32(e + 4);
		memset(a, 0, sizeof(*a));
		if (port > 65535 || (fam != AF_INET && fam != AF_INET6)) {
			dl_errf(err, errlen, "entry %d: family %u, port %u", r, fam, port);
			return -1;
		}
		if (fam == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->sa;
			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons((uint16_t)port);
			memcpy(&s6->sin6_addr, e + 8, 16);
			a->salen = sizeof(*s6);
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&a->sa;
			s4->sin_family = AF_INET;
			s4->sin_port = htons((uint16_t)port);
			memcpy(&s4->sin_addr, e + 8, 4);
			a->salen = sizeof(*s4);
		}
		dl_wire_text(a->node, sizeof(a->node), e + 24, DL_NODE_MAX);
	}
	return 0;
}

static void entry_put(uint8_t *e, const struct sockaddr_storage *ss, int port, const char *node)
{
	memset(e, 0, DL_TABLE_ENTRY_LEN);
	dl_put32(e, (uint32_t)ss->ss_family);
	dl_put32(e + 4, (uint32_t)port);
	if (ss->ss_family == AF_INET6)
		memcpy(e + 8, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	else
		memcpy(e + 8, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	memcpy(e + 24, node, strnlen(node, DL_NODE_MAX - 1));
}

static int inbox_add(struct dl_star *st, struct dl_inbox *in, const void *p, size_t n)
{
	if (st->in_total + n > DL_STAR_INBOX_MAX)
		return -1;
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
	st->in_total += n;
	return 0;
}

/* Drop the first n bytes of peer's inbox (a consumed message). */
static void inbox_take(struct dl_star *st, struct dl_inbox *in, size_t n)
{
	memmove(in->buf, in->buf + n, in->len - n);
	in->len -= n;
	in->seen = in->seen > n ? in->seen - n : 0;
	st->in_total -= n;
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
	return dl_errf(err, errlen, "%s", st->why);
}

/* The job is over for the reason in why (already set): tell the others. */
static void set_failed(struct dl_star *st, int skip)
{
	st->failed = 1;
	if (st->rank == 0)
		tell_all(st, skip);
}

/* A peer's connection ended (EOF or reset) without BYE. */
static void peer_lost(struct dl_star *st, int peer, const char *how)
{
	char name[96];
	dl_star_name(st, peer, name, sizeof(name));
	if (st->rank == 0)
		snprintf(st->why, sizeof(st->why),
			 "%s died or was killed (its connection to rank 0 %s)", name, how);
	else
		snprintf(st->why, sizeof(st->why),
			 "%s died or was killed (its connection %s)", name, how);
	set_failed(st, peer);
}

/* Look through peer's new complete messages for BYE, DEAD and STUCK (they
 * may sit behind messages nobody has asked for yet). */
static void scan(struct dl_star *st, int peer)
{
	struct dl_inbox *in = &st->in[peer];
	uint32_t type, len;
	long n;
	char name[96], text[256];

	while ((n = dl_star_parse_msg(in->buf + in->seen, in->len - in->seen, &type, &len)) > 0) {
		const unsigned char *body = in->buf + in->seen + sizeof(struct msg_hdr);
		if (type == DL_MSG_BYE) {
			char num[24];
			dl_wire_text(num, sizeof(num), body, len);
			st->bye[peer] = 1;
			st->bye_seq[peer] = strtoul(num, NULL, 10);
		} else if (type == DL_MSG_STUCK && st->rank == 0) {
			st->stuck[peer] = 1;
			if (!st->stuck_what[0])
				dl_wire_text(st->stuck_what, sizeof(st->stuck_what), body, len);
		} else if (type == DL_MSG_DEAD && !st->failed) {
			dl_wire_text(text, sizeof(text), body, len);
			if (st->rank == 0) {
				dl_star_name(st, peer, name, sizeof(name));
				snprintf(st->why, sizeof(st->why), "%s gave up: %s", name, text);
			} else {
				snprintf(st->why, sizeof(st->why), "%s", text);
			}
			set_failed(st, peer);
		}
		in->seen += (size_t)n;
	}
	if (n < 0 && !st->failed) {
		dl_star_name(st, peer, name, sizeof(name));
		snprintf(st->why, sizeof(st->why), "%s sent garbage on the control connection "
			 "(message type %u of %u bytes)", name, type, len);
		set_failed(st, peer);
	}
}

int dl_star_feed(struct dl_star *st, int peer, const void *p, size_t n)
{
	char name[96];
	if (inbox_add(st, &st->in[peer], p, n) < 0) {
		if (!st->failed) {
			dl_star_name(st, peer, name, sizeof(name));
			snprintf(st->why, sizeof(st->why), "%s sent more than %zu MiB of control "
				 "messages nobody asked for", name, DL_STAR_INBOX_MAX >> 20);
			set_failed(st, peer);
		}
		return -1;
	}
	scan(st, peer);
	return 0;
}

/* Drain fd of peer into its inbox.  Returns 1 on EOF/reset, 0 otherwise. */
static int drain(struct dl_star *st, int peer, const char **how)
{
	unsigned char b[65536];
	for (;;) {
		ssize_t n = recv(st->fd[peer], b, sizeof(b), 0);
		if (n > 0) {
			if (dl_star_feed(st, peer, b, (size_t)n) < 0) {
				*how = "sent too much";
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

/* A SIGTERM during the bootstrap (dl_stop_arm): the job is over, say so. */
static void check_stopped(struct dl_star *st)
{
	char msg[160];
	if (!dl_stopped() || st->failed)
		return;
	snprintf(msg, sizeof(msg), "rank %d (%s) was stopped by signal %d (SIGTERM?) while "
		 "joining the job", st->rank, st->peer[st->rank].node, dl_stopped());
	dl_star_abort(st, msg);
}

int dl_star_pump(struct dl_star *st, int timeout_ms, char *err, size_t errlen)
{
	struct pollfd *pf = st->pf;
	int np = 0;

	check_stopped(st);
	if (st->failed)
		return fail(st, err, errlen);
	for (int i = 0; i < st->size; i++) {
		if (i == st->rank || st->fd[i] < 0)
			continue;
		pf[np].fd = st->fd[i];
		pf[np].events = POLLIN;
		pf[np].revents = 0;
		st->who[np++] = i;
	}
	int r = poll(np ? pf : NULL, (nfds_t)np, timeout_ms);
	if (r < 0 && errno != EINTR) {
		dl_errf(err, errlen, "poll: %s", strerror(errno));
		return -1;
	}
	check_stopped(st);
	if (st->failed)
		return fail(st, err, errlen);
	for (int k = 0; k < np && r > 0; k++) {
		int i = st->who[k];
		const char *how = NULL;
		if (!pf[k].revents)
			continue;
		int eof = drain(st, i, &how);
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
		dl_errf(err, errlen, "no connection to %s", name);
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
				dl_errf(err, errlen, "sending to %s: %s", name, strerror(errno));
				return -1;
			}
			if (dl_now() >= deadline) {
				dl_star_name(st, peer, name, sizeof(name));
				dl_errf(err, errlen, "timed out sending to %s", name);
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
		uint32_t htype = 0, hlen = 0;
		long n = dl_star_parse_msg(in->buf, in->len, &htype, &hlen);

		/* A BYE (seen by scan already) may precede a leaving rank's last
		 * messages, e.g. its close barrier. */
		if (n > 0 && htype == DL_MSG_BYE && type != DL_MSG_BYE) {
			inbox_take(st, in, (size_t)n);
			continue;
		}
		/* What arrived before a failure is still delivered: the failure
		 * is then reported by the call that really waits on it. */
		if (n > 0 && (int)htype == type) {
			*p = malloc(hlen ? hlen : 1);
			if (!*p) {
				dl_errf(err, errlen, "out of memory for a %u-byte message", hlen);
				return -1;
			}
			memcpy(*p, in->buf + sizeof(struct msg_hdr), hlen);
			*len = hlen;
			inbox_take(st, in, (size_t)n);
			return 0;
		}
		if (st->failed)
			return fail(st, err, errlen);
		if (n != 0) {
			dl_star_name(st, peer, name, sizeof(name));
			dl_errf(err, errlen, "%s sent control message %u where %d was due "
				 "(ranks out of step?)", name, htype, type);
			return -1;
		}
		double left = deadline - dl_now();
		if (left <= 0) {
			dl_star_name(st, peer, name, sizeof(name));
			dl_errf(err, errlen, "timed out waiting for %s", name);
			return -2;
		}
		if (st->fd[peer] < 0) {
			dl_star_name(st, peer, name, sizeof(name));
			dl_errf(err, errlen, "%s has closed its connection", name);
			return -1;
		}
		/* On failure, look at the inbox once more: what arrived first
		 * is still delivered. */
		if (dl_star_pump(st, left > 0.2 ? 200 : (int)(left * 1000) + 1, err, errlen) < 0 &&
		    !st->failed)
			return -1;
	}
}

int dl_star_init(struct dl_star *st, int rank, int size, char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	if (size < 1 || size > DL_WORLD_MAX || rank < 0 || rank >= size) {
		dl_errf(err, errlen, "rank %d of a world of %d (at most %d ranks)", rank, size,
			 DL_WORLD_MAX);
		return -1;
	}
	st->rank = rank;
	st->size = size;
	st->fd = malloc(sizeof(int) * (size_t)size);
	st->in = calloc((size_t)size, sizeof(*st->in));
	st->pf = calloc((size_t)size, sizeof(*st->pf));
	st->who = calloc((size_t)size, sizeof(*st->who));
	st->bye = calloc((size_t)size, 1);
	st->bye_seq = calloc((size_t)size, sizeof(*st->bye_seq));
	st->stuck = calloc((size_t)size, 1);
	st->peer = calloc((size_t)size, sizeof(*st->peer));
	if (!st->fd || !st->in || !st->pf || !st->who || !st->bye || !st->bye_seq || !st->stuck ||
	    !st->peer) {
		free(st->fd);
		free(st->in);
		free(st->pf);
		free(st->who);
		free(st->bye);
		free(st->bye_seq);
		free(st->stuck);
		free(st->peer);
		memset(st, 0, sizeof(*st));
		dl_errf(err, errlen, "out of memory for a world of %d ranks", size);
		return -1;
	}
	for (int i = 0; i < size; i++)
		st->fd[i] = -1;
	return 0;
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

static void greeting_put(uint8_t *g, uint32_t role, const unsigned char nonce[DL_NONCE_LEN])
{
	dl_put32(g, STAR_MAGIC);
	dl_put32(g + 4, role);
	memcpy(g + 8, nonce, DL_NONCE_LEN);
}

/* The rank 0 end of a star connection, as both ends see it (rank 0: the
 * accepted socket's own address; a rank: the address it connected to), as
 * five words for the handshake's MACs: the address (IPv4 as ::ffff:a.b.c.d)
 * and the port.  So a stranger who holds another port or address of rank
 * 0's host (MASTER_PORT before rank 0 came, or MASTER_ADDR's IPv6 address
 * when rank 0 listens on its IPv4 one) and passes a rank's handshake on to
 * rank 0 byte for byte is dropped: rank 0 sees another end than the one the
 * rank's MAC names.  Before, that stranger sat in the middle of the rank's
 * connection (the table, hence where the ring connects; the exchanges).  A
 * NAT or port forwarding between the ranks and rank 0 is refused the same
 * way.  Returns 0, or -1 if fd has no such address. */
static int star_end(int fd, int own, uint32_t out[5])
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	uint8_t a[16] = { 0 };
	int rc = own ? getsockname(fd, (struct sockaddr *)&ss, &sl) : getpeername(fd, (struct sockaddr *)&ss, &sl);

	if (rc < 0)
		return -1;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
		a[10] = a[11] = 0xff;
		memcpy(a + 12, &s4->sin_addr, 4);
		out[4] = ntohs(s4->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
		memcpy(a, &s6->sin6_addr, 16);
		out[4] = ntohs(s6->sin6_port);
	} else {
		return -1;
	}
	for (int i = 0; i < 4; i++)
		out[i] = dl_get32(a + 4 * i);
	return 0;
}

/* Rank 0: a connection in its handshake (greeted, hello not complete). */
struct pending {
	int fd;
	double until;                      /* dropped if the hello is not in by then */
	size_t got;
	unsigned char nonce[DL_NONCE_LEN]; /* rank 0's challenge */
	uint8_t hello[DL_HELLO_LEN];
};

static void pending_drop(struct pending *pd, int *npend, int k)
{
	close(pd[k].fd);
	pd[k] = pd[--*npend];
}

/* Rank 0: a complete hello on pending k.  Returns 1 if it made a rank join,
 * 0 if it was a stranger (dropped), -1 if the job must fail (why is set). */
static int root_hello(struct dl_star *st, struct pending *p, struct sockaddr_storage *pa,
		      int *rport)
{
	struct dl_hello_view h;
	char e[256];
	uint8_t proof[DL_PROOF_LEN];
	uint32_t ints[8];

	if (dl_star_parse_hello(p->hello, sizeof(p->hello), &h, e, sizeof(e)) < 0)
		return 0;
	ints[0] = h.rank;
	ints[1] = h.size;
	ints[2] = h.ring_port;
	if (star_end(p->fd, 1, ints + 3) < 0 ||
	    !dl_auth_check(&st->auth, "dljob star hello", p->nonce, h.nonce, ints, 8,
			   p->hello + 16, DL_NODE_MAX, h.mac)) /* the node as sent */
		return 0; /* no proof: a stranger, another step's rank, or a relay */
	/* A process of this job: prove rank 0 knows the secret too. */
	dl_put32(proof, STAR_MAGIC);
	ints[2] = h.rank;
	dl_auth_mac(&st->auth, "dljob star proof", h.nonce, p->nonce, ints + 2, 6, NULL, 0,
		    proof + 4);
	if (dl_write_full(p->fd, proof, sizeof(proof), dl_now() + 1.0, e, sizeof(e)) < 0)
		return 0;
	int r = (int)h.rank;
	if (st->failed) {
		/* Set-up failed already: tell this latecomer why. */
		(void)send_msg(p->fd, DL_MSG_DEAD, st->why, strlen(st->why), dl_now() + 1.0, e,
			       sizeof(e));
		return 0;
	}
	if ((int)h.size != st->size || h.rank == 0 || h.rank >= (uint32_t)st->size ||
	    st->fd[r] >= 0) {
		if ((int)h.size != st->size)
			snprintf(st->why, sizeof(st->why), "rank %u (%s) says the world has %u "
				 "ranks, rank 0 (%s) says %d", h.rank, h.node, h.size,
				 st->peer[0].node, st->size);
		else
			snprintf(st->why, sizeof(st->why), "a process of this job on %s joined as "
				 "rank %u, which is %s", h.node, h.rank,
				 h.rank == 0 || h.rank >= (uint32_t)st->size ? "out of range" :
				 "taken twice");
		(void)send_msg(p->fd, DL_MSG_DEAD, st->why, strlen(st->why), dl_now() + 1.0, e,
			       sizeof(e));
		set_failed(st, -1);
		return -1;
	}
	socklen_t sl = sizeof(pa[r]);
	if (getpeername(p->fd, (struct sockaddr *)&pa[r], &sl) < 0)
		return 0;
	st->fd[r] = p->fd;
	rport[r] = (int)h.ring_port;
	snprintf(st->peer[r].node, sizeof(st->peer[r].node), "%s", h.node);
	return 1;
}

/* Rank 0: serve every connection at once until all size-1 others have
 * joined.  After a failure, keep serving LINGER_S to tell latecomers why. */
static int open_root(struct dl_star *st, int lfd, int *ring_fd, const char *node,
		     double deadline, char *err, size_t errlen)
{
	struct sockaddr_storage *pa = NULL, me;
	socklen_t ml = sizeof(me);
	int *rport = NULL, have = 0, rv = -1, npend = 0, ring_port = 0;
	struct pending *pd = NULL;
	struct pollfd *pf = NULL;
	uint8_t *tab = NULL;
	double linger = 0;
	char e[256], name[96];

	pa = calloc((size_t)st->size, sizeof(*pa));
	rport = calloc((size_t)st->size, sizeof(*rport));
	tab = calloc((size_t)st->size, DL_TABLE_ENTRY_LEN);
	pd = calloc(PENDING_MAX, sizeof(*pd));
	pf = calloc(PENDING_MAX + 1, sizeof(*pf));
	if (!pa || !rport || !tab || !pd || !pf) {
		dl_errf(err, errlen, "out of memory for a world of %d ranks", st->size);
		goto out;
	}
	snprintf(st->peer[0].node, sizeof(st->peer[0].node), "%s", node);
	if (getsockname(lfd, (struct sockaddr *)&me, &ml) < 0) {
		dl_errf(err, errlen, "getsockname: %s", strerror(errno));
		goto out;
	}
	if (ring_fd) {
		if ((*ring_fd = dl_listen_addr(&me, e, sizeof(e))) < 0) {
			dl_errf(err, errlen, "rank 0: ring listener: %s", e);
			goto out;
		}
		ring_port = dl_local_port(*ring_fd);
	}
	for (;;) {
		double now = dl_now();
		if (st->failed && linger == 0)
			linger = now + LINGER_S < deadline ? now + LINGER_S : deadline;
		if (st->failed ? now >= linger : have == st->size - 1)
			break;
		if (!st->failed && now >= deadline) {
			char miss[160];
			int nm;
			missing_list(st, miss, sizeof(miss), &nm);
			char at[INET6_ADDRSTRLEN];
			dl_addr_text((struct sockaddr *)&me, at, sizeof(at));
			snprintf(st->why, sizeof(st->why), "%s %s (of %d) never joined rank 0 (%s, "
				 "listening on %s port %d) before the timeout", nm > 1 ? "ranks" : "rank",
				 miss, st->size, node, at, dl_local_port(lfd));
			set_failed(st, -1);
		}
		/* Joined ranks: a death or a DEAD before the table fails the
		 * job now, naming the rank (the pump also looks at SIGTERM). */
		if (!st->failed)
			(void)dl_star_pump(st, 0, e, sizeof(e));
		if (st->failed && dl_stopped())
			break;
		/* Accept what is queued; a flood pushes out the oldest pending
		 * handshake (a silent stranger, as honest ranks answer at once). */
		for (;;) {
			int fd = dl_accept_one(lfd, e, sizeof(e));
			if (fd == -3 && npend > 0) {
				pending_drop(pd, &npend, 0);
				continue;
			}
			if (fd < 0)
				break;
			if (npend == PENDING_MAX)
				pending_drop(pd, &npend, 0);
			struct pending *p = &pd[npend];
			uint8_t g[DL_GREETING_LEN];
			memset(p, 0, sizeof(*p));
			p->fd = fd;
			p->until = dl_now() + DL_HANDSHAKE_S;
			dl_auth_nonce(p->nonce);
			greeting_put(g, ROLE_STAR, p->nonce);
			if (dl_write_full(fd, g, sizeof(g), dl_now() + 1.0, e, sizeof(e)) < 0) {
				close(fd);
				continue;
			}
			npend++;
		}
		pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int k = 0; k < npend; k++)
			pf[k + 1] = (struct pollfd){ .fd = pd[k].fd, .events = POLLIN };
		if (poll(pf, (nfds_t)npend + 1, 20) < 0 && errno != EINTR) {
			dl_errf(err, errlen, "poll: %s", strerror(errno));
			goto out;
		}
		now = dl_now();
		for (int k = npend - 1; k >= 0; k--) {
			struct pending *p = &pd[k];
			if (pf[k + 1].revents) {
				ssize_t n = recv(p->fd, p->hello + p->got, sizeof(p->hello) - p->got, 0);
				if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
					pending_drop(pd, &npend, k);
					continue;
				}
				if (n > 0)
					p->got += (size_t)n;
			}
			if (p->got == sizeof(p->hello)) {
				int fd = p->fd, rc = root_hello(st, p, pa, rport);
				pd[k] = pd[--npend];
				if (rc > 0)
					have++;
				else
					close(fd);
				continue;
			}
			if (now > p->until)
				pending_drop(pd, &npend, k);
		}
	}
	if (st->failed)
		goto failed;
	for (int r = 1; r < st->size; r++)
		entry_put(tab + (size_t)r * DL_TABLE_ENTRY_LEN, &pa[r], rport[r], st->peer[r].node);
	for (int r = 1; r < st->size; r++) {
		/* Rank 0's own address as rank r reaches it (its listener's). */
		entry_put(tab, &me, ring_port, node);
		if (dl_star_send(st, r, DL_MSG_TABLE, tab, (size_t)DL_TABLE_ENTRY_LEN * (size_t)st->size,
				 deadline, e, sizeof(e)) < 0) {
			dl_star_name(st, r, name, sizeof(name));
			dl_errf(err, errlen, "rendezvous: sending the table to %s: %s", name, e);
			goto out;
		}
	}
	if (dl_star_parse_table(tab, (size_t)DL_TABLE_ENTRY_LEN * (size_t)st->size, st->size,
				st->peer, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "rendezvous: own table: %s", e);
		goto out;
	}
	rv = 0;
	goto out;
failed:
	dl_errf(err, errlen, "%s", st->why);
out:
	for (int k = 0; k < npend; k++)
		close(pd[k].fd);
	free(pa);
	free(rport);
	free(tab);
	free(pd);
	free(pf);
	return rv;
}

/* A rank: the handshake with whatever listens at host:port on fd.  Returns
 * 1 if it is this job's rank 0 (fd is kept), 0 if it is not (fd closed,
 * what it was in err), -1 if a SIGTERM came (fd closed, err). */
static int handshake_root(struct dl_star *st, int fd, int port, int *ring_fd, const char *node,
			  double deadline, char *err, size_t errlen)
{
	uint8_t g[DL_GREETING_LEN], hello[DL_HELLO_LEN], proof[DL_PROOF_LEN];
	unsigned char n0[DL_NONCE_LEN], mine[DL_NONCE_LEN];
	char e[256], nodebuf[DL_NODE_MAX];
	uint32_t ints[8];
	size_t got, more = 0;
	double gd = dl_now() + DL_HANDSHAKE_S;

	if (gd > deadline)
		gd = deadline;
	/* Magic and role first: another program is named at once. */
	int ok = dl_read_full(fd, g, 8, gd, &got, e, sizeof(e)) == 0;
	if (ok && dl_get32(g) != STAR_MAGIC) /* a little more of it, for the message */
		(void)dl_read_full(fd, g + 8, 8, dl_now() + 0.2, &more, e, sizeof(e));
	else if (ok)
		ok = dl_read_full(fd, g + 8, sizeof(g) - 8, gd, &more, e, sizeof(e)) == 0;
	got += more;
	if (dl_stopped()) {
		dl_errf(err, errlen, "rank %d was stopped by signal %d while joining rank 0",
			 st->rank, dl_stopped());
		close(fd);
		return -1;
	}
	if (!ok && got == 0) {
		/* Closed before a word: rank 0 pushed this connection out in a
		 * flood of strangers (the next round comes back), or a program
		 * that says nothing. */
		dl_errf(err, errlen, "port %d: the program listening there sent no dljob greeting "
			 "(%s): another program holds it, or rank 0 is stuck", port, e);
		close(fd);
		return 0;
	}
	if (got < sizeof(g) || dl_star_parse_greeting(g, sizeof(g), ROLE_STAR, n0) < 0) {
		char text[24];
		dl_wire_text(text, sizeof(text), g, got < 16 ? got : 16);
		dl_errf(err, errlen, "port %d: the program listening there is not a dljob rank 0 "
			 "(it sent \"%s\"): another program holds it", port, text);
		goto bad;
	}
	if (ring_fd) {
		struct sockaddr_storage me;
		socklen_t ml = sizeof(me);
		if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
		    (*ring_fd = dl_listen_addr(&me, e, sizeof(e))) < 0) {
			dl_errf(err, errlen, "rank %d: ring listener: %s", st->rank, e);
			goto bad;
		}
	}
	dl_auth_nonce(mine);
	memset(hello, 0, sizeof(hello));
	memset(nodebuf, 0, sizeof(nodebuf));
	memcpy(nodebuf, node, strnlen(node, sizeof(nodebuf) - 1));
	ints[0] = (uint32_t)st->rank;
	ints[1] = (uint32_t)st->size;
	ints[2] = ring_fd ? (uint32_t)dl_local_port(*ring_fd) : 0;
	if (star_end(fd, 0, ints + 3) < 0) {
		dl_errf(err, errlen, "port %d: getpeername: %s", port, strerror(errno));
		goto bad;
	}
	dl_put32(hello, STAR_MAGIC);
	dl_put32(hello + 4, ints[0]);
	dl_put32(hello + 8, ints[1]);
	dl_put32(hello + 12, ints[2]);
	memcpy(hello + 16, nodebuf, DL_NODE_MAX);
	memcpy(hello + 16 + DL_NODE_MAX, mine, DL_NONCE_LEN);
	dl_auth_mac(&st->auth, "dljob star hello", n0, mine, ints, 8, nodebuf, DL_NODE_MAX,
		    hello + 16 + DL_NODE_MAX + DL_NONCE_LEN);
	double hd = dl_now() + DL_HANDSHAKE_S;
	if (hd > deadline)
		hd = deadline; /* a stranger that greets and then waits must not hold it longer */
	if (dl_write_full(fd, hello, sizeof(hello), hd, e, sizeof(e)) < 0 ||
	    dl_read_full(fd, proof, sizeof(proof), hd, &got, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "port %d: the dljob rank 0 there refused rank %d's proof (%s): "
			 "it is another step's rank 0, a stranger, or DLJOB_JOB_SECRET differs", port,
			 st->rank, e);
		goto bad;
	}
	ints[2] = ints[0];
	if (dl_get32(proof) != STAR_MAGIC ||
	    !dl_auth_check(&st->auth, "dljob star proof", mine, n0, ints + 2, 6, NULL, 0, proof + 4)) {
		dl_errf(err, errlen, "port %d: the process there could not prove it knows the job "
			 "secret: not this job's rank 0 (a stranger on MASTER_PORT?)", port);
		goto bad;
	}
	return 1;
bad:
	if (ring_fd && *ring_fd >= 0) {
		close(*ring_fd);
		*ring_fd = -1;
	}
	close(fd);
	return dl_stopped() ? -1 : 0;
}

/* A rank: find this job's rank 0 among the candidate ports and do the
 * handshake.  Every rank tries the ports in the same order, round after
 * round until the deadline (rank 0 may start late, or take a port that a
 * finished step held a moment ago).  Returns the fd, or -1 with err naming
 * what listened on MASTER_PORT itself. */
static int join_root(struct dl_star *st, const char *host, int port, int nports, int *found,
		     int *ring_fd, const char *node, double deadline, char *err, size_t errlen)
{
	struct addrinfo *res = NULL;
	char e[256], he[640], first[640] = "nobody answered", at[128] = "", a[INET6_ADDRSTRLEN];
	double pause = 0.01;
	int fd = -1;

	if (dl_resolve(host, &res, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "rank %d cannot reach rank 0: %s", st->rank, e);
		return -1;
	}
	/* What host is here, for the messages: a name that this node resolves
	 * to loopback, or to an address rank 0 does not listen on, shows. */
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		size_t n = strlen(at);
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		dl_addr_text(ai->ai_addr, a, sizeof(a));
		if (strstr(at, a) || n + strlen(a) + 3 >= sizeof(at))
			continue;
		snprintf(at + n, sizeof(at) - n, "%s%s", n ? ", " : "", a);
	}
	for (int round = 0;; round++) {
		/* MASTER_PORT refused: nobody listens there, so rank 0 is most
		 * likely not up yet (it would have taken it): the other ports are
		 * swept only every 10th round (~1.5 s), so that a firewall that
		 * drops them costs nothing in the usual start.  Anything else on
		 * MASTER_PORT: every round. */
		int sweep = round % 10 == 9;
		for (int k = 0; k < nports && (k == 0 || sweep); k++) {
			int retry, rc;
			fd = dl_connect_once(res, port + k, deadline, &retry, e, sizeof(e));
			if (fd < 0 && !retry) {
				dl_errf(err, errlen, "rank %d cannot reach rank 0: cannot connect to "
					 "%s (%s) port %d: %s", st->rank, host, at, port + k, e);
				goto out;
			}
			if (fd < 0) {
				if (k == 0) {
					snprintf(first, sizeof(first), "port %d: %s", port, e);
					sweep |= strcmp(e, strerror(ECONNREFUSED)) != 0;
				}
				continue;
			}
			rc = handshake_root(st, fd, port + k, ring_fd, node, deadline, he, sizeof(he));
			*found = port + k;
			if (rc > 0)
				goto out;
			fd = -1;
			if (rc < 0) {
				dl_errf(err, errlen, "%s", he);
				goto out;
			}
			if (k == 0) {
				snprintf(first, sizeof(first), "%s", he);
				sweep = 1;
			}
		}
		if (dl_stopped()) {
			dl_errf(err, errlen, "rank %d was stopped by signal %d while joining rank 0",
				 st->rank, dl_stopped());
			goto out;
		}
		if (dl_now() + pause > deadline)
			break;
		struct timespec ts = { 0, (long)(pause * 1e9) };
		nanosleep(&ts, NULL);
		if (pause < 0.2)
			pause *= 2;
	}
	if (nports > 1)
		dl_errf(err, errlen, "rank %d found no rank 0 of this job at %s (%s) ports %d-%d "
			 "before the timeout (%s)", st->rank, host, at, port, port + nports - 1, first);
	else
		dl_errf(err, errlen, "rank %d found no rank 0 of this job at %s (%s) before the "
			 "timeout (%s)", st->rank, host, at, first);
out:
	freeaddrinfo(res);
	return fd;
}

int dl_star_open(struct dl_star *st, int rank, int size, int lfd, const char *host, int port,
		 int nports, int *ring_fd, const char *node, const struct dl_auth *auth, double deadline,
		 char *err, size_t errlen)
{
	void *p = NULL;
	size_t len;
	char e[512];
	int rv = -1;

	if (ring_fd)
		*ring_fd = -1;
	if (dl_star_init(st, rank, size, err, errlen) < 0)
		return -1;
	st->auth = *auth;
	snprintf(st->peer[rank].node, sizeof(st->peer[rank].node), "%s", node);
	if (rank == 0)
		return open_root(st, lfd, ring_fd, node, deadline, err, errlen);

	int fd = join_root(st, host, port, nports, &port, ring_fd, node, deadline, err, errlen);
	if (fd < 0)
		return -1;
	st->fd[0] = fd;
	snprintf(st->peer[0].node, sizeof(st->peer[0].node), "%s", host);
	/* Rank 0 answers once everybody has arrived, so this waits as long as
	 * rank 0 does, plus a little for its answer to travel. */
	int rc = dl_star_recv(st, 0, DL_MSG_TABLE, &p, &len, deadline + 2.0, e, sizeof(e));
	if (rc == -2) {
		dl_errf(err, errlen, "rendezvous at %s:%d: no table from rank 0 before the timeout",
			 host, port);
		goto out;
	}
	if (rc < 0) {
		dl_errf(err, errlen, "rendezvous at %s:%d: %s", host, port, e);
		goto out;
	}
	if (dl_star_parse_table(p, len, size, st->peer, e, sizeof(e)) < 0) {
		dl_errf(err, errlen, "rendezvous: rank 0 sent %s", e);
		goto out;
	}
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
	dl_errf(err, errlen, "barrier: %s", e);
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

	if (len > DL_STAR_MSG_MAX / (size_t)st->size) {
		dl_errf(err, errlen, "exchange: %d x %zu bytes is more than the %u MiB a control "
			 "message may carry", st->size, len, DL_STAR_MSG_MAX >> 20);
		return -1;
	}
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
	dl_errf(err, errlen, "exchange: %s", e);
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
		snprintf(st->why, sizeof(st->why), DL_STAR_ALL_WAITED " %g s in %s without progress "
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
		dl_errf(err, errlen, "%s: no progress for %g s", what, st->timeout_s);
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
	dl_errf(err, errlen, "%s", e);
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
	free(st->pf);
	free(st->who);
	memset(st, 0, sizeof(*st));
}
