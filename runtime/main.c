/* dljob: entry point.  Dispatches sub-commands; the default is training
 * (which also answers --help and --version, wherever they are). */
#include "config.h"
#include <string.h>

#include "runtime/cli.h"

int main(int argc, char **argv)
{
	/* `dljob NAME ...`: each subcommand parses its own options. */
	for (size_t i = 0; argc > 1 && i < dl_n_subcommands; i++)
		if (strcmp(argv[1], dl_subcommands[i].name) == 0)
			return dl_subcommands[i].main(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], "--list-options") == 0)
		return dl_cli_list_options(stdout);
	return dl_cli_train_main(argc, argv);
}
