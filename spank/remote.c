/* slurmstepd: per step, read the step's working directory (relative
 * --dl-data/--dl-out are made absolute from it) and GPUs, and load the
 * topology once (user_init, before the tasks are forked); per task
 * (task_init, inside the forked task after Slurm's own binding) export the
 * rank variables, pick the GPU/NICs/NUMA node and bind.  In model mode the
 * plugin only checks and prepares: the task's command must be the site's
 * runtime, which Slurm itself execs after the rest of its task set-up
 * (limits, TMPDIR, later plugins, TaskProlog, SELinux, container), and the
 * checked --dl-* values reach it as DLJOB_* variables (spank-dljob(8), MODEL
 * MODE); those checks, and the order of a container plugin against
 * dljob.so, are spank/model.c.  Failures here end the task or the step,
 * never slurmstepd. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "spank/slurm_api.h"

#include "mapping/mapping.h"
#include "common/handoff.h"
#include "common/hostlist.h"
#include "common/master.h"
#include "spank/plugin.h"

/* State of this step in this slurmstepd: set in init_post_opt and user_init,
 * inherited by the forked tasks. */
static struct {
	int active;                /* this step asked for dljob */
	uint32_t job, step;
	/* The step's working directory on the host, as slurmstepd set it
	 * before user_init (srun's, or its --chdir; a batch script's):
	 * relative --dl-data and --dl-out are taken from it, before any
	 * container plugin moves a task. */
	char workdir[PATH_MAX];
	struct stat workdir_sb;
	char out[DL_PATH_MAX];     /* --dl-out made absolute (default: workdir/dljob-JOBID) */
	int out_relative;          /* ... from workdir */
	int ngpus;                 /* the step's GPUs on this node (Slurm's step-wide SLURM_STEP_GPUS) */
	int gpus[DL_MAP_MAX_GPUS]; /* their node indexes */
	char cvd[1024];            /* the step-wide CUDA_VISIBLE_DEVICES Slurm wrote, as it wrote it */
	struct dl_map *map;        /* NULL: no mapping (bind=none or topology failed) */
	struct dl_map_plan *plan;  /* the node's plan, computed once (user_init); NULL: no mapping */
	hwloc_bitmap_t within;     /* the step's CPUs the plan is made in (user_init); NULL: all */
	char within_desc[DL_ERR_LEN]; /* where they come from, for the table's title */
	char map_err[DL_ERR_LEN];
	char err[DL_ERR_LEN];      /* the step's options are wrong: fail every task */
	/* The user's own NCCL_IB_HCA / NCCL_SOCKET_IFNAME: what the step's
	 * environment held in user_init, before any task (and so before a
	 * container plugin's task_init put an image's values there). */
	int user_nic_set[2];
	char user_nic[2][512];
	int have_mntns;
	struct stat mntns;         /* slurmstepd's mount namespace (user_init) */
	/* With data_allow: the data directory as checked on the node in
	 * user_init, before any container plugin moved a task (its device
	 * and inode), or why it was refused there. */
	int data_known;
	struct stat data_sb;
	char data_err[DL_ERR_LEN];
} st;

/* The NIC variables: the user's value wins, else dljob's, never an image's. */
static const char *const nic_vars[2] = DL_NIC_VARS;

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
		dl_error(0, "%s", st.err);
		st.active = 1;
		return 0;
	}
	st.active = 1;
	return 0;
}

/* The step's GPUs on this node, before any task exists: the step-wide
 * values gres set in the step's environment.  A task's own values may be
 * narrowed to its GPU (--gpus-per-task, --gpu-bind) and, under
 * ConstrainDevices=yes, CUDA_VISIBLE_DEVICES counts from 0 within the
 * step: keeping Slurm's own step-wide string is right in every case. */
static void read_step_gpus(spank_t sp)
{
	char buf[1024];
	int n = -1;

	st.ngpus = 0;
	st.cvd[0] = '\0';
	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", st.cvd, sizeof(st.cvd)) != ESPANK_SUCCESS ||
	    dl_optval_has_ctl(st.cvd))
		st.cvd[0] = '\0';
	if (spank_getenv(sp, "SLURM_STEP_GPUS", buf, sizeof(buf)) == ESPANK_SUCCESS && buf[0])
		n = dl_map_parse_index_list(buf, st.gpus, DL_MAP_MAX_GPUS);
	else if (st.cvd[0])
		n = dl_map_parse_index_list(st.cvd, st.gpus, DL_MAP_MAX_GPUS);
	st.ngpus = n < 0 ? 0 : n;
	/* DLJOB_GPU is a position in CUDA_VISIBLE_DEVICES: the two lists must
	 * name the same GPUs, one entry each (Slurm writes them so). */
	if (st.ngpus > 0 && st.cvd[0]) {
		int entries = 1;

		for (const char *c = st.cvd; *c; c++)
			entries += *c == ',';
		if (entries != st.ngpus) {
			dl_error(0, "the step's CUDA_VISIBLE_DEVICES has %d entries and SLURM_STEP_GPUS %d: "
				 "no GPU variables set", entries, st.ngpus);
			st.ngpus = 0;
			st.cvd[0] = '\0';
		}
	}
}

/* Whether cpus are this machine's online CPUs (/sys/devices/system/cpu/
 * online, the kernel's list syntax). */
static int same_cpus(hwloc_const_bitmap_t cpus)
{
	char line[4096];
	hwloc_bitmap_t online = hwloc_bitmap_alloc();
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	int same = 0;

	if (f && online && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		same = dl_map_parse_cpu_list(line, online) > 0 && hwloc_bitmap_isequal(online, cpus);
	}
	if (f)
		fclose(f);
	hwloc_bitmap_free(online);
	return same;
}

/* The CPUs of this node that the step owns, for the plan (st.within, NULL:
 * the whole topology), and in st.within_desc where they come from.
 * Read in user_init, in slurmstepd before any task exists, from Slurm
 * 22.05 and 24.11's own sources (mgr.c _fork_all_tasks: task_g_pre_setuid,
 * then spank_user; 24.11 may run spank_user in a clone of slurmstepd,
 * which keeps its affinity):
 * - slurmstepd's CPU affinity.  task/cgroup with ConstrainCores=yes
 *   (task_cgroup_cpuset_create, from task_p_pre_setuid) has by then made
 *   the job's and the step's cpusets from xcpuinfo_abs_to_mac of their
 *   cores; on cgroup v1 it attaches slurmstepd to the step's cpuset (the
 *   step's CPUs exactly), on cgroup v2 slurmstepd stays in the step's
 *   slurm_processes leaf, under the job's cpuset (the job's CPUs: a
 *   superset when several steps share the node).  Without ConstrainCores
 *   it is slurmd's, usually every CPU: then it says nothing and is not
 *   used.  The kernel enforces it, so it is never wrong.
 * - S_STEP_ALLOC_CORES: the step's cores as Slurm's abstract numbers
 *   (socket-major over the node's Sockets x CoresPerSocket), which
 *   xcpuinfo_abs_to_mac maps through slurmd's hwloc block map to every
 *   hardware thread of each core; dl_map_slurm_cores does the same on the
 *   topology (this machine's is loaded whole, with the CPUs a cgroup
 *   disallows, as slurmd loads it).  Exact when slurm.conf describes the
 *   node as its hardware (slurmd -C); on a node configured otherwise
 *   Slurm's numbering differs, which cannot be seen from here: then the
 *   cpuset, where there is one, still bounds the plan, and a task binds
 *   within what Slurm gave it.  It is not placed when the topology has no
 *   cores, fewer than Slurm names, or lacks some of the machine's CPUs
 *   (offline ones: the numbering would shift).  This is what tells the
 *   step's CPUs without ConstrainCores (task/affinity alone: another job
 *   beside this step binds its tasks to other cores of the node).
 * The tasks' own affinity (task/affinity, set after user_init) is not
 * known here: a task still binds within what Slurm gave it
 * (dl_map_bound).  So the plan is made within both sources that are
 * known, and within the whole topology when neither is: conservative, and
 * said in the table's title.  Both number this machine's CPUs: with a
 * topology= file whose CPUs are not this machine's online CPUs (the file
 * of another machine, as in the tests) neither is used. */
static void read_step_cpus(spank_t sp, const struct dl_args *a)
{
	cpu_set_t aff;
	char *cores = NULL, err[DL_ERR_LEN], list[DL_MAP_LIST], q[256], from[2][DL_ERR_LEN] = { "", "" };
	hwloc_const_bitmap_t all = hwloc_get_root_obj(dl_map_topology(st.map))->cpuset;
	hwloc_bitmap_t w = hwloc_bitmap_dup(all), set = hwloc_bitmap_alloc();
	int used = 0;

	st.within = NULL;
	if (!w || !set) {
		snprintf(from[0], sizeof(from[0]), "out of memory");
		goto out;
	}
	if (a->topology[0] && !same_cpus(all)) {
		hwloc_bitmap_list_snprintf(list, sizeof(list), all);
		snprintf(from[0], sizeof(from[0]), "topology='s CPUs %s are not this machine's online CPUs", list);
		goto out;
	}
	/* 1. slurmstepd's affinity, when it is narrower than the machine. */
	if (sched_getaffinity(0, sizeof(aff), &aff) == 0) {
		hwloc_bitmap_zero(set);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &aff) && hwloc_bitmap_set(set, (unsigned)c) < 0)
				goto oom;
		hwloc_bitmap_list_snprintf(list, sizeof(list), set);
		if (!hwloc_bitmap_intersects(w, set)) {
			snprintf(from[0], sizeof(from[0]), "slurmstepd's cpuset %s is not in the topology", list);
		} else if (!hwloc_bitmap_isincluded(w, set)) {
			if (hwloc_bitmap_and(w, w, set) < 0)
				goto oom;
			used = 1;
			snprintf(from[0], sizeof(from[0]), "slurmstepd's cpuset %s", list);
		}
	}
	/* 2. Slurm's cores of the step, placed as slurmd places them. */
	if (spank_get_item(sp, S_STEP_ALLOC_CORES, &cores) == ESPANK_SUCCESS && cores && cores[0]) {
		dl_optval_escape(cores, q, sizeof(q));
		if (dl_map_slurm_cores(st.map, cores, set, err, sizeof(err)) < 0) {
			snprintf(from[1], sizeof(from[1]), "Slurm's cores %.200s not placed: %.500s", q, err);
		} else if (!hwloc_bitmap_intersects(w, set)) {
			hwloc_bitmap_list_snprintf(list, sizeof(list), set);
			snprintf(from[1], sizeof(from[1]), "Slurm's cores %.200s (CPUs %.500s) left out: outside the cpuset", q,
				 list);
		} else if (hwloc_bitmap_and(w, w, set) < 0) {
			goto oom;
		} else {
			used = 1;
			snprintf(from[1], sizeof(from[1]), "Slurm's cores %s", q);
		}
	}
	if (used && !hwloc_bitmap_isequal(w, all)) {
		st.within = w;
		w = NULL;
	}
	goto out;
oom:
	used = 0;
	snprintf(from[0], sizeof(from[0]), "out of memory");
	from[1][0] = '\0';
out:
	if (used) {
		/* Known: its CPUs, or all of them when the step has the node. */
		if (st.within)
			hwloc_bitmap_list_snprintf(list, sizeof(list), st.within);
		snprintf(st.within_desc, sizeof(st.within_desc), "%s%.200s (%.380s%s%.380s)", st.within ? "CPUs " : "all CPUs",
			 st.within ? list : "", from[0], from[0][0] && from[1][0] ? "; " : "", from[1]);
	} else {
		snprintf(st.within_desc, sizeof(st.within_desc), "all CPUs (the step's are not known%s%.450s%s%.450s)",
			 from[0][0] || from[1][0] ? ": " : "", from[0], from[0][0] && from[1][0] ? "; " : "", from[1]);
	}
	hwloc_bitmap_free(w);
	hwloc_bitmap_free(set);
}

/* With data_allow: check the data directory on the node itself (user_init,
 * slurmstepd's mount namespace, the user's effective ids) and keep its
 * device and inode, or why it was refused.  A task that a container plugin
 * listed before dljob has moved sees the container's file system, where a
 * user's mount can put another directory over an allowed path:
 * data_matches then compares. */
static void node_data(const struct dl_args *a)
{
	struct dl_opts *tmp;

	st.data_known = 0;
	st.data_err[0] = '\0';
	if (!a->data_allow[0])
		return;
	if (!(tmp = malloc(sizeof(*tmp)))) {
		snprintf(st.data_err, sizeof(st.data_err), "out of memory at %s:%d", __FILE__, __LINE__);
		return;
	}
	*tmp = *dl_opts();
	if (dl_opts_check_data(tmp, a, st.workdir, st.data_err, sizeof(st.data_err)) == 0 && tmp->data[0]) {
		char q[256];

		if (stat(tmp->data, &st.data_sb) == 0)
			st.data_known = 1;
		else
			snprintf(st.data_err, sizeof(st.data_err), "--dl-data=%s: %s",
				 dl_optval_escape(tmp->data, q, sizeof(q)), strerror(errno));
	}
	free(tmp);
}

/* data_allow where the task opens the data: the directory o->data (checked
 * by dl_opts_check_data in the task) must be the one checked on the node. */
static int data_matches(const struct dl_args *a, const struct dl_opts *o)
{
	struct stat sb;
	char q[256];

	if (!a->data_allow[0] || !o->data[0])
		return 0;
	if (!st.data_known) {
		dl_error(1, "%s, on the node outside any container (data_allow allows only the node's own "
			 "directories; mount the dataset into the container from one of them)",
			 st.data_err[0] ? st.data_err : "--dl-data: not checked on the node");
		return -1;
	}
	dl_optval_escape(o->data, q, sizeof(q));
	if (stat(o->data, &sb) < 0) {
		dl_error(1, "--dl-data=%s: %s", q, strerror(errno));
		return -1;
	}
	if (sb.st_dev != st.data_sb.st_dev || sb.st_ino != st.data_sb.st_ino) {
		dl_error(1, "--dl-data=%s: another directory than the node's, which data_allow allowed, is at that "
			 "path in the task (a container mount over it?); mount the node's directory there, or "
			 "give --dl-data the path the dataset is mounted at", q);
		return -1;
	}
	return 0;
}

int dl_remote_user_init(spank_t sp, const struct dl_args *a)
{
	uint32_t nlocal = 0;
	char rel[64], q[256], q2[256];
	const struct dl_opts *o = dl_opts();

	if (!st.active || st.err[0])
		return 0;
	/* slurmstepd is in the step's working directory now (mgr.c chdir
	 * before spank_user in Slurm 22.05 and 24.11; /tmp when that
	 * directory is missing on the node, as for the tasks). */
	if (!getcwd(st.workdir, sizeof(st.workdir)) || stat(st.workdir, &st.workdir_sb) < 0) {
		snprintf(st.err, sizeof(st.err), "cannot read the step's working directory: %s", strerror(errno));
		dl_error(0, "%s", st.err);
		return 0;
	}
	snprintf(rel, sizeof(rel), "dljob-%u", st.job);
	st.out_relative = o->out[0] != '/';
	if (dl_optval_path_abs(st.workdir, o->out[0] ? o->out : rel, st.out, sizeof(st.out)) < 0) {
		snprintf(st.err, sizeof(st.err), "--dl-out=%s: longer than %d bytes from the step's working directory %s",
			 dl_optval_escape(o->out[0] ? o->out : rel, q, sizeof(q)), DL_PATH_MAX - 1,
			 dl_optval_escape(st.workdir, q2, sizeof(q2)));
		dl_error(0, "%s", st.err);
		return 0;
	}
	for (int i = 0; i < 2; i++)
		st.user_nic_set[i] = spank_getenv(sp, nic_vars[i], st.user_nic[i], sizeof(st.user_nic[i])) ==
			ESPANK_SUCCESS && !dl_optval_has_ctl(st.user_nic[i]);
	st.have_mntns = stat("/proc/self/ns/mnt", &st.mntns) == 0;
	node_data(a);
	read_step_gpus(sp);
	/* The admin's topology= must load, whatever the step's --dl-bind: a
	 * wrong file fails the step with the key named, never silently. */
	if (a->topology[0]) {
		st.map = dl_map_open(a->topology, st.map_err, sizeof(st.map_err));
		if (!st.map) {
			snprintf(st.err, sizeof(st.err), "plugstack.conf: topology=: %.900s", st.map_err);
			dl_error(0, "%s", st.err);
			return 0;
		}
	}
	if (dl_opts()->bind_none)
		return 0;
	if (!st.map && !(st.map = dl_map_open(NULL, st.map_err, sizeof(st.map_err)))) {
		dl_error(0, "no GPU/NIC/NUMA mapping: %s", st.map_err);
		return 0;
	}
	/* The node's plan, once for all its tasks (each applies its row). */
	if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal) != ESPANK_SUCCESS) {
		snprintf(st.map_err, sizeof(st.map_err), "cannot read the step's local task count");
		dl_error(0, "no GPU/NIC/NUMA mapping: %s", st.map_err);
		return 0;
	}
	read_step_cpus(sp, a);
	st.plan = dl_map_plan(st.map, st.gpus, st.ngpus, NULL, (int)nlocal, st.within, a->nic, st.map_err,
			      sizeof(st.map_err));
	if (!st.plan)
		dl_error(0, "no GPU/NIC/NUMA mapping: %s", st.map_err);
	return 0;
}

void dl_remote_exit(void)
{
	dl_map_plan_free(st.plan);
	st.plan = NULL;
	hwloc_bitmap_free(st.within);
	st.within = NULL;
	dl_map_close(st.map);
	st.map = NULL;
}

static int setenv_u(spank_t sp, const char *k, unsigned v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%u", v);
	return spank_setenv(sp, k, buf, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* Whether Slurm's cgroup/v2 confines this task's devices (called from
 * task_init, as the step's user, for a task bound to fewer GPUs than the
 * step's).  On v2 there is no devices controller (/proc/self/cgroup has
 * the one line "0::/path"): ConstrainDevices=yes is an eBPF program
 * (BPF_CGROUP_DEVICE) on the job's, step's and task's cgroups, which no
 * cgroup file shows, and which only root may query (BPF_PROG_QUERY);
 * Slurm 22.05 moves the task into its task cgroup after
 * task_init_privileged, so root in the task cannot query it either.  The
 * filter itself answers: access(2) checks a device node against it (the
 * kernel's inode_permission, devcgroup_inode_permission) without opening
 * the driver.  Confined: some NVIDIA GPU node /dev/nvidia<N> is refused
 * with EPERM and fewer than the step's GPUs are allowed.  Not chosen:
 * reading ConstrainDevices from cgroup.conf (its path is unknown here,
 * configless nodes have none under /etc), or open(2) (it wakes a real
 * GPU's driver). */
static int v2_devices_confined(unsigned local)
{
	char line[4096];
	int v2 = 0, allowed = 0, denied = 0;
	DIR *d;
	struct dirent *e;
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::/", 4) == 0)
			v2 = v2 < 0 ? -1 : 1;
		else if (strstr(line, "devices"))
			v2 = -1; /* cgroup v1's devices controller: not v2 */
	fclose(f);
	if (v2 != 1 || !(d = opendir("/dev")))
		return 0;
	while ((e = readdir(d))) {
		struct stat sb;
		const char *n = e->d_name + 6;

		if (strncmp(e->d_name, "nvidia", 6) != 0 || !*n || strspn(n, "0123456789") != strlen(n) ||
		    fstatat(dirfd(d), e->d_name, &sb, 0) < 0 || !S_ISCHR(sb.st_mode))
			continue;
		if (faccessat(dirfd(d), e->d_name, R_OK | W_OK, AT_EACCESS) == 0)
			allowed++;
		else if (errno == EPERM)
			denied++;
	}
	closedir(d);
	slurm_debug("dljob: cgroup v2: task %u may open %d of /dev/nvidia<N>, %d refused by the device filter, "
		    "step GPUs %d", local, allowed, denied, st.ngpus);
	return denied > 0 && allowed < st.ngpus;
}

/* Whether Slurm confines this task's devices: with ConstrainDevices=yes on
 * cgroup v1, task/cgroup puts each task of a step in a devices cgroup
 * .../task_<local> before its task_init, allowing only the GPUs it bound
 * the task to (src/plugins/task/cgroup/task_cgroup_devices.c in 22.05); on
 * cgroup v2, v2_devices_confined. */
static int devices_confined(unsigned local)
{
	char line[4096], want[32];
	int found = 0;
	FILE *f;

	if (v2_devices_confined(local))
		return 1;
	if (!(f = fopen("/proc/self/cgroup", "re")))
		return 0;
	snprintf(want, sizeof(want), "/task_%u", local);
	while (!found && fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *path, *save = NULL;
		size_t pl, wl = strlen(want);

		if (!ctl || !(path = strchr(ctl + 1, ':')))
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		pl = strlen(path);
		if (pl < wl || strcmp(path + pl - wl, want) != 0)
			continue;
		for (char *c = strtok_r(ctl + 1, ",", &save); c; c = strtok_r(NULL, ",", &save))
			if (strcmp(c, "devices") == 0)
				found = 1;
	}
	fclose(f);
	return found;
}

/* This task's GPU as an index in the step's list: the GPU Slurm bound it
 * to (its own SLURM_STEP_GPUS narrowed by --gpus-per-task or --gpu-bind),
 * else local % ngpus.  -1 when Slurm bound the task and confines its
 * devices: the task can open only its own GPUs, which Slurm 22.05 numbers
 * from 0 in both its CUDA_VISIBLE_DEVICES and its SLURM_STEP_GPUS, so
 * neither says which of the node's GPUs it is. */
static int task_gpu(spank_t sp, unsigned local)
{
	char buf[1024];
	int mine[DL_MAP_MAX_GPUS], n;

	if (spank_getenv(sp, "SLURM_STEP_GPUS", buf, sizeof(buf)) == ESPANK_SUCCESS && buf[0] &&
	    (n = dl_map_parse_index_list(buf, mine, DL_MAP_MAX_GPUS)) > 0 && n < st.ngpus) {
		if (devices_confined(local))
			return -1;
		for (int i = 0; i < st.ngpus; i++)
			if (st.gpus[i] == mine[0])
				return i;
	}
	return (int)(local % (unsigned)st.ngpus);
}

/* The node's table, printed once per node (by local task 0) under
 * --dl-bind=...,verbose: the same table as `dljob topo`. */
static void print_table(spank_t sp, const struct dl_args *a, unsigned nlocal)
{
	char title[2048], host[256];

	/* Slurm's name of the node (several slurmd may share a host). */
	if ((spank_getenv(sp, "SLURMD_NODENAME", host, sizeof(host)) != ESPANK_SUCCESS || dl_optval_has_ctl(host)) &&
	    gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	snprintf(title, sizeof(title), "mapping of %u task%s on %s, step GPUs %.200s, topology %.200s, within %.500s",
		 nlocal, nlocal == 1 ? "" : "s", host, st.ngpus ? st.cvd[0] ? st.cvd : "(see SLURM_STEP_GPUS)" : "none",
		 a->topology[0] ? a->topology : "of this machine", st.within_desc);
	dl_map_plan_print(stderr, st.plan, title);
}

/* Export the GPU, NIC and NUMA choice and bind this task.  Problems are
 * reported and the task runs unbound: a wrong guess must not stop a job. */
static void map_task(spank_t sp, const struct dl_args *a, const struct dl_opts *o,
		     unsigned rank, unsigned local, unsigned nlocal)
{
	int gpu = -1, live = !a->topology[0];
	char err[DL_ERR_LEN], buf[DL_MAP_LIST + 8], bound[DL_MAP_LIST];
	const char *mem = "none", *note = "";
	const struct dl_map_task *t;
	struct dl_map_plan *own = NULL;
	hwloc_bitmap_t allowed = NULL, cpus = NULL;
	cpu_set_t cur;

	if (st.ngpus > 0) {
		/* Every task sees all the step's GPUs of its node (NCCL needs
		 * them for NVLink/P2P between the tasks), in Slurm's own
		 * step-wide CUDA_VISIBLE_DEVICES; DLJOB_GPU says which one is
		 * this task's, as an index in that list.  Unless Slurm confines
		 * the task's devices to its own GPUs: the others cannot be
		 * opened, so a wider list would only name GPUs it cannot use. */
		gpu = task_gpu(sp, local);
		if (gpu >= 0 && st.cvd[0])
			spank_setenv(sp, "CUDA_VISIBLE_DEVICES", st.cvd, 1);
		spank_setenv(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
		/* Confined: Slurm's own narrowed CUDA_VISIBLE_DEVICES stays,
		 * and the task's GPU is its first entry. */
		setenv_u(sp, DL_HANDOFF(GPU), gpu >= 0 ? (unsigned)gpu : 0);
	}
	if (!st.plan) {
		if (o->verbose)
			fprintf(stderr, "dljob: rank=%u local_rank=%u gpu=%d not bound: %s\n", rank, local, gpu,
				o->bind_none ? "--dl-bind=none" : st.map_err);
		return;
	}
	if (o->verbose && local == 0)
		print_table(sp, a, nlocal);
	t = dl_map_plan_task(st.plan, (int)local);
	if (!t || t->gpu != gpu) {
		/* Slurm bound this task to another GPU than the plan's
		 * local % GPUs, or confines its devices (its GPU is unknown:
		 * every task of the step is then mapped as a task without GPU):
		 * the plan again, with this task's own GPU. */
		int *tg = calloc(nlocal ? nlocal : 1, sizeof(*tg));

		for (unsigned r = 0; tg && r < nlocal; r++)
			tg[r] = gpu < 0 ? -1 : r == local ? gpu : (int)(r % (unsigned)st.ngpus);
		if (!tg || !(own = dl_map_plan(st.map, st.gpus, st.ngpus, tg, (int)nlocal, st.within, a->nic, err,
							   sizeof(err)))) {
			if (!tg)
				snprintf(err, sizeof(err), "out of memory");
			free(tg);
			slurm_verbose("dljob: rank=%u not bound", rank);
			if (o->verbose)
				fprintf(stderr, "dljob: rank=%u local_rank=%u not bound: %s\n", rank, local, err);
			return;
		}
		free(tg);
		t = dl_map_plan_task(own, (int)local);
		note = gpu < 0 ? " (devices confined: mapped without GPU)" : " (Slurm's GPU binding: mapped again)";
	}
	if (sched_getaffinity(0, sizeof(cur), &cur) < 0 || !(allowed = hwloc_bitmap_alloc()) ||
	    !(cpus = hwloc_bitmap_alloc())) {
		fprintf(stderr, "dljob: rank=%u: cannot read the task's CPU set: %s\n", rank, strerror(errno));
		goto out;
	}
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &cur))
			hwloc_bitmap_set(allowed, (unsigned)c);
	/* Slurm's own allocation still restricts the plan's CPUs. */
	if (dl_map_bound(t, allowed, cpus) < 0) {
		fprintf(stderr, "dljob: rank=%u: out of memory\n", rank);
		goto out;
	}
	hwloc_bitmap_list_snprintf(bound, sizeof(bound), cpus);
	if (a->nic)
		for (int i = 0; i < 2; i++) {
			const char *mine = i == 0 ? t->hca : t->ifname;

			/* The user's own choice wins (dl_remote_task_init
			 * re-asserts it), then dljob's; an image's never. */
			if (st.user_nic_set[i])
				continue;
			snprintf(buf, sizeof(buf), "=%s", mine);
			if (mine[0])
				spank_setenv(sp, nic_vars[i], buf, 1);
			else
				spank_unsetenv(sp, nic_vars[i]);
		}
	if (t->busid[0])
		spank_setenv(sp, DL_HANDOFF(GPU_BUSID), t->busid, 1);
	spank_setenv(sp, DL_HANDOFF(NUMA), t->numa, 1);

	/* cpus is inside what Slurm allowed, so it only names CPUs that
	 * exist here even when the topology is an XML file of another node. */
	CPU_ZERO(&cur);
	for (int c = hwloc_bitmap_first(cpus); c >= 0 && c < CPU_SETSIZE; c = hwloc_bitmap_next(cpus, c))
		CPU_SET(c, &cur);
	if (CPU_COUNT(&cur) > 0 && sched_setaffinity(0, sizeof(cur), &cur) < 0)
		fprintf(stderr, "dljob: rank=%u: sched_setaffinity(%s): %s\n", rank, bound, strerror(errno));
	spank_setenv(sp, DL_HANDOFF(CPUS), bound, 1);

	/* Memory: only with the live topology (an XML file's NUMA nodes are
	 * not this machine's).  Non-strict BIND is a preference, so a full
	 * node spills over instead of failing the job. */
	if (!live) {
		mem = "skipped(topology=)";
	} else if (!hwloc_bitmap_iszero(t->nodeset)) {
		if (hwloc_set_membind(dl_map_topology(st.map), t->nodeset, HWLOC_MEMBIND_BIND,
				      HWLOC_MEMBIND_BYNODESET) == 0)
			mem = t->numa;
		else
			mem = "failed";
	}
	/* This task's row as applied: the table's columns, then what Slurm's
	 * allocation left of its CPUs (bound) and its memory policy. */
	if (o->verbose)
		fprintf(stderr, "dljob: rank=%u local_rank=%u gpu=%d busid=%s hca=%s ifname=%s numa=%s "
			"cpus=%s%s bound=%s mem=%s%s\n", rank, local, t->gpu, t->busid[0] ? t->busid : "-",
			t->hca[0] ? t->hca : "-", t->ifname[0] ? t->ifname : "-", t->numa[0] ? t->numa : "-",
			t->cpus[0] ? t->cpus : "-", t->shared ? "(shared)" : "", bound, mem, note);
out:
	dl_map_plan_free(own);
	hwloc_bitmap_free(allowed);
	hwloc_bitmap_free(cpus);
}

/* Ends the step on every node, as `scancel JOB.STEP` does (slurmctld
 * signals every node's tasks with SIGKILL), for a refusal only some nodes
 * can see.  Called from task_init, in the task, as the step's user, who may
 * cancel their own step; slurmstepd itself is never signalled by it.  A
 * failure is logged: the other nodes then stop at their own timeout. */
static void kill_step(void)
{
	int rc;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	slurm_step_id_t id = { .job_id = st.job, .step_id = st.step, .step_het_comp = NO_VAL };

	rc = slurm_kill_job_step(&id, SIGKILL, 0);
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
	rc = slurm_kill_job_step(st.job, st.step, SIGKILL, 0);
#else
	rc = slurm_kill_job_step(st.job, st.step, SIGKILL);
#endif
	if (rc != SLURM_SUCCESS)
		dl_error(1, "cannot end step %u.%u on the other nodes (%s): their tasks stop at their own timeout",
			 st.job, st.step, slurm_strerror(errno));
}

/* The step's shape must be one world with rank 0 on its first node (the
 * MASTER_ADDR every node derives from SLURM_STEP_NODELIST on its own).  Two
 * shapes break that, and are refused on the nodes that can see it:
 * - a heterogeneous step (srun ... : ...): each component is a step of its
 *   own to slurmstepd (ranks from 0, its own task count) while Slurm's
 *   SLURM_STEP_NUM_TASKS counts all of them, so the components would form
 *   separate worlds on one MASTER_ADDR;
 * - rank 0 elsewhere than on the step's first node (node id 0, the first of
 *   SLURM_STEP_NODELIST), as --distribution=arbitrary does with a host file
 *   that does not start with that node: only the node holding rank 0 and
 *   the first node can see it (slurmstepd knows no other node's ranks, and
 *   srun's SLURM_DISTRIBUTION and SLURM_STEP_TASKS_PER_NODE do not say
 *   where rank 0 is), so *whole_step is set: the step must be ended on
 *   every node (kill_step), or the others would wait for rank 0 until
 *   their rendezvous timeout.
 * -1 with one line in err. */
static int check_shape(spank_t sp, uint32_t world, uint32_t nlocal, const char *master, int *whole_step,
		       char *err, size_t errlen)
{
	char buf[32], host[256], *end;
	uint32_t nodeid = 0;
	int has0 = 0;

	if (spank_getenv(sp, "SLURM_STEP_NUM_TASKS", buf, sizeof(buf)) == ESPANK_SUCCESS) {
		unsigned long n;

		errno = 0;
		n = strtoul(buf, &end, 10);
		if (errno == 0 && end != buf && !*end && n != world)
			return dl_errf(err, errlen, "a heterogeneous step (srun ... : ..., or --het-group=0,1) is "
				       "not supported: this component has %u of the step's %lu tasks and would be a world of its own; "
				       "run one srun per world (srun --het-group=N), each with its own --dl-*",
				       world, n);
	}
	if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS)
		return dl_errf(err, errlen, "cannot read the node's id in the step from Slurm");
	for (uint32_t l = 0; l < nlocal; l++) {
		uint32_t g = 1;

		if (spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, l, &g) != ESPANK_SUCCESS)
			return dl_errf(err, errlen, "cannot read the rank of local task %u from Slurm", l);
		has0 |= g == 0;
	}
	if ((nodeid == 0) == has0)
		return 0;
	*whole_step = 1;
	if ((spank_getenv(sp, "SLURMD_NODENAME", host, sizeof(host)) != ESPANK_SUCCESS || dl_optval_has_ctl(host)) &&
	    gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	return dl_errf(err, errlen, "rank 0 %s%s%s on the step's first node %s (MASTER_ADDR): a task layout "
		       "that does not start on the first node (--distribution=arbitrary with a host file, "
		       "SLURM_HOSTFILE, whose first line is not %s) is not supported; list %s first",
		       has0 ? "runs on this node (" : "does not run", has0 ? host : "", has0 ? "), not" : "", master, master, master);
}

int dl_remote_task_init(spank_t sp, const struct dl_args *a)
{
	const struct dl_opts *o = dl_opts();
	uint32_t rank = 0, world = 0, nlocal = 0;
	int local = 0, whole_step = 0;
	char master[256], resv[256];

	if (!st.active)
		return 0;
	/* The data path is checked here, in the task, where it is opened
	 * (inside the container when a container plugin ran before dljob); a
	 * relative one is taken from the step's working directory on the host. */
	if (st.err[0] || dl_opts_check_data(dl_opts(), a, st.workdir, st.err, sizeof(st.err)) < 0) {
		dl_error(1, "%s", st.err);
		return -1;
	}
	if (data_matches(a, o) < 0)
		return -1;
	/* Only the plugin sets these (common/handoff.h, DL_HO_CLEAR). */
	for (size_t i = 0; i < DL_HO_COUNT; i++)
		if (dl_handoff_vars[i].flags & DL_HO_CLEAR)
			spank_unsetenv(sp, dl_handoff_vars[i].name);
	if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &world) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal) != ESPANK_SUCCESS) {
		dl_error(1, "cannot read the task's rank from Slurm");
		return -1;
	}
	char why[DL_ERR_LEN];
	if (dl_spank_master_addr(sp, master, sizeof(master), why, sizeof(why)) < 0 ||
	    check_shape(sp, world, nlocal, master, &whole_step, why, sizeof(why)) < 0) {
		dl_error(1, "%s", why);
		if (whole_step && local == 0)
			kill_step();
		return -1;
	}
	/* MASTER_PORT: the step's first reserved port (MpiParams=ports=...:
	 * Slurm gives every step on a node its own), else one derived from the
	 * ids, which another step may hold (dljob's runtime then moves on, a
	 * PyTorch rank 0 fails with "address already in use"). */
	int port = dl_master_port(st.job, st.step, a->port_lo, a->port_hi);
	spank_err_t rc = spank_getenv(sp, "SLURM_STEP_RESV_PORTS", resv, sizeof(resv));
	if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_NOEXIST) {
		dl_error(1, "SLURM_STEP_RESV_PORTS cannot be read (%s)", spank_strerror(rc));
		return -1;
	}
	if (rc == ESPANK_SUCCESS && resv[0] && (port = dl_resv_port_first(resv)) < 0) {
		char q[256];
		dl_error(1, "SLURM_STEP_RESV_PORTS='%s' is not a list of ports", dl_optval_escape(resv, q, sizeof(q)));
		return -1;
	}
	if (setenv_u(sp, "RANK", rank) < 0 || setenv_u(sp, "LOCAL_RANK", (unsigned)local) < 0 ||
	    setenv_u(sp, "WORLD_SIZE", world) < 0 || setenv_u(sp, "LOCAL_WORLD_SIZE", nlocal) < 0 ||
	    spank_setenv(sp, "MASTER_ADDR", master, 1) != ESPANK_SUCCESS ||
	    setenv_u(sp, "MASTER_PORT", (unsigned)port) < 0) {
		dl_error(1, "cannot set the rank variables");
		return -1;
	}
	/* The step's secret, from srun's launch request (spank/local.c):
	 * whatever --export passed.  Without one (options that reached this
	 * step only through the environment) the environment's stays. */
	if (o->secret_bad) {
		dl_error(1, "the step's secret in the launch request is not %d lowercase hex digits", DL_SECRET_HEX);
		return -1;
	}
	if (o->secret[0] && spank_setenv(sp, DL_HANDOFF(JOB_SECRET), o->secret, 1) != ESPANK_SUCCESS) {
		dl_error(1, "cannot set %s", DL_HANDOFF(JOB_SECRET));
		return -1;
	}
	/* The NIC variables are the user's, else dljob's (map_task), else
	 * none: a value that a container plugin run before dljob put there
	 * from an image goes, also when there is no mapping (the task then
	 * runs unbound and NCCL picks its own devices). */
	if (a->nic && !o->bind_none)
		for (int i = 0; i < 2; i++)
			if (!st.user_nic_set[i])
				spank_unsetenv(sp, nic_vars[i]);
	map_task(sp, a, o, rank, (unsigned)local, nlocal);
	/* The user's own NIC choice, over whatever a container plugin that
	 * ran before dljob put there from an image. */
	for (int i = 0; i < 2; i++)
		if (st.user_nic_set[i])
			spank_setenv(sp, nic_vars[i], st.user_nic[i], 1);
	const struct dl_model_ctx m = {
		.workdir = st.workdir, .workdir_sb = &st.workdir_sb, .out = st.out, .out_relative = st.out_relative,
		.user_nic_set = st.user_nic_set, .have_mntns = st.have_mntns, .mntns = &st.mntns,
	};
	if (!dl_opts_is_env(o) && dl_model_prepare_runtime(sp, a, o, &m) < 0)
		return -1;
	return dl_model_container_after_dljob(sp, a, o, !dl_opts_is_env(o), &m);
}
