/* common/hostlist.c, the one parser of Slurm node lists (MASTER_ADDR in the
 * plugin and the runtime, the step's other node): every host of the forms
 * Slurm writes, in order (zero padding, lists and ranges in brackets,
 * several groups per name); every malformed or hostile list refused in
 * bounded time with one line naming what is wrong and where; a host that
 * does not fit the caller's buffer refused, never cut. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/hostlist.h"
#include "tests/check.h"

/* All hosts of list, space-separated (at most max of them), or "ERR: why". */
static const char *expand(const char *list, int max, size_t outlen)
{
	static char buf[4096];
	struct dl_hostlist h;
	char host[DL_HOSTLIST_NAME_MAX + 1], err[256];
	size_t o = 0;
	int rc;

	buf[0] = '\0';
	if (dl_hostlist_init(&h, list, err, sizeof(err)) < 0) {
		snprintf(buf, sizeof(buf), "ERR: %s", err);
		return buf;
	}
	for (int n = 0; n < max && (rc = dl_hostlist_next(&h, host, outlen, err, sizeof(err))) != 0; n++) {
		if (rc < 0) {
			snprintf(buf, sizeof(buf), "ERR: %s", err);
			return buf;
		}
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", o ? " " : "", host);
		if (o >= sizeof(buf))
			break;
	}
	return buf;
}

#define HOSTS(list, want) do { \
	const char *got_ = expand((list), 1000, DL_HOSTLIST_NAME_MAX + 1); \
	CHECK(strcmp(got_, (want)) == 0, "'%s': got '%s', want '%s'", (list), got_, (want)); \
} while (0)

#define REFUSED(list, why) do { \
	const char *got_ = expand((list), 1000, DL_HOSTLIST_NAME_MAX + 1); \
	CHECK(strncmp(got_, "ERR: ", 5) == 0 && strstr(got_, (why)), "'%s': got '%s', want an error with '%s'", \
	      (list), got_, (why)); \
} while (0)

int main(void)
{
	static char big[DL_HOSTLIST_LEN_MAX + 16];
	char err[256], out[64];

	/* what Slurm writes */
	HOSTS("n1", "n1");
	HOSTS("a,b", "a b");
	HOSTS("n[1-3,5],m7", "n1 n2 n3 n5 m7");
	HOSTS("n[01-10]", "n01 n02 n03 n04 n05 n06 n07 n08 n09 n10");
	HOSTS("n[8-10]", "n8 n9 n10");
	HOSTS("n[098-101]", "n098 n099 n100 n101");
	HOSTS("n[1,3-4]", "n1 n3 n4");
	HOSTS("node[007-010,12]", "node007 node008 node009 node010 node12");
	HOSTS("gpu[3,5]-ib,cpu1", "gpu3-ib gpu5-ib cpu1");
	HOSTS("node-12", "node-12");
	HOSTS("n[0]", "n0");
	HOSTS("[1-2]", "1 2");
	HOSTS("10.0.0.[1-2]", "10.0.0.1 10.0.0.2");
	HOSTS("n[000000001-000000002]", "n000000001 n000000002");
	/* several groups: the product, the last fastest */
	HOSTS("r[1-2]n[03-04],x", "r1n03 r1n04 r2n03 r2n04 x");
	HOSTS("a[1,3]b[5]c[7-8]d", "a1b5c7d a1b5c8d a3b5c7d a3b5c8d");
	HOSTS("x[1][2][3][4]", "x1234");
	HOSTS("n[3,1]", "n3 n1");
	HOSTS("n1,n1", "n1 n1");

	/* malformed */
	REFUSED("", "empty");
	REFUSED("n[1-2", "the '[' at byte 2 is not closed");
	REFUSED("n[", "the '[' at byte 2 is not closed");
	REFUSED("n[1,", "not closed");
	REFUSED("n[1-", "the '[' at byte 2 is not closed");
	REFUSED("n[]", "']' at byte 3 is not a number");
	REFUSED("n[x]", "'x' at byte 3 is not a number");
	REFUSED("n[1-]", "']' at byte 5 is not a number");
	REFUSED("n[-1]", "'-' at byte 3 is not a number");
	REFUSED("n[1,]", "']' at byte 5 is not a number");
	REFUSED("n[1-2-3]", "'-' at byte 6: expected a digit, '-', ',' or ']'");
	REFUSED("n[1[2]]", "'[' at byte 4: expected");
	REFUSED("n]1", "the ']' at byte 2 has no '['");
	REFUSED("n[2-1]", "the range 2-1 at byte 3 goes down");
	REFUSED("a,,b", "empty host name at byte 3");
	REFUSED(",a", "empty host name at byte 1");
	REFUSED("a,", "empty host name at byte 3");
	REFUSED("a b", "0x20 at byte 2 is not part of a host name");
	REFUSED("a\nb", "0x0a at byte 2 is not part of a host name");
	REFUSED("a\x80", "0x80 at byte 2");
	REFUSED("n1,m[1-2", "the '[' at byte 5 is not closed"); /* the whole list is checked */
	/* hostile: huge numbers and ranges, many groups, long names, long lists */
	REFUSED("n[0-9999999999999999999]", "the number at byte 5 has more than 18 digits");
	REFUSED("n[99999999999999999999999999]", "more than 18 digits");
	REFUSED("n[0-999999999]", "the range 0-999999999 at byte 3 has more than 1048576 hosts");
	REFUSED("n[0-999999999999999999]", "the range 0-999999999999999999 at byte 3 has more than");
	/* Slurm ranges a numeric suffix of any length (strtoul, no bound) */
	HOSTS("node[20231124001-20231124002],x[000000000000000007,999999999999999999]",
	      "node20231124001 node20231124002 x000000000000000007 x999999999999999999");
	/* the largest range is accepted (and only walked as far as asked) */
	CHECK(strcmp(expand("n[0-1048575]", 3, 256), "n0 n1 n2") == 0, "largest range: %s",
	      expand("n[0-1048575]", 3, 256));
	REFUSED("n[0-1048576]", "more than 1048576 hosts");
	REFUSED("n[1][2][3][4][5]", "more than 4 bracket groups in one host name (byte 14)");
	REFUSED("n[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][]", "more than 4 bracket groups");
	memset(big, 'n', 256);
	big[256] = '\0';
	REFUSED(big, "the host names at byte 1 are longer than 255 bytes");
	big[255] = '\0';
	HOSTS(big, big);
	memcpy(big + 240, "[000000001-2]", 14); /* 240 + 9 digits */
	CHECK(strlen(expand(big, 1, 256)) == 249 && strcmp(expand(big, 1, 256) + 240, "000000001") == 0,
	      "a 249-byte host: %s", expand(big, 1, 256));
	memcpy(big + 240, "[1-2]x[1-2]yyyyyyyyyyyyyyy", 27); /* 240 + 1 + 1 + 1 + 15 = 258 */
	REFUSED(big, "longer than 255 bytes");
	/* the longest list is checked, in linear time; one byte more is not */
	for (size_t i = 0; i < DL_HOSTLIST_LEN_MAX; i += 2)
		memcpy(big + i, "n,", 2);
	big[DL_HOSTLIST_LEN_MAX - 1] = '\0';
	clock_t t0 = clock();
	CHECK(strcmp(expand(big, 2, 256), "n n") == 0, "a long list: %.20s", expand(big, 2, 256));
	CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 2.0, "a 1 MiB list took %.2f s",
	      (double)(clock() - t0) / CLOCKS_PER_SEC);
	big[DL_HOSTLIST_LEN_MAX - 1] = 'n';
	big[DL_HOSTLIST_LEN_MAX] = 'n';
	big[DL_HOSTLIST_LEN_MAX + 1] = '\0';
	REFUSED(big, "longer than 1048576 bytes");

	/* a host that does not fit the caller's buffer: refused, not cut */
	CHECK(strncmp(expand("n[1-2],verylongname", 5, 8), "ERR: the host name verylongname is longer than 7 bytes",
		      60) == 0, "a host longer than the buffer: %s", expand("n[1-2],verylongname", 5, 8));

	/* dl_hostlist_first: the plugin's and the runtime's MASTER_ADDR */
	CHECK(dl_hostlist_first("gpu[007-010,12]-ib,cpu1", out, sizeof(out), err, sizeof(err)) == 0 &&
	      strcmp(out, "gpu007-ib") == 0, "first: %s", out);
	CHECK(dl_hostlist_first("r[1-2]n[03-04],r3n1", out, sizeof(out), err, sizeof(err)) == 0 &&
	      strcmp(out, "r1n03") == 0, "first: %s", out);
	err[0] = '\0';
	CHECK(dl_hostlist_first("n1,n[", out, sizeof(out), err, sizeof(err)) < 0 && strstr(err, "not closed"),
	      "first of a malformed list: %s", err);
	CHECK(dl_hostlist_first("abcdefgh", out, 8, err, sizeof(err)) < 0 && strstr(err, "longer than 7 bytes"),
	      "first that does not fit: %s", err);

	if (check_failures)
		fprintf(stderr, "%d check(s) failed\n", check_failures);
	else
		printf("ok: hostlist\n");
	return check_failures ? 1 : 0;
}
