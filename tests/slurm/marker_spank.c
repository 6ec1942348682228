/* A SPANK plugin for the tests only: listed after dljob.so in
 * plugstack.conf, its task_init sets DLJOB_TEST_MARKER=task_init in the
 * task, so a test can see that every plugin's task_init ran for a task
 * (model mode and env mode alike). */
#include <slurm/spank.h>

SPANK_PLUGIN(dljob_test_marker, 1);

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_setenv(sp, "DLJOB_TEST_MARKER", "task_init", 1) != ESPANK_SUCCESS) {
		slurm_error("dljob_test_marker: cannot set DLJOB_TEST_MARKER");
		return -1;
	}
	return 0;
}
