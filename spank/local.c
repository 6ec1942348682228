/* srun, sbatch, salloc: check the --dl-* options before anything is
 * launched, so a typo costs one line and a non-zero exit, not a queued job
 * that fails on the nodes; and give the step (srun) or the batch script or
 * shell (sbatch, salloc) its rendezvous secret. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/handoff.h"
#include "spank/plugin.h"

/* DLJOB_JOB_SECRET: 32 random bytes as 64 lowercase hex digits, made in
 * srun for every step, and in sbatch/salloc for the batch script or shell
 * (whose own sruns make fresh ones), so only the job's processes have it;
 * a value the user set is replaced.  Never logged.  The runtime's
 * rendezvous proves knowledge of it (spank-dljob(8), SECURITY OF THE
 * RENDEZVOUS).  text gets DL_SECRET_HEX digits and a NUL. */
static int make_secret(char text[DL_SECRET_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char key[DL_SECRET_HEX / 2];
	size_t got = 0;

	while (got < sizeof(key)) {
		ssize_t n = getrandom(key + got, sizeof(key) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			dl_error(0, "cannot make the step's secret: getrandom: %s", strerror(errno));
			explicit_bzero(key, sizeof(key));
			return -1;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(key); i++) {
		text[2 * i] = hex[key[i] >> 4];
		text[2 * i + 1] = hex[key[i] & 15];
	}
	text[DL_SECRET_HEX] = '\0';
	explicit_bzero(key, sizeof(key));
	return 0;
}

/* sbatch, salloc: the batch script's or shell's DLJOB_JOB_SECRET, in this
 * process's environment (spank_setenv is for remote context only), which
 * their --export decides about.  Their sruns make their own (below). */
static int set_secret_env(void)
{
	char text[DL_SECRET_HEX + 1];
	int rc;

	if (make_secret(text) < 0)
		return -1;
	rc = setenv(DL_HANDOFF(JOB_SECRET), text, 1);
	explicit_bzero(text, sizeof(text));
	if (rc < 0) {
		dl_error(0, "cannot set DLJOB_JOB_SECRET: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* srun: the step's secret travels as the value of the hidden SPANK option
 * dl-job-secret in the launch request srun sends each slurmd (never through
 * slurmctld, never in an argv, never in the environment srun exports, so
 * --export=NONE or any --export list keeps it), and the remote plugin
 * puts it into every task's environment.  srun has no such command-line
 * option (it is registered in slurmstepd only): spank_option_getopt, asked
 * for an option it has not seen, takes its value from this process's
 * _SLURM_SPANK_OPTION_dljob_dl_job_secret and keeps it among the options
 * srun forwards; the variable is removed at once. */
int dl_local_user_init(spank_t sp)
{
	char text[DL_SECRET_HEX + 1], *got = NULL;
	spank_err_t e;
	int rc = 0;

	if (!dl_opts()->given)
		return 0;
	if (make_secret(text) < 0)
		return -1;
	if (setenv(DL_SECRET_OPTION_ENV, text, 1) < 0) {
		dl_error(0, "cannot set %s: %s", DL_SECRET_OPTION_ENV, strerror(errno));
		rc = -1;
	} else if ((e = spank_option_getopt(sp, dl_secret_option(), &got)) != ESPANK_SUCCESS ||
		   !got || strlen(got) != DL_SECRET_HEX) {
		/* A step without its secret would run an unauthenticated
		 * rendezvous: fail it. */
		dl_error(0, "cannot hand the step's secret to the launch request: spank_option_getopt: %s",
			 e != ESPANK_SUCCESS ? spank_strerror(e) : "no value");
		rc = -1;
	}
	unsetenv(DL_SECRET_OPTION_ENV);
	explicit_bzero(text, sizeof(text));
	return rc;
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
	/* srun: the step's secret is made in local_user_init. */
	return spank_context() == S_CTX_ALLOCATOR ? set_secret_env() : 0;
}
