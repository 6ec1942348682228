/* Variables of slurmstepd's environment that have no length bound, read
 * whole (dl_spank_getenv_whole): the step's first node (MASTER_ADDR) for
 * task_init (spank/remote.c), and the task's PATH, searched for its command
 * (spank/model.c task_command).  SLURM_STEP_NODELIST: a large job on a
 * fragmented allocation gets one of many KiB ("nid[001234,001236,...]"),
 * read up to DL_HOSTLIST_LEN_MAX bytes.  SLURM_NODELIST (the job's list,
 * whose first node need not be in the step) is read only when the step's
 * is not set at all, never because the step's was too long for a buffer. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "spank/slurm_api.h"
#include "common/hostlist.h"
#include "common/optval.h"
#include "spank/plugin.h"

spank_err_t dl_spank_getenv_whole(spank_t sp, const char *name, size_t max, char **val)
{
	size_t len = max < 4096 ? max + 1 : 4096;
	spank_err_t rc;

	*val = NULL;
	for (;;) {
		char *b = realloc(*val, len);

		if (!b) {
			rc = ESPANK_ERROR;
			break;
		}
		*val = b;
		rc = spank_getenv(sp, name, b, (int)len);
		if (rc != ESPANK_NOSPACE || len > max)
			break;
		len = len > max / 2 ? max + 1 : 2 * len;
	}
	if (rc != ESPANK_SUCCESS) {
		free(*val);
		*val = NULL;
	}
	return rc;
}

int dl_spank_master_addr(spank_t sp, char *out, size_t outlen, char *err, size_t errlen)
{
	const char *var = "SLURM_STEP_NODELIST";
	char *nodes, why[256], q[256];
	spank_err_t rc = dl_spank_getenv_whole(sp, var, DL_HOSTLIST_LEN_MAX, &nodes);
	int rv;

	if (rc == ESPANK_ENV_NOEXIST) {
		var = "SLURM_NODELIST";
		rc = dl_spank_getenv_whole(sp, var, DL_HOSTLIST_LEN_MAX, &nodes);
	}
	if (rc == ESPANK_NOSPACE)
		return dl_errf(err, errlen, "%s is longer than %d bytes", var, DL_HOSTLIST_LEN_MAX);
	if (rc != ESPANK_SUCCESS)
		return dl_errf(err, errlen, "cannot read %s (%s)", var, spank_strerror(rc));
	if ((rv = dl_hostlist_first(nodes, out, outlen, why, sizeof(why))) < 0)
		dl_errf(err, errlen, "cannot find the first node in %s='%s': %s", var,
			dl_optval_escape(nodes, q, sizeof(q)), why);
	free(nodes);
	return rv;
}
