/* MASTER_ADDR and MASTER_PORT: the first host of the step and a port
 * derived from the job and step ids, so every task computes the same pair
 * without talking to the others. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "spank/plugin.h"

/* Slurm's compressed host lists: "n1", "n[1-2],x", "gpu[007-010,12]-ib".
 * The first host is the prefix, the first number of the first range (with
 * its zero padding) and whatever follows the closing bracket. */
int dl_first_host(const char *list, char *out, size_t outlen)
{
	const char *p = list, *lb = NULL, *end;
	size_t n;

	/* The first entry ends at the first comma outside brackets. */
	for (end = p; *end && *end != ','; end++) {
		if (*end == '[') {
			lb = end;
			while (*end && *end != ']')
				end++;
			if (!*end)
				return -1;
		}
	}
	if (end == p)
		return -1;
	if (!lb) {
		n = (size_t)(end - p);
		if (n >= outlen)
			return -1;
		memcpy(out, p, n);
		out[n] = '\0';
		return 0;
	}
	const char *num = lb + 1, *num_end = num, *rb = strchr(lb, ']');
	while (*num_end >= '0' && *num_end <= '9')
		num_end++;
	if (num_end == num)
		return -1;
	int w = snprintf(out, outlen, "%.*s%.*s%.*s", (int)(lb - p), p, (int)(num_end - num), num,
			 (int)(end - rb - 1), rb + 1);
	return w < 0 || (size_t)w >= outlen ? -1 : 0;
}

int dl_master_port(unsigned job, unsigned step, int lo, int hi)
{
	/* Steps of one job that run at the same time get different ports. */
	unsigned span = (unsigned)(hi - lo + 1);

	return lo + (int)((job * 31u + step) % span);
}
