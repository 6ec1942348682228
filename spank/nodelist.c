/* MASTER_ADDR and MASTER_PORT: the first host of the step and a port
 * derived from the job and step ids, so every task computes the same pair
 * without talking to the others. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "spank/plugin.h"

/* Slurm's compressed host lists: "n1", "n[1-2],x", "gpu[007-010,12]-ib",
 * "r[1-2]n[3-4]".  The first host keeps everything outside brackets and, of
 * each bracket group, the first number with its zero padding (the same rule
 * as the runtime's dl_hostlist_first, which it uses without MASTER_ADDR). */
int dl_first_host(const char *list, char *out, size_t outlen)
{
	size_t n = 0;
	const char *p = list;

	for (; *p && *p != ','; p++) {
		if (*p == '[') {
			const char *num = ++p;
			while (*p >= '0' && *p <= '9')
				p++;
			if (p == num)
				return -1;
			if (n + (size_t)(p - num) >= outlen)
				return -1;
			memcpy(out + n, num, (size_t)(p - num));
			n += (size_t)(p - num);
			while (*p && *p != ']')
				p++;
			if (!*p)
				return -1;
			continue;
		}
		if (n + 1 >= outlen)
			return -1;
		out[n++] = *p;
	}
	if (n == 0)
		return -1;
	out[n] = '\0';
	return 0;
}

int dl_master_port(unsigned job, unsigned step, int lo, int hi)
{
	/* Steps of one job that run at the same time get different ports. */
	unsigned span = (unsigned)(hi - lo + 1);

	return lo + (int)((job * 31u + step) % span);
}
