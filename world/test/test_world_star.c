/* test_world_star: the rendezvous's wire parsers, proofs and limits without
 * sockets (world/world_star.c, world_auth.c): framing and garbage headers,
 * greetings, hellos with control characters in the node name, tables with
 * bad families or ports, BYE/DEAD scanning (DEAD text made printable), the
 * total inbox limit, the world-size limit, and proofs that fail for another
 * secret, job key, nonce, rank or direction. */
#include "config.h"
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "world/world_int.h"

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);    \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
			failures++;                                        \
		}                                                          \
	} while (0)

static size_t msg(uint8_t *out, uint32_t type, const void *body, uint32_t len)
{
	uint32_t h[2] = { htonl(type), htonl(len) };
	memcpy(out, h, 8);
	if (len)
		memcpy(out + 8, body, len);
	return 8 + (size_t)len;
}

int main(void)
{
	uint8_t buf[4096];
	uint32_t type, len;
	char err[512];

	/* Framing. */
	size_t n = msg(buf, DL_MSG_BLOB, "abc", 3);
	CHECK(dl_star_parse_msg(buf, n, &type, &len) == (long)n && type == DL_MSG_BLOB && len == 3,
	      "a complete BLOB");
	CHECK(dl_star_parse_msg(buf, n - 1, &type, &len) == 0, "an incomplete BLOB");
	CHECK(dl_star_parse_msg(buf, 7, &type, &len) == 0, "half a header");
	msg(buf, 99, NULL, 0);
	CHECK(dl_star_parse_msg(buf, 8, &type, &len) == -1, "unknown type 99");
	msg(buf, DL_MSG_BLOB, NULL, 0);
	dl_put32(buf + 4, DL_STAR_MSG_MAX + 1);
	CHECK(dl_star_parse_msg(buf, 8, &type, &len) == -1, "a header announcing > max");

	/* Greeting and hello. */
	uint8_t g[DL_GREETING_LEN] = { 0 };
	unsigned char nonce[DL_NONCE_LEN];
	dl_put32(g, 0x646c6a32u);
	dl_put32(g + 4, 1);
	CHECK(dl_star_parse_greeting(g, sizeof(g), 1, nonce) == 0, "a star greeting");
	CHECK(dl_star_parse_greeting(g, sizeof(g), 2, nonce) < 0, "a star greeting as a ring one");
	CHECK(dl_star_parse_greeting((const uint8_t *)"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n12345678", 40, 1,
				     nonce) < 0, "an SSH banner");
	uint8_t hello[DL_HELLO_LEN] = { 0 };
	struct dl_hello_view h;
	dl_put32(hello, 0x646c6a32u);
	dl_put32(hello + 4, 1);
	dl_put32(hello + 8, 3);
	dl_put32(hello + 12, 40000);
	memcpy(hello + 16, "n1\nforged line\x1b[31m", 20);
	CHECK(dl_star_parse_hello(hello, sizeof(hello), &h, err, sizeof(err)) == 0 && h.rank == 1 &&
	      h.size == 3 && h.ring_port == 40000, "a hello: %s", err);
	CHECK(strcmp(h.node, "n1?forged line?[31m") == 0, "node made printable: '%s'", h.node);
	memset(hello + 16, 'x', DL_NODE_MAX); /* no NUL at all */
	CHECK(dl_star_parse_hello(hello, sizeof(hello), &h, err, sizeof(err)) == 0 &&
	      strlen(h.node) == DL_NODE_MAX - 1, "an unterminated node name");
	dl_put32(hello + 12, 70000);
	CHECK(dl_star_parse_hello(hello, sizeof(hello), &h, err, sizeof(err)) < 0, "ring port 70000");
	CHECK(dl_star_parse_hello(hello, sizeof(hello) - 1, &h, err, sizeof(err)) < 0, "a short hello");

	/* Tables. */
	uint8_t tab[2 * DL_TABLE_ENTRY_LEN] = { 0 };
	struct dl_peer_addr peers[2];
	dl_put32(tab, AF_INET);
	dl_put32(tab + 4, 40000);
	dl_put32(tab + DL_TABLE_ENTRY_LEN, AF_INET6);
	dl_put32(tab + DL_TABLE_ENTRY_LEN + 4, 40001);
	memcpy(tab + 24, "n1", 2);
	CHECK(dl_star_parse_table(tab, sizeof(tab), 2, peers, err, sizeof(err)) == 0 &&
	      peers[0].sa.ss_family == AF_INET && peers[1].sa.ss_family == AF_INET6 &&
	      strcmp(peers[0].node, "n1") == 0, "a table: %s", err);
	CHECK(dl_star_parse_table(tab, sizeof(tab), 3, peers, err, sizeof(err)) < 0,
	      "a table of 2 for 3 ranks");
	dl_put32(tab + DL_TABLE_ENTRY_LEN, 1); /* AF_UNIX */
	CHECK(dl_star_parse_table(tab, sizeof(tab), 2, peers, err, sizeof(err)) < 0, "family 1");

	/* World size limits. */
	struct dl_star st;
	CHECK(dl_star_init(&st, 0, DL_WORLD_MAX + 1, err, sizeof(err)) < 0 && st.fd == NULL,
	      "a world of 2^20+1");
	CHECK(dl_star_init(&st, 0, 2147483647, err, sizeof(err)) < 0, "a world of 2^31-1");
	CHECK(dl_star_init(&st, 3, 3, err, sizeof(err)) < 0, "rank 3 of 3");

	/* Scanning: BYE and DEAD behind other messages; DEAD text printable. */
	CHECK(dl_star_init(&st, 1, 3, err, sizeof(err)) == 0, "init: %s", err);
	n = msg(buf, DL_MSG_BLOBS, "xyz", 3);
	n += msg(buf + n, DL_MSG_BYE, "7", 1);
	CHECK(dl_star_feed(&st, 0, buf, n - 2) == 0 && !st.bye[0], "half a BYE");
	CHECK(dl_star_feed(&st, 0, buf + n - 2, 2) == 0 && st.bye[0] && st.bye_seq[0] == 7,
	      "the BYE completed");
	n = msg(buf, DL_MSG_DEAD, "rank 2 died\nroot: forged", 24);
	CHECK(dl_star_feed(&st, 0, buf, n) == 0 && st.failed &&
	      strcmp(st.why, "rank 2 died?root: forged") == 0, "DEAD: '%s'", st.why);
	void *p = NULL;
	size_t got;
	CHECK(dl_star_recv(&st, 0, DL_MSG_BLOBS, &p, &got, 0.0, err, sizeof(err)) == 0 && got == 3 &&
	      memcmp(p, "xyz", 3) == 0, "what came before the DEAD is delivered");
	free(p);
	dl_star_close(&st);

	/* Garbage header: the star fails naming the peer. */
	CHECK(dl_star_init(&st, 0, 3, err, sizeof(err)) == 0, "init: %s", err);
	msg(buf, 1234, NULL, 0);
	(void)dl_star_feed(&st, 2, buf, 8);
	CHECK(st.failed && strstr(st.why, "rank 2 sent garbage on the control connection"),
	      "garbage: '%s'", st.why);
	dl_star_close(&st);

	/* The inbox limit: messages nobody asked for, past DL_STAR_INBOX_MAX. */
	CHECK(dl_star_init(&st, 0, 2, err, sizeof(err)) == 0, "init: %s", err);
	size_t big = 8u << 20, fed = 0;
	uint8_t *m = calloc(1, big + 8);
	int rc = 0;
	if (!m)
		return 1;
	msg(m, DL_MSG_BLOB, NULL, 0);
	dl_put32(m + 4, (uint32_t)big);
	while (fed <= DL_STAR_INBOX_MAX && (rc = dl_star_feed(&st, 1, m, big + 8)) == 0)
		fed += big + 8;
	CHECK(rc < 0 && st.failed && strstr(st.why, "rank 1 sent more than 160 MiB"),
	      "inbox limit after %zu bytes: '%s'", fed, st.why);
	free(m);
	dl_star_close(&st);

	/* Proofs. */
	struct dl_auth a, b, c;
	unsigned char key[DL_SECRET_LEN], n1[DL_NONCE_LEN], n2[DL_NONCE_LEN], mac[DL_MAC_LEN];
	uint32_t ints[2] = { 1, 3 }, other[2] = { 2, 3 };
	memset(key, 7, sizeof(key));
	dl_auth_nonce(n1);
	dl_auth_nonce(n2);
	CHECK(memcmp(n1, n2, sizeof(n1)) != 0, "two nonces alike");
	CHECK(dl_auth_init(&a, key, 1, "5.0:29500", err, sizeof(err)) == 0, "auth: %s", err);
	key[0] ^= 1;
	CHECK(dl_auth_init(&b, key, 1, "5.0:29500", err, sizeof(err)) == 0, "auth: %s", err);
	key[0] ^= 1;
	CHECK(dl_auth_init(&c, key, 1, "5.1:29500", err, sizeof(err)) == 0, "auth: %s", err);
	dl_auth_mac(&a, "dljob ring hello", n1, n2, ints, 2, NULL, 0, mac);
	CHECK(dl_auth_check(&a, "dljob ring hello", n1, n2, ints, 2, NULL, 0, mac), "the right proof");
	CHECK(!dl_auth_check(&b, "dljob ring hello", n1, n2, ints, 2, NULL, 0, mac), "another secret");
	CHECK(!dl_auth_check(&c, "dljob ring hello", n1, n2, ints, 2, NULL, 0, mac), "another step");
	CHECK(!dl_auth_check(&a, "dljob ring proof", n2, n1, ints, 2, NULL, 0, mac),
	      "reflected as the other direction");
	CHECK(!dl_auth_check(&a, "dljob ring hello", n2, n1, ints, 2, NULL, 0, mac), "nonces swapped");
	CHECK(!dl_auth_check(&a, "dljob ring hello", n1, n2, other, 2, NULL, 0, mac), "another rank");
	CHECK(dl_auth_init(&b, NULL, 0, "5.0:29500", err, sizeof(err)) == 0 && !b.secret,
	      "no secret: unauthenticated");

	if (failures) {
		fprintf(stderr, "test_world_star: %d check(s) failed\n", failures);
		return 1;
	}
	printf("test_world_star: all checks passed\n");
	return 0;
}
