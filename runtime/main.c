/* dljob: entry point.  Dispatches sub-commands; the default is training
 * (which also answers --help and --version, wherever they are). */
#include "config.h"
#include <string.h>

#include "runtime/cli.h"
#include "runtime/pack.h"
#include "runtime/topo.h"
#include "runtime/report.h"
#include "runtime/eval.h"
#include "runtime/plan.h"

int main(int argc, char **argv)
{
	/* `dljob pack SRC DST ...`: the packer parses its own options. */
	if (argc > 1 && strcmp(argv[1], "pack") == 0)
		return dl_pack_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "topo") == 0)
		return dl_topo_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "report") == 0)
		return dl_report_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "eval") == 0)
		return dl_eval_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "plan") == 0)
		return dl_plan_main(argc - 1, argv + 1);
	return dl_cli_train_main(argc, argv);
}
