/* The training command's environment (world/env.h): what the SPANK
 * plugin hands over in model mode (DLJOB_*), and what Slurm sets
 * (SLURM_JOB_ID, SLURM_RESTART_COUNT), read from an environment array; and
 * the Open MPI parameters that decide whether dljob chooses Open MPI's TCP
 * interfaces (OMPI_MCA_*, HOME, OPAL_SYSCONFDIR). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world/env.h"
#include "common/handoff.h"
#include "common/optval.h"

/* Values quoted in messages: escaped, cut to this many bytes. */
#define QUOTE_LEN 80

static int is_digit(char c) { return c >= '0' && c <= '9'; }

const char *dl_env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

int dl_env_long(char *const *envp, const char *name, long lo, long hi, long *out, char *err,
		size_t errlen)
{
	const char *s = dl_env_get(envp, name);
	char q[QUOTE_LEN], *end;
	long v;

	if (!s || !*s)
		return 0;
	/* strtol skips blanks and takes a sign: only digits may start it. */
	if (!is_digit(s[0]) && !(lo < 0 && s[0] == '-' && is_digit(s[1])))
		goto bad;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		goto bad;
	*out = v;
	return 1;
bad:
	return dl_errf(err, errlen, "%s='%s' is not an integer in [%ld, %ld]", name,
		    dl_optval_escape(s, q, sizeof(q)), lo, hi);
}

const char *dl_env_dev_ino(const char *s, unsigned long long *dev, unsigned long long *ino)
{
	char *end;

	/* strtoull takes blanks and a '-' (and wraps it): digits only. */
	if (!is_digit(s[0]))
		return NULL;
	errno = 0;
	*dev = strtoull(s, &end, 10);
	if (errno || *end != ':' || !is_digit(end[1]))
		return NULL;
	*ino = strtoull(end + 1, &end, 10);
	return errno ? NULL : end;
}

/* A PCI bus id as the plugin writes it: "0000:5f:00.0". */
static int is_busid(const char *s)
{
	static const char pat[] = "xxxx:xx:xx.x";

	if (strlen(s) != sizeof(pat) - 1)
		return 0;
	for (size_t i = 0; pat[i]; i++)
		if (pat[i] == 'x' ? !strchr("0123456789abcdefABCDEF", s[i]) || !s[i] : s[i] != pat[i])
			return 0;
	return 1;
}

/* An absolute path as getcwd gives it: '/', then components that are not
 * empty, "." or "..", no '/' at the end (unless it is "/"). */
static int is_canonical_abs(const char *p)
{
	if (p[0] != '/')
		return 0;
	if (!p[1])
		return 1;
	for (const char *c = p + 1;;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (!c[n])
			return 1;
		c += n + 1;
	}
}

/* The plugin's GPU for this task: DLJOB_GPU, else DLJOB_GPU_BUSID. */
static int parse_gpu(struct dl_run_env *r, char *const *envp, char *err, size_t errlen)
{
	const char *idx = dl_env_get(envp, DL_HANDOFF(GPU)),
		   *bus = dl_env_get(envp, DL_HANDOFF(GPU_BUSID));
	char q[QUOTE_LEN];
	long v;

	if (idx && *idx) {
		if (dl_env_long(envp, DL_HANDOFF(GPU), 0, 1023, &v, err, errlen) < 0)
			return dl_errf(err, errlen, "DLJOB_GPU='%s' is not a device index (0-1023)",
				    dl_optval_escape(idx, q, sizeof(q)));
		r->gpu = idx;
	} else if (bus && *bus) {
		if (!is_busid(bus))
			return dl_errf(err, errlen, "DLJOB_GPU_BUSID='%s' is not a PCI bus id like 0000:5f:00.0",
				    dl_optval_escape(bus, q, sizeof(q)));
		r->gpu = bus;
	}
	return 0;
}

int dl_run_env_parse(struct dl_run_env *r, char *const *envp, char *err, size_t errlen)
{
	const char *s;
	char q[QUOTE_LEN];
	long v = 0;

	memset(r, 0, sizeof(*r));
	r->job_id = -1;
	r->tmpdir = "/tmp";
	r->model = dl_env_get(envp, DL_HANDOFF(MODEL)) != NULL;
	r->have_out = dl_env_get(envp, DL_HANDOFF(OUT)) != NULL;
	if (dl_env_long(envp, DL_HANDOFF(PREPENDED), 0, 1, &v, err, errlen) < 0)
		return -1;
	r->prepended = r->model && v == 1;
	if (parse_gpu(r, envp, err, errlen) < 0)
		return -1;

	if ((s = dl_env_get(envp, DL_HANDOFF(DATA_ID)))) {
		const char *end = dl_env_dev_ino(s, &r->data_dev, &r->data_ino);
		if (!end || *end)
			return dl_errf(err, errlen, "DLJOB_DATA_ID='%s' is not DEV:INO (decimal device and inode "
				    "numbers)", dl_optval_escape(s, q, sizeof(q)));
		r->have_data_id = 1;
	}
	if ((s = dl_env_get(envp, DL_HANDOFF(OUT_BASE)))) {
		const char *end = dl_env_dev_ino(s, &r->base_dev, &r->base_ino);
		if (!end || *end != ':')
			return dl_errf(err, errlen, "DLJOB_OUT_BASE='%s' is not DEV:INO:DIR (decimal device and "
				    "inode numbers, an absolute directory)", dl_optval_escape(s, q, sizeof(q)));
		r->base_dir = end + 1;
		if (!is_canonical_abs(r->base_dir) || strlen(r->base_dir) >= DL_PATH_MAX)
			return dl_errf(err, errlen, "DLJOB_OUT_BASE: '%s' is not an absolute directory without "
				    "'.', '..' or empty components, shorter than %d bytes",
				    dl_optval_escape(r->base_dir, q, sizeof(q)), DL_PATH_MAX);
		r->have_out_base = 1;
	}

	/* Slurm's job ids are decimal numbers: the default output directory
	 * is named after it, so a '/' or ".." in it must never get there. */
	if (dl_env_long(envp, "SLURM_JOB_ID", 0, LONG_MAX, &r->job_id, err, errlen) < 0 ||
	    dl_env_long(envp, "SLURM_RESTART_COUNT", 0, INT_MAX, &r->restart_count, err, errlen) < 0)
		return -1;

	if ((s = dl_env_get(envp, "TMPDIR")) && *s) {
		if (s[0] != '/' || strlen(s) >= 4000)
			return dl_errf(err, errlen, "TMPDIR='%s' is not an absolute path (shorter than 4000 bytes)",
				    dl_optval_escape(s, q, sizeof(q)));
		r->tmpdir = s;
	}
	return 0;
}

void dl_ompi_env_parse(struct dl_ompi_env *o, char *const *envp)
{
	/* Set, even to "": the user's word, which dljob never overrides. */
	static const char *const chosen[] = {
		"OMPI_MCA_opal_btl_tcp_if_include", "OMPI_MCA_btl_tcp_if_include",
		"OMPI_MCA_opal_btl_tcp_if_exclude", "OMPI_MCA_btl_tcp_if_exclude",
		"OMPI_MCA_opal_mca_base_param_file_prefix", "OMPI_MCA_mca_base_param_file_prefix",
		"OMPI_MCA_opal_mca_base_envar_file_prefix", "OMPI_MCA_mca_base_envar_file_prefix",
	};
	const char *s;

	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < sizeof(chosen) / sizeof(chosen[0]) && !o->set_var; i++)
		if ((o->set_val = dl_env_get(envp, chosen[i])))
			o->set_var = chosen[i];
	/* Open MPI looks a parameter up by its long name (opal_...) first */
	if (!(o->param_files = dl_env_get(envp, "OMPI_MCA_opal_mca_base_param_files")))
		o->param_files = dl_env_get(envp, "OMPI_MCA_mca_base_param_files");
	if (!(o->param_files_syn = dl_env_get(envp, "OMPI_MCA_opal_mca_param_files")))
		o->param_files_syn = dl_env_get(envp, "OMPI_MCA_mca_param_files");
	o->home = dl_env_get(envp, "HOME");
	if ((s = dl_env_get(envp, "OPAL_SYSCONFDIR")) && *s)
		o->sysconfdir = s;
	if ((s = dl_env_get(envp, "OPAL_PREFIX")) && *s)
		o->prefix = s;
}
