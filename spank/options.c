/* The --dl-* options: one table, callbacks that only record the value
 * (slurmstepd may call them twice: from the launch message and from the
 * environment sbatch exported), and the checks srun/sbatch and slurmstepd
 * share. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/models.h"
#include "common/optval.h"
#include "spank/plugin.h"

enum { OPT_JOB = 1, OPT_DATA, OPT_EPOCHS, OPT_BATCH, OPT_LR, OPT_OUT, OPT_BIND, OPT_SECRET };

/* SPANK option callbacks get no context pointer: the values have to live
 * here.  Written only by opt_cb. */
static struct dl_opts opts = { .bind = "closest" };

struct dl_opts *dl_opts(void) { return &opts; }

void dl_error(int to_stderr, const char *fmt, ...)
{
	char msg[2 * DL_ERR_LEN], safe[2 * DL_ERR_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Values are refused when they hold control characters, but paths
	 * from the file system and the environment may still: escape the
	 * whole line, so no byte of it can start a new log line. */
	dl_optval_escape_msg(msg, safe, sizeof(safe));
	slurm_error("dljob: %s", safe);
	if (to_stderr)
		fprintf(stderr, "dljob: %s\n", safe);
}

/* Record one value (srun's argv, or _SLURM_SPANK_OPTION_dljob_* in the job
 * environment in slurmstepd: untrusted either way).  A bad value is kept as
 * the options' error and reported by dl_opts_check, so srun and slurmstepd
 * fail the same clean way. */
static int opt_cb(int val, const char *arg, int remote)
{
	char *dst, q[96];
	size_t len;

	(void)remote;
	/* The step's secret: kept only when well formed, never echoed (it
	 * is not a --dl-* option: it does not make the step a dljob one). */
	if (val == OPT_SECRET) {
		size_t n = arg ? strlen(arg) : 0;

		opts.secret[0] = '\0';
		opts.secret_bad = n != DL_SECRET_HEX || strspn(arg, "0123456789abcdef") != n;
		if (!opts.secret_bad)
			memcpy(opts.secret, arg, n + 1);
		return 0;
	}
	switch (val) {
	case OPT_JOB: dst = opts.job; len = sizeof(opts.job); break;
	case OPT_DATA: dst = opts.data; len = sizeof(opts.data); break;
	case OPT_EPOCHS: dst = opts.epochs; len = sizeof(opts.epochs); break;
	case OPT_BATCH: dst = opts.batch; len = sizeof(opts.batch); break;
	case OPT_LR: dst = opts.lr; len = sizeof(opts.lr); break;
	case OPT_OUT: dst = opts.out; len = sizeof(opts.out); break;
	case OPT_BIND: dst = opts.bind; len = sizeof(opts.bind); break;
	default: return -1;
	}
	opts.given = 1;
	if (!arg)
		arg = "";
	if (opts.err[0])
		return 0;
	if (dl_optval_has_ctl(arg)) {
		snprintf(opts.err, sizeof(opts.err), "--%s: the value '%s' holds a control character",
			 dl_opt_name(val), dl_optval_escape(arg, q, sizeof(q)));
		return 0;
	}
	if (strlen(arg) >= len) {
		snprintf(opts.err, sizeof(opts.err), "--%s: the value '%s' is longer than %zu bytes",
			 dl_opt_name(val), dl_optval_escape(arg, q, sizeof(q)), len - 1);
		return 0;
	}
	memcpy(dst, arg, strlen(arg) + 1);
	return 0;
}

static struct spank_option table[] = {
	{ "dl-job", "MODEL|env", "Train MODEL (resnet18/34/50/101/152, resnet20/32/56) with the "
	  "site's dljob runtime, or 'env': run your own program with RANK, LOCAL_RANK, WORLD_SIZE, "
	  "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set (PyTorch env://).", 1, OPT_JOB, opt_cb },
	{ "dl-data", "DIR", "Dataset directory (default: the site's default_data).", 1, OPT_DATA, opt_cb },
	{ "dl-epochs", "N", "Number of epochs.", 1, OPT_EPOCHS, opt_cb },
	{ "dl-batch", "N", "Batch size per task.", 1, OPT_BATCH, opt_cb },
	{ "dl-lr", "X", "Base learning rate, for a global batch of 256.", 1, OPT_LR, opt_cb },
	{ "dl-out", "DIR", "Output directory (default: ./dljob-<jobid>).", 1, OPT_OUT, opt_cb },
	{ "dl-bind", "closest|none[,verbose]", "Bind each task to cores of its own near its GPU, its "
	  "GPU's NUMA node and nearest NICs (closest, the default) or not (none); verbose prints "
	  "the node's mapping and each task's binding.",
	  1, OPT_BIND, opt_cb },
	SPANK_OPTIONS_TABLE_END
};

/* Not in the table: slurmstepd registers it alone (plugin.c). */
static struct spank_option secret_option = {
	"dl-job-secret", "HEX", "The step's rendezvous secret (set by srun's dljob plugin).",
	1, OPT_SECRET, opt_cb
};

struct spank_option *dl_secret_option(void) { return &secret_option; }

const char *dl_opt_name(int val)
{
	for (const struct spank_option *o = table; o->name; o++)
		if (o->val == val)
			return o->name;
	return "dl-?";
}

int dl_opts_register(spank_t sp)
{
	for (struct spank_option *o = table; o->name; o++) {
		spank_err_t e = spank_option_register(sp, o);
		if (e != ESPANK_SUCCESS) {
			slurm_error("dljob: cannot register --%s: %s", o->name, spank_strerror(e));
			return -1;
		}
	}
	return 0;
}

int dl_opts_register_secret(spank_t sp)
{
	spank_err_t e = spank_option_register(sp, &secret_option);

	if (e != ESPANK_SUCCESS) {
		slurm_error("dljob: cannot register the step's secret option: %s", spank_strerror(e));
		return -1;
	}
	return 0;
}

int dl_opts_is_env(const struct dl_opts *o) { return strcmp(o->job, "env") == 0; }

/* Is dir (resolved) inside one of the ':'-separated allowed directories? */
static int allowed_dir(const char *dir, const char *allow)
{
	char buf[4096], real[PATH_MAX];

	if (!allow[0])
		return 1;
	snprintf(buf, sizeof(buf), "%s", allow);
	for (char *save = NULL, *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		size_t n;

		if (!realpath(p, real))
			continue;
		n = strlen(real);
		if (n == 1 && real[0] == '/')
			return 1;
		if (!strncmp(dir, real, n) && (dir[n] == '\0' || dir[n] == '/'))
			return 1;
	}
	return 0;
}

int dl_opts_check(struct dl_opts *o, char *err, size_t errlen)
{
	char bind[sizeof(o->bind)], q[96], known_list[256] = "";
	int known = 0, iv;
	double dv;

	if (o->err[0]) {
		dl_errf(err, errlen, "%s", o->err);
		return -1;
	}
	if (!o->job[0]) {
		dl_errf(err, errlen, "--dl-job=MODEL|env is required with the other --dl-* options");
		return -1;
	}
	/* common/models.h: the models the plugin offers */
	for (int i = 0; i < DL_MODEL_COUNT; i++) {
		size_t n = strlen(known_list);

		if (!dl_model_list[i].plugin)
			continue;
		if (!strcmp(o->job, dl_model_list[i].name))
			known = 1;
		snprintf(known_list + n, sizeof(known_list) - n, "%s, ", dl_model_list[i].name);
	}
	if (!known && !dl_opts_is_env(o)) {
		dl_errf(err, errlen, "--dl-job=%s: unknown model (known: %sor env)",
			 dl_optval_escape(o->job, q, sizeof(q)), known_list);
		return -1;
	}
	/* The runtime's own limits (common/optval.h), so srun refuses what
	 * every task would refuse. */
	if ((o->epochs[0] && dl_optval_int("dl-epochs", o->epochs, DL_EPOCHS_MIN, DL_EPOCHS_MAX, &iv, err, errlen) < 0) ||
	    (o->batch[0] && dl_optval_int("dl-batch", o->batch, DL_BATCH_MIN, DL_BATCH_MAX, &iv, err, errlen) < 0) ||
	    (o->lr[0] && dl_optval_double("dl-lr", o->lr, DL_LR_MIN, 1, DL_LR_MAX, 0, &dv, err, errlen) < 0))
		return -1;
	snprintf(bind, sizeof(bind), "%s", o->bind);
	o->bind_none = 0;
	o->verbose = 0;
	for (char *save = NULL, *p = strtok_r(bind, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (!strcmp(p, "closest")) {
			o->bind_none = 0;
		} else if (!strcmp(p, "none")) {
			o->bind_none = 1;
		} else if (!strcmp(p, "verbose")) {
			o->verbose = 1;
		} else {
			char q2[64];

			dl_errf(err, errlen, "--dl-bind=%s: unknown word '%s' (closest, none, verbose)",
				 dl_optval_escape(o->bind, q, sizeof(q)), dl_optval_escape(p, q2, sizeof(q2)));
			return -1;
		}
	}
	return 0;
}

int dl_opts_check_data(struct dl_opts *o, const struct dl_args *a, const char *workdir, char *err, size_t errlen)
{
	char real[PATH_MAX], abs[DL_PATH_MAX], q[256], q2[256], at[DL_PATH_MAX + 8];
	const char *data;
	struct stat st;

	/* default_data is the runtime's data: an env job's program never
	 * reads it, so it is not checked there (it may exist only on some
	 * nodes, or not on the submit host). */
	data = o->data[0] ? o->data : dl_opts_is_env(o) ? "" : a->default_data;
	if (!data[0]) {
		if (dl_opts_is_env(o))
			return 0;
		dl_errf(err, errlen, "--dl-data=DIR is required (the site sets no default_data)");
		return -1;
	}
	/* A relative path names a directory under the step's working
	 * directory, which srun/sbatch --chdir may change: only slurmstepd
	 * knows it. */
	if (!workdir && data[0] != '/')
		return 0;
	dl_optval_escape(data, q, sizeof(q));
	if (dl_optval_path_abs(workdir ? workdir : "", data, abs, sizeof(abs)) < 0) {
		dl_errf(err, errlen, "--dl-data=%s: longer than %d bytes from the step's working directory %s",
			 q, DL_PATH_MAX - 1, dl_optval_escape(workdir ? workdir : "", q2, sizeof(q2)));
		return -1;
	}
	/* The message names the absolute path a relative one became. */
	at[0] = '\0';
	if (data[0] != '/')
		snprintf(at, sizeof(at), " (%s)", dl_optval_escape(abs, q2, sizeof(q2)));
	if (!realpath(abs, real)) {
		dl_errf(err, errlen, "--dl-data=%s%s: %s", q, at, strerror(errno));
		return -1;
	}
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		dl_errf(err, errlen, "--dl-data=%s%s: not a directory", q, at);
		return -1;
	}
	/* On the node (slurmstepd, the step's user's effective ids; in the
	 * task, the user): a directory the user cannot list is named with
	 * its errno here, not as a dataset missing its train/ later. */
	if (workdir && faccessat(AT_FDCWD, real, R_OK | X_OK, AT_EACCESS) < 0) {
		dl_errf(err, errlen, "--dl-data=%s%s: %s (the step's user must be able to list it)", q, at,
			 strerror(errno));
		return -1;
	}
	if (!allowed_dir(real, a->data_allow)) {
		dl_errf(err, errlen, "--dl-data=%s: %s is outside the allowed data directories (%s)",
			 q, dl_optval_escape(real, q2, sizeof(q2)), a->data_allow);
		return -1;
	}
	if (!workdir)
		return 0;
	snprintf(o->data, sizeof(o->data), "%s", real);
	return 0;
}
