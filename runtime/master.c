#include "config.h"

#include <ctype.h>

#include "runtime/master.h"

int dl_hostlist_first(const char *list, char *out, size_t outlen)
{
	size_t o = 0;
	const char *p = list;

	if (!list || !*list || outlen == 0)
		return -1;
	/* prefix[range,...]suffix: the first host takes the prefix, the first
	 * number of each bracket group (with its zero padding) and the suffix. */
	while (*p && *p != ',') {
		if (*p == '[') {
			const char *num = ++p;
			while (isdigit((unsigned char)*p)) {
				if (o + 1 >= outlen)
					return -1;
				out[o++] = *p++;
			}
			if (p == num)
				return -1;
			while (*p && *p != ']')
				p++;
			if (*p != ']')
				return -1;
			p++;
			continue;
		}
		if (o + 1 >= outlen)
			return -1;
		out[o++] = *p++;
	}
	out[o] = '\0';
	return o > 0 ? 0 : -1;
}

int dl_master_port(unsigned long job, unsigned long step, int lo, int hi)
{
	unsigned long span = (unsigned long)(hi - lo + 1);

	return lo + (int)((job * 31u + step) % span);
}
