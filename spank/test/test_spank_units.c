/* The plugin's pure parts without Slurm: plugstack.conf arguments,
 * MASTER_PORT, and the shared option-value parsers and escaping
 * (common/optval.c).  The node list's parser: test_hostlist.c; the
 * plugin's reading of it (spank/nodes.c, MASTER_ADDR) here, with a
 * spank_getenv that copies as slurmstepd's does. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"
#include "common/master.h"
#include "common/optval.h"
#include "spank/plugin.h"

static int fails;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	fails += !ok;
}

/* slurmstepd's environment for spank_getenv, which copies as Slurm 22.05's
 * does (strlcpy: cut, ESPANK_NOSPACE when it does not fit). */
static const char *fake_env[4];

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	size_t n = strlen(var);

	(void)sp;
	for (const char **e = fake_env; *e; e++)
		if (strncmp(*e, var, n) == 0 && (*e)[n] == '=') {
			snprintf(buf, (size_t)len, "%s", *e + n + 1);
			return strlen(*e + n + 1) >= (size_t)len ? ESPANK_NOSPACE : ESPANK_SUCCESS;
		}
	return ESPANK_ENV_NOEXIST;
}

const char *spank_strerror(spank_err_t e)
{
	return e == ESPANK_ENV_NOEXIST ? "not set" : "error";
}

/* dl_spank_master_addr on step (SLURM_STEP_NODELIST, NULL: unset) and job
 * (SLURM_NODELIST): want is the master, or (want_err) a part of the error. */
static void master(const char *step, const char *job, const char *want, int want_err)
{
	char out[256] = "", err[DL_ERR_LEN] = "", msg[400];
	int k = 0, rc;

	if (step)
		fake_env[k++] = step;
	if (job)
		fake_env[k++] = job;
	fake_env[k] = NULL;
	rc = dl_spank_master_addr(NULL, out, sizeof(out), err, sizeof(err));
	snprintf(msg, sizeof(msg), "MASTER_ADDR from %.40s%s / %.40s -> %s (got: %s)", step ? step : "(unset)",
		 step && strlen(step) > 40 ? "..." : "", job ? job : "(unset)", want, rc < 0 ? err : out);
	check(want_err ? rc < 0 && strstr(err, want) : rc == 0 && !strcmp(out, want), msg);
}

static void args(const char *line, const char *want_err)
{
	char buf[512], *av[16], err[DL_ERR_LEN] = "", msg[700];
	int ac = 0, rc;
	struct dl_args a;

	snprintf(buf, sizeof(buf), "%s", line);
	for (char *save = NULL, *p = strtok_r(buf, " ", &save); p && ac < 16; p = strtok_r(NULL, " ", &save))
		av[ac++] = p;
	rc = dl_args_parse(&a, ac, av, err, sizeof(err));
	snprintf(msg, sizeof(msg), "plugstack '%s' -> %s (got: %s)", line, want_err ? want_err : "accepted",
		 rc < 0 ? err : "accepted");
	check(want_err ? rc < 0 && strstr(err, want_err) : rc == 0, msg);
}

int main(void)
{
	struct dl_args a;
	char err[DL_ERR_LEN];
	char *av[] = { "runtime=/opt/dljob/bin/dljob", "data_allow=/d1:/d2", "default_data=/d1/in",
		       "topology=/t.xml", "nic=none", "master_port_range=40000-40009" };


	check(dl_master_port(5, 0, 29500, 29999) == 29500 + 155, "MASTER_PORT for job 5 step 0 is 29655");
	check(dl_master_port(5, 1, 29500, 29999) == 29500 + 156, "another step of the job gets another port");
	check(dl_master_port(4000000000u, 7, 40000, 40009) >= 40000 &&
	      dl_master_port(4000000000u, 7, 40000, 40009) <= 40009, "MASTER_PORT stays in a small range");

	check(dl_args_parse(&a, 6, av, err, sizeof(err)) == 0 && !strcmp(a.runtime, "/opt/dljob/bin/dljob") &&
	      !strcmp(a.data_allow, "/d1:/d2") && !strcmp(a.default_data, "/d1/in") && !strcmp(a.topology, "/t.xml") &&
	      a.nic == 0 && a.port_lo == 40000 && a.port_hi == 40009, "all plugstack arguments are read");
	check(dl_args_parse(&a, 0, av, err, sizeof(err)) == 0 && a.runtime[0] == '/' && a.nic == 1 &&
	      a.port_lo == 29500 && a.port_hi == 29999 && !a.data_allow[0], "defaults");
	args("bogus=1", "unknown argument 'bogus'");
	args("runtime=/x bogus=1", "unknown argument 'bogus'");
	args("topology", "argument 'topology' is not key=value");
	args("=x", "argument '=x' is not key=value");
	args("runtime=dljob", "runtime=dljob is not an absolute path");
	args("nic=far", "nic=far: expected closest or none");
	args("master_port_range=9-3", "master_port_range=9-3");
	args("master_port_range=1-70000", "master_port_range=1-70000");
	args("master_port_range=100", "master_port_range=100");
	args("nic=closest master_port_range=1000-1000", NULL);
	/* An empty data_allow= used to allow everything: it is refused by name. */
	args("data_allow=", "data_allow= is empty");
	args("data_allow=/d1: nic=none", "data_allow=/d1:: every entry must be an absolute directory");
	args("data_allow=/d1::/d2", "every entry must be an absolute directory");
	args("data_allow=:/d1", "every entry must be an absolute directory");
	args("data_allow=data", "data_allow=data: every entry");
	args("data_allow=/d1:/d2/x", NULL);

	/* A value with a newline never reaches a message raw. */
	{
		char *nl[] = { "nic=x\nerror: forged" };

		check(dl_args_parse(&a, 1, nl, err, sizeof(err)) < 0 && !strchr(err, '\n') &&
		      strstr(err, "nic=x\\nerror: forged"), "a plugstack value with a newline is escaped in the message");
	}
	{
		char out[32];
		long lv;
		double dv;
		uint64_t uv;

		check(!strcmp(dl_optval_escape("a\nb\\c\x1b\xff", out, sizeof(out)), "a\\nb\\\\c\\x1b\\xff"),
		      "escape: newline, backslash, escape, high byte");
		check(!strcmp(dl_optval_escape_msg("a\\n\r", out, sizeof(out)), "a\\n\\x0d"),
		      "message escape keeps a backslash, escapes a carriage return");
		check(!strcmp(dl_optval_escape("0123456789abcdefghijklmnopqrstuvwxyz", out, 12), "01234567..."),
		      "escape cuts with ... inside the buffer");
		check(!strcmp(dl_optval_escape("\n\n\n\n\n", out, 8), "\\n\\n..."), "escape never splits an escape");
		check(dl_optval_has_ctl("a\tb") && dl_optval_has_ctl("\x7f") && !dl_optval_has_ctl("a b\xc3\xa9"),
		      "control characters: tab and DEL are, UTF-8 is not");
		check(dl_optval_long("n", " 3", 1, 9, &lv, err, sizeof(err)) < 0 &&
		      dl_optval_long("n", "+3", 1, 9, &lv, err, sizeof(err)) < 0 &&
		      dl_optval_long("n", "-3", -5, 9, &lv, err, sizeof(err)) == 0 && lv == -3 &&
		      dl_optval_long("n", "-3", 1, 9, &lv, err, sizeof(err)) < 0, "integers: whole decimal strings only");
		check(dl_optval_u64("s", " -1", &uv, err, sizeof(err)) < 0 && dl_optval_u64("s", "-1", &uv, err, sizeof(err)) < 0 &&
		      dl_optval_u64("s", "18446744073709551615", &uv, err, sizeof(err)) == 0 && uv == UINT64_MAX &&
		      dl_optval_u64("s", "18446744073709551616", &uv, err, sizeof(err)) < 0, "u64: no sign, no wrap");
		check(dl_optval_double("t", "1e-300", DL_TIMEOUT_MIN, 0, DL_TIMEOUT_MAX, 0, &dv, err, sizeof(err)) < 0 &&
		      dl_optval_double("t", "1e-400", 0, 1, 1e6, 0, &dv, err, sizeof(err)) < 0 &&
		      dl_optval_double("t", "0x10", 0, 1, 1e6, 0, &dv, err, sizeof(err)) < 0 &&
		      dl_optval_double("t", "inf", 0, 1, 1e6, 0, &dv, err, sizeof(err)) < 0 &&
		      dl_optval_double("t", " 1", 0, 1, 1e6, 0, &dv, err, sizeof(err)) < 0 &&
		      dl_optval_double("t", ".5", 0, 1, 1e6, 0, &dv, err, sizeof(err)) == 0 && dv == 0.5 &&
		      dl_optval_double("t", "1000", DL_LR_MIN, 1, DL_LR_MAX, 0, &dv, err, sizeof(err)) == 0,
		      "numbers: decimal, finite, in range");
	}

	/* --dl-data and --dl-out made absolute from the step's working
	 * directory on the host (spank/remote.c). */
	{
		char out[32];

		check(!dl_optval_path_abs("/home/u", "data/x", out, sizeof(out)) && !strcmp(out, "/home/u/data/x"),
		      "relative path: under the working directory");
		check(!dl_optval_path_abs("/home/u/", "./a//b/.", out, sizeof(out)) && !strcmp(out, "/home/u/a/b"),
		      "relative path: '.' and empty components dropped");
		check(!dl_optval_path_abs("/home/u", "../v", out, sizeof(out)) && !strcmp(out, "/home/u/../v"),
		      "relative path: '..' kept for the kernel");
		check(!dl_optval_path_abs("/", "x", out, sizeof(out)) && !strcmp(out, "/x") &&
		      !dl_optval_path_abs("/w", ".", out, sizeof(out)) && !strcmp(out, "/w"),
		      "relative path: from / and '.' alone");
		check(!dl_optval_path_abs("/home/u", "/abs/./p", out, sizeof(out)) && !strcmp(out, "/abs/./p"),
		      "absolute path: kept as given");
		check(dl_optval_path_abs("/home/u", "0123456789012345678901234567", out, sizeof(out)) < 0,
		      "relative path: too long for the buffer is an error");
	}

	/* MASTER_ADDR: the step's list read whole, however long (a large job
	 * on a fragmented allocation: 12 KiB here); the job's list only when
	 * the step's is unset (its first node need not be in the step). */
	{
		size_t len = 3 * (size_t)DL_HOSTLIST_LEN_MAX;
		char *step = malloc(len);
		size_t o;

		if (!step)
			return 1;
		o = (size_t)snprintf(step, len, "SLURM_STEP_NODELIST=nid[");
		for (int i = 2; i < 4002; i += 2)
			o += (size_t)snprintf(step + o, len - o, "%s%05d", i > 2 ? "," : "", i);
		snprintf(step + o, len - o, "]");
		master(step, "SLURM_NODELIST=x1", "nid00002", 0);
		master(NULL, "SLURM_NODELIST=a[3-4]", "a3", 0);
		master(NULL, NULL, "cannot read SLURM_NODELIST (not set)", 1);
		master("SLURM_STEP_NODELIST=n1,m[2-", "SLURM_NODELIST=x1",
		       "cannot find the first node in SLURM_STEP_NODELIST='n1,m[2-': the '[' at byte 5 is not closed", 1);
		memset(step + 20, 'n', len - 21);
		step[len - 1] = '\0';
		master(step, "SLURM_NODELIST=x1", "SLURM_STEP_NODELIST is longer than 1048576 bytes", 1);
		step[20 + DL_HOSTLIST_LEN_MAX + 1] = '\0'; /* one byte too many */
		master(step, "SLURM_NODELIST=x1", "SLURM_STEP_NODELIST is longer than 1048576 bytes", 1);
		step[20 + DL_HOSTLIST_LEN_MAX] = '\0'; /* read whole, refused by the parser */
		master(step, "SLURM_NODELIST=x1", "SLURM_STEP_NODELIST='nnnn", 1);
		free(step);
	}

	/* dl_spank_getenv_whole: a value of exactly max bytes is read whole,
	 * one byte more is ESPANK_NOSPACE (the task's PATH, up to 128 KiB). */
	{
		static char var[5 + 131073];
		char *val = NULL;
		spank_err_t rc;

		memcpy(var, "PATH=", 5);
		for (size_t lens[] = { 100, 4095, 4096, 4097, 8193, 131072 }, i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			char msg[200];
			size_t n = lens[i];

			memset(var + 5, 'p', n);
			var[5 + n] = '\0';
			fake_env[0] = var;
			fake_env[1] = NULL;
			rc = dl_spank_getenv_whole(NULL, "PATH", n, &val);
			snprintf(msg, sizeof(msg), "a %zu-byte PATH is read whole with max=%zu", n, n);
			check(rc == ESPANK_SUCCESS && val && strlen(val) == n, msg);
			free(val);
			rc = dl_spank_getenv_whole(NULL, "PATH", n - 1, &val);
			snprintf(msg, sizeof(msg), "a %zu-byte PATH is ESPANK_NOSPACE with max=%zu", n, n - 1);
			check(rc == ESPANK_NOSPACE && !val, msg);
		}
		rc = dl_spank_getenv_whole(NULL, "NOPE", 10, &val);
		check(rc == ESPANK_ENV_NOEXIST && !val, "an unset variable is ESPANK_ENV_NOEXIST");
		fake_env[0] = NULL;
	}

	printf("%s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
