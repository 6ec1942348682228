/* list_spank_options: the plugin's --dl-* options as it registers them
 * (spank/options.c's table, through a stub spank_option_register), one a
 * line as "option --NAME", the help of --dl-job as "help TEXT", then the
 * models --dl-job offers (common/models.h) as "model NAME", for
 * tests/test_man_tables.sh. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <slurm/spank.h>

#include "common/models.h"
#include "spank/plugin.h"

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
	(void)sp;
	printf("option --%s\n", opt->name);
	if (strcmp(opt->name, "dl-job") == 0)
		printf("help %s\n", opt->usage);
	return ESPANK_SUCCESS;
}

const char *spank_strerror(spank_err_t e)
{
	(void)e;
	return "stub";
}

void slurm_error(const char *fmt, ...)
{
	(void)fmt;
}

int main(void)
{
	if (dl_opts_register(NULL) < 0)
		return 1;
	for (int i = 0; i < DL_MODEL_COUNT; i++)
		if (dl_model_list[i].plugin)
			printf("model %s\n", dl_model_list[i].name);
	return 0;
}
