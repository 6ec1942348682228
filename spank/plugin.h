/* Internal interfaces of the dljob SPANK plugin: the option values (from
 * srun/sbatch), the admin's plugstack.conf arguments and the per-context
 * handlers.  Only plugin.c exports symbols (see dljob.map). */
#ifndef DLJOB_SPANK_PLUGIN_H
#define DLJOB_SPANK_PLUGIN_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>
#include "spank/slurm_api.h"

#include "common/optval.h"

#define DL_ERR_LEN 1024
#define DL_SECRET_HEX 64 /* DLJOB_JOB_SECRET: 32 bytes as lowercase hex */

/* --dl-* values as given (strings: checked by dl_opts_check). */
struct dl_opts {
	int given;              /* any --dl-* option was seen */
	char err[DL_ERR_LEN];   /* a value was refused where it entered (control
				 * character, too long): reported by dl_opts_check */
	char job[64];           /* --dl-job: model name or "env" */
	char data[DL_PATH_MAX];
	char epochs[32];
	char batch[32];
	char lr[64];
	char out[DL_PATH_MAX];
	char bind[64];          /* --dl-bind as given, default "closest" */
	int bind_none;          /* parsed from bind */
	int verbose;            /* parsed from bind */
	/* The step's DLJOB_JOB_SECRET as srun sent it in the launch request
	 * (64 lowercase hex digits; "" = none came), and whether a value that
	 * came was malformed.  Not an option the user gives: see local.c. */
	char secret[DL_SECRET_HEX + 1];
	int secret_bad;
};

/* plugstack.conf arguments. */
struct dl_args {
	char runtime[PATH_MAX];
	char data_allow[4096];  /* ':'-separated absolute directories, "" = not given: allow all */
	char default_data[PATH_MAX];
	char topology[PATH_MAX];/* hwloc XML, "" = this machine */
	int nic;                /* 1: closest, 0: none */
	int port_lo, port_hi;
};

/* options.c: the values live in the plugin because SPANK option callbacks
 * get no context pointer; they are only written by the callbacks. */
struct dl_opts *dl_opts(void);
int dl_opts_register(spank_t sp);
/* The hidden option that carries the step's secret from srun to slurmstepd
 * (registered in slurmstepd only, so srun has no such command-line option),
 * and the name of the variable through which srun's plugin hands it to
 * spank_option_getopt. */
struct spank_option *dl_secret_option(void);
int dl_opts_register_secret(spank_t sp);
#define DL_SECRET_OPTION_ENV "_SLURM_SPANK_OPTION_dljob_dl_job_secret"
int dl_opts_is_env(const struct dl_opts *o);
/* Check the values against common/optval.h's limits (and parse
 * --dl-bind).  -1 with one line in err (values in it are escaped). */
int dl_opts_check(struct dl_opts *o, char *err, size_t errlen);
/* Resolve --dl-data (or default_data), a relative path from workdir (the
 * step's working directory on the host, read in user_init), and check it
 * against data_allow; on success o->data is the real path (empty in env
 * mode without data).  workdir NULL (srun, sbatch, salloc, which do not
 * know the step's --chdir): an absolute path is checked the same way but
 * o->data is kept, a relative one is left to the task.  -1 with one line
 * in err. */
int dl_opts_check_data(struct dl_opts *o, const struct dl_args *a, const char *workdir, char *err, size_t errlen);
/* The option's name ("dl-job") from its table value. */
const char *dl_opt_name(int val);
/* Log one error line, "dljob: " + the message with every control byte
 * escaped, through slurm_error and, if to_stderr, the task's stderr. */
void dl_error(int to_stderr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* args.c */
int dl_args_parse(struct dl_args *a, int ac, char **av, char *err, size_t errlen);

/* local.c: srun, sbatch, salloc.  post_opt checks the options and, in
 * sbatch and salloc, sets DLJOB_JOB_SECRET for the script or shell;
 * user_init (srun only, before the launch) makes the step's secret. */
int dl_local_post_opt(spank_t sp, const struct dl_args *a, const char *args_err);
int dl_local_user_init(spank_t sp);

/* remote.c: slurmstepd. */
int dl_remote_post_opt(spank_t sp, const struct dl_args *a, const char *args_err);
int dl_remote_user_init(spank_t sp, const struct dl_args *a);
int dl_remote_task_init(spank_t sp, const struct dl_args *a);
/* spank/nodes.c: MASTER_ADDR, the first host of SLURM_STEP_NODELIST (of
 * SLURM_NODELIST when that is unset), read whole.  Returns 0, or -1 with
 * one line in err. */
int dl_spank_master_addr(spank_t sp, char *out, size_t outlen, char *err, size_t errlen);
/* name's value from slurmstepd's environment, whole, into *val (malloc'ed,
 * the caller frees it; NULL unless ESPANK_SUCCESS): ESPANK_NOSPACE when it
 * is longer than max bytes, ESPANK_ERROR when memory runs out. */
spank_err_t dl_spank_getenv_whole(spank_t sp, const char *name, size_t max, char **val);
void dl_remote_exit(void);
/* The NIC variables dljob sets in a task (remote.c) and re-asserts after a
 * container plugin (model.c): the user's value wins, else dljob's, never an
 * image's. */
#define DL_NIC_VARS { "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME" }

/* model.c: the end of dl_remote_task_init, in the task: model mode (the
 * task's command must be the site's runtime, loadable where the task is)
 * and the order of a container plugin (pyxis) against dljob.so.  The
 * step's state they read, which remote.c keeps from user_init: */
struct dl_model_ctx {
	const char *workdir;           /* the step's working directory on the host */
	const struct stat *workdir_sb; /* ... its device and inode */
	const char *out;               /* --dl-out made absolute */
	int out_relative;              /* ... from workdir */
	const int *user_nic_set;       /* [2]: the user set DL_NIC_VARS[i] */
	int have_mntns;
	const struct stat *mntns;      /* slurmstepd's mount namespace (user_init) */
};
/* Model mode: check that the task's command names a->runtime and that it
 * loads (inside a container too), and hand the checked values to it as
 * DLJOB_*.  -1 after dl_error: the task fails. */
int dl_model_prepare_runtime(spank_t sp, const struct dl_args *a, const struct dl_opts *o,
			     const struct dl_model_ctx *m);
/* A container plugin listed after dljob.so: re-assert dljob's variables
 * (Slurm 23.11+) or refuse the step; in model mode (model != 0) also
 * prepend runtime= to the task's command line (23.11+).  -1 after
 * dl_error. */
int dl_model_container_after_dljob(spank_t sp, const struct dl_args *a, const struct dl_opts *o, int model,
				   const struct dl_model_ctx *m);


#endif
