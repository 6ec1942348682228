/* fuzz_options: the --dl-* option values as the plugin takes them in
 * (spank/options.c: the option callbacks, dl_opts_check, dl_opts_check_data
 * at submit and on the node), the shared value parsers and escaping
 * (common/optval.c) and the GPU index lists of SLURM_STEP_GPUS /
 * CUDA_VISIBLE_DEVICES (mapping/parse.c dl_map_parse_index_list): all of
 * them read bytes a user controls, in slurmstepd through the job
 * environment.  Input: byte 0 selects the context (bit 0: remote, bit 1:
 * data checked as on the node), then up to 8 NUL-separated values for
 * --dl-job, --dl-data, --dl-epochs, --dl-batch, --dl-lr, --dl-out,
 * --dl-bind and the hidden dl-job-secret (an empty one is not given).
 * Checks: no message carries a control character (what reaches slurmd's
 * log), accepted values are within common/optval.h's limits, a kept
 * secret is 64 lowercase hex digits and never makes the step a dljob one,
 * escaping never overflows. */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

#include "common/optval.h"
#include "common/master.h"
#include "mapping/mapping.h"
#include "spank/plugin.h"

/* The SPANK calls options.c makes, as stubs: the option table is kept to
 * reach the (static) callbacks, messages are checked instead of logged. */
static struct spank_option *table[16];
static int ntable;

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
	(void)sp;
	if (ntable < 16)
		table[ntable++] = opt;
	return ESPANK_SUCCESS;
}

const char *spank_strerror(spank_err_t e)
{
	(void)e;
	return "stub";
}

void slurm_error(const char *fmt, ...)
{
	char msg[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dl_optval_has_ctl(msg))
		abort();
}

static void check_msg(const char *err)
{
	if (!err[0] || dl_optval_has_ctl(err))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "dl-job", "dl-data", "dl-epochs", "dl-batch", "dl-lr", "dl-out",
					     "dl-bind", "dl-job-secret" };
	char *buf, err[DL_ERR_LEN], esc[64];
	struct dl_opts *o = dl_opts();
	struct dl_args a;
	int ctx, idx[DL_MAP_MAX_GPUS], fed = 0;
	size_t i = 1;

	if (size < 1)
		return 0;
	if (!ntable && (dl_opts_register(NULL) < 0 || dl_opts_register_secret(NULL) < 0))
		abort();
	ctx = data[0];
	buf = malloc(size + 1);
	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';

	memset(o, 0, sizeof(*o));
	strcpy(o->bind, "closest");
	memset(&a, 0, sizeof(a));
	strcpy(a.runtime, "/usr/bin/dljob");
	strcpy(a.data_allow, "/tmp");
	a.nic = 1;
	a.port_lo = DL_MASTER_PORT_LO;
	a.port_hi = DL_MASTER_PORT_HI;

	for (int k = 0; k < 8 && i < size; k++) {
		const char *v = buf + i;

		i += strlen(v) + 1;
		if (!v[0])
			continue;
		fed |= k < 7;
		for (int t = 0; t < ntable; t++)
			if (!strcmp(table[t]->name, names[k]) && table[t]->cb(table[t]->val, v, ctx & 1) < 0)
				abort();
	}
	if (o->secret[0] && (o->secret_bad || strlen(o->secret) != DL_SECRET_HEX ||
			     strspn(o->secret, "0123456789abcdef") != DL_SECRET_HEX))
		abort();
	if (o->given != fed)
		abort();
	err[0] = '\0';
	if (dl_opts_check(o, err, sizeof(err)) == 0) {
		int iv;
		double dv;

		if ((o->epochs[0] && dl_optval_int("e", o->epochs, DL_EPOCHS_MIN, DL_EPOCHS_MAX, &iv, err, sizeof(err)) < 0) ||
		    (o->batch[0] && dl_optval_int("b", o->batch, DL_BATCH_MIN, DL_BATCH_MAX, &iv, err, sizeof(err)) < 0) ||
		    (o->lr[0] && dl_optval_double("l", o->lr, DL_LR_MIN, 1, DL_LR_MAX, 0, &dv, err, sizeof(err)) < 0) ||
		    dl_optval_has_ctl(o->job) || dl_optval_has_ctl(o->data) || dl_optval_has_ctl(o->out))
			abort();
		err[0] = '\0';
		if (dl_opts_check_data(o, &a, (ctx & 2) ? "/tmp/dljob-fuzz-work" : NULL, err, sizeof(err)) < 0)
			check_msg(err);
	} else {
		check_msg(err);
	}

	/* The raw input (up to its first NUL) through the shared parsers. */
	{
		long lv;
		double dv;
		uint64_t uv;
		const char *s = buf + (size > 1 ? 1 : 0);

		err[0] = '\0';
		if (dl_optval_long("x", s, -5, 5, &lv, err, sizeof(err)) == 0 ? lv < -5 || lv > 5 : (check_msg(err), 0))
			abort();
		if (dl_optval_double("x", s, 0, 1, 1e6, 0, &dv, err, sizeof(err)) == 0 ? !(dv > 0 && dv <= 1e6) : (check_msg(err), 0))
			abort();
		if (dl_optval_u64("x", s, &uv, err, sizeof(err)) < 0)
			check_msg(err);
		dl_optval_escape(s, esc, sizeof(esc));
		if (strlen(esc) >= sizeof(esc) || dl_optval_has_ctl(esc))
			abort();
		dl_optval_escape_msg(s, esc, 4);
		if (strlen(esc) >= 4)
			abort();
		if (dl_map_parse_index_list(s, idx, DL_MAP_MAX_GPUS) > DL_MAP_MAX_GPUS)
			abort();
	}
	free(buf);
	return 0;
}
