/* slurmstepd: per step, load the topology once (user_init, before the tasks
 * are forked); per task (task_init, inside the forked task after Slurm's own
 * binding) export the rank variables, pick the GPU/NICs/NUMA node, bind, and
 * in model mode replace the task with the site's runtime.  Failures here end
 * the task or the step, never slurmstepd. */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank/mapping.h"
#include "runtime/master.h"
#include "spank/plugin.h"

/* State of this step in this slurmstepd: set in init_post_opt and user_init,
 * inherited by the forked tasks. */
static struct {
	int active;                /* this step asked for dljob */
	uint32_t job, step;
	char out[PATH_MAX];
	struct dl_map *map;        /* NULL: no mapping (bind=none or topology failed) */
	char map_err[DL_ERR_LEN];
	char err[DL_ERR_LEN];      /* the step's options are wrong: fail every task */
} st;

int dl_remote_post_opt(spank_t sp, const struct dl_args *a, const char *args_err)
{
	struct dl_opts *o = dl_opts();
	char err[DL_ERR_LEN];

	st.active = 0;
	st.err[0] = '\0';
	if (spank_get_item(sp, S_JOB_STEPID, &st.step) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ID, &st.job) != ESPANK_SUCCESS)
		return 0;
	/* The batch script, the extern step and salloc's interactive step are
	 * not the user's tasks: sbatch's options reach them too (through the
	 * environment) but they must run untouched. */
	if (st.step == SLURM_BATCH_SCRIPT || st.step == SLURM_EXTERN_CONT ||
	    st.step == SLURM_INTERACTIVE_STEP)
		return 0;
	if (!o->given)
		return 0;
	/* A failed init_post_opt only makes srun print "launch failed" and
	 * exit 0; failing every task (dl_remote_task_init) gives the user the
	 * message and a non-zero exit. */
	if (args_err[0] || dl_opts_check(o, err, sizeof(err)) < 0) {
		snprintf(st.err, sizeof(st.err), "%s", args_err[0] ? args_err : err);
		slurm_error("dljob: %s", st.err);
		st.active = 1;
		return 0;
	}
	if (o->out[0])
		snprintf(st.out, sizeof(st.out), "%s", o->out);
	else
		snprintf(st.out, sizeof(st.out), "./dljob-%u", st.job);
	st.active = 1;
	return 0;
}

int dl_remote_user_init(spank_t sp, const struct dl_args *a)
{
	(void)sp;
	if (!st.active || st.err[0] || dl_opts()->bind_none)
		return 0;
	st.map = dl_map_open(a->topology[0] ? a->topology : NULL, st.map_err, sizeof(st.map_err));
	if (!st.map)
		slurm_error("dljob: no GPU/NIC/NUMA mapping: %s", st.map_err);
	return 0;
}

void dl_remote_exit(void)
{
	dl_map_close(st.map);
	st.map = NULL;
}

static int setenv_u(spank_t sp, const char *k, unsigned v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%u", v);
	return spank_setenv(sp, k, buf, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* The step's GPUs as node indexes, from Slurm's SLURM_STEP_GPUS, else a
 * numeric CUDA_VISIBLE_DEVICES.  Returns the count (0: none). */
static int step_gpus(spank_t sp, int *idx, char *cvd, size_t cvdlen)
{
	char buf[1024];
	int n = 0;

	cvd[0] = '\0';
	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", cvd, (int)cvdlen) != ESPANK_SUCCESS)
		cvd[0] = '\0';
	if (spank_getenv(sp, "SLURM_STEP_GPUS", buf, sizeof(buf)) == ESPANK_SUCCESS && buf[0])
		n = dl_map_parse_index_list(buf, idx, DL_MAP_MAX_GPUS);
	else if (cvd[0])
		n = dl_map_parse_index_list(cvd, idx, DL_MAP_MAX_GPUS);
	return n < 0 ? 0 : n;
}

/* Export the GPU, NIC and NUMA choice and bind this task.  Problems are
 * reported and the task runs unbound: a wrong guess must not stop a job. */
static void map_task(spank_t sp, const struct dl_args *a, const struct dl_opts *o,
		     unsigned rank, unsigned local, unsigned nlocal)
{
	int gpus[DL_MAP_MAX_GPUS], ng, live = !a->topology[0];
	char cvd[1024], err[DL_ERR_LEN], buf[DL_MAP_LIST + 8];
	const char *mem = "none";
	struct dl_map_task t;
	hwloc_bitmap_t allowed = NULL;
	cpu_set_t cur;

	ng = step_gpus(sp, gpus, cvd, sizeof(cvd));
	if (ng > 0) {
		/* NCCL needs every GPU of the step visible to see NVLink peers;
		 * DLJOB_GPU says which one is this task's.  If Slurm narrowed
		 * CUDA_VISIBLE_DEVICES per task, widen it to the step's GPUs. */
		int visible[DL_MAP_MAX_GPUS];

		if (!cvd[0] || dl_map_parse_index_list(cvd, visible, DL_MAP_MAX_GPUS) != ng) {
			size_t len = 0;
			for (int i = 0; i < ng && len < sizeof(cvd); i++)
				len += (size_t)snprintf(cvd + len, sizeof(cvd) - len, "%s%d", i ? "," : "", gpus[i]);
			spank_setenv(sp, "CUDA_VISIBLE_DEVICES", cvd, 1);
		}
		spank_setenv(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
		setenv_u(sp, "DLJOB_GPU", local % (unsigned)ng);
	}
	if (!st.map) {
		if (o->verbose)
			fprintf(stderr, "dljob: rank=%u local_rank=%u gpu=%d not bound: %s\n", rank, local,
				ng > 0 ? (int)(local % (unsigned)ng) : -1,
				o->bind_none ? "--dl-bind=none" : st.map_err);
		return;
	}
	if (sched_getaffinity(0, sizeof(cur), &cur) < 0 || !(allowed = hwloc_bitmap_alloc())) {
		fprintf(stderr, "dljob: rank=%u: cannot read the task's CPU set: %s\n", rank, strerror(errno));
		return;
	}
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &cur))
			hwloc_bitmap_set(allowed, (unsigned)c);
	if (dl_map_task(st.map, gpus, ng, (int)local, (int)nlocal, allowed, a->nic, &t, err, sizeof(err)) < 0) {
		/* E.g. the step's GPUs are not in the topology: run unbound. */
		slurm_verbose("dljob: rank=%u not bound: %s", rank, err);
		if (o->verbose)
			fprintf(stderr, "dljob: rank=%u local_rank=%u not bound: %s\n", rank, local, err);
		hwloc_bitmap_free(allowed);
		return;
	}
	if (t.hca[0]) {
		snprintf(buf, sizeof(buf), "=%s", t.hca);
		spank_setenv(sp, "NCCL_IB_HCA", buf, 0);   /* the user's own choice wins */
	}
	if (t.ifname[0]) {
		snprintf(buf, sizeof(buf), "=%s", t.ifname);
		spank_setenv(sp, "NCCL_SOCKET_IFNAME", buf, 0);
	}
	if (t.busid[0])
		spank_setenv(sp, "DLJOB_GPU_BUSID", t.busid, 1);
	spank_setenv(sp, "DLJOB_NUMA", t.numa, 1);

	/* t.cpuset is inside what Slurm allowed, so it only names CPUs that
	 * exist here even when the topology is an XML file of another node. */
	CPU_ZERO(&cur);
	for (int c = hwloc_bitmap_first(t.cpuset); c >= 0 && c < CPU_SETSIZE; c = hwloc_bitmap_next(t.cpuset, c))
		CPU_SET(c, &cur);
	if (CPU_COUNT(&cur) > 0 && sched_setaffinity(0, sizeof(cur), &cur) < 0)
		fprintf(stderr, "dljob: rank=%u: sched_setaffinity(%s): %s\n", rank, t.cpus, strerror(errno));
	spank_setenv(sp, "DLJOB_CPUS", t.cpus, 1);

	/* Memory: only with the live topology (an XML file's NUMA nodes are
	 * not this machine's).  Non-strict BIND is a preference, so a full
	 * node spills over instead of failing the job. */
	if (!live) {
		mem = "skipped(topology=)";
	} else if (!hwloc_bitmap_iszero(t.nodeset)) {
		if (hwloc_set_membind(dl_map_topology(st.map), t.nodeset, HWLOC_MEMBIND_BIND,
				      HWLOC_MEMBIND_BYNODESET) == 0)
			mem = t.numa;
		else
			mem = "failed";
	}
	if (o->verbose)
		fprintf(stderr, "dljob: rank=%u local_rank=%u gpu=%d busid=%s hca=%s ifname=%s numa=%s "
			"cpus=%s bound=%s mem=%s\n", rank, local, t.gpu, t.busid[0] ? t.busid : "-",
			t.hca[0] ? t.hca : "-", t.ifname[0] ? t.ifname : "-", t.numa[0] ? t.numa : "-",
			t.numa_cpus[0] ? t.numa_cpus : "-", t.cpus, mem);
	dl_map_task_clear(&t);
	hwloc_bitmap_free(allowed);
}

/* Replace this task with the runtime.  Only returns on failure, by ending
 * the task (this is the forked task, not slurmstepd).  Slurm >= 23.11 has
 * spank_prepend_task_argv, but it keeps the user's command as arguments of
 * the runtime; execve here works the same on every version (what it skips
 * is Slurm's TaskProlog, see spank-dljob(8)). */
static void exec_runtime(spank_t sp, const struct dl_args *a, const struct dl_opts *o)
{
	char *argv[16], **env = NULL;
	int n = 0;
	extern char **environ;

	argv[n++] = (char *)a->runtime;
	argv[n++] = "--model";
	argv[n++] = (char *)o->job;
	argv[n++] = "--data";
	argv[n++] = (char *)o->data;
	if (o->epochs[0]) {
		argv[n++] = "--epochs";
		argv[n++] = (char *)o->epochs;
	}
	if (o->batch[0]) {
		argv[n++] = "--batch";
		argv[n++] = (char *)o->batch;
	}
	if (o->lr[0]) {
		argv[n++] = "--lr";
		argv[n++] = (char *)o->lr;
	}
	argv[n++] = "--out";
	argv[n++] = st.out;
	argv[n] = NULL;

	/* The job's environment (with what we set above) is slurmstepd's
	 * copy, not this process's environ. */
	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env)
		env = environ;
	execve(a->runtime, argv, env);
	fprintf(stderr, "dljob: cannot run the runtime %s: %s\n", a->runtime, strerror(errno));
	slurm_error("dljob: cannot run the runtime %s: %s", a->runtime, strerror(errno));
	_exit(127);
}

int dl_remote_task_init(spank_t sp, const struct dl_args *a)
{
	const struct dl_opts *o = dl_opts();
	uint32_t rank = 0, world = 0, nlocal = 0;
	int local = 0;
	char nodes[8192], master[256];

	if (!st.active)
		return 0;
	/* The data path is checked here, in the task, because only the task
	 * is in the job's working directory (a relative --dl-data). */
	if (st.err[0] || dl_opts_check_data(dl_opts(), a, st.err, sizeof(st.err)) < 0) {
		fprintf(stderr, "dljob: %s\n", st.err);
		slurm_error("dljob: %s", st.err);
		return -1;
	}
	if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &world) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal) != ESPANK_SUCCESS) {
		slurm_error("dljob: cannot read the task's rank from Slurm");
		return -1;
	}
	if (spank_getenv(sp, "SLURM_STEP_NODELIST", nodes, sizeof(nodes)) != ESPANK_SUCCESS &&
	    spank_getenv(sp, "SLURM_NODELIST", nodes, sizeof(nodes)) != ESPANK_SUCCESS)
		nodes[0] = '\0';
	if (dl_hostlist_first(nodes, master, sizeof(master)) < 0) {
		slurm_error("dljob: cannot find the first node in SLURM_STEP_NODELIST='%s'", nodes);
		return -1;
	}
	if (setenv_u(sp, "RANK", rank) < 0 || setenv_u(sp, "LOCAL_RANK", (unsigned)local) < 0 ||
	    setenv_u(sp, "WORLD_SIZE", world) < 0 || setenv_u(sp, "LOCAL_WORLD_SIZE", nlocal) < 0 ||
	    spank_setenv(sp, "MASTER_ADDR", master, 1) != ESPANK_SUCCESS ||
	    setenv_u(sp, "MASTER_PORT", (unsigned)dl_master_port(st.job, st.step, a->port_lo, a->port_hi)) < 0) {
		slurm_error("dljob: cannot set the rank variables");
		return -1;
	}
	map_task(sp, a, o, rank, (unsigned)local, nlocal);
	if (!dl_opts_is_env(o))
		exec_runtime(sp, a, o);
	return 0;
}
