/* srun, sbatch, salloc: check the --dl-* options before anything is
 * launched, so a typo costs one line and a non-zero exit, not a queued job
 * that fails on the nodes; and give the step its rendezvous secret. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "spank/plugin.h"

/* DLJOB_JOB_SECRET: 32 random bytes as 64 lowercase hex digits, made here
 * in srun's own context for every step (and by sbatch/salloc for the batch
 * script, whose own sruns make fresh ones), so only the job's processes
 * have it; a value the user set is replaced.  Never logged.  The runtime's
 * rendezvous proves knowledge of it (spank-dljob(8), SECURITY OF THE
 * RENDEZVOUS). */
static int set_secret(void)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char key[32];
	char text[2 * sizeof(key) + 1];
	size_t got = 0;
	int rc;

	while (got < sizeof(key)) {
		ssize_t n = getrandom(key + got, sizeof(key) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			dl_error(0, "cannot make the step's secret: getrandom: %s", strerror(errno));
			return -1;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(key); i++) {
		text[2 * i] = hex[key[i] >> 4];
		text[2 * i + 1] = hex[key[i] & 15];
	}
	text[sizeof(text) - 1] = '\0';
	/* spank_setenv is for remote context only; in srun, sbatch and salloc
	 * the job's environment is this process's (their --export decides
	 * what of it reaches the tasks: keep DLJOB_JOB_SECRET in a list). */
	rc = setenv("DLJOB_JOB_SECRET", text, 1);
	explicit_bzero(key, sizeof(key));
	explicit_bzero(text, sizeof(text));
	if (rc < 0) {
		dl_error(0, "cannot set DLJOB_JOB_SECRET: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Whether the step runs in a container (pyxis's --container-image or
 * --container-name, from whichever plugin registers them).  Before the
 * plugins' init_post_opt, Slurm puts every option given into this
 * process's environment as _SLURM_SPANK_OPTION_<plugin>_<option>. */
static int container_in_use(void)
{
	static const char prefix[] = "_SLURM_SPANK_OPTION_";
	static const char *const opts[] = { "_container_image=", "_container_name=" };

	for (char **e = environ; e && *e; e++) {
		const char *eq;

		if (strncmp(*e, prefix, sizeof(prefix) - 1) != 0 || !(eq = strchr(*e, '=')))
			continue;
		for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
			size_t n = strlen(opts[i]);

			if ((size_t)(eq + 1 - *e) >= n && strncmp(eq + 1 - n, opts[i], n) == 0)
				return 1;
		}
	}
	return 0;
}

int dl_local_post_opt(spank_t sp, const struct dl_args *a, const char *args_err)
{
	struct dl_opts *o = dl_opts();
	char err[DL_ERR_LEN];

	/* No --dl-* option: leave the job exactly as it is. */
	if (!o->given)
		return 0;
	if (args_err[0]) {
		dl_error(0, "%s", args_err);
		return -1;
	}
	/* In a container the data directory may exist only there (an image's
	 * or a mount's): the task checks it (spank-dljob(8), CONTAINERS). */
	if (dl_opts_check(o, err, sizeof(err)) < 0 ||
	    (!container_in_use() && dl_opts_check_data(o, a, NULL, err, sizeof(err)) < 0)) {
		dl_error(0, "%s", err);
		return -1;
	}
	(void)sp;
	return set_secret();
}
