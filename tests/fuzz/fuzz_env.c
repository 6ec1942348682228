/* fuzz_env: the runtime's environment, which the SPANK plugin, Slurm, a
 * user running dljob by hand or a container image set: dl_world_env
 * (world/world_env.c: how the process joins its job) and
 * dl_run_env_parse (world/env.c: DLJOB_DATA_ID, DLJOB_OUT_BASE,
 * DLJOB_GPU, SLURM_JOB_ID, TMPDIR, ...), both pure functions of an
 * environment array, the first with Open MPI's variables
 * (dl_ompi_env_parse: OMPI_MCA_btl_tcp_if_*, HOME, ...).  Input: NUL-separated entries; an entry whose first
 * byte is 1..N (N names[] below) is names[byte - 1], its value the rest (so
 * every variable is one byte away), any other entry is taken whole as a
 * NAME=VALUE string (or a string without '=').  Checks: an error is one
 * line without control characters that names a variable; what is accepted
 * is within the documented limits (rank below size, ports in 1-65535,
 * printable names that fit, canonical absolute DLJOB_OUT_BASE, ...). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world/env.h"
#include "common/optval.h"
#include "world/world_int.h"

static const char *const names[] = {
	"DLJOB_WORLD", "PMIX_RANK", "PMIX_NAMESPACE", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_ID",
	"SLURM_STEP_ID", "SLURMD_NODENAME", "DLJOB_JOB_SECRET", "SLURM_STEP_RESV_PORTS", "DLJOB_COLLECTIVES",
	"DLJOB_WORLD_VERBOSE", "DLJOB_MODEL", "DLJOB_OUT", "DLJOB_PREPENDED", "DLJOB_GPU", "DLJOB_GPU_BUSID",
	"DLJOB_DATA_ID", "DLJOB_OUT_BASE", "SLURM_RESTART_COUNT", "TMPDIR", "OMPI_MCA_btl_tcp_if_include",
	"OMPI_MCA_btl_tcp_if_exclude", "OMPI_MCA_mca_base_envar_file_prefix", "OMPI_MCA_mca_base_param_files",
	"OMPI_MCA_mca_param_files", "HOME", "OPAL_SYSCONFDIR",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* One line, printable, naming one of the variables. */
static void check_err(const char *err, size_t errlen)
{
	if (!err[0] || strnlen(err, errlen) == errlen || dl_optval_has_ctl(err))
		abort();
	for (size_t i = 0; i < NNAMES; i++)
		if (strstr(err, names[i]))
			return;
	abort();
}

static int printable(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	if (n == 0 || n == max)
		return 0;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7f)
			return 0;
	return 1;
}

static int digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* "/" or "/a/b": no empty, "." or ".." component (checked the slow way). */
static int canonical(const char *p)
{
	size_t n = strlen(p);
	char *t;

	if (p[0] != '/')
		return 0;
	if (n == 1)
		return 1;
	if (p[n - 1] == '/' || strstr(p, "//"))
		return 0;
	if (!(t = malloc(n + 2)))
		abort();
	snprintf(t, n + 2, "%s/", p);
	int ok = !strstr(t, "/./") && !strstr(t, "/../");
	free(t);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), **envp, **own, err[512];
	size_t n = 0, k = 0;
	struct dl_world_env e;
	struct dl_run_env r;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (size_t i = 0; i <= size; i++)
		n += buf[i] == '\0';
	envp = calloc(n + 1, sizeof(*envp));
	own = calloc(n + 1, sizeof(*own));
	if (!envp || !own)
		abort();
	for (char *p = buf; p <= buf + size; p += strlen(p) + 1) {
		unsigned char c = (unsigned char)p[0];
		if (c >= 1 && c <= NNAMES) {
			size_t len = strlen(names[c - 1]) + strlen(p + 1) + 2;
			if (!(own[k] = malloc(len)))
				abort();
			snprintf(own[k], len, "%s=%s", names[c - 1], p + 1);
			envp[k] = own[k];
			k++;
		} else if (c) {
			envp[k++] = p;
		}
	}
	envp[k] = NULL;

	memset(err, 'x', sizeof(err));
	if (dl_world_env(&e, envp, err, sizeof(err)) < 0) {
		check_err(err, sizeof(err));
	} else {
		if (e.size < 1 || e.size > DL_WORLD_MAX || e.rank < 0 || e.rank >= e.size ||
		    !printable(e.node, sizeof(e.node)) || strnlen(e.jobkey, sizeof(e.jobkey)) == sizeof(e.jobkey))
			abort();
		if (e.other_node[0] && (!printable(e.other_node, sizeof(e.other_node)) ||
					strcmp(e.other_node, e.node) == 0))
			abort();
		if (e.kind == DL_WORLD_TCP &&
		    (e.size < 2 || !printable(e.master_addr, sizeof(e.master_addr)) || e.master_port < 1 ||
		     e.master_port > 65535))
			abort();
		if (e.kind != DL_WORLD_TCP && e.kind != DL_WORLD_PMIX && e.kind != DL_WORLD_SINGLE)
			abort();
		if ((e.use_ring != 0 && e.use_ring != 1) || (e.verbose != 0 && e.verbose != 1))
			abort();
		/* Open MPI's: whether set, pointers into envp's values (HOME even
		 * empty, as Open MPI takes it). */
		if (!e.ompi.set_var != !e.ompi.set_val ||
		    (e.ompi.sysconfdir && !*e.ompi.sysconfdir) ||
		    (e.ompi.set_var && strncmp(e.ompi.set_var, "OMPI_MCA_", 9) != 0))
			abort();
	}

	memset(err, 'x', sizeof(err));
	if (dl_run_env_parse(&r, envp, err, sizeof(err)) < 0) {
		check_err(err, sizeof(err));
	} else {
		if (r.gpu && !(digits(r.gpu) && atoi(r.gpu) <= 1023) && strlen(r.gpu) != 12)
			abort();
		if (r.have_out_base && (!canonical(r.base_dir) || strlen(r.base_dir) >= DL_PATH_MAX))
			abort();
		if (r.job_id < -1 || r.restart_count < 0 || r.tmpdir[0] != '/' || (r.prepended && !r.model))
			abort();
	}

	for (size_t i = 0; i < k; i++)
		free(own[i]);
	free(own);
	free(envp);
	free(buf);
	return 0;
}
