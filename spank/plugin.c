/* dljob SPANK plugin: a small dispatcher on spank_context().  srun, sbatch
 * and salloc (local/allocator) check the --dl-* options and make the step's
 * DLJOB_JOB_SECRET (srun sends it in the launch request, see local.c); slurmstepd (remote) sets up each task and, for
 * --dl-job=MODEL, checks that the task's command is the site's runtime and
 * hands it the values (Slurm itself execs it, see spank/model.c).
 * Nothing here may take slurmd or slurmstepd down: errors are returned from
 * the callbacks that fail a step, never abort/exit. */
#include "config.h"

#include <stdio.h>
#include "spank/slurm_api.h"

#include "spank/plugin.h"

SPANK_PLUGIN(dljob, 1);

/* Slurm loads a SPANK plugin only under the major.minor release it was
 * built for (plugin_version, from SPANK_PLUGIN): one dljob.so per release.
 * This line (in slurmd's log at debug level) says which. */
static const char built_for[] = "dljob: built for Slurm " DLJOB_SLURM_VERSION;

/* Slurm 25.05 and later hold a failing slurm_spank_init against the node
 * (drained, the job requeued) unless the plugin says the job is at fault
 * (spank(8)).  dljob's init fails only when its options cannot be
 * registered: never the node's fault, and a dljob failure must never drain
 * a node, so the job fails instead.  Its other callbacks never fail in
 * slurmstepd itself: a refused step fails in task_init, inside the task.
 * Older releases look no such variable up (and lack ESPANK_JOB_FAILURE). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

/* plugstack.conf arguments, parsed once per process in slurm_spank_init.  A
 * bad argument is kept as an error for the steps that use dljob rather than
 * failing every job on the cluster. */
static struct dl_args args;
static char args_err[DL_ERR_LEN];

static int plugin_context(void)
{
	spank_context_t c = spank_context();

	return c == S_CTX_LOCAL || c == S_CTX_ALLOCATOR || c == S_CTX_REMOTE;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (!plugin_context())
		return 0;
	slurm_debug("%s", built_for);
	args_err[0] = '\0';
	if (dl_args_parse(&args, ac, av, args_err, sizeof(args_err)) < 0 && !args_err[0])
		snprintf(args_err, sizeof(args_err), "invalid plugstack.conf arguments");
	if (dl_opts_register(sp) < 0 ||
	    (spank_context() == S_CTX_REMOTE && dl_opts_register_secret(sp) < 0))
		return -1;
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return dl_local_post_opt(sp, &args, args_err);
	case S_CTX_REMOTE:
		return dl_remote_post_opt(sp, &args, args_err);
	default:
		return 0;
	}
}

/* srun only, after the allocation and before the launch. */
int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_LOCAL)
		return 0;
	return dl_local_user_init(sp);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return dl_remote_user_init(sp, &args);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return dl_remote_task_init(sp, &args);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_REMOTE)
		dl_remote_exit();
	return 0;
}
