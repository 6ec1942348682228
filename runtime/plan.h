/* `dljob plan`: the planned device memory of one training step (the cuda
 * backend's arena, engine/cuda/cuda_arena.h), computed without a GPU. */
#ifndef DLJOB_RUNTIME_PLAN_H
#define DLJOB_RUNTIME_PLAN_H

#include "runtime/opttab.h"

/* argv[0] is "plan".  Returns the process exit status. */
int dl_plan_main(int argc, char **argv);
/* Its options (runtime/opttab.h): usage, parsing, dljob --list-options. */
extern const struct dl_opt_table dl_plan_opttab;

#endif
