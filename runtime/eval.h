/* `dljob eval`: evaluate weights on a dataset (runtime/eval.c). */
#ifndef DLJOB_RUNTIME_EVAL_H
#define DLJOB_RUNTIME_EVAL_H

/* argv[0] is "eval".  Returns an exit status (DL_EXIT_*). */
int dl_eval_main(int argc, char **argv);

#endif
