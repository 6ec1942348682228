/* slurmstepd, model mode and container plugins: what dl_remote_task_init
 * (spank/remote.c) does last in each task.  In model mode the task's
 * command must name the site's runtime= (found the way slurmstepd will
 * find it), and the runtime must be loadable where the task now is (inside
 * a container when a container plugin listed before dljob moved it);
 * Slurm itself then execs it (take_command up to Slurm 23.02,
 * spank_prepend_task_argv from 23.11 on), with the checked --dl-* values as
 * DLJOB_* variables.  A container plugin listed after dljob.so (pyxis)
 * would replace dljob's variables: from 23.11 on they are re-asserted when
 * the task starts, before that the step is refused.  The step's state
 * comes from remote.c as a struct dl_model_ctx (spank/plugin.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spank/slurm_api.h"

#include "common/handoff.h"
#include "spank/plugin.h"

#if DL_HAVE_PREPEND_ARGV
/* The NIC variables: the user's value wins, else dljob's, never an image's. */
static const char *const nic_vars[2] = DL_NIC_VARS;

/* What dljob sets in a task and re-asserts after a container plugin that
 * runs later (prepend_argv): every variable an image could also set.
 * DLJOB_JOB_SECRET is not among them (it would show in the task's argv). */
static const char *const task_vars[] = {
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", DL_HANDOFF(GPU), DL_HANDOFF(GPU_BUSID), DL_HANDOFF(NUMA),
	DL_HANDOFF(CPUS), "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", NULL,
};
#endif

/* The longest PATH searched for the task's command: MAX_ARG_STRLEN, the
 * longest string execve(2) passes, so a longer one never reaches a task. */
#define DL_TASK_PATH_MAX (32 * 4096)

/* The file the task's command names, found the way slurmstepd will find it
 * when it execs the task (task.c _build_path in Slurm 22.05: as it is if
 * absolute, from the working directory if it starts with '.', else the
 * first PATH entry holding a non-directory of that name).  PATH is read
 * whole (module systems make ones of many KiB); an entry whose file name
 * would not fit in path (len, PATH_MAX: the kernel refuses longer names) is
 * skipped, never looked up cut.  where says how it was looked up, for a
 * message: "on the task's PATH=..." (escaped, cut to fit), or "" for a
 * path.  0: found, in path and *sb; 1: not found (path is the command's
 * word, *sb_errno why for a path); -1: PATH cannot be read, one line in
 * err. */
static int task_command(spank_t sp, char *path, size_t len, struct stat *sb, int *sb_errno, char *where,
			size_t wlen, char *err, size_t errlen)
{
	char **argv = NULL, *env_path = NULL, q[512];
	int argc = 0, rv = 1;
	spank_err_t rc;

	path[0] = '\0';
	where[0] = '\0';
	*sb_errno = ENOENT;
	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv || !argv[0])
		return 1;
	if (argv[0][0] == '/' || argv[0][0] == '.') {
		if ((size_t)snprintf(path, len, "%s", argv[0]) >= len)
			return 1;
		if (stat(path, sb) == 0)
			return 0;
		*sb_errno = errno;
		return 1;
	}
	rc = dl_spank_getenv_whole(sp, "PATH", DL_TASK_PATH_MAX, &env_path);
	if (rc == ESPANK_NOSPACE)
		return dl_errf(err, errlen, "PATH longer than %d bytes: the task's command is not looked up in it",
			       DL_TASK_PATH_MAX);
	if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_NOEXIST)
		return dl_errf(err, errlen, "cannot read the task's PATH (%s)", spank_strerror(rc));
	if (env_path) {
		/* Escaped, and cut with "..." when longer than q. */
		dl_optval_escape(env_path, q, sizeof(q));
		snprintf(where, wlen, "on the task's PATH=%s", q);
	} else {
		snprintf(where, wlen, "(the task has no PATH)");
	}
	for (char *save = NULL, *d = env_path ? strtok_r(env_path, ":", &save) : NULL; d;
	     d = strtok_r(NULL, ":", &save)) {
		if ((size_t)snprintf(path, len, "%s/%s", d, argv[0]) >= len)
			continue;
		if (stat(path, sb) == 0 && !S_ISDIR(sb->st_mode)) {
			rv = 0;
			break;
		}
	}
	free(env_path);
	if (rv)
		snprintf(path, len, "%s", argv[0]);
	return rv;
}

/* Whether the step uses a container plugin: pyxis's --container-image or
 * --container-name (slurmstepd knows every plugin's options, and SPANK
 * looks them up by name).  The option structs must outlive the lookup:
 * SPANK keeps a pointer to them. */
static int container_requested(spank_t sp)
{
	static struct spank_option opts[] = {
		{ "container-image", "IMAGE", "", 1, 0, NULL },
		{ "container-name", "NAME", "", 1, 0, NULL },
	};

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		char *arg = NULL;

		if (spank_option_getopt(sp, &opts[i], &arg) == ESPANK_SUCCESS)
			return 1;
	}
	return 0;
}

/* Whether a plugin listed before dljob has already moved this task into
 * another mount namespace (pyxis joins the container's in its task_init):
 * the task's is no longer the one slurmstepd had in user_init. */
static int task_moved(const struct dl_model_ctx *m)
{
	struct stat now;

	if (!m->have_mntns || stat("/proc/self/ns/mnt", &now) < 0)
		return 0;
	return now.st_dev != m->mntns->st_dev || now.st_ino != m->mntns->st_ino;
}

/* Inside a container (a container plugin listed before dljob moved the
 * task): whether the runtime can be loaded there.  Its dynamic loader is
 * asked to list the runtime's libraries without running it
 * (LD_TRACE_LOADED_OBJECTS=1, what ldd does), as the task's user, in the
 * task's namespaces.  0 with missing[0] == '\0' when all are found; else
 * missing names what is not (libraries, or the ELF interpreter).  -1 only
 * when the check itself could not run (then nothing is said). */
static int runtime_loadable(const char *runtime, char *missing, size_t len)
{
	int fd[2], status = 0;
	char out[16384];
	size_t got = 0;
	pid_t pid;

	missing[0] = '\0';
	if (pipe2(fd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		char *const argv[] = { (char *)runtime, NULL };
		char *const envp[] = { "LD_TRACE_LOADED_OBJECTS=1", NULL };

		if (dup2(fd[1], 1) < 0 || (null >= 0 && (dup2(null, 0) < 0 || dup2(null, 2) < 0)))
			_exit(126);
		execve(runtime, argv, envp);
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(fd[1]);
	for (;;) {
		ssize_t n = read(fd[0], out + got, sizeof(out) - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(out) - 1)
			break;
	}
	close(fd[0]);
	out[got] = '\0';
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !got) {
		snprintf(missing, len, "its interpreter (the dynamic loader, or a script's #! program)");
		return 0;
	}
	/* "\tlibfoo.so.1 => not found" */
	for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *arrow = strstr(line, " => not found");
		size_t used = strlen(missing);

		if (!arrow)
			continue;
		*arrow = '\0';
		line += strspn(line, " \t");
		snprintf(missing + used, len - used, "%s%s", used ? ", " : "", line);
	}
	return 0;
}

/* Whether the task's command names the site's runtime.  The word "dljob"
 * itself (no '/') means the site's runtime, whatever the task's PATH finds
 * (a container plugin may have replaced PATH with the image's, which lacks
 * the site's directory or holds an image's own dljob): Slurm then execs
 * runtime= exactly (see take_command).  Any other command must be the same
 * file (device and inode, whatever name or link led to it), found the way
 * slurmstepd will find it; with spank_prepend_task_argv also any command
 * named dljob, since Slurm then runs runtime= whatever the word finds.
 * 0 with why: one line saying what the command is instead. */
static int command_is_runtime(spank_t sp, const struct dl_args *a, const struct stat *rt, char *why,
			      size_t whylen, char *err, size_t errlen)
{
	struct stat cmd;
	char **argv = NULL, path[PATH_MAX], where[600], q[256], q2[256];
	int argc = 0, found, cmd_errno;

	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv || !argv[0]) {
		snprintf(why, whylen, "cannot be read from Slurm");
		return 0;
	}
	if (strcmp(argv[0], "dljob") == 0)
		return 1;
	found = task_command(sp, path, sizeof(path), &cmd, &cmd_errno, where, sizeof(where), err, errlen);
	if (found < 0)
		return -1;
	if (found == 0 && cmd.st_dev == rt->st_dev && cmd.st_ino == rt->st_ino)
		return 1;
#if DL_HAVE_PREPEND_ARGV
	{
		const char *base = strrchr(argv[0], '/');

		base = base ? base + 1 : argv[0];
		if (strcmp(base, "dljob") == 0)
			return 1;
	}
#endif
	dl_optval_escape(argv[0], q, sizeof(q));
	if (found == 0)
		dl_errf(why, whylen, "'%s' is %s%s%s, not the runtime %s", q, dl_optval_escape(path, q2, sizeof(q2)),
			where[0] ? ", found " : "", where, a->runtime);
	else if (where[0])
		dl_errf(why, whylen, "'%s' is not found %s", q, where);
	else
		dl_errf(why, whylen, "'%s': %s", q, strerror(cmd_errno));
	return 0;
}

#if !DL_HAVE_PREPEND_ARGV
/* Up to Slurm 23.02 slurmstepd execs the task's argv, which outside
 * --multi-prog is the array S_JOB_ARGV gives (job->argv; task.c resolves a
 * word without '/' on the task's PATH after every plugin and the
 * TaskProlog).  Set its first word, in this task's own copy of slurmstepd's
 * memory (task_init runs in the forked task), to runtime=, absolute: Slurm
 * then execs exactly the file checked, in whatever namespace the plugins
 * left the task, and no later change of PATH can pick another. */
static int take_command(spank_t sp, const struct dl_args *a)
{
	char **argv = NULL, *rt;
	int argc = 0;

	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv || !argv[0] ||
	    !(rt = strdup(a->runtime))) {
		dl_error(1, "cannot set the task's command to the runtime %s", a->runtime);
		return -1;
	}
	argv[0] = rt; /* the task execs (or exits) with it: never freed */
	return 0;
}
#endif

/* Model mode: the task's command must name the site's runtime.  Up to
 * Slurm 23.02, dljob makes the task's first word runtime= itself
 * (take_command) and Slurm execs it after the rest of its task set-up;
 * from 23.11 on, dljob prepends runtime= to
 * the command line (spank_prepend_task_argv), so Slurm execs exactly the
 * site's runtime, after every plugin, in whatever namespace they left the
 * task (a container), and the user's word "dljob" becomes its argv[1]
 * (DLJOB_PREPENDED=1 tells the runtime to skip it).  The checked values go
 * to it as DLJOB_*; it takes them as its --model, --data, ... options. */
int dl_model_prepare_runtime(spank_t sp, const struct dl_args *a, const struct dl_opts *o,
			     const struct dl_model_ctx *m)
{
	struct stat rt;
	char why[DL_ERR_LEN], err[DL_ERR_LEN];
	int is_rt;

	if (stat(a->runtime, &rt) < 0) {
		/* A container plugin listed before dljob has moved the task:
		 * the runtime must be mounted into the container. */
		if (task_moved(m))
			dl_error(1, "cannot run the runtime %s inside the container: %s; mount its installation "
				 "into the container at the same path (an enroot mounts.d entry, or "
				 "--container-mounts)", a->runtime, strerror(errno));
		else
			dl_error(1, "cannot run the runtime %s: %s", a->runtime, strerror(errno));
		return -1;
	}
	if (task_moved(m)) {
		char missing[1024];

		if (runtime_loadable(a->runtime, missing, sizeof(missing)) == 0 && missing[0]) {
			dl_error(1, "cannot run the runtime %s inside the container: %s not found there; mount "
				 "the runtime's libraries into the container (an enroot mounts.d entry, or "
				 "--container-mounts)", a->runtime, missing);
			return -1;
		}
	}
	if ((is_rt = command_is_runtime(sp, a, &rt, why, sizeof(why), err, sizeof(err))) < 0) {
		dl_error(1, "%s", err);
		return -1;
	}
	if (!is_rt) {
		dl_error(1, "--dl-job=%s runs the site's runtime %s: give the command as the word dljob "
			 "(srun --dl-job=%s ... dljob); the command %s", o->job, a->runtime, o->job, why);
		return -1;
	}
#if !DL_HAVE_PREPEND_ARGV
	if (take_command(sp, a) < 0)
		return -1;
#endif
	/* The directory checked against data_allow, for the runtime to
	 * compare with the one it opens (runtime/cli.c check_data_id). */
	struct stat data_sb;
	char data_id[64];

	if (stat(o->data, &data_sb) < 0) {
		dl_error(1, "--dl-data=%s: %s", o->data, strerror(errno));
		return -1;
	}
	snprintf(data_id, sizeof(data_id), "%llu:%llu", (unsigned long long)data_sb.st_dev,
		 (unsigned long long)data_sb.st_ino);
	/* A relative (or the default) --dl-out is under the step's working
	 * directory on the host: the runtime checks, where it runs (possibly
	 * inside a container), that this is still that directory
	 * (runtime/cli.c check_out_base), so the output reaches the host. */
	char out_base[PATH_MAX + 64];

	snprintf(out_base, sizeof(out_base), "%llu:%llu:%s", (unsigned long long)m->workdir_sb->st_dev,
		 (unsigned long long)m->workdir_sb->st_ino, m->workdir);
	if (spank_setenv(sp, DL_HANDOFF(MODEL), o->job, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, DL_HANDOFF(DATA), o->data, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, DL_HANDOFF(DATA_ID), data_id, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, DL_HANDOFF(OUT), m->out, 1) != ESPANK_SUCCESS ||
	    (m->out_relative && spank_setenv(sp, DL_HANDOFF(OUT_BASE), out_base, 1) != ESPANK_SUCCESS) ||
	    (o->epochs[0] && spank_setenv(sp, DL_HANDOFF(EPOCHS), o->epochs, 1) != ESPANK_SUCCESS) ||
	    (o->batch[0] && spank_setenv(sp, DL_HANDOFF(BATCH), o->batch, 1) != ESPANK_SUCCESS) ||
	    (o->lr[0] && spank_setenv(sp, DL_HANDOFF(LR), o->lr, 1) != ESPANK_SUCCESS) ||
	    (DL_HAVE_PREPEND_ARGV && spank_setenv(sp, DL_HANDOFF(PREPENDED), "1", 1) != ESPANK_SUCCESS)) {
		dl_error(1, "cannot set the DLJOB_* variables for the runtime");
		return -1;
	}
	return 0;
}

#if DL_HAVE_PREPEND_ARGV
/* Prepend to the task's command line: runtime= in model mode, and, when a
 * container plugin runs after dljob (late), first "/usr/bin/env
 * NAME=VALUE..." with dljob's values of task_vars, so they replace what
 * the plugin put in the task's environment from the image (pyxis sets the
 * image's variables over the task's).  /usr/bin/env is the image's. */
static int prepend_argv(spank_t sp, const struct dl_args *a, int model, int late, const struct dl_model_ctx *m)
{
	const char *argv[2 * (sizeof(task_vars) / sizeof(task_vars[0])) + 4];
	char *owned[sizeof(task_vars) / sizeof(task_vars[0])];
	int argc = 0, nowned = 0, rc = 0;

	if (late) {
		argv[argc++] = "/usr/bin/env";
		/* NIC variables dljob leaves unset must not come from the
		 * image either (options before the assignments). */
		for (int i = 0; i < 2; i++) {
			char tmp[8];

			if (a->nic && !m->user_nic_set[i] &&
			    spank_getenv(sp, nic_vars[i], tmp, sizeof(tmp)) == ESPANK_ENV_NOEXIST) {
				argv[argc++] = "-u";
				argv[argc++] = nic_vars[i];
			}
		}
		for (const char *const *v = task_vars; *v; v++) {
			char val[4096];
			size_t n;
			spank_err_t e = spank_getenv(sp, *v, val, sizeof(val));

			if (e == ESPANK_ENV_NOEXIST)
				continue;
			if (e != ESPANK_SUCCESS) {
				dl_error(1, "cannot read back %s to re-assert it after the container plugin: %s",
					 *v, spank_strerror(e));
				rc = -1;
				goto out;
			}
			n = strlen(*v) + 1 + strlen(val) + 1;
			if (!(owned[nowned] = malloc(n))) {
				dl_error(1, "out of memory at %s:%d", __FILE__, __LINE__);
				rc = -1;
				goto out;
			}
			snprintf(owned[nowned], n, "%s=%s", *v, val);
			argv[argc++] = owned[nowned++];
		}
	}
	if (model)
		argv[argc++] = a->runtime;
	argv[argc] = NULL;
	if (argc > 0 && spank_prepend_task_argv(sp, argc, argv) != ESPANK_SUCCESS) {
		dl_error(1, "cannot prepend %s to the task's command line", argv[0]);
		rc = -1;
	}
out:
	for (int i = 0; i < nowned; i++)
		free(owned[i]);
	return rc;
}
#endif

/* With a container plugin listed after dljob.so, that plugin's task_init
 * runs after dljob's: it puts the image's variables over dljob's and moves
 * the task into the container.  From Slurm 23.11 on, dljob then re-asserts
 * its values when the task starts (prepend_argv); before, the step is
 * refused with the fix. */
int dl_model_container_after_dljob(spank_t sp, const struct dl_args *a, const struct dl_opts *o, int model,
				   const struct dl_model_ctx *m)
{
	char **argv = NULL;
	int argc = 0;

	if (!container_requested(sp) || task_moved(m)) {
#if DL_HAVE_PREPEND_ARGV
		return model ? prepend_argv(sp, a, 1, 0, m) : 0;
#else
		return 0;
#endif
	}
#if DL_HAVE_PREPEND_ARGV
	/* env takes a first word with '=' for one more assignment. */
	if (!model && spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argc > 0 && argv &&
	    argv[0] && strchr(argv[0], '=')) {
		char q[256];

		dl_error(1, "--dl-job=env in a container: the command '%s' holds '='",
			 dl_optval_escape(argv[0], q, sizeof(q)));
		return -1;
	}
	return prepend_argv(sp, a, model, 1, m);
#else
	(void)argc;
	(void)argv;
	dl_error(1, "--dl-job=%s with a container (--container-image/--container-name): the container "
		 "plugin is listed after dljob.so in plugstack.conf, so it would replace dljob's %s; "
		 "list dljob.so after it (pyxis), or use Slurm 23.11 or later (this dljob.so is built "
		 "for Slurm %s)", o->job, model ? "runtime check and variables" : "variables",
		 DLJOB_SLURM_VERSION);
	return -1;
#endif
}
