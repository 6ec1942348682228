/* The DLJOB_* variables the plugin (spank/) hands to the task, and so to
 * the runtime (runtime/cli.c, world/env.c, world/world_env.c): the one
 * table of their names, who sets them and what they mean.  Header only,
 * no code: the plugin and the runtime both include it, neither links the
 * other.  The variables a user sets for the runtime (DLJOB_WORLD,
 * DLJOB_COLLECTIVES, ...) are not hand-offs and are not here.
 *
 * Adding one: a row below, then DL_HANDOFF(NAME) where it is set and read,
 * and a line in spank-dljob(8) (tests/test_man_tables.sh checks it). */
#ifndef DLJOB_COMMON_HANDOFF_H
#define DLJOB_COMMON_HANDOFF_H

#include <stddef.h>

/* flags.  DL_HO_MODEL: set only in model mode (--dl-job=MODEL), for the
 * site's runtime.  DL_HO_CLEAR: only the plugin may set it: unset in every
 * dljob task first, so that none comes from the submitting environment. */
#define DL_HO_MODEL 1u
#define DL_HO_CLEAR 2u

/* X(NAME, flags, who sets it, the runtime option it stands for (without
 * "--") or NULL, what it means).  The rows with an option are prepended,
 * in this order, to the runtime's command line (dl_cli_plugin_argv). */
#define DL_HANDOFF_VARS(X) \
	X(MODEL, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", "model", "the model --dl-job named") \
	X(DATA, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", "data", \
	  "--dl-data (or default_data), absolute, checked against data_allow") \
	X(EPOCHS, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", "epochs", "--dl-epochs, when given") \
	X(BATCH, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", "batch", "--dl-batch, when given") \
	X(LR, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", "lr", "--dl-lr, when given") \
	X(OUT, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", "out", "--dl-out, or the default ./dljob-JOBID") \
	X(DATA_ID, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", NULL, \
	  "DEV:INO of the data directory the plugin checked, compared with the one the runtime opens") \
	X(OUT_BASE, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", NULL, \
	  "DEV:INO:DIR of the step's working directory, which a relative --dl-out is under") \
	X(PREPENDED, DL_HO_MODEL | DL_HO_CLEAR, "slurmstepd", NULL, \
	  "1: the plugin prepended the runtime to the command line, argv[1] is the user's word dljob") \
	X(GPU, DL_HO_CLEAR, "slurmstepd", NULL, "the task's GPU, an index in CUDA_VISIBLE_DEVICES") \
	X(GPU_BUSID, DL_HO_CLEAR, "slurmstepd", NULL, "the PCI bus id of the task's GPU") \
	X(NUMA, DL_HO_CLEAR, "slurmstepd", NULL, "the NUMA node(s) the task's memory is bound to") \
	X(CPUS, DL_HO_CLEAR, "slurmstepd", NULL, "the CPUs the task is bound to") \
	X(JOB_SECRET, 0, "srun, slurmstepd", NULL, "the step's rendezvous secret (hex)")

/* DL_HO_ID_MODEL, DL_HO_ID_DATA, ...: a row's index in dl_handoff_vars. */
enum dl_handoff_id {
#define DL_HO_ENUM(name, flags, who, opt, what) DL_HO_ID_##name,
	DL_HANDOFF_VARS(DL_HO_ENUM)
#undef DL_HO_ENUM
	DL_HO_COUNT
};

/* The variable's name, "DLJOB_" #name, as a constant (it may initialize a
 * static array); a name that has no row does not compile. */
#define DL_HANDOFF(name) (&("DLJOB_" #name)[0 * DL_HO_ID_##name])

struct dl_handoff_var {
	const char *name;
	unsigned flags;
	const char *who, *opt, *what;
};

static const struct dl_handoff_var dl_handoff_vars[DL_HO_COUNT] = {
#define DL_HO_ROW(name, flags, who, opt, what) { "DLJOB_" #name, flags, who, opt, what },
	DL_HANDOFF_VARS(DL_HO_ROW)
#undef DL_HO_ROW
};

#endif
