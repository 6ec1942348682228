/* fuzz_star: the parsers of what rendezvous peers send (world/world_star.c):
 * the framed control messages, the handshake's greeting and hello, and the
 * table of addresses; then the same bytes fed into a star's inbox as if read
 * from a peer (BYE/DEAD/STUCK scanning, the inbox limit, dl_star_recv).
 * Input: byte 0 picks the parser (0: messages, 1: greeting, 2: hello,
 * 3: table, 4-7: inbox of rank 0 or 1 in a world of 3), byte 1 is the table's
 * world size or the inbox's chunk size; the rest is what the peer sent.
 * Nothing here opens a socket: every connection of the star is -1. */
#include "config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "world/world_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void messages(const uint8_t *p, size_t n)
{
	uint32_t type, len;
	long m;
	while ((m = dl_star_parse_msg(p, n, &type, &len)) > 0) {
		char text[256];
		dl_wire_text(text, sizeof(text), p + 8, len);
		p += m;
		n -= (size_t)m;
	}
}

static void inbox(int rank, size_t chunk, const uint8_t *p, size_t n)
{
	struct dl_star st;
	char err[512];
	if (dl_star_init(&st, rank, 3, err, sizeof(err)) < 0)
		abort();
	snprintf(st.peer[0].node, sizeof(st.peer[0].node), "n0");
	int peer = rank == 0 ? 1 : 0;
	for (size_t off = 0; off < n; off += chunk)
		if (dl_star_feed(&st, peer, p + off, n - off < chunk ? n - off : chunk) < 0)
			break;
	/* Consume what is there, as the collectives would (the deadline has
	 * passed: no waiting). */
	for (int type = DL_MSG_TABLE; type <= DL_MSG_LAST; type++) {
		void *msg = NULL;
		size_t len;
		if (dl_star_recv(&st, peer, type, &msg, &len, 0.0, err, sizeof(err)) == 0)
			free(msg);
	}
	dl_star_close(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const uint8_t *p = data + 2;
	size_t n = size - 2;
	char err[256];

	switch (data[0] & 7) {
	case 0:
		messages(p, n);
		break;
	case 1: {
		unsigned char nonce[DL_NONCE_LEN];
		(void)dl_star_parse_greeting(p, n, 1, nonce);
		(void)dl_star_parse_greeting(p, n, 2, nonce);
		break;
	}
	case 2: {
		struct dl_hello_view h;
		if (dl_star_parse_hello(p, n, &h, err, sizeof(err)) == 0 && strlen(h.node) >= DL_NODE_MAX)
			abort();
		break;
	}
	case 3: {
		int ws = data[1] ? data[1] : 1;
		struct dl_peer_addr *peers = calloc((size_t)ws, sizeof(*peers));
		if (!peers)
			return 0;
		if (dl_star_parse_table(p, n, ws, peers, err, sizeof(err)) == 0)
			for (int r = 0; r < ws; r++)
				if (strlen(peers[r].node) >= DL_NODE_MAX)
					abort();
		free(peers);
		break;
	}
	default:
		inbox((data[0] & 1), data[1] ? data[1] : 1, p, n);
		break;
	}
	return 0;
}
