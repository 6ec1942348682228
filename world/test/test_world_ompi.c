/* Who chooses Open MPI's TCP interface for the PMIx world
 * (world/world_ompi.c): the user's OMPI_MCA_ variables (even empty) and
 * the parameter files Open MPI reads win, and dljob then sets nothing; a
 * one-node step or a node on the same host gets Open MPI's defaults; the
 * parameter-file scanner on the forms Open MPI accepts.  (The network
 * chosen across real hosts: tests/cluster/test_netns.sh.) */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/check.h"
#include "world/world_int.h"

#define VAR "OMPI_MCA_btl_tcp_if_include"

static void scan(const char *text, int want)
{
	int got = dl_mca_file_names(text, strlen(text), "btl_tcp_if_include");
	CHECK(got == want, "'%s': %d, want %d", text, got, want);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

/* dl_ompi_tcp_if on envp: nothing chosen, VAR still unset, note has want. */
static void left_alone(char **envp, const char *other, const char *want)
{
	struct dl_ompi_env o;
	struct dl_ompi_if r;

	unsetenv(VAR);
	dl_ompi_env_parse(&o, envp);
	dl_ompi_tcp_if(&o, other, "n1", &r);
	CHECK(!r.chosen && !r.value[0] && !getenv(VAR), "chose '%s' (%s)", r.value, r.note);
	CHECK_CONTAINS(r.note, want);
}

/* test_world_ompi --scan FILE: 1 if the scanner says FILE sets
 * btl_tcp_if_include (by its name or its long name), else 0; for
 * test_mca_ompi.sh, which asks Open MPI's ompi_info the same. */
static int scan_file(const char *path)
{
	static char buf[1 << 21];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		perror(path);
		return 2;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	printf("%d\n", dl_mca_file_names(buf, n, "btl_tcp_if_include") ||
			   dl_mca_file_names(buf, n, "opal_btl_tcp_if_include"));
	return 0;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/dljob-ompi.XXXXXX", files[256], sys[300], path[300], home[300];
	struct dl_ompi_env o;

	if (argc == 3 && strcmp(argv[1], "--scan") == 0)
		return scan_file(argv[2]);

	/* The scanner: Open MPI's "key = value" lines. */
	scan("btl_tcp_if_include = eth0\n", 1);
	scan("btl_tcp_if_include=10.0.0.0/8", 1);
	scan("  \tbtl_tcp_if_include\t= eth0\r\n", 1);
	scan("btl_tcp_if_include =\n", 1);
	scan("a = 1\nbtl_tcp_if_include = eth0", 1);
	scan("# btl_tcp_if_include = eth0\n", 0);
	scan("btl_tcp_if_include_x = 1\nbtl_tcp_if_includ = 1\nx btl_tcp_if_include = 1\n", 0);
	scan("", 0);
	CHECK(dl_mca_file_names("btl_tcp_if_include", 17, "btl_tcp_if_include") == 0,
	      "read past the length");
	/* What Open MPI 4.1's keyval scanner and parser make of the rest: a
	 * key without '=' is an error there (nothing set), '\r' is no blank,
	 * '\f' and '\v' are. */
	scan("btl_tcp_if_include\n", 0);
	scan("btl_tcp_if_include\r = eth0\n", 0);
	scan("\vbtl_tcp_if_include\f=\veth0\n", 1);
	/* the parser starts over at the token after one it did not expect */
	scan("@btl_tcp_if_include = eth0\n", 1);
	scan("a@btl_tcp_if_include = eth0\n", 1);
	scan("a=b btl_tcp_if_include = eth0\n", 0);
	CHECK(dl_mca_file_names("\0btl_tcp_if_include = eth0\n", 27, "btl_tcp_if_include") == 1, "a NUL");
	/* comments: '#' and "//" to a newline (at the end of the file without
	 * one, '#' is a stray byte), block comments */
	scan("# btl_tcp_if_include = eth0", 1);
	scan("// btl_tcp_if_include = eth0\n", 0);
	scan("/*\nbtl_tcp_if_include = eth0\n# */ x = 1\n", 0);
	scan("/* x */ btl_tcp_if_include = eth0\n", 1);
	scan("/*\n# **/btl_tcp_if_include = eth0\n", 1);
	/* mpirun's forms: --mca and -mca set parameters, -x sets variables */
	scan("--mca btl_tcp_if_include eth0\n", 1);
	scan("-mca\tbtl_tcp_if_include 10.0.0.0/8", 1);
	scan("--mca a b --mca btl_tcp_if_include 'eth0' \n", 1);
	scan("--mca a #b @btl_tcp_if_include = eth0\n", 1);
	scan("--mca btl_tcp_if_include\n-x btl_tcp_if_include=1\n-x btl_tcp_if_include\n", 0);
	scan("-mca --mcabtl_tcp_if_include eth0\n", 1);

	/* The environment: the first variable that chooses, pointers into envp. */
	char *e1[] = { "HOME=/h", "OMPI_MCA_btl_tcp_if_exclude=", VAR "=eth1", "OPAL_SYSCONFDIR=/s",
		       "OMPI_MCA_mca_param_files=/f", NULL };
	dl_ompi_env_parse(&o, e1);
	CHECK(o.set_var && strcmp(o.set_var, VAR) == 0 && strcmp(o.set_val, "eth1") == 0,
	      "set_var %s", o.set_var ? o.set_var : "(null)");
	CHECK(o.home && strcmp(o.home, "/h") == 0 && o.sysconfdir && strcmp(o.sysconfdir, "/s") == 0 &&
	      !o.param_files && strcmp(o.param_files_syn, "/f") == 0, "home, sysconfdir, param_files");
	char *e2[] = { "HOME=", "OPAL_SYSCONFDIR=", "OMPI_MCA_mca_base_param_files=/a",
		       "OMPI_MCA_mca_param_files=/b", NULL };
	dl_ompi_env_parse(&o, e2);
	CHECK(!o.set_var && o.home && !*o.home && !o.sysconfdir && strcmp(o.param_files, "/a") == 0 &&
	      strcmp(o.param_files_syn, "/b") == 0, "empty HOME (Open MPI's too), empty OPAL_SYSCONFDIR "
	      "(its default), the name and its synonym");
	/* Open MPI looks the long names (opal_...) up first */
	char *e3[] = { "OMPI_MCA_mca_base_param_files=/a", "OMPI_MCA_opal_mca_base_param_files=/c",
		       "OMPI_MCA_opal_btl_tcp_if_exclude=docker0", NULL };
	dl_ompi_env_parse(&o, e3);
	CHECK(!o.home && strcmp(o.param_files, "/c") == 0 && o.set_var &&
	      strcmp(o.set_var, "OMPI_MCA_opal_btl_tcp_if_exclude") == 0, "long names: %s",
	      o.set_var ? o.set_var : "(null)");

	/* The user's word wins, even empty; an aggregate set too. */
	char *u1[] = { VAR "=dock0", NULL };
	left_alone(u1, "127.0.0.1", VAR "='dock0' from the environment");
	char *u2[] = { "OMPI_MCA_btl_tcp_if_exclude=", NULL };
	left_alone(u2, "127.0.0.1", "OMPI_MCA_btl_tcp_if_exclude='' from the environment");
	char *u3[] = { "OMPI_MCA_mca_base_envar_file_prefix=x", NULL };
	left_alone(u3, "127.0.0.1", "OMPI_MCA_mca_base_envar_file_prefix='x'");
	char *u4[] = { "OMPI_MCA_opal_btl_tcp_if_exclude=docker0", NULL };
	left_alone(u4, "127.0.0.1", "OMPI_MCA_opal_btl_tcp_if_exclude='docker0' from the environment");

	/* Parameter files: the user's list, ~/ in it, the site's, the override. */
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/a.conf", dir);
	write_file(path, "# mine\nbtl_base_verbose = 0\n");
	snprintf(home, sizeof(home), "%s/b.conf", dir);
	write_file(home, "btl_tcp_if_exclude = docker0\n");
	snprintf(files, sizeof(files), "OMPI_MCA_mca_base_param_files=~/b.conf,,%s/a.conf", dir);
	snprintf(home, sizeof(home), "HOME=%s", dir);
	char *f1[] = { files, home, NULL };
	left_alone(f1, "127.0.0.1", "b.conf sets btl_tcp_if_exclude");
	/* "~/" only at the start of the list and after ':' (not after ','),
	 * as Open MPI 4.1 */
	snprintf(files, sizeof(files), "OMPI_MCA_mca_base_param_files=%s/a.conf,~/b.conf", dir);
	left_alone(f1, "", "the step has no other node");
	/* the synonym's list is read as well, by long name too */
	snprintf(files, sizeof(files), "OMPI_MCA_mca_base_param_files=%s/a.conf", dir);
	char syn[300];
	snprintf(syn, sizeof(syn), "OMPI_MCA_opal_mca_param_files=%s/b.conf", dir);
	char *f4[] = { files, syn, home, NULL };
	left_alone(f4, "127.0.0.1", "b.conf sets btl_tcp_if_exclude");
	/* a long name in a file */
	snprintf(path, sizeof(path), "%s/a.conf", dir);
	write_file(path, "opal_btl_tcp_if_include = eth9\n");
	char *f5[] = { files, home, NULL };
	left_alone(f5, "127.0.0.1", "a.conf sets opal_btl_tcp_if_include");
	write_file(path, "# mine\nbtl_base_verbose = 0\n");
	/* The site's file and its override, in OPAL_SYSCONFDIR. */
	snprintf(sys, sizeof(sys), "OPAL_SYSCONFDIR=%s", dir);
	snprintf(files, sizeof(files), "OMPI_MCA_mca_base_param_files=%s/a.conf", dir);
	char *f2[] = { files, sys, home, NULL };
	left_alone(f2, "", "the step has no other node");
	snprintf(path, sizeof(path), "%s/openmpi-mca-params-override.conf", dir);
	write_file(path, "btl_tcp_if_include = ib0\n");
	left_alone(f2, "", "openmpi-mca-params-override.conf sets");
	/* "none" in effect: Open MPI reads no file, not the override either */
	char *f6[] = { "OMPI_MCA_mca_base_param_files=x", "OMPI_MCA_mca_param_files=none", sys, home, NULL };
	left_alone(f6, "", "the step has no other node");
	CHECK(unlink(path) == 0, "unlink %s", path);
	snprintf(path, sizeof(path), "%s/openmpi-mca-params.conf", dir);
	write_file(path, "btl_tcp_if_include = ib0\n");
	char *f3[] = { sys, home, NULL };
	left_alone(f3, "", "openmpi-mca-params.conf sets");
	CHECK(unlink(path) == 0, "unlink %s", path);
	/* a moved Open MPI (OPAL_PREFIX): its site files in PREFIX/etc too */
	char pfx[320], etc[320];
	snprintf(pfx, sizeof(pfx), "OPAL_PREFIX=%s", dir);
	snprintf(etc, sizeof(etc), "%s/etc", dir);
	CHECK(mkdir(etc, 0700) == 0, "mkdir %s", etc);
	snprintf(path, sizeof(path), "%s/etc/openmpi-mca-params-override.conf", dir);
	write_file(path, "btl_tcp_if_exclude = docker0\n");
	char *f7[] = { pfx, home, NULL };
	left_alone(f7, "", "etc/openmpi-mca-params-override.conf sets btl_tcp_if_exclude");
	CHECK(unlink(path) == 0 && rmdir(etc) == 0, "rm %s", path);
	/* A parameter file dljob cannot read whole: it cannot tell, so nothing. */
	snprintf(path, sizeof(path), "%s/.openmpi", dir);
	CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
	snprintf(path, sizeof(path), "%s/.openmpi/mca-params.conf", dir);
	CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
	left_alone(f3, "", "mca-params.conf is not a regular file");
	CHECK(rmdir(path) == 0, "rmdir %s", path);
	/* Nobody chose: one node, or the other node on this host. */
	left_alone(f3, "", "Open MPI's defaults (the step has no other node)");
	left_alone(f3, "127.0.0.1", "Open MPI's defaults (n1 reaches 127.0.0.1 through loopback");
	left_alone(f3, "no-such-host.invalid", "Open MPI's defaults: cannot tell the interface");

	snprintf(path, sizeof(path), "%s/.openmpi", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/a.conf", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/b.conf", dir);
	unlink(path);
	rmdir(dir);
	if (check_failures) {
		fprintf(stderr, "test_world_ompi: %d failure(s)\n", check_failures);
		return 1;
	}
	printf("test_world_ompi: OK\n");
	return 0;
}
