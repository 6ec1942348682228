/* Slurm's public headers, included here and nowhere else.  Newer releases'
 * slurm.h declares functions with an empty parameter list (24.11: the
 * callbacks of slurm_trigger_callbacks_t and ping_all_controllers()), which
 * -Wstrict-prototypes (and so an --enable-werror build) rejects: the warning
 * is silenced for Slurm's own declarations only, and stays on for dljob's
 * code. */
#ifndef DLJOB_SPANK_SLURM_API_H
#define DLJOB_SPANK_SLURM_API_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <slurm/slurm.h>
#include <slurm/spank.h>
#pragma GCC diagnostic pop

/* Slurm 23.11 added spank_prepend_task_argv: the task's command line can
 * then be changed from task_init, so Slurm itself execs the runtime after
 * every plugin (spank/model.c). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
#define DL_HAVE_PREPEND_ARGV 1
#else
#define DL_HAVE_PREPEND_ARGV 0
#endif

#endif
