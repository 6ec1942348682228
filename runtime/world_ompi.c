/* Open MPI's TCP interface for the PMIx world (runtime/world_pmix.c).
 *
 * Left alone, Open MPI's TCP transport (the btl tcp component) offers its
 * peers every interface but loopback, and takes an interface with the same
 * address on every node (docker0's 172.17.0.1/16) for a way to its peer:
 * its first exchange then never completes.  So before MPI_Init, unless the
 * user or the site chose the interfaces, every rank sets
 * OMPI_MCA_btl_tcp_if_include to the network of the interface through which
 * this host reaches another node of the step: the choice the TCP world
 * makes (dl_listen_host, dl_connect_host: the route's source address to
 * that node), written as CIDR (10.0.0.0/24; the interface's name for IPv6,
 * which Open MPI 4.1's CIDR parser does not take).  The network, not the
 * name: it is the same on every node however the nodes name their
 * interfaces.
 *
 * Chosen already, and so left alone, when: OMPI_MCA_btl_tcp_if_include or
 * _if_exclude is set in the environment (even empty), or an aggregate
 * parameter set is (mca_base_param_file_prefix, mca_base_envar_file_prefix:
 * dljob cannot tell what they set); or a parameter file Open MPI reads
 * (OMPI_MCA_mca_base_param_files, else ~/.openmpi/mca-params.conf and the
 * site's openmpi-mca-params.conf, plus openmpi-mca-params-override.conf)
 * names btl_tcp_if_include or btl_tcp_if_exclude, or cannot be read whole.
 * Nothing is chosen either on a one-node step (no other node: its ranks
 * meet in shared memory, and Open MPI's defaults are right), nor when the
 * other node is reached through loopback (the nodes share this host).
 *
 * The OOB transport's oob_tcp_if_include is not Open MPI's concern here:
 * under srun --mpi=pmix the ranks start with the ess pmi component and
 * open no OOB (tests/cluster/test_netns.sh ran with oob_tcp_if_include
 * naming the same-address bridge: no effect). */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "runtime/optval.h"
#include "runtime/world_int.h"

/* A parameter file longer than this is not read: dljob cannot tell what it
 * sets, so it chooses nothing. */
#define MCA_FILE_MAX (1 << 20)

int dl_mca_file_names(const char *text, size_t len, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < len;) {
		size_t end = i;
		while (end < len && text[end] != '\n')
			end++;
		/* "  key = value", "key=value", "key": Open MPI's keyval syntax;
		 * '#' starts a comment line. */
		size_t k = i;
		while (k < end && (text[k] == ' ' || text[k] == '\t'))
			k++;
		size_t ke = k;
		while (ke < end && text[ke] != ' ' && text[ke] != '\t' && text[ke] != '=' &&
		       text[ke] != '\r' && text[ke] != '#')
			ke++;
		if (ke - k == nl && memcmp(text + k, name, nl) == 0)
			return 1;
		i = end + 1;
	}
	return 0;
}

/* 1 if the file at path names btl_tcp_if_include or _exclude, or cannot be
 * read whole (then why says so); 0 if it does not, or does not exist. */
static int file_chooses(const char *path, char *why, size_t whylen)
{
	char q[160], *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, rv = 1;

	why[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0; /* Open MPI skips it too */
		snprintf(why, whylen, "cannot read Open MPI's parameter file %s (%s)",
			 dl_optval_escape(path, q, sizeof(q)), strerror(errno));
		return 1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MCA_FILE_MAX) {
		snprintf(why, whylen, "Open MPI's parameter file %s is not a regular file of at most "
			 "%d bytes", dl_optval_escape(path, q, sizeof(q)), MCA_FILE_MAX);
		goto out;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		snprintf(why, whylen, "out of memory reading %s", dl_optval_escape(path, q, sizeof(q)));
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, whylen, "cannot read Open MPI's parameter file %s (%s)",
				 dl_optval_escape(path, q, sizeof(q)), n < 0 ? strerror(errno) : "cut short");
			goto out;
		}
		got += (size_t)n;
	}
	rv = dl_mca_file_names(buf, got, "btl_tcp_if_include") ||
	     dl_mca_file_names(buf, got, "btl_tcp_if_exclude");
	if (rv)
		snprintf(why, whylen, "%s sets btl_tcp_if_include or btl_tcp_if_exclude",
			 dl_optval_escape(path, q, sizeof(q)));
out:
	free(buf);
	close(fd);
	return rv;
}

/* file_chooses on dir/name; a path too long to build counts as choosing
 * (dljob cannot look). */
static int in_dir_chooses(const char *dir, const char *name, char *why, size_t whylen)
{
	char path[4200];
	int k = snprintf(path, sizeof(path), "%s/%s", dir, name);

	if (k < 0 || (size_t)k >= sizeof(path)) {
		snprintf(why, whylen, "the path of Open MPI's parameter file %s is longer than %zu bytes",
			 name, sizeof(path) - 1);
		return 1;
	}
	return file_chooses(path, why, whylen);
}

/* 1 if one of the parameter files Open MPI reads chooses the interfaces
 * (why: which), else 0. */
static int files_choose(const struct dl_ompi_env *o, char *why, size_t whylen)
{
	const char *sys = o->sysconfdir ? o->sysconfdir : DLJOB_OMPI_SYSCONFDIR;
	char path[4200];

	if (o->param_files) {
		/* The user's list replaces the default one ("none": no files);
		 * "~/" at the start is the home directory, as in Open MPI. */
		if (strcmp(o->param_files, "none") == 0)
			goto site_override;
		for (const char *p = o->param_files; *p;) {
			size_t n = strcspn(p, ",");
			const char *home = o->home ? o->home : "";
			int tilde = n >= 2 && p[0] == '~' && p[1] == '/';
			int k = snprintf(path, sizeof(path), "%s%.*s", tilde ? home : "",
					 (int)(tilde ? n - 1 : n), tilde ? p + 1 : p);
			if (k < 0 || (size_t)k >= sizeof(path)) {
				snprintf(why, whylen, "OMPI_MCA_mca_base_param_files names a path of more "
					 "than %zu bytes", sizeof(path) - 1);
				return 1;
			}
			if (n > 0 && file_chooses(path, why, whylen))
				return 1;
			p += n;
			if (*p)
				p++;
		}
	} else {
		const char *home = o->home;
		struct passwd pw, *pwp = NULL;
		char pwbuf[4096];
		/* Open MPI's home directory: HOME, else the password entry. */
		if (!home && getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
			home = pw.pw_dir;
		if ((home && in_dir_chooses(home, ".openmpi/mca-params.conf", why, whylen)) ||
		    in_dir_chooses(sys, "openmpi-mca-params.conf", why, whylen))
			return 1;
	}
site_override:
	/* Read whatever the list: its values beat the environment. */
	return in_dir_chooses(sys, "openmpi-mca-params-override.conf", why, whylen);
}

void dl_ompi_tcp_if(const struct dl_ompi_env *o, const char *other, const char *node,
		    struct dl_ompi_if *r)
{
	struct sockaddr_storage a;
	char ifname[IF_NAMESIZE + 1], e[384], q[96], at[INET6_ADDRSTRLEN];
	int prefix = 0;

	memset(r, 0, sizeof(*r));
	if (o->set_var) {
		snprintf(r->note, sizeof(r->note), "%s='%s' from the environment: dljob chose nothing",
			 o->set_var, dl_optval_escape(o->set_val, q, sizeof(q)));
		return;
	}
	if (files_choose(o, e, sizeof(e))) {
		snprintf(r->note, sizeof(r->note), "left to Open MPI's parameter files: %s", e);
		return;
	}
	if (!other || !*other) {
		snprintf(r->note, sizeof(r->note), "Open MPI's defaults (the step has no other node)");
		return;
	}
	if (dl_reach_if(other, ifname, sizeof(ifname), &a, &prefix, e, sizeof(e)) < 0) {
		snprintf(r->note, sizeof(r->note), "Open MPI's defaults: cannot tell the interface "
			 "to %s (%s)", other, e);
		return;
	}
	if (dl_is_loopback((struct sockaddr *)&a)) {
		snprintf(r->note, sizeof(r->note), "Open MPI's defaults (%s reaches %s through "
			 "loopback: the same host)", node, other);
		return;
	}
	if (a.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a;
		uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
		s4->sin_addr.s_addr = htonl(ntohl(s4->sin_addr.s_addr) & mask);
		dl_addr_text((struct sockaddr *)&a, at, sizeof(at));
		snprintf(r->value, sizeof(r->value), "%s/%d", at, prefix);
	} else {
		snprintf(r->value, sizeof(r->value), "%s", ifname);
	}
	if (setenv("OMPI_MCA_btl_tcp_if_include", r->value, 0) < 0) {
		snprintf(r->note, sizeof(r->note), "Open MPI's defaults: cannot set "
			 "OMPI_MCA_btl_tcp_if_include (%s)", strerror(errno));
		r->value[0] = '\0';
		return;
	}
	r->chosen = 1;
	snprintf(r->note, sizeof(r->note), "dljob set OMPI_MCA_btl_tcp_if_include=%s (%s, through "
		 "which %s reaches %s)", r->value, ifname, node, other);
}
