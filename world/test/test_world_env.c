/* How the world decides to bootstrap, from the environment alone
 * (world/world_env.c): precedence PMIx > RANK/WORLD_SIZE > SLURM_* >
 * single, MASTER_ADDR from the step's first node, MASTER_PORT Slurm's
 * reserved port or from the job and step ids, the candidate ports, one-line errors naming the bad variable; and the
 * other node of the step that rank 0 checks its listening address against
 * (other_node).  The node list parser itself: common/test/test_hostlist.c. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/master.h"
#include "world/world_int.h"

static int failures;

#define LONG_NAME "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn" \
	"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn" \
	"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);    \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
			failures++;                                        \
		}                                                          \
	} while (0)

static const char *const vars[] = {
	"DLJOB_WORLD", "PMIX_RANK", "PMIX_NAMESPACE", "RANK", "WORLD_SIZE", "MASTER_ADDR",
	"MASTER_PORT", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
	"SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURMD_NODENAME",
	"DLJOB_JOB_SECRET", "SLURM_STEP_RESV_PORTS", "DLJOB_COLLECTIVES", "DLJOB_WORLD_VERBOSE",
};

/* Set the environment to exactly the NULL-terminated name=value list. */
static void env_set(const char *const *kv)
{
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	for (; kv && *kv; kv += 2)
		setenv(kv[0], kv[1], 1);
}

int main(void)
{
	struct dl_world_env e;
	char err[512];
	int rc;

	/* other_node: a host of the step's node list that is not this node,
	 * "" for a one-node step or a list that cannot be parsed. */
	static const struct { const char *list, *me, *want; } on[] = {
		{ "n[1-2]", "n1", "n2" },      { "n[1-2]", "n2", "n1" },
		{ "n1", "n1", "" },            { "n[01-04,7],gpu1", "n01", "n02" },
		{ "n07,n[1-2]", "n07", "n1" }, { "r[1-2]n[3-4]", "r1n3", "r1n4" },
		{ "gpu[3,5]-ib", "gpu3-ib", "gpu5-ib" }, { "a,b", "b", "a" },
		{ "n[1-2", "n1", "" },         { "n[]", "n1", "" },
		{ "n[2-1]", "n1", "" },        { "n[1-99999999999]", "n1", "" },
		{ "n[1-2]", "x", "n1" },       { "x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,y", "x", "" },
		{ "", "n1", "" },              { "n[1-2]x[]", "n1x", "" },
		/* Walked in bounded time (no host, 10^8 prefixes). */
		{ "n[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][]", "n1", "" },
	};
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		char nl[96], me[96];
		snprintf(nl, sizeof(nl), "SLURM_STEP_NODELIST=%s", on[i].list);
		snprintf(me, sizeof(me), "SLURMD_NODENAME=%s", on[i].me);
		rc = dl_world_env(&e, (char *const[]){ nl, me, NULL }, err, sizeof(err));
		CHECK(rc == 0 && strcmp(e.other_node, on[i].want) == 0, "other node of %s in '%s': "
		      "rc %d '%s', want '%s' (%s)", on[i].me, on[i].list, rc, e.other_node, on[i].want, err);
	}
	rc = dl_world_env(&e, (char *const[]){ "SLURM_JOB_NODELIST=j[1-2]", "SLURMD_NODENAME=j1", NULL },
			  err, sizeof(err));
	CHECK(rc == 0 && strcmp(e.other_node, "j2") == 0, "other node from the job's list: '%s'",
	      e.other_node);
	rc = dl_world_env(&e, (char *const[]){ "SLURM_STEP_NODELIST=s1", "SLURM_JOB_NODELIST=s[1-2]",
					       "SLURMD_NODENAME=s1", NULL }, err, sizeof(err));
	CHECK(rc == 0 && strcmp(e.other_node, "") == 0, "a one-node step of a 2-node job: '%s'",
	      e.other_node);

	/* Nothing: a single process. */
	env_set((const char *[]){ NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_SINGLE && e.size == 1, "empty env: rc %d kind %d", rc, e.kind);

	/* A batch script: SLURM_PROCID without a step's task count. */
	env_set((const char *[]){ "SLURM_PROCID", "0", "SLURM_JOB_ID", "7", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_SINGLE, "batch script: rc %d kind %d (%s)", rc, e.kind, err);

	/* PMIx wins over everything else. */
	env_set((const char *[]){ "PMIX_RANK", "1", "PMIX_NAMESPACE", "slurm.pmix.7.0", "RANK", "1",
				  "WORLD_SIZE", "4", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_PMIX, "pmix: rc %d kind %d (%s)", rc, e.kind, err);

	/* A pure function of the array it is given, whatever environ holds:
	 * the PMIx world's knobs, a rank that names itself. */
	rc = dl_world_env(&e, (char *const[]){ "PMIX_RANK=0", "PMIX_NAMESPACE=x", "DLJOB_COLLECTIVES=ring",
					       "DLJOB_WORLD_VERBOSE=1", "SLURMD_NODENAME=gpu-07", NULL },
			  err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_PMIX && e.use_ring == 1 && e.verbose == 1 && strcmp(e.node, "gpu-07") == 0,
	      "array env: rc %d kind %d ring %d verbose %d node '%s' (%s)", rc, e.kind, e.use_ring, e.verbose,
	      e.node, err);
	rc = dl_world_env(&e, (char *const[]){ "DLJOB_COLLECTIVES=mpi", "DLJOB_WORLD_VERBOSE=0", NULL }, err,
			  sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_SINGLE && !e.use_ring && !e.verbose, "mpi, quiet: rc %d (%s)", rc, err);

	/* srun --mpi=none: all from SLURM_*. */
	env_set((const char *[]){ "SLURM_PROCID", "3", "SLURM_STEP_NUM_TASKS", "4",
				  "SLURM_STEP_NODELIST", "n[1-2]", "SLURM_JOB_ID", "12",
				  "SLURM_STEP_ID", "1", "SLURMD_NODENAME", "n2", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_TCP && e.rank == 3 && e.size == 4,
	      "slurm: rc %d kind %d rank %d size %d (%s)", rc, e.kind, e.rank, e.size, err);
	CHECK(strcmp(e.master_addr, "n1") == 0, "slurm: MASTER_ADDR '%s', want n1", e.master_addr);
	CHECK(e.master_port == DL_MASTER_PORT_LO + (12 * 31 + 1) % (DL_MASTER_PORT_HI - DL_MASTER_PORT_LO + 1), "slurm: port %d", e.master_port);
	CHECK(strcmp(e.node, "n2") == 0, "slurm: node '%s', want n2", e.node);
	int port0 = e.master_port;
	setenv("SLURM_STEP_ID", "2", 1);
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.master_port != port0, "the next step must get another port (%d)", e.master_port);

	/* Slurm reserved ports for the step (MpiParams=ports=...): the first
	 * one is MASTER_PORT, whatever the ids; the job key stays the ids'. */
	setenv("SLURM_STEP_RESV_PORTS", "31001-31002", 1);
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.master_port == 31001, "reserved ports: rc %d port %d (%s)", rc,
	      e.master_port, err);
	CHECK(strstr(e.jobkey, "12.2") != NULL, "reserved ports: job key '%s'", e.jobkey);
	setenv("SLURM_STEP_RESV_PORTS", "31001-", 1);
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc < 0 && strstr(err, "SLURM_STEP_RESV_PORTS='31001-' is not a list of ports"),
	      "bad reserved ports: rc %d (%s)", rc, err);
	unsetenv("SLURM_STEP_RESV_PORTS");

	/* The rendezvous's candidate ports stop at 65535. */
	CHECK(dl_master_port_tries(29500) == DL_MASTER_PORT_TRIES && dl_master_port_tries(65535) == 1 &&
	      dl_master_port_tries(65530) == 6, "candidate ports: %d %d %d", dl_master_port_tries(29500),
	      dl_master_port_tries(65535), dl_master_port_tries(65530));
	/* SLURM_STEP_RESV_PORTS as Slurm writes it, and what it must refuse. */
	{
		static const struct { const char *in; int want; } rp[] = {
			{ "12000", 12000 }, { "12000-12001", 12000 }, { "12005,12000-12001", 12005 },
			{ "1-65535", 1 }, { "", -1 }, { "0", -1 }, { "65536", -1 }, { "12001-12000", -1 },
			{ "12000,", -1 }, { "12000-", -1 }, { "-1", -1 }, { " 12000", -1 }, { "12000x", -1 },
			{ "99999999999999999999", -1 }, { "[12000-12001]", -1 },
		};
		for (size_t i = 0; i < sizeof(rp) / sizeof(rp[0]); i++)
			CHECK(dl_resv_port_first(rp[i].in) == rp[i].want, "resv ports '%s': %d, want %d",
			      rp[i].in, dl_resv_port_first(rp[i].in), rp[i].want);
	}

	/* torchrun style, with Slurm's ids around: RANK/MASTER_* win. */
	env_set((const char *[]){ "RANK", "2", "WORLD_SIZE", "3", "MASTER_ADDR", "10.0.0.5",
				  "MASTER_PORT", "29500", "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "8",
				  "SLURM_JOB_ID", "5", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_TCP && e.rank == 2 && e.size == 3 &&
	      strcmp(e.master_addr, "10.0.0.5") == 0 && e.master_port == 29500,
	      "torchrun: rc %d rank %d size %d %s:%d (%s)", rc, e.rank, e.size, e.master_addr,
	      e.master_port, err);

	/* RANK/WORLD_SIZE under Slurm without MASTER_*: from the node list. */
	env_set((const char *[]){ "RANK", "1", "WORLD_SIZE", "2", "SLURM_JOB_ID", "5",
				  "SLURM_STEP_ID", "0", "SLURM_JOB_NODELIST", "gpu[07-08]", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && strcmp(e.master_addr, "gpu07") == 0, "rank env + nodelist: rc %d '%s' (%s)",
	      rc, e.master_addr, err);

	/* WORLD_SIZE=1: single, no rendezvous. */
	env_set((const char *[]){ "RANK", "0", "WORLD_SIZE", "1", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_SINGLE, "WORLD_SIZE=1: rc %d kind %d", rc, e.kind);

	/* DLJOB_WORLD forces. */
	env_set((const char *[]){ "DLJOB_WORLD", "single", "PMIX_RANK", "0", "PMIX_NAMESPACE", "x", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.kind == DL_WORLD_SINGLE, "DLJOB_WORLD=single: rc %d kind %d", rc, e.kind);

	/* The secret: 64 lowercase hex digits; the job key does not depend on
	 * how MASTER_ADDR is spelled. */
	char key1[64];
	env_set((const char *[]){ "RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "localhost",
				  "MASTER_PORT", "4000", "DLJOB_JOB_SECRET",
				  "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1eff",
				  NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && e.have_secret && e.secret[0] == 0 && e.secret[1] == 1 && e.secret[31] == 0xff,
	      "secret: rc %d have %d (%s)", rc, e.have_secret, err);
	snprintf(key1, sizeof(key1), "%s", e.jobkey);
	env_set((const char *[]){ "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1",
				  "MASTER_PORT", "4000", NULL });
	rc = dl_world_env(&e, environ, err, sizeof(err));
	CHECK(rc == 0 && !e.have_secret && strcmp(key1, e.jobkey) == 0,
	      "job key: '%s' vs '%s' (have_secret %d)", key1, e.jobkey, e.have_secret);

	/* Errors name the variable. */
	static const struct {
		const char *kv[11];
		const char *msg;
	} bad[] = {
		{ { "RANK", "0", NULL }, "RANK is set but WORLD_SIZE is not" },
		{ { "RANK", "x", "WORLD_SIZE", "2", NULL }, "RANK='x'" },
		{ { "RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "1", NULL },
		  "rank 2 is not below the world size 2 (RANK, WORLD_SIZE)" },
		{ { "SLURM_PROCID", "4", "SLURM_STEP_NUM_TASKS", "4", "SLURM_JOB_ID", "1", NULL },
		  "rank 4 is not below the world size 4 (SLURM_PROCID, SLURM_STEP_NUM_TASKS)" },
		/* Whole decimal numbers only: strtol's blanks and '+' are refused. */
		{ { "RANK", "+1", "WORLD_SIZE", "2", NULL }, "RANK='+1' is not an integer in [0, 1048575]" },
		{ { "RANK", "0", "WORLD_SIZE", " 2", NULL }, "WORLD_SIZE=' 2' is not an integer" },
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "-0", NULL },
		  "MASTER_PORT='-0' is not an integer in [1, 65535]" },
		/* A value with a control character is quoted escaped, never raw
		 * (the CHECK below refuses a newline in err). */
		{ { "DLJOB_WORLD", "tcp\n", NULL }, "DLJOB_WORLD='tcp\\n': expected single, pmix or tcp" },
		{ { "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_ID", "1", "SLURM_STEP_NODELIST",
		    "n[1-\n", NULL }, "SLURM_STEP_NODELIST='n[1-\\n': not a Slurm node list: 0x0a at byte 5 is "
		    "not a number" },
		/* The whole list is checked, with the old parsers' blind spots:
		 * a range of 10^12 hosts (n0 was taken), a bad later element. */
		{ { "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_ID", "1", "SLURM_STEP_NODELIST",
		    "n[0-999999999999]", NULL }, "'n[0-999999999999]': not a Slurm node list: the range "
		    "0-999999999999 at byte 3 has more than 1048576 hosts" },
		{ { "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_ID", "1", "SLURM_STEP_NODELIST",
		    "n1,m[2-", NULL }, "the '[' at byte 5 is not closed" },
		{ { "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_ID", "1", "SLURM_STEP_NODELIST",
		    "n1", "SLURM_STEP_RESV_PORTS", "1\x1b", NULL }, "SLURM_STEP_RESV_PORTS='1\\x1b' is not" },
		/* MASTER_ADDR that does not fit was cut (another host); one with
		 * a blank or a control character is no address. */
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", LONG_NAME, "MASTER_PORT", "1", NULL },
		  "is not a host name or address (printable, no blanks, at most 255 bytes)" },
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a b", "MASTER_PORT", "1", NULL },
		  "MASTER_ADDR='a b' is not a host name" },
		/* SLURMD_NODENAME goes into the hello, whose node peers check:
		 * it was cut at 63 bytes and sent with any byte in it. */
		{ { "SLURMD_NODENAME", "n1\tx", NULL }, "SLURMD_NODENAME='n1\\tx' is not a node name" },
		{ { "SLURMD_NODENAME", LONG_NAME, NULL }, "is not a node name (printable, no blanks, at most 63 bytes)" },
		/* The job key's ids: decimal, or the key was any bytes. */
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "1", "SLURM_JOB_ID", "x/y",
		    NULL }, "SLURM_JOB_ID='x/y' is not an integer" },
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "1", "SLURM_STEP_ID", "batch",
		    NULL }, "SLURM_STEP_ID='batch' is not an integer" },
		/* The PMIx world's knobs, checked in every world. */
		{ { "DLJOB_COLLECTIVES", "nccl", NULL }, "DLJOB_COLLECTIVES='nccl': expected mpi or ring" },
		{ { "DLJOB_WORLD_VERBOSE", "yes", NULL }, "DLJOB_WORLD_VERBOSE='yes' is not an integer in [0, 1]" },
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "1", NULL }, "MASTER_ADDR is not" },
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "70000", NULL },
		  "MASTER_PORT='70000'" },
		{ { "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_ID", "1", NULL },
		  "SLURM_STEP_NODELIST" },
		{ { "DLJOB_WORLD", "tcp", NULL }, "DLJOB_WORLD=tcp but neither" },
		{ { "DLJOB_WORLD", "pmix", NULL }, "PMIX_NAMESPACE is unset" },
		/* Sizes beyond any job are refused by name (issue 19, finding 9). */
		{ { "RANK", "0", "WORLD_SIZE", "2147483647", "MASTER_ADDR", "a", "MASTER_PORT", "1",
		    NULL }, "WORLD_SIZE='2147483647' is not an integer in [1, 1048576]" },
		{ { "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2000000", NULL },
		  "SLURM_STEP_NUM_TASKS='2000000' is not an integer in [1, 1048576]" },
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "1",
		    "DLJOB_JOB_SECRET", "abc", NULL }, "DLJOB_JOB_SECRET must be 64 lowercase hex" },
		{ { "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "1",
		    "DLJOB_JOB_SECRET",
		    "000102030405060708090A0B0C0D0E0F101112131415161718191a1b1c1d1e1f", NULL },
		  "(character 22 is not)" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		env_set(bad[i].kv);
		err[0] = 0;
		rc = dl_world_env(&e, environ, err, sizeof(err));
		CHECK(rc < 0 && strstr(err, bad[i].msg) && !strchr(err, '\n'),
		      "bad env %zu: rc %d, message '%s', want '%s'", i, rc, err, bad[i].msg);
	}

	if (failures) {
		fprintf(stderr, "test_world_env: %d check(s) failed\n", failures);
		return 1;
	}
	printf("test_world_env: all checks passed\n");
	return 0;
}
