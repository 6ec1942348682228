/* dljob: entry point.  Dispatches sub-commands; the default is training. */
#include "config.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		printf("dljob %s (built for Slurm %s)\n", PACKAGE_VERSION, DLJOB_SLURM_VERSION);
		return 0;
	}
	fprintf(stderr, "dljob: training is not built yet\n");
	return 1;
}
