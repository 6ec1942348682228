#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "common/master.h"

int dl_master_port(unsigned long job, unsigned long step, int lo, int hi)
{
	unsigned long span = (unsigned long)(hi - lo + 1);

	return lo + (int)((job * 31u + step) % span);
}

int dl_master_port_tries(int port)
{
	int n = 65535 - port + 1;
	return n < DL_MASTER_PORT_TRIES ? n : DL_MASTER_PORT_TRIES;
}

/* A port number at *p (advanced past it): 1-65535, or -1. */
static long port_at(const char **p)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)**p))
		return -1;
	errno = 0;
	v = strtol(*p, &end, 10);
	if (errno || v < 1 || v > 65535)
		return -1;
	*p = end;
	return v;
}

int dl_resv_port_first(const char *list)
{
	const char *p = list;
	long first = -1;

	if (!list || !*list)
		return -1;
	for (;;) {
		long lo = port_at(&p), hi = lo;
		if (lo < 0)
			return -1;
		if (*p == '-') {
			p++;
			if ((hi = port_at(&p)) < lo)
				return -1;
		}
		if (first < 0)
			first = lo;
		if (*p == '\0')
			return (int)first;
		if (*p++ != ',')
			return -1;
	}
}
