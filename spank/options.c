/* The --dl-* options: one table, callbacks that only record the value
 * (slurmstepd may call them twice: from the launch message and from the
 * environment sbatch exported), and the checks srun/sbatch and slurmstepd
 * share. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "spank/plugin.h"

const char *const dl_models[] = {
	"resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
	"resnet20", "resnet32", "resnet56", NULL,
};

enum { OPT_JOB = 1, OPT_DATA, OPT_EPOCHS, OPT_BATCH, OPT_LR, OPT_OUT, OPT_BIND };

/* SPANK option callbacks get no context pointer: the values have to live
 * here.  Written only by opt_cb. */
static struct dl_opts opts = { .bind = "closest" };

struct dl_opts *dl_opts(void) { return &opts; }

static int opt_cb(int val, const char *optarg, int remote)
{
	char *dst;
	size_t len;

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
	if (!optarg || strlen(optarg) >= len) {
		slurm_error("dljob: option value too long: %.40s...", optarg ? optarg : "");
		return -1;
	}
	memcpy(dst, optarg, strlen(optarg) + 1);
	opts.given = 1;
	return 0;
}

static struct spank_option table[] = {
	{ "dl-job", "MODEL|env", "Train MODEL (resnet18/34/50/101/152, resnet20/32/56) with the "
	  "site's dljob runtime, or 'env': run your own program with RANK, LOCAL_RANK, WORLD_SIZE, "
	  "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set (PyTorch env://).", 1, OPT_JOB, opt_cb },
	{ "dl-data", "DIR", "Dataset directory (default: the site's default_data).", 1, OPT_DATA, opt_cb },
	{ "dl-epochs", "N", "Number of epochs.", 1, OPT_EPOCHS, opt_cb },
	{ "dl-batch", "N", "Batch size per task.", 1, OPT_BATCH, opt_cb },
	{ "dl-lr", "X", "Learning rate.", 1, OPT_LR, opt_cb },
	{ "dl-out", "DIR", "Output directory (default: ./dljob-<jobid>).", 1, OPT_OUT, opt_cb },
	{ "dl-bind", "closest|none[,verbose]", "Bind each task to its GPU's NUMA node and nearest "
	  "NICs (closest, the default) or not (none); verbose prints the mapping per task.",
	  1, OPT_BIND, opt_cb },
	SPANK_OPTIONS_TABLE_END
};

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

int dl_opts_is_env(const struct dl_opts *o) { return strcmp(o->job, "env") == 0; }

static int check_count(const char *opt, const char *s, char *err, size_t errlen)
{
	char *end;
	long v;

	if (!s[0])
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 1 || v > 1000000) {
		snprintf(err, errlen, "--%s=%s: expected a whole number from 1 to 1000000", opt, s);
		return -1;
	}
	return 0;
}

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
	char bind[sizeof(o->bind)];
	int known = 0;

	if (!o->job[0]) {
		snprintf(err, errlen, "--dl-job=MODEL|env is required with the other --dl-* options");
		return -1;
	}
	for (int i = 0; dl_models[i]; i++)
		if (!strcmp(o->job, dl_models[i]))
			known = 1;
	if (!known && !dl_opts_is_env(o)) {
		snprintf(err, errlen, "--dl-job=%s: unknown model (known: resnet18, resnet34, resnet50, "
			 "resnet101, resnet152, resnet20, resnet32, resnet56, or env)", o->job);
		return -1;
	}
	if (check_count("dl-epochs", o->epochs, err, errlen) < 0 ||
	    check_count("dl-batch", o->batch, err, errlen) < 0)
		return -1;
	if (o->lr[0]) {
		char *end;
		double lr;

		errno = 0;
		lr = strtod(o->lr, &end);
		if (end == o->lr || *end || errno || !isfinite(lr) || lr <= 0) {
			snprintf(err, errlen, "--dl-lr=%s: expected a positive number", o->lr);
			return -1;
		}
	}
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
			snprintf(err, errlen, "--dl-bind=%s: unknown word '%s' (closest, none, verbose)", o->bind, p);
			return -1;
		}
	}
	return 0;
}

int dl_opts_check_data(struct dl_opts *o, const struct dl_args *a, char *err, size_t errlen)
{
	char real[PATH_MAX];
	const char *data;
	struct stat st;

	data = o->data[0] ? o->data : a->default_data;
	if (!data[0]) {
		if (dl_opts_is_env(o))
			return 0;
		snprintf(err, errlen, "--dl-data=DIR is required (the site sets no default_data)");
		return -1;
	}
	if (!realpath(data, real)) {
		snprintf(err, errlen, "--dl-data=%s: %s", data, strerror(errno));
		return -1;
	}
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--dl-data=%s: not a directory", data);
		return -1;
	}
	if (!allowed_dir(real, a->data_allow)) {
		snprintf(err, errlen, "--dl-data=%s: %s is outside the allowed data directories (%s)",
			 data, real, a->data_allow);
		return -1;
	}
	snprintf(o->data, sizeof(o->data), "%s", real);
	return 0;
}
