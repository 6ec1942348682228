/* The rendezvous's proofs of knowledge of the job secret (see world_int.h):
 * HMAC-SHA-256 from libsodium over a label, the job key, two nonces, some
 * ranks and sizes, and an optional blob.  Nothing here ever sends the key. */
#include "config.h"
#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include "common/err.h"
#include "world/world_int.h"

_Static_assert(crypto_auth_hmacsha256_BYTES == DL_MAC_LEN, "HMAC-SHA-256 is 32 bytes");

int dl_auth_init(struct dl_auth *a, const unsigned char *secret, int have_secret,
		 const char *jobkey, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (sodium_init() < 0) {
		dl_errf(err, errlen, "libsodium cannot start (no random source?)");
		return -1;
	}
	if (have_secret) {
		memcpy(a->key, secret, DL_SECRET_LEN);
		a->secret = 1;
	}
	snprintf(a->jobkey, sizeof(a->jobkey), "%s", jobkey);
	return 0;
}

void dl_auth_nonce(unsigned char nonce[DL_NONCE_LEN])
{
	randombytes_buf(nonce, DL_NONCE_LEN);
}

void dl_auth_mac(const struct dl_auth *a, const char *label, const unsigned char *n1,
		 const unsigned char *n2, const uint32_t *ints, int nints, const void *extra,
		 size_t extralen, unsigned char mac[DL_MAC_LEN])
{
	crypto_auth_hmacsha256_state s;
	unsigned char jk[sizeof(a->jobkey)];

	/* Fixed-size fields: no two different inputs concatenate alike. */
	memset(jk, 0, sizeof(jk));
	memcpy(jk, a->jobkey, strnlen(a->jobkey, sizeof(a->jobkey)));
	crypto_auth_hmacsha256_init(&s, a->key, sizeof(a->key));
	crypto_auth_hmacsha256_update(&s, (const unsigned char *)label, strlen(label) + 1);
	crypto_auth_hmacsha256_update(&s, jk, sizeof(jk));
	crypto_auth_hmacsha256_update(&s, n1, DL_NONCE_LEN);
	crypto_auth_hmacsha256_update(&s, n2, DL_NONCE_LEN);
	for (int i = 0; i < nints; i++) {
		uint32_t be = htonl(ints[i]);
		crypto_auth_hmacsha256_update(&s, (const unsigned char *)&be, sizeof(be));
	}
	if (extralen)
		crypto_auth_hmacsha256_update(&s, extra, extralen);
	crypto_auth_hmacsha256_final(&s, mac);
	sodium_memzero(&s, sizeof(s));
}

int dl_auth_check(const struct dl_auth *a, const char *label, const unsigned char *n1,
		  const unsigned char *n2, const uint32_t *ints, int nints, const void *extra,
		  size_t extralen, const unsigned char mac[DL_MAC_LEN])
{
	unsigned char want[DL_MAC_LEN];
	dl_auth_mac(a, label, n1, n2, ints, nints, extra, extralen, want);
	return crypto_verify_32(want, mac) == 0;
}
