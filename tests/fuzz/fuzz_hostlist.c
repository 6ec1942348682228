/* fuzz_hostlist: common/hostlist.c, the parser of Slurm node lists
 * (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST) that the plugin runs inside
 * slurmstepd and every task runs for MASTER_ADDR.  Input: the variable's
 * value (up to the first NUL).  Checks: a refused list has a one-line
 * reason; an accepted one holds only printable, non-blank bytes, and its
 * first (up to) 4096 hosts are non-empty names of at most
 * DL_HOSTLIST_NAME_MAX printable bytes without ',', '[', ']', the first
 * being dl_hostlist_first's; a list without brackets is exactly its comma-
 * separated names; a small buffer gets a whole host or an error, never a
 * byte past its end. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"

static int good_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > DL_HOSTLIST_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7f || *s == ',' || *s == '[' || *s == ']')
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), host[DL_HOSTLIST_NAME_MAX + 1], first[DL_HOSTLIST_NAME_MAX + 1];
	char err[256], small[8 + 4];
	struct dl_hostlist h, h2;
	int rc, brackets;

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	memset(err, 'x', sizeof(err));
	if (dl_hostlist_init(&h, s, err, sizeof(err)) < 0) {
		if (strnlen(err, sizeof(err)) == sizeof(err) || !err[0] || strchr(err, '\n'))
			abort();
		if (dl_hostlist_first(s, first, sizeof(first), err, sizeof(err)) == 0)
			abort();
		free(s);
		return 0;
	}
	for (const char *p = s; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			abort();
	if (dl_hostlist_first(s, first, sizeof(first), err, sizeof(err)) < 0)
		abort();
	brackets = strchr(s, '[') != NULL;
	const char *elem = s;
	for (int n = 0; n < 4096; n++) {
		rc = dl_hostlist_next(&h, host, sizeof(host), err, sizeof(err));
		if (rc == 0)
			break;
		if (rc != 1 || !good_name(host) || (n == 0 && strcmp(host, first) != 0))
			abort();
		if (!brackets) {
			size_t len = strcspn(elem, ",");
			if (strlen(host) != len || memcmp(host, elem, len) != 0)
				abort();
			elem += len + (elem[len] == ',');
		}
	}
	if (!brackets && rc == 0 && *elem)
		abort();
	/* the same list into an 8-byte buffer: a whole host or an error */
	if (dl_hostlist_init(&h2, s, err, sizeof(err)) < 0)
		abort();
	for (int n = 0; n < 64; n++) {
		memset(small, 'x', sizeof(small));
		rc = dl_hostlist_next(&h2, small, 8, err, sizeof(err));
		if (rc == 0)
			break;
		if (memcmp(small + 8, "xxxx", 4) != 0 || (rc == 1 && !good_name(small)) || (rc == 1 && strlen(small) > 7))
			abort();
	}
	free(s);
	return 0;
}
