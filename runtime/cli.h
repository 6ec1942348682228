/* The `dljob` training command line: options -> dl_train_config, with every
 * check done before anything is written, then the process group, signals
 * and the engine. */
#ifndef DLJOB_RUNTIME_CLI_H
#define DLJOB_RUNTIME_CLI_H

#include <stddef.h>
#include <stdio.h>
#include "engine/data/dataset.h"
#include "engine/train.h"
#include "runtime/opttab.h"
#include "world/env.h"

/* --data's default, for training and dljob eval. */
#define DL_DEFAULT_DATA "fashion-mnist:/usr/share/datasets/fashion-mnist"

/* Exit statuses of dljob. */
#define DL_EXIT_OK 0      /* finished, or checkpointed and stopped on SIGTERM/SIGUSR1 */
#define DL_EXIT_ERROR 1   /* data, I/O, peer or numeric failure */
#define DL_EXIT_USAGE 2   /* bad command line */

struct dl_cli {
	struct dl_train_config cfg;
	double timeout_s;     /* bootstrap/collective timeout */
	int help;             /* --help was given: print usage, do nothing else */
	int version;          /* --version was given (anywhere): print it, do nothing else */
	struct dl_data_options norm; /* --normalize (only have_norm, mean, std) */
	char out_buf[4096];   /* storage for the default output directory */
};

/* Under srun --dl-job=MODEL the SPANK plugin leaves the command line alone
 * (Slurm itself execs the runtime) and hands its checked values over in
 * envp's DLJOB_MODEL, DLJOB_DATA, DLJOB_EPOCHS, DLJOB_BATCH, DLJOB_LR,
 * DLJOB_OUT (re: envp parsed by dl_run_env_parse).  Returns a new argv
 * (free() it; the strings are borrowed): argv[0], those values as options
 * (--model M --data D ...: *nfixed words), then argv[1..] (argv[2..] with
 * DLJOB_PREPENDED=1).  Without DLJOB_MODEL it is argv itself and *nfixed
 * is 0.  NULL: no memory. */
char **dl_cli_plugin_argv(int argc, char **argv, char *const *envp, const struct dl_run_env *re,
			  int *nargc, int *nfixed);

/* Parse the training options in argv (argv[0] is the program name); the
 * nfixed words after argv[0] come from the plugin and the options they set
 * may not be given again.  From re: the default --out (./dljob-JOBID) and
 * the GPU the plugin chose.  Returns 0, or -1 with one line naming the bad
 * option in err.  Only parses and range-checks: nothing is opened or
 * created. */
int dl_cli_parse(struct dl_cli *cli, int argc, char **argv, int nfixed, const struct dl_run_env *re,
		 char *err, size_t errlen);

/* --normalize VALUE ("imagenet", "none" or "MR,MG,MB:SR,SG,SB") into
 * o->have_norm, mean, std.  Returns 0, or -1 with err. */
int dl_cli_parse_norm(const char *s, struct dl_data_options *o, char *err, size_t errlen);
/* The normalization o stands for, as "MR,MG,MB:SR,SG,SB". */
void dl_cli_norm_str(const struct dl_data_options *o, char *buf, size_t len);

/* The engine options that training and dljob eval share: opt "backend"
 * (auto, cpu, ref, cuda) or "precision" (auto, fp32, bf16, fp16), given val.
 * Returns 0 with *out = val, or -1 with "--OPT: unknown ..." in err. */
int dl_cli_engine_opt(const char *opt, const char *val, const char **out, char *err, size_t errlen);

/* Print the option summary to f. */
void dl_cli_usage(FILE *f);
/* dljob --list-options (not in --help): the command line's options, the
 * subcommands and their options, the DLJOB_* hand-offs and the models, one
 * a line ("option --NAME", "subcommand NAME", "suboption NAME --OPTION",
 * "handoff NAME", "model NAME"), for tests/test_man_tables.sh.
 * Returns DL_EXIT_OK. */
int dl_cli_list_options(FILE *f);

/* dljob NAME ...: the subcommands, each with its usage line after
 * "dljob NAME " (dl_cli_usage) and its options (runtime/opttab.h). */
struct dl_subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *usage;
	const struct dl_opt_table *opts;
};
extern const struct dl_subcommand dl_subcommands[];
extern const size_t dl_n_subcommands;

/* `dljob [options]`: parse, validate (model, backend, dataset, resume
 * file), create the output directory, join the job, train.  Returns an
 * exit status (DL_EXIT_*). */
int dl_cli_train_main(int argc, char **argv);

#endif
