/* Internals shared by the world methods (world/world_*.c): environment
 * detection, socket helpers and the "star", a TCP connection from every rank
 * to rank 0 that carries the rendezvous, small control messages and, above
 * all, failure detection: a process that dies closes its sockets, so rank 0
 * learns at once which rank is gone and tells everybody else. */
#ifndef DLJOB_WORLD_INT_H
#define DLJOB_WORLD_INT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include "world/env.h"
#include "world/world.h"

/* The largest world accepted from the environment or from PMIx: beyond it
 * WORLD_SIZE is a mistake, not a job. */
#define DL_WORLD_MAX (1 << 20)
/* DLJOB_JOB_SECRET: 32 random bytes, 64 lowercase hex digits. */
#define DL_SECRET_LEN 32

struct dl_world_ops {
	int (*exchange)(struct dl_world *w, const void *mine, size_t len, void *all,
			char *err, size_t errlen);
	void (*close)(struct dl_world *w);
	void (*abort)(struct dl_world *w, const char *why);
};

/* Big-endian 32-bit fields of the wire messages (star and ring). */
static inline uint32_t dl_get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return ntohl(v);
}

static inline void dl_put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

/* ---- environment (world_env.c) ---- */

enum dl_world_kind { DL_WORLD_SINGLE, DL_WORLD_PMIX, DL_WORLD_TCP };

#define DL_NODE_MAX 64

struct dl_world_env {
	enum dl_world_kind kind;
	int rank, size;            /* TCP only; PMIx asks its server */
	char master_addr[256];     /* TCP: where rank 0 listens */
	int master_port;
	char node[DL_NODE_MAX];    /* this node's name: SLURMD_NODENAME, else hostname */
	char other_node[256];      /* a node of the step that is not this one (from
				    * SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST);
				    * "" if none or unknown */
	char jobkey[64];           /* tells this job's rendezvous from a stale one */
	unsigned char secret[DL_SECRET_LEN]; /* DLJOB_JOB_SECRET, when set */
	int have_secret;
	int use_ring;              /* PMIx: DLJOB_COLLECTIVES=ring (else mpi) */
	int verbose;               /* PMIx: DLJOB_WORLD_VERBOSE=1, phase timings */
	struct dl_ompi_env ompi;   /* PMIx: who chose Open MPI's TCP interfaces */
};

/* Decide how to join from the environment array envp (NAME=VALUE strings up
 * to a NULL: environ, or the fuzz target's; nothing else is read, except
 * the host name when SLURMD_NODENAME is unset).  Returns 0, or -1 with one
 * line naming the bad variable in err. */
int dl_world_env(struct dl_world_env *e, char *const *envp, char *err, size_t errlen);
/* DLJOB_JOB_SECRET into e->secret (e->have_secret = 1); unset leaves
 * have_secret 0.  Returns 0, or -1 if it is not 64 lowercase hex digits. */
int dl_world_env_secret(struct dl_world_env *e, char *const *envp, char *err, size_t errlen);

/* ---- Open MPI's TCP interface (world_ompi.c) ---- */

struct dl_ompi_if {
	int chosen;      /* 1: dljob set OMPI_MCA_btl_tcp_if_include=value */
	char value[64];  /* "10.0.0.0/24" (IPv4) or the interface's name (IPv6) */
	char note[512];  /* one line: what was chosen, or who chose, or why nothing */
};

/* Before MPI_Init: unless o says the user or the site chose Open MPI's TCP
 * interfaces, set OMPI_MCA_btl_tcp_if_include to the network through which
 * this host (node) reaches other, a node of the step ("" if none).  Never
 * fails: r says what happened. */
void dl_ompi_tcp_if(const struct dl_ompi_env *o, const char *other, const char *node,
		    struct dl_ompi_if *r);
/* 1 if Open MPI 4.1 reading the parameter file text[0..len) would set the
 * parameter name ("name = value", "--mca name value"; comments), else 0. */
int dl_mca_file_names(const char *text, size_t len, const char *name);

/* ---- authentication (world_auth.c) ----
 * Every connection of the rendezvous (rank -> rank 0, rank -> its ring
 * successor) starts with a mutual challenge-response: each side sends a
 * fresh random nonce and proves knowledge of the job secret with an
 * HMAC-SHA-256 over both nonces, the job key, the ranks and a label naming
 * the direction (so no proof can be replayed or reflected).  The secret
 * itself never travels.  Without a secret the key is all zeros: the same
 * protocol, but anybody can compute the proofs (unauthenticated). */
#define DL_NONCE_LEN 32
#define DL_MAC_LEN 32

struct dl_auth {
	unsigned char key[DL_SECRET_LEN];
	int secret;      /* 1: key is the job's secret; 0: unauthenticated */
	char jobkey[64]; /* this step's rendezvous, in every proof */
};

/* Returns 0, or -1 with err if libsodium cannot start. */
int dl_auth_init(struct dl_auth *a, const unsigned char *secret, int have_secret,
		 const char *jobkey, char *err, size_t errlen);
void dl_auth_nonce(unsigned char nonce[DL_NONCE_LEN]);
/* mac = HMAC(key, label | jobkey | n1 | n2 | ints (big-endian) | extra). */
void dl_auth_mac(const struct dl_auth *a, const char *label, const unsigned char *n1,
		 const unsigned char *n2, const uint32_t *ints, int nints, const void *extra,
		 size_t extralen, unsigned char mac[DL_MAC_LEN]);
/* 1 if mac is the right one (constant time), else 0. */
int dl_auth_check(const struct dl_auth *a, const char *label, const unsigned char *n1,
		  const unsigned char *n2, const uint32_t *ints, int nints, const void *extra,
		  size_t extralen, const unsigned char mac[DL_MAC_LEN]);

/* ---- sockets and time (world_net.c) ---- */

double dl_now(void);          /* monotonic seconds */
int dl_set_nonblock(int fd);
/* SIGTERM during the bootstrap: dl_stop_arm installs a handler (no
 * SA_RESTART) that records the signal, every bootstrap wait then ends with
 * dl_stopped() != 0; dl_stop_disarm restores the caller's handler, hands
 * it the signal if one came, and clears the flag.  The flag is the one piece of static state of
 * the world (what a signal handler may touch). */
int dl_stop_arm(struct sigaction *old);
int dl_stop_disarm(const struct sigaction *old); /* returns the signal, or 0 */
int dl_stopped(void);
/* Listen on host's address (the first of its IPv4/IPv6 addresses this
 * machine has), port 0: any; what names host in messages ("MASTER_ADDR").  When that address is loopback (Debian's
 * "127.0.1.1 <hostname>" in /etc/hosts) and other is a node of the job (its
 * name, "" if none), the other node decides: if this host reaches it through
 * loopback too, both are on this host and loopback is right; otherwise rank 0
 * listens on the address of the interface through which this host reaches
 * it (what the other nodes resolve host to) and says so in note (else note is
 * ""), or, if host is a loopback spelling ("localhost", "127.0.0.1"), fails
 * naming it.  Returns the fd, -2 with err if the port is taken (EADDRINUSE),
 * or -1 with err saying why (e.g. host is not an address of this machine). */
int dl_listen_host(const char *what, const char *host, int port, const char *other, char *note,
		   size_t notelen, char *err, size_t errlen);
/* Where a rank other than 0 connects to reach rank 0 at host: host itself
 * (copied to out), unless rank 0's dl_listen_host moved off loopback for it:
 * host resolves to loopback on this machine, is no loopback spelling, and
 * this machine reaches other through a network address, which is then rank
 * 0's (this rank shares its host) and goes to out as numbers.  Returns 1 if
 * it moved, else 0. */
int dl_connect_host(const char *host, const char *other, char *out, size_t outlen);
/* The interface through which this host reaches host other (the route's
 * source address, IPv4 first, as dl_listen_host moves off loopback): its
 * name, this host's address on it and that address's prefix length (the
 * network it is on).  Returns 0, or -1 with err. */
int dl_reach_if(const char *other, char *ifname, size_t iflen, struct sockaddr_storage *addr,
		int *prefix, char *err, size_t errlen);
/* 1 if sa is a loopback address (127/8, ::1, ::ffff:127/104), else 0. */
int dl_is_loopback(const struct sockaddr *sa);
/* sa's address as text, without port ("10.0.0.1", "::1"). */
void dl_addr_text(const struct sockaddr *sa, char *out, size_t outlen);
/* Listen on the address of sa, any port (a ring listener on the interface
 * that reaches rank 0). */
int dl_listen_addr(const struct sockaddr_storage *sa, char *err, size_t errlen);
int dl_local_port(int fd);
/* host's addresses, for dl_connect_once (freeaddrinfo them).  Returns 0,
 * or -1 with err. */
struct addrinfo;
int dl_resolve(const char *host, struct addrinfo **res, char *err, size_t errlen);
/* One connection attempt to port on each address of res in turn: a
 * non-blocking fd, or -1 with err and *retry set if trying again later may
 * help (refused: nobody listens there yet; unreachable; timed out). */
int dl_connect_once(const struct addrinfo *res, int port, double deadline, int *retry,
		    char *err, size_t errlen);
/* Connect to a resolved address (retrying until deadline). */
int dl_connect_addr(const struct sockaddr_storage *sa, socklen_t salen, double deadline,
		    char *err, size_t errlen);
/* Accept one pending connection on a non-blocking listener: a non-blocking
 * fd, -2 if none is pending, -3 if out of file descriptors, -1 with err. */
int dl_accept_one(int lfd, char *err, size_t errlen);
/* Write/read exactly len bytes on a non-blocking fd before deadline (or a
 * SIGTERM, see dl_stop_arm).  Return 0, or -1 with err ("peer closed",
 * "timed out", errno); dl_read_full sets *got (if not NULL) to the bytes
 * read. */
int dl_write_full(int fd, const void *buf, size_t len, double deadline, char *err, size_t errlen);
int dl_read_full(int fd, void *buf, size_t len, double deadline, size_t *got, char *err,
		 size_t errlen);

/* ---- the star (world_star.c) ---- */

enum dl_star_msg {
	DL_MSG_HELLO = 1,  /* (unused: the hello is the handshake below) */
	DL_MSG_TABLE,      /* 0 -> rank: everybody's address and node */
	DL_MSG_DEAD,       /* 0 -> rank, or rank -> 0: the job is over, text says why */
	DL_MSG_BLOB,       /* rank -> 0: my part of an exchange */
	DL_MSG_BLOBS,      /* 0 -> rank: everybody's parts */
	DL_MSG_BARRIER,    /* rank -> 0: I reached the barrier */
	DL_MSG_GO,         /* 0 -> rank: everybody reached it */
	DL_MSG_BYE,        /* either way: I close normally, my EOF is no failure */
	DL_MSG_STUCK,      /* rank -> 0: my wait timed out (text: in what) */
	DL_MSG_LAST = DL_MSG_STUCK,
};

/* Framed messages: type and length (32-bit big-endian), then the bytes.
 * A header announcing more than DL_STAR_MSG_MAX is garbage; a rank holds at
 * most DL_STAR_INBOX_MAX bytes that nobody has asked for yet. */
#define DL_STAR_MSG_MAX (96u << 20)
#define DL_STAR_INBOX_MAX ((size_t)160 << 20)
/* How long one side of a handshake waits for the other's next bytes. */
#define DL_HANDSHAKE_S 5.0

/* The handshake of the star (a connection from rank r to rank 0):
 *   0 -> r  greeting: magic, role (1: star, 2: ring), nonce0      (40 bytes)
 *   r -> 0  hello:    magic, rank, size, ring port, node, nonce_r,
 *                     MAC("dljob star hello", nonce0, nonce_r, rank, size,
 *                     ring port, END, node)                       (144 bytes)
 *   0 -> r  proof:    magic, MAC("dljob star proof", nonce_r, nonce0, r, END)
 * END is rank 0's address and port on this connection as each side sees
 * it (world_star.c star_end: never sent, so a relay is caught).
 * then framed messages.  The ring's is the same with role 2 and a shorter
 * hello (world_ring.c). */
#define DL_GREETING_LEN 40
#define DL_HELLO_LEN (16 + DL_NODE_MAX + DL_NONCE_LEN + DL_MAC_LEN)
#define DL_PROOF_LEN (4 + DL_MAC_LEN)
#define DL_TABLE_ENTRY_LEN (24 + DL_NODE_MAX)

struct dl_hello_view {
	uint32_t rank, size, ring_port;
	char node[DL_NODE_MAX];          /* NUL-terminated, printable */
	unsigned char nonce[DL_NONCE_LEN];
	unsigned char mac[DL_MAC_LEN];
};

/* Parsers of the bytes peers send (fuzzed by tests/fuzz/fuzz_star.c).
 * dl_star_parse_msg: the framed message at the start of buf: its whole
 * length when complete (*type, *plen set), 0 if more bytes are needed, -1
 * if the header is garbage (unknown type, or longer than DL_STAR_MSG_MAX). */
long dl_star_parse_msg(const uint8_t *buf, size_t len, uint32_t *type, uint32_t *plen);
/* A greeting of role: 0 and the nonce, or -1. */
int dl_star_parse_greeting(const uint8_t *buf, size_t len, uint32_t role,
			   unsigned char nonce[DL_NONCE_LEN]);
/* A hello (not yet authenticated: check h->mac next): 0, or -1 with err. */
int dl_star_parse_hello(const uint8_t *buf, size_t len, struct dl_hello_view *h, char *err,
			size_t errlen);
/* A table of size entries into peers[size]: 0, or -1 with err. */
struct dl_peer_addr;
int dl_star_parse_table(const uint8_t *buf, size_t len, int size, struct dl_peer_addr *peers,
			char *err, size_t errlen);
/* Text from a peer, made safe to print: printable ASCII, others as '?'. */
void dl_wire_text(char *out, size_t outlen, const void *p, size_t n);

struct dl_peer_addr {
	struct sockaddr_storage sa; /* with the port of its ring listener */
	socklen_t salen;
	char node[DL_NODE_MAX];
};

struct dl_inbox {
	unsigned char *buf;
	size_t len, cap;
	size_t seen;             /* complete messages before this offset were scanned */
};

struct pollfd;
struct dl_star {
	int rank, size;
	int *fd;                 /* rank 0: fd[i] to rank i; others: fd[0] to rank 0 */
	struct dl_inbox *in;     /* bytes read from fd[i], not yet consumed */
	size_t in_total;         /* their sum, at most DL_STAR_INBOX_MAX */
	struct pollfd *pf;       /* size entries: the pump's poll set */
	int *who;                /* ... and whose each entry is */
	unsigned char *bye;      /* peer said BYE: its EOF is expected */
	unsigned long *bye_seq;  /* ... after this many collectives */
	unsigned long seq;       /* collectives this rank has entered */
	int left;                /* this rank said BYE */
	unsigned char *stuck;    /* rank 0: peer reported a timed-out wait */
	char stuck_what[160];    /* rank 0: what the first report said */
	double timeout_s;        /* the world's timeout, for the verdicts */
	int diagnosing;          /* rank 0 is collecting STUCK reports */
	struct dl_peer_addr *peer; /* everybody's node (and ring address) */
	struct dl_auth auth;     /* the job's secret, for the ring's handshakes */
	int failed;              /* the job is over: every call fails with why */
	char why[512];
};

/* An empty star of size ranks, no connections (dl_star_open does this
 * first; the fuzz target feeds it bytes).  Returns 0, or -1 with err. */
int dl_star_init(struct dl_star *st, int rank, int size, char *err, size_t errlen);
/* Bytes read from peer: into its inbox, then look for BYE/DEAD/STUCK.
 * Returns 0, or -1 if the inbox limit is passed (the star has failed). */
int dl_star_feed(struct dl_star *st, int peer, const void *p, size_t n);

/* Join the star.  Rank 0 passes the listening socket lfd (master); the others
 * pass master host and its candidate ports port .. port + nports - 1, which
 * they try in turn, round after round, until one answers with this job's
 * proof (a refused port, a silent or foreign listener and another job's
 * rank 0 are passed over).  With ring_fd, this rank also opens its ring
 * listener (on the address that reaches rank 0; rank 0: lfd's) and returns
 * it there.  Rank 0 serves every connection at once, drops strangers (no
 * proof, garbage, silence for DL_HANDSHAKE_S), waits for all size-1 others
 * until deadline and names the missing ones.  On success st->peer[] holds
 * every rank's node and ring address. */
int dl_star_open(struct dl_star *st, int rank, int size, int lfd, const char *host, int port,
		 int nports, int *ring_fd, const char *node, const struct dl_auth *auth, double deadline,
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
/* How a timeout's diagnosis begins when every rank was alive and waiting
 * (no rank to blame); the message reaches every rank, so this is how a
 * rank tells that case from a hung or dead peer. */
#define DL_STAR_ALL_WAITED "every rank waited"
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
