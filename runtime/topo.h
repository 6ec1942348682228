/* `dljob topo`: the GPU/NIC/NUMA/CPU mapping the SPANK plugin would apply
 * to a node's tasks, printed as a table with the rule behind each column.
 * Runs nothing. */
#ifndef DLJOB_RUNTIME_TOPO_H
#define DLJOB_RUNTIME_TOPO_H

#include "runtime/opttab.h"

/* argv[0] is "topo".  Returns the process exit status. */
int dl_topo_main(int argc, char **argv);
/* Its options (runtime/opttab.h): usage, parsing, dljob --list-options. */
extern const struct dl_opt_table dl_topo_opttab;

#endif
