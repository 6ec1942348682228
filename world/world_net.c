/* Socket helpers for the bootstrap: every wait has a deadline, every socket
 * is non-blocking, and nothing ever raises SIGPIPE (a dead peer must become
 * an error message, not a silent death of the survivor). */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/err.h"
#include "world/world_int.h"

double dl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ms_until(double deadline)
{
	double left = deadline - dl_now();
	if (left <= 0)
		return 0;
	if (left > 1e6)
		return 1000000000;
	return (int)(left * 1000.0) + 1;
}

int dl_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

static void tune(int fd)
{
	int one = 1;
	/* Small control messages must not wait for Nagle. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* The signal that ended the bootstrap (0: none). */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

int dl_stop_arm(struct sigaction *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a poll or sleep returns EINTR, and the wait looks. */
	stop_signal = 0;
	return sigaction(SIGTERM, &sa, old);
}

int dl_stop_disarm(const struct sigaction *old)
{
	int sig = stop_signal;
	(void)sigaction(SIGTERM, old, NULL);
	stop_signal = 0;
	/* The caller's own handler learns of the signal too (dljob then
	 * stops instead of training). */
	if (sig && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN &&
	    !(old->sa_flags & SA_SIGINFO))
		old->sa_handler(sig);
	return sig;
}

int dl_stopped(void)
{
	return stop_signal;
}

static int listen_on(struct sockaddr_storage *ss, socklen_t len, int port, char *err,
		     size_t errlen)
{
	int fd, one = 1;
	char a[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ss)->sin6_addr, a, sizeof(a));
	} else {
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
		inet_ntop(AF_INET, &((struct sockaddr_in *)ss)->sin_addr, a, sizeof(a));
	}
	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		dl_errf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* A previous job's connections in TIME_WAIT must not block the port
	 * (SO_REUSEADDR does not let another socket bind it while we listen). */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)ss, len) < 0 || listen(fd, 1024) < 0 ||
	    dl_set_nonblock(fd) < 0) {
		dl_errf(err, errlen, "cannot listen on %s port %d: %s", a, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int dl_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

void dl_addr_text(const struct sockaddr *sa, char *out, size_t outlen)
{
	const void *a = sa->sa_family == AF_INET6 ?
		(const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr :
		(const void *)&((const struct sockaddr_in *)sa)->sin_addr;
	if (outlen == 0)
		return;
	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    !inet_ntop(sa->sa_family, a, out, (socklen_t)outlen))
		snprintf(out, outlen, "?");
}

/* The address of the interface through which this host reaches host other
 * (a UDP "connect" only asks the routing table; nothing is sent), of the
 * family fam.  Returns 0, or -1 with err. */
static int reach_addr(const char *other, int fam, struct sockaddr_storage *ss, socklen_t *len,
		      char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL;
	int rc, fd;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = fam;
	hints.ai_socktype = SOCK_DGRAM;
	rc = getaddrinfo(other, "9", &hints, &res);
	if (rc != 0) {
		dl_errf(err, errlen, "cannot resolve the job's node '%s': %s", other, gai_strerror(rc));
		return -1;
	}
	fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	*len = sizeof(*ss);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0 ||
	    getsockname(fd, (struct sockaddr *)ss, len) < 0) {
		dl_errf(err, errlen, "no route from this host to the job's node '%s': %s", other,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return -1;
	}
	close(fd);
	freeaddrinfo(res);
	return 0;
}

int dl_reach_if(const char *other, char *ifname, size_t iflen, struct sockaddr_storage *addr,
		int *prefix, char *err, size_t errlen)
{
	struct ifaddrs *ifs = NULL;
	socklen_t len;
	char e4[256], at[INET6_ADDRSTRLEN];
	int found = 0;

	/* IPv4 first, as dl_listen_host. */
	if (reach_addr(other, AF_INET, addr, &len, e4, sizeof(e4)) < 0 &&
	    reach_addr(other, AF_INET6, addr, &len, err, errlen) < 0) {
		dl_errf(err, errlen, "%s", e4);
		return -1;
	}
	if (getifaddrs(&ifs) < 0) {
		dl_errf(err, errlen, "getifaddrs: %s", strerror(errno));
		return -1;
	}
	for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
		const unsigned char *a, *b, *m;
		size_t n;
		if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != addr->ss_family)
			continue;
		if (addr->ss_family == AF_INET) {
			a = (const unsigned char *)&((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
			b = (const unsigned char *)&((const struct sockaddr_in *)addr)->sin_addr;
			m = (const unsigned char *)&((const struct sockaddr_in *)i->ifa_netmask)->sin_addr;
			n = 4;
		} else {
			a = ((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr.s6_addr;
			b = ((const struct sockaddr_in6 *)addr)->sin6_addr.s6_addr;
			m = ((const struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr.s6_addr;
			n = 16;
		}
		if (memcmp(a, b, n) != 0)
			continue;
		*prefix = 0;
		for (size_t k = 0; k < n; k++)
			for (int bit = 7; bit >= 0 && (m[k] >> bit & 1); bit--)
				++*prefix;
		snprintf(ifname, iflen, "%s", i->ifa_name);
		found = 1;
	}
	freeifaddrs(ifs);
	if (!found) {
		dl_addr_text((struct sockaddr *)addr, at, sizeof(at));
		dl_errf(err, errlen, "no interface of this host has the address %s through which it "
			 "reaches '%s'", at, other);
		return -1;
	}
	return 0;
}

/* 1 if host is written as a loopback address itself (not a host name that
 * this machine maps to one): the user asked for loopback. */
static int loopback_spelling(const char *host)
{
	struct addrinfo hints, *res = NULL;
	int lit;

	if (strcmp(host, "localhost") == 0 || strncmp(host, "localhost.", 10) == 0 ||
	    strcmp(host, "ip6-localhost") == 0)
		return 1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST;
	lit = getaddrinfo(host, NULL, &hints, &res) == 0;
	if (res)
		freeaddrinfo(res);
	return lit;
}

int dl_connect_host(const char *host, const char *other, char *out, size_t outlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct sockaddr_storage via;
	socklen_t len;
	char e[256];
	int moved = 0;

	snprintf(out, outlen, "%s", host);
	if (!other || !*other || loopback_spelling(host))
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0; /* the connect says why */
	/* The address dl_listen_host starts from: the first IPv4 one, else
	 * the first. */
	for (ai = res; ai && ai->ai_family != AF_INET; ai = ai->ai_next)
		;
	if (!ai)
		ai = res;
	if (ai && dl_is_loopback(ai->ai_addr) &&
	    reach_addr(other, ai->ai_family, &via, &len, e, sizeof(e)) == 0 &&
	    !dl_is_loopback((struct sockaddr *)&via)) {
		dl_addr_text((struct sockaddr *)&via, out, outlen);
		moved = 1;
	}
	freeaddrinfo(res);
	return moved;
}

int dl_listen_host(const char *what, const char *host, int port, const char *other, char *note,
		   size_t notelen, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	char e[256] = "";
	int rc, fd = -1;

	if (notelen)
		note[0] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc != 0) {
		dl_errf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
		return -1;
	}
	/* IPv4 first: the peers try every address, and most sites are IPv4. */
	for (int pass = 0; pass < 2 && fd < 0; pass++)
		for (ai = res; ai && fd < 0; ai = ai->ai_next) {
			struct sockaddr_storage ss;
			socklen_t len = ai->ai_addrlen;
			if ((pass == 0) != (ai->ai_family == AF_INET) ||
			    ai->ai_addrlen > sizeof(ss))
				continue;
			memset(&ss, 0, sizeof(ss));
			memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
			if (dl_is_loopback((struct sockaddr *)&ss) && other && *other) {
				/* The other nodes resolve host to where they reach
				 * it, never to their own loopback: find that
				 * address, or learn that the node is on this host. */
				struct sockaddr_storage via;
				char lo[INET6_ADDRSTRLEN], at[INET6_ADDRSTRLEN];
				if (reach_addr(other, ai->ai_family, &via, &len, e, sizeof(e)) < 0) {
					/* Cannot tell (a node name that is no host
					 * name?): as asked, but say what may go wrong. */
					dl_addr_text((struct sockaddr *)&ss, lo, sizeof(lo));
					snprintf(note, notelen, "%s '%s' resolves to the loopback "
						 "address %s on this host, and %s: if the ranks on other "
						 "nodes cannot join, map '%s' to this host's network "
						 "address in /etc/hosts (not 127.0.1.1)", what, host, lo,
						 e, host);
					via = ss;
					len = ai->ai_addrlen;
				}
				if (!dl_is_loopback((struct sockaddr *)&via)) {
					dl_addr_text((struct sockaddr *)&ss, lo, sizeof(lo));
					dl_addr_text((struct sockaddr *)&via, at, sizeof(at));
					if (loopback_spelling(host)) {
						dl_errf(err, errlen, "%s '%s' is the loopback address "
							 "%s, but the job has ranks on %s, another host: "
							 "set %s to this host's name or network address "
							 "(%s)", what, host, lo, other, what, at);
						fd = -1;
						goto out;
					}
					snprintf(note, notelen, "%s '%s' resolves to the loopback "
						 "address %s on this host (/etc/hosts), which the job's "
						 "other nodes cannot reach: rank 0 listens on %s instead, "
						 "the address through which this host reaches %s", what,
						 host, lo, at, other);
					ss = via;
				}
			}
			fd = listen_on(&ss, len, port, e, sizeof(e));
			if (fd < 0 && strstr(e, strerror(EADDRINUSE)))
				break; /* taken: no other address of host will do better */
		}
	if (fd < 0 && strstr(e, strerror(EADDRINUSE))) {
		dl_errf(err, errlen, "%s", e);
		fd = -2;
		goto out;
	}
	if (fd < 0) {
		if (strstr(e, "Cannot assign requested address"))
			dl_errf(err, errlen, "'%s' is not an address of this machine (%s)", host, e);
		else
			dl_errf(err, errlen, "%s", e[0] ? e : "no usable address");
	}
out:
	freeaddrinfo(res);
	if (fd < 0 && notelen)
		note[0] = '\0';
	return fd;
}

int dl_listen_addr(const struct sockaddr_storage *sa, char *err, size_t errlen)
{
	struct sockaddr_storage ss = *sa;
	return listen_on(&ss, ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
			 sizeof(struct sockaddr_in), 0, err, errlen);
}

int dl_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* One non-blocking connect attempt: fd when connected, -1 with *retry set if
 * it is worth trying again (nobody listening yet), -1 otherwise. */
static int try_connect(const struct sockaddr *sa, socklen_t salen, double deadline, int *retry,
		       char *err, size_t errlen)
{
	int fd, soerr = 0;
	socklen_t sl = sizeof(soerr);

	*retry = 0;
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		dl_errf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, sa, salen) < 0) {
		if (errno != EINPROGRESS) {
			soerr = errno;
		} else {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			/* Bound one attempt so an unreachable address is retried. */
			int ms = ms_until(deadline);
			if (ms > 2000)
				ms = 2000;
			int r = poll(&p, 1, ms);
			if (r < 0)
				soerr = errno;
			else if (r == 0)
				soerr = ETIMEDOUT;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
				soerr = errno;
		}
	}
	if (soerr == 0) {
		tune(fd);
		return fd;
	}
	close(fd);
	*retry = soerr == ECONNREFUSED || soerr == ETIMEDOUT || soerr == EHOSTUNREACH ||
		 soerr == ENETUNREACH || soerr == ECONNRESET || soerr == EINTR || soerr == EAGAIN;
	dl_errf(err, errlen, "%s", strerror(soerr));
	return -1;
}

int dl_connect_addr(const struct sockaddr_storage *sa, socklen_t salen, double deadline,
		    char *err, size_t errlen)
{
	double pause = 0.01;
	for (;;) {
		int retry;
		int fd = try_connect((const struct sockaddr *)sa, salen, deadline, &retry, err, errlen);
		if (fd >= 0)
			return fd;
		if (!retry || dl_now() + pause > deadline)
			return -1;
		if (dl_stopped()) {
			dl_errf(err, errlen, "stopped by signal %d", dl_stopped());
			return -1;
		}
		struct timespec ts = { 0, (long)(pause * 1e9) };
		nanosleep(&ts, NULL);
		if (pause < 0.2)
			pause *= 2;
	}
}

int dl_resolve(const char *host, struct addrinfo **res, char *err, size_t errlen)
{
	struct addrinfo hints;
	int rc;

	*res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, NULL, &hints, res);
	if (rc != 0) {
		dl_errf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
		return -1;
	}
	return 0;
}

int dl_connect_once(const struct addrinfo *res, int port, double deadline, int *retry,
		    char *err, size_t errlen)
{
	char e[256] = "no address";
	*retry = 0;
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		struct sockaddr_storage ss;
		int again;
		if (ai->ai_addrlen > sizeof(ss) ||
		    (ai->ai_family != AF_INET && ai->ai_family != AF_INET6))
			continue;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		if (ss.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		else
			((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
		int fd = try_connect((const struct sockaddr *)&ss, ai->ai_addrlen, deadline, &again,
				     e, sizeof(e));
		if (fd >= 0)
			return fd;
		*retry |= again;
	}
	dl_errf(err, errlen, "%s", e);
	return -1;
}

int dl_accept_one(int lfd, char *err, size_t errlen)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0) {
			tune(fd);
			return fd;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -2;
		/* Out of fds (a flood of strangers) is no reason to give up:
		 * the caller drops its oldest pending connection. */
		if (errno == EMFILE || errno == ENFILE)
			return -3;
		dl_errf(err, errlen, "accept: %s", strerror(errno));
		return -1;
	}
}

int dl_write_full(int fd, const void *buf, size_t len, double deadline, char *err, size_t errlen)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			dl_errf(err, errlen, "%s", strerror(errno));
			return -1;
		}
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		if (dl_now() >= deadline) {
			dl_errf(err, errlen, "timed out");
			return -1;
		}
		if (dl_stopped()) {
			dl_errf(err, errlen, "stopped by signal %d", dl_stopped());
			return -1;
		}
		(void)poll(&pf, 1, ms_until(deadline));
	}
	return 0;
}

int dl_read_full(int fd, void *buf, size_t len, double deadline, size_t *got, char *err,
		 size_t errlen)
{
	char *p = buf;
	if (got)
		*got = 0;
	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			if (got)
				*got += (size_t)n;
			continue;
		}
		if (n == 0) {
			dl_errf(err, errlen, "peer closed the connection");
			return -1;
		}
		if (errno != EAGAIN && errno != EINTR) {
			dl_errf(err, errlen, "%s", strerror(errno));
			return -1;
		}
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (dl_now() >= deadline) {
			dl_errf(err, errlen, "timed out");
			return -1;
		}
		if (dl_stopped()) {
			dl_errf(err, errlen, "stopped by signal %d", dl_stopped());
			return -1;
		}
		(void)poll(&pf, 1, ms_until(deadline));
	}
	return 0;
}
