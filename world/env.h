/* The environment as untrusted input.  Every variable the runtime reads is
 * parsed by a pure function of an environment array (NAME=VALUE strings up
 * to a NULL, as environ): dl_world_env (world/world_env.c) for how the
 * process joins its job, dl_run_env_parse (here) for what the training
 * command takes from the SPANK plugin and from Slurm, dl_ompi_env_parse
 * (here) for who chose Open MPI's TCP interfaces.  Only the entry
 * points (dl_world_open, dl_cli_train_main) pass environ; the fuzz target
 * tests/fuzz/fuzz_env.c passes any bytes.  A bad value is refused with one
 * line naming the variable and what is wrong, the value escaped
 * (dl_optval_escape: no control character reaches a terminal or a log);
 * nothing is silently cut, wrapped or replaced by a default. */
#ifndef DLJOB_WORLD_ENV_H
#define DLJOB_WORLD_ENV_H

#include <stddef.h>

/* The value of name in envp (the first NAME=VALUE entry), or NULL. */
const char *dl_env_get(char *const *envp, const char *name);

/* name as a whole-string decimal integer in [lo, hi] (digits only, a
 * leading '-' only when lo < 0: no blanks, no '+', no "0x").  Returns 1
 * with *out, 0 when name is unset or empty (*out untouched), -1 with
 * "NAME='VALUE' is not an integer in [LO, HI]" in err. */
int dl_env_long(char *const *envp, const char *name, long lo, long hi, long *out, char *err,
		size_t errlen);

/* What the training command reads from its environment besides the
 * process group (world/world_env.c). */
struct dl_run_env {
	int model;                 /* DLJOB_MODEL is set: started by srun --dl-job=MODEL */
	int have_out;              /* DLJOB_OUT is set: --out came from --dl-out */
	int prepended;             /* DLJOB_PREPENDED=1 in model mode: argv[1] is the
				    * user's word "dljob" (0 or 1, else refused) */
	const char *gpu;           /* DLJOB_GPU (an index, 0-1023), else DLJOB_GPU_BUSID
				    * (0000:5f:00.0); NULL when neither is set */
	int have_data_id;          /* DLJOB_DATA_ID "DEV:INO" (decimal): the --dl-data */
	unsigned long long data_dev, data_ino; /* directory the plugin checked */
	int have_out_base;         /* DLJOB_OUT_BASE "DEV:INO:DIR": the step's working */
	unsigned long long base_dev, base_ino; /* directory on the host, DIR */
	const char *base_dir;      /* absolute, without ".", ".." or empty components */
	long job_id;               /* SLURM_JOB_ID (decimal), -1 when unset */
	long restart_count;        /* SLURM_RESTART_COUNT, 0 when unset */
	const char *tmpdir;        /* TMPDIR (absolute), "/tmp" when unset or empty */
};

/* Parse them all from envp into r (r's strings point into envp).  Returns
 * 0, or -1 with one line naming the first bad variable in err. */
int dl_run_env_parse(struct dl_run_env *r, char *const *envp, char *err, size_t errlen);

/* "DEV:INO" (decimal, each fitting 64 bits) at the start of s: the end of
 * INO, or NULL. */
const char *dl_env_dev_ino(const char *s, unsigned long long *dev, unsigned long long *ino);

/* Whether the user (or the site, through the environment) chose Open MPI's
 * TCP interfaces, and where Open MPI reads its parameter files: the PMIx
 * world (world/world_ompi.c) chooses them only when nobody did. */
struct dl_ompi_env {
	const char *set_var;     /* the first of OMPI_MCA_btl_tcp_if_include, _if_exclude,
				  * OMPI_MCA_mca_base_param_file_prefix, _envar_file_prefix
				  * (aggregate sets, which dljob cannot read), each by its long
				  * name (OMPI_MCA_opal_btl_tcp_if_include...) or its name,
				  * that is set, even empty; NULL if none */
	const char *set_val;     /* its value (untrusted: escape it in messages) */
	const char *param_files; /* OMPI_MCA_opal_mca_base_param_files, else
				  * OMPI_MCA_mca_base_param_files (',' separated; "none": no
				  * files); NULL if unset: Open MPI's default files */
	const char *param_files_syn; /* the same of the synonym mca_param_files, NULL if unset:
				  * when set, Open MPI reads its list as well, and "none"
				  * there reads no file */
	const char *home;        /* HOME, even empty (Open MPI's home directory); NULL if unset */
	const char *sysconfdir;  /* OPAL_SYSCONFDIR, NULL if unset or empty: Open MPI's own */
	const char *prefix;      /* OPAL_PREFIX, NULL if unset or empty: a moved Open MPI */
};

/* Fill o from envp (o's strings point into envp).  Never fails. */
void dl_ompi_env_parse(struct dl_ompi_env *o, char *const *envp);

#endif
