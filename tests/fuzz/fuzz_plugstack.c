/* fuzz_plugstack: the plugstack.conf argument parser (spank/args.c,
 * dl_args_parse), which slurmd, slurmstepd, srun and sbatch run on the
 * words after the plugin's path.  Input: the words, separated by NUL bytes
 * (at most 64; an empty input is no words).  Checks: a return of 0 leaves
 * every string field NUL-terminated, an absolute runtime= and a sane port
 * range; a return of -1 leaves one line in err. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spank/plugin.h"

#define MAX_WORDS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *av[MAX_WORDS], err[DL_ERR_LEN];
	struct dl_args a;
	int ac = 0;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (size_t i = 0; i < size && ac < MAX_WORDS;) {
		av[ac++] = buf + i;
		i += strlen(buf + i) + 1;
	}
	err[0] = '\0';
	if (dl_args_parse(&a, ac, av, err, sizeof(err)) == 0) {
		if (a.runtime[0] != '/' || a.port_lo < 1 || a.port_hi > 65535 || a.port_lo > a.port_hi ||
		    a.nic < 0 || a.nic > 1 || strnlen(a.runtime, sizeof(a.runtime)) == sizeof(a.runtime) ||
		    strnlen(a.data_allow, sizeof(a.data_allow)) == sizeof(a.data_allow) ||
		    strnlen(a.default_data, sizeof(a.default_data)) == sizeof(a.default_data) ||
		    strnlen(a.topology, sizeof(a.topology)) == sizeof(a.topology))
			abort();
	} else if (!err[0] || strchr(err, '\n')) {
		abort();
	}
	free(buf);
	return 0;
}
