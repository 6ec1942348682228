/* A SPANK plugin for the tests only: a stand-in for pyxis, NOT pyxis.  It
 * plays the parts of pyxis (0.24, pyxis_slurmstepd.c slurm_spank_task_init)
 * that matter to dljob, in its task_init, in every task:
 *   --container-image=DIR (pyxis's option name; DIR stands for the image):
 *   - the "image's environment", DIR/environment (NAME=VALUE lines), is set
 *     over the task's with overwrite, as pyxis's spank_import_container_env
 *     sets the container's whole environment: an image's PATH replaces the
 *     task's (enroot's container PATH is the image's), NGC images' NCCL_*
 *     and enroot's 50-slurm-pytorch hook's MASTER_PORT reach tasks; then,
 *     when PYTORCH_VERSION is set, RANK and LOCAL_RANK become SLURM_PROCID
 *     and SLURM_LOCALID (pyxis's pytorch_setup);
 *   - the task moves to a new mount namespace (pyxis joins the
 *     container's), which is what tells dljob that a container plugin has
 *     already run for the task;
 *   --container-mounts=SRC:DST[:ro] (one pair): SRC is bind-mounted over DST
 *     in that namespace (a user's own container mount), read-only with :ro,
 *     as the task's user (an ordinary user's task makes a user namespace
 *     first, as enroot mounts as the user);
 *   --container-workdir=DIR: the task then changes to DIR (pyxis changes to
 *     the image's working directory, or this option's).
 * No image, no rootfs, no enroot: paths are the host's.  Listed before or
 * after dljob.so in the test's plugstack.conf (tests/slurm/test_spank_container.sh). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <slurm/spank.h>

SPANK_PLUGIN(dljob_test_container, 1);

static int opt_cb(int val, const char *arg, int remote)
{
	(void)val;
	(void)arg;
	(void)remote;
	return 0;
}

static struct spank_option image_opt = {
	"container-image", "DIR", "test stand-in for pyxis: DIR/environment", 1, 0, opt_cb
};

static struct spank_option mounts_opt = {
	"container-mounts", "SRC:DST[:ro]", "test stand-in for pyxis: bind-mount SRC over DST", 1, 0, opt_cb
};

static struct spank_option workdir_opt = {
	"container-workdir", "DIR", "test stand-in for pyxis: the task's working directory", 1, 0, opt_cb
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_option_register(sp, &image_opt) != ESPANK_SUCCESS ||
	    spank_option_register(sp, &mounts_opt) != ESPANK_SUCCESS ||
	    spank_option_register(sp, &workdir_opt) != ESPANK_SUCCESS) {
		slurm_error("dljob_test_container: cannot register its options");
		return -1;
	}
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	char *dir = NULL, path[4096], line[4096], val[4096];
	FILE *f;

	(void)ac;
	(void)av;
	if (spank_option_getopt(sp, &image_opt, &dir) != ESPANK_SUCCESS || !dir || !dir[0])
		return 0;
	snprintf(path, sizeof(path), "%s/environment", dir);
	if ((f = fopen(path, "re"))) {
		while (fgets(line, sizeof(line), f)) {
			char *eq = strchr(line, '=');

			line[strcspn(line, "\n")] = '\0';
			if (!eq)
				continue;
			*eq = '\0';
			if (spank_setenv(sp, line, eq + 1, 1) != ESPANK_SUCCESS) {
				slurm_error("dljob_test_container: cannot set %s", line);
				fclose(f);
				return -1;
			}
		}
		fclose(f);
	}
	/* pyxis's pytorch_setup, after the import. */
	if (spank_getenv(sp, "PYTORCH_VERSION", val, sizeof(val)) == ESPANK_SUCCESS) {
		static const char *const remap[][2] = { { "SLURM_PROCID", "RANK" }, { "SLURM_LOCALID", "LOCAL_RANK" } };

		for (int i = 0; i < 2; i++)
			if (spank_getenv(sp, remap[i][0], val, sizeof(val)) != ESPANK_SUCCESS ||
			    spank_setenv(sp, remap[i][1], val, 1) != ESPANK_SUCCESS) {
				slurm_error("dljob_test_container: pytorch: cannot set %s", remap[i][1]);
				return -1;
			}
	}
	/* An ordinary user's task needs a user namespace for its own mount
	 * namespace, as pyxis joins the container's user namespace first. */
	if (unshare(geteuid() == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) < 0) {
		slurm_error("dljob_test_container: unshare: %m");
		return -1;
	}
	if (spank_option_getopt(sp, &mounts_opt, &dir) == ESPANK_SUCCESS && dir && strchr(dir, ':')) {
		char src[4096], dst[4096], *flags;
		const char *d = strchr(dir, ':') + 1;

		snprintf(src, sizeof(src), "%.*s", (int)(d - 1 - dir), dir);
		snprintf(dst, sizeof(dst), "%s", d);
		if ((flags = strchr(dst, ':')))
			*flags++ = '\0';
		/* Private first: nothing mounted here may reach the host's
		 * namespace. */
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount(src, dst, NULL, MS_BIND, NULL) < 0 ||
		    (flags && !strcmp(flags, "ro") &&
		     mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)) {
			slurm_error("dljob_test_container: mount %s over %s: %m", src, dst);
			return -1;
		}
	}
	if (spank_option_getopt(sp, &workdir_opt, &dir) == ESPANK_SUCCESS && dir && dir[0] && chdir(dir) < 0) {
		slurm_error("dljob_test_container: chdir %s: %m", dir);
		return -1;
	}
	return 0;
}
