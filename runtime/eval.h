/* `dljob eval`: evaluate weights on a dataset (runtime/eval.c). */
#ifndef DLJOB_RUNTIME_EVAL_H
#define DLJOB_RUNTIME_EVAL_H

#include "runtime/opttab.h"

/* argv[0] is "eval".  Returns an exit status (DL_EXIT_*). */
int dl_eval_main(int argc, char **argv);
/* Its options (runtime/opttab.h): usage, parsing, dljob --list-options. */
extern const struct dl_opt_table dl_eval_opttab;

#endif
