/* The `dljob` training command line: options -> dl_train_config, with every
 * check done before anything is written, then the process group, signals
 * and the engine. */
#ifndef DLJOB_RUNTIME_CLI_H
#define DLJOB_RUNTIME_CLI_H

#include <stddef.h>
#include <stdio.h>
#include "engine/train.h"

/* Exit statuses of dljob. */
#define DL_EXIT_OK 0      /* finished, or checkpointed and stopped on SIGTERM/SIGUSR1 */
#define DL_EXIT_ERROR 1   /* data, I/O, peer or numeric failure */
#define DL_EXIT_USAGE 2   /* bad command line */

struct dl_cli {
	struct dl_train_config cfg;
	double timeout_s;     /* bootstrap/collective timeout */
	int help;             /* --help was given: print usage, do nothing else */
	char out_buf[4096];   /* storage for the default output directory */
};

/* Parse the training options in argv (argv[0] is the program name).
 * Returns 0, or -1 with one line naming the bad option in err.  Only parses
 * and range-checks: nothing is opened or created. */
int dl_cli_parse(struct dl_cli *cli, int argc, char **argv, char *err, size_t errlen);

/* Print the option summary to f. */
void dl_cli_usage(FILE *f);

/* `dljob [options]`: parse, validate (model, backend, dataset, resume
 * file), create the output directory, join the job, train.  Returns an
 * exit status (DL_EXIT_*). */
int dl_cli_train_main(int argc, char **argv);

#endif
