/* `dljob plan`: the planned device memory of one training step (the cuda
 * backend's arena, engine/cuda/cuda_arena.h), computed without a GPU. */
#ifndef DLJOB_RUNTIME_PLAN_H
#define DLJOB_RUNTIME_PLAN_H

/* argv[0] is "plan".  Returns the process exit status. */
int dl_plan_main(int argc, char **argv);

#endif
