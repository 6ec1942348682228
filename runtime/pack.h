/* `dljob pack SRC DST [options]`: the command line of the packer
 * (engine/data/pack.h), its numbers read by the shared option parsers
 * (common/optval.h), so a bad one gets the same message as any other
 * option's. */
#ifndef DLJOB_RUNTIME_PACK_H
#define DLJOB_RUNTIME_PACK_H

#include "runtime/opttab.h"

/* argv[0] is the sub-command name ("pack"), then
 *   SRC DST [OPTION]... (dl_pack_opttab)
 * Returns the process exit status (DL_EXIT_OK, DL_EXIT_ERROR, DL_EXIT_USAGE). */
int dl_pack_main(int argc, char **argv);
/* Its options (runtime/opttab.h): usage, parsing, dljob --list-options. */
extern const struct dl_opt_table dl_pack_opttab;

#endif
