/* srun, sbatch, salloc: check the --dl-* options before anything is
 * launched, so a typo costs one line and a non-zero exit, not a queued job
 * that fails on the nodes. */
#include "config.h"

#include "spank/plugin.h"

int dl_local_post_opt(spank_t sp, const struct dl_args *a, const char *args_err)
{
	struct dl_opts *o = dl_opts();
	char err[DL_ERR_LEN];

	(void)sp;
	/* No --dl-* option: leave the job exactly as it is. */
	if (!o->given)
		return 0;
	if (args_err[0]) {
		slurm_error("dljob: %s", args_err);
		return -1;
	}
	if (dl_opts_check(o, err, sizeof(err)) < 0 || dl_opts_check_data(o, a, err, sizeof(err)) < 0) {
		slurm_error("dljob: %s", err);
		return -1;
	}
	return 0;
}
