/* What the training command takes from its environment (world/env.c,
 * dl_run_env_parse): the SPANK plugin's DLJOB_* of model mode, Slurm's
 * SLURM_JOB_ID and SLURM_RESTART_COUNT, TMPDIR.  Every value is untrusted:
 * each bad one is refused with one printable line naming the variable; the
 * good ones are read exactly.  The environment is an array here, never
 * environ: the parser is a pure function of it. */
#include "config.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "world/env.h"
#include "common/optval.h"
#include "tests/check.h"


#define ENV(...) ((char *const[]){ __VA_ARGS__, NULL })

int main(void)
{
	struct dl_run_env r;
	char err[512];
	int rc;

	/* Nothing set: the defaults. */
	rc = dl_run_env_parse(&r, ENV("HOME=/x"), err, sizeof(err));
	CHECK(rc == 0 && !r.model && !r.gpu && !r.have_data_id && !r.have_out_base && r.job_id == -1 &&
	      r.restart_count == 0 && strcmp(r.tmpdir, "/tmp") == 0, "empty env: rc %d (%s)", rc, err);

	/* Model mode as the plugin sets it. */
	rc = dl_run_env_parse(&r, ENV("DLJOB_MODEL=resnet50", "DLJOB_OUT=/home/u/run", "DLJOB_PREPENDED=1",
				      "DLJOB_GPU=3", "DLJOB_DATA_ID=2049:131075", "DLJOB_OUT_BASE=2049:42:/home/u",
				      "SLURM_JOB_ID=77", "SLURM_RESTART_COUNT=2", "TMPDIR=/tmp/job77"),
			      err, sizeof(err));
	CHECK(rc == 0 && r.model && r.have_out && r.prepended && r.gpu && strcmp(r.gpu, "3") == 0 &&
	      r.have_data_id && r.data_dev == 2049 && r.data_ino == 131075 && r.have_out_base &&
	      r.base_dev == 2049 && r.base_ino == 42 && strcmp(r.base_dir, "/home/u") == 0 && r.job_id == 77 &&
	      r.restart_count == 2 && strcmp(r.tmpdir, "/tmp/job77") == 0, "model mode: rc %d (%s)", rc, err);
	rc = dl_run_env_parse(&r, ENV("DLJOB_GPU_BUSID=0000:5f:00.0", "DLJOB_OUT_BASE=1:2:/",
				      "DLJOB_DATA_ID=18446744073709551615:0", "DLJOB_PREPENDED=1"), err, sizeof(err));
	CHECK(rc == 0 && r.gpu && strcmp(r.gpu, "0000:5f:00.0") == 0 && strcmp(r.base_dir, "/") == 0 &&
	      r.data_dev == 18446744073709551615ull && !r.prepended,
	      "bus id, root base, largest dev, DLJOB_PREPENDED without DLJOB_MODEL: rc %d (%s)", rc, err);

	/* Every bad value, refused by name.  Before world/env.c: '+1',
	 * '../../x' and 'abc' were taken (the default --out became
	 * ./dljob-../../x, atoi read 'abc' as 0 and overflowed on the huge
	 * count), a relative TMPDIR and '..' in DLJOB_OUT_BASE passed silently,
	 * and a newline in a value reached the message. */
	static const struct {
		const char *kv;
		const char *msg;
	} bad[] = {
		{ "DLJOB_DATA_ID=1:x", "DLJOB_DATA_ID='1:x' is not DEV:INO" },
		{ "DLJOB_DATA_ID=", "DLJOB_DATA_ID='' is not DEV:INO" },
		{ "DLJOB_DATA_ID=-1:2", "DLJOB_DATA_ID='-1:2' is not DEV:INO" },
		{ "DLJOB_DATA_ID= 1:2", "DLJOB_DATA_ID=' 1:2' is not DEV:INO" },
		{ "DLJOB_DATA_ID=1:-2", "DLJOB_DATA_ID='1:-2' is not DEV:INO" },
		{ "DLJOB_DATA_ID=18446744073709551616:1", "is not DEV:INO" },
		{ "DLJOB_DATA_ID=1:18446744073709551616", "is not DEV:INO" },
		{ "DLJOB_DATA_ID=1:2:3", "DLJOB_DATA_ID='1:2:3' is not DEV:INO" },
		{ "DLJOB_DATA_ID=1:2\n", "DLJOB_DATA_ID='1:2\\n' is not DEV:INO" },
		{ "DLJOB_OUT_BASE=1:2", "DLJOB_OUT_BASE='1:2' is not DEV:INO:DIR" },
		{ "DLJOB_OUT_BASE=1:2:", "DLJOB_OUT_BASE: '' is not an absolute directory" },
		{ "DLJOB_OUT_BASE=1:2:home/u", "DLJOB_OUT_BASE: 'home/u' is not an absolute directory" },
		{ "DLJOB_OUT_BASE=1:2:/a/../b", "DLJOB_OUT_BASE: '/a/../b' is not an absolute directory" },
		{ "DLJOB_OUT_BASE=1:2:/a/..", "DLJOB_OUT_BASE: '/a/..' is not" },
		{ "DLJOB_OUT_BASE=1:2:/a/./b", "DLJOB_OUT_BASE: '/a/./b' is not" },
		{ "DLJOB_OUT_BASE=1:2:/a//b", "DLJOB_OUT_BASE: '/a//b' is not" },
		{ "DLJOB_OUT_BASE=1:2:/a/", "DLJOB_OUT_BASE: '/a/' is not" },
		{ "DLJOB_OUT_BASE=x:2:/a", "DLJOB_OUT_BASE='x:2:/a' is not DEV:INO:DIR" },
		{ "SLURM_JOB_ID=../../x", "SLURM_JOB_ID='../../x' is not an integer in [0, " },
		{ "SLURM_JOB_ID=12/x", "SLURM_JOB_ID='12/x' is not an integer" },
		{ "SLURM_JOB_ID=-5", "SLURM_JOB_ID='-5' is not an integer" },
		{ "SLURM_JOB_ID=+5", "SLURM_JOB_ID='+5' is not an integer" },
		{ "SLURM_JOB_ID=99999999999999999999", "SLURM_JOB_ID='99999999999999999999' is not an integer" },
		{ "SLURM_RESTART_COUNT=abc", "SLURM_RESTART_COUNT='abc' is not an integer in [0, 2147483647]" },
		{ "SLURM_RESTART_COUNT=99999999999999999999", "SLURM_RESTART_COUNT='99999999999999999999'" },
		{ "SLURM_RESTART_COUNT=2147483648", "SLURM_RESTART_COUNT='2147483648'" },
		{ "SLURM_RESTART_COUNT=1 ", "SLURM_RESTART_COUNT='1 '" },
		{ "TMPDIR=rel", "TMPDIR='rel' is not an absolute path" },
		{ "DLJOB_GPU=x", "DLJOB_GPU='x' is not a device index (0-1023)" },
		{ "DLJOB_GPU=-1", "DLJOB_GPU='-1' is not a device index" },
		{ "DLJOB_GPU=1024", "DLJOB_GPU='1024' is not a device index" },
		{ "DLJOB_GPU= 1", "DLJOB_GPU=' 1' is not a device index" },
		{ "DLJOB_GPU_BUSID=0000:5f:00", "DLJOB_GPU_BUSID='0000:5f:00' is not a PCI bus id" },
		{ "DLJOB_GPU_BUSID=0000:5f:00.0\x1b", "DLJOB_GPU_BUSID='0000:5f:00.0\\x1b' is not a PCI bus id" },
		{ "DLJOB_PREPENDED=2", "DLJOB_PREPENDED='2' is not an integer in [0, 1]" },
		{ "DLJOB_PREPENDED=yes", "DLJOB_PREPENDED='yes'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *envp[] = { "DLJOB_MODEL=resnet20", (char *)bad[i].kv, NULL };
		err[0] = 0;
		rc = dl_run_env_parse(&r, envp, err, sizeof(err));
		CHECK(rc < 0 && strstr(err, bad[i].msg) && !dl_optval_has_ctl(err),
		      "bad env '%s': rc %d, message '%s', want '%s'", bad[i].kv, rc, err, bad[i].msg);
	}

	/* The lookup: the first NAME=VALUE, never a longer name's, never an
	 * entry without '='. */
	char *const lk[] = { "SLURM_JOB_IDX=9", "SLURM_JOB_ID", "SLURM_JOB_ID=4", "SLURM_JOB_ID=5", NULL };
	CHECK(dl_env_get(lk, "SLURM_JOB_ID") && strcmp(dl_env_get(lk, "SLURM_JOB_ID"), "4") == 0,
	      "dl_env_get: '%s'", dl_env_get(lk, "SLURM_JOB_ID") ? dl_env_get(lk, "SLURM_JOB_ID") : "(null)");
	CHECK(dl_env_get(NULL, "X") == NULL && dl_env_get(lk, "SLURM") == NULL, "dl_env_get: prefix or NULL");

	if (check_failures) {
		fprintf(stderr, "test_run_env: %d check(s) failed\n", check_failures);
		return 1;
	}
	printf("test_run_env: all checks passed\n");
	return 0;
}
