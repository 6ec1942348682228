/* dljob SPANK plugin: placeholder until the options land. */
#include <slurm/spank.h>
SPANK_PLUGIN(dljob, 1);
int slurm_spank_init(spank_t sp, int ac, char **av) { (void)sp; (void)ac; (void)av; return 0; }
