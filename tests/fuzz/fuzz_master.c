/* fuzz_master: the parser of common/master.c that reads a Slurm variable
 * in every task (and in the plugin, inside slurmstepd):
 * SLURM_STEP_RESV_PORTS (dl_resv_port_first).  Input: the variable's value
 * (up to the first NUL).  Checks: a port is -1 or in 1-65535 and is the
 * leading number of the input.  The node list: fuzz_hostlist.c. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/master.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	int port;

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	port = dl_resv_port_first(s);
	if (port != -1 && (port < 1 || port > 65535 || atoi(s) != port))
		abort();
	free(s);
	return 0;
}
