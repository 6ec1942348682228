/* Open MPI's TCP interface for the PMIx world (world/world_pmix.c).
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
 * dljob cannot tell what they set), each by its name or its long name
 * (OMPI_MCA_opal_btl_tcp_if_include, which Open MPI looks up first); or a
 * parameter file Open MPI reads (OMPI_MCA_mca_base_param_files and its
 * synonym mca_param_files, else ~/.openmpi/mca-params.conf and the site's
 * openmpi-mca-params.conf, plus openmpi-mca-params-override.conf) sets
 * btl_tcp_if_include or btl_tcp_if_exclude (or their long names) as Open
 * MPI 4.1 reads it (dl_mca_file_names), or cannot be read whole.
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
#include "common/optval.h"
#include "world/world_int.h"

/* A parameter file longer than this is not read: dljob cannot tell what it
 * sets, so it chooses nothing. */
#define MCA_FILE_MAX (1 << 20)

/* Open MPI 4.1's parameter-file reader, emulated, so that "does the file
 * set this parameter" is answered as Open MPI answers it: the flex scanner
 * of opal/util/keyval/keyval_lex.l (its rules and start states; the
 * longest match wins, the earlier rule on a tie, trailing context counted;
 * an unmatched byte is skipped, flex's default rule) and the parser of
 * opal/util/keyval_parse.c, which on a token it does not expect drops that
 * token and starts over at the next one.  So a parameter is set by
 * "key = value" (or "key" alone) wherever a key token may start: after
 * blanks (' ', '\t', '\f', '\v'), after a byte that starts no token ("@",
 * a NUL: "@btl_tcp_if_include = x" sets it) or after a block comment that
 * ends on the line; and by "--mca key value" or "-mca key value", several
 * to a line.  Never inside a value, a block comment, or a '#' or "//"
 * comment that a newline ends (at the end of a file without a newline,
 * "# key = v" is no comment: '#' is a stray byte, and the key is set).
 * Linear in the file's size. */
enum { T_DONE, T_NEWLINE, T_EQUAL, T_WORD, T_VALUE, T_MCAVAR, T_ENVEQL, T_ENVVAR, T_ERROR, T_BLANK };
enum { S_INITIAL, S_VALUE, S_COMMENT, S_MCA_VALUE };

struct kv_lex {
	const char *t;
	size_t n, pos;
	int state;
	size_t key, keylen;    /* T_WORD: the word; T_MCAVAR: its parameter's name */
	size_t eol_from, eol;  /* the first newline at or after eol_from (n if none) */
	size_t q_eol, q[2];    /* in the line ending at q_eol: past the last ' and " followed by a blank */
};

static int kv_white(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }
static int kv_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '.';
}
static size_t kv_run(const struct kv_lex *l, size_t p, int (*in)(char))
{
	while (p < l->n && in(l->t[p]))
		p++;
	return p;
}

/* The newline that ends the line of p (n if none); p only grows. */
static size_t kv_eol(struct kv_lex *l, size_t p)
{
	if (p < l->eol_from || p > l->eol) {
		const char *nl = memchr(l->t + p, '\n', l->n - p);
		l->eol_from = p;
		l->eol = nl ? (size_t)(nl - l->t) : l->n;
	}
	return l->eol;
}

/* "-"?"-x"{WHITE}+{CHAR}+ or "-"?"-mca"{WHITE}+{CHAR}+ at p: the end of
 * the name (0 if none), its start in *name. */
static size_t kv_dash(const struct kv_lex *l, size_t p, const char *word, size_t *name)
{
	size_t wl = strlen(word), q = p;

	if (q < l->n && l->t[q] == '-' && l->n - q > wl && memcmp(l->t + q + 1, word, wl) == 0)
		q++;
	if (l->n - q < wl || memcmp(l->t + q, word, wl) != 0)
		return 0;
	*name = kv_run(l, q + wl, kv_white);
	if (*name == q + wl)
		return 0;
	q = kv_run(l, *name, kv_char);
	return q == *name ? 0 : q;
}

/* One rule's match: the longest so far wins, the earlier rule on a tie. */
struct kv_best {
	size_t len, eat; /* matched (trailing context counted), consumed */
	int tok, state;
};
static int kv_cand(struct kv_best *b, size_t len, size_t eat, int tok, int state)
{
	if (len <= b->len)
		return 0;
	*b = (struct kv_best){ len, eat, tok, state };
	return 1;
}

/* The INITIAL state's rules at p (< n), in keyval_lex.l's order. */
static int kv_initial(struct kv_lex *l, size_t p)
{
	const char *t = l->t;
	size_t n = l->n, w = kv_run(l, p, kv_white), c, e, name = 0;
	struct kv_best b = { 0, 0, T_ERROR, S_INITIAL };

	if (w < n && t[w] == '\n')                          /* {WHITE}*\n */
		kv_cand(&b, w + 1 - p, w + 1 - p, T_NEWLINE, S_INITIAL);
	if ((t[p] == '#' || (t[p] == '/' && p + 1 < n && t[p + 1] == '/')) && (e = kv_eol(l, p)) < n)
		kv_cand(&b, e + 1 - p, e + 1 - p, T_NEWLINE, S_INITIAL); /* #.*\n "//".*\n */
	if (t[p] == '/' && p + 1 < n && t[p + 1] == '*')    /* "/" "*" */
		kv_cand(&b, 2, 2, T_NEWLINE, S_COMMENT);
	if (w < n && t[w] == '=') {                         /* {WHITE}*"="{WHITE}* */
		e = kv_run(l, w + 1, kv_white);
		kv_cand(&b, e - p, e - p, T_EQUAL, S_VALUE);
	}
	if (w > p)                                          /* {WHITE}+ */
		kv_cand(&b, w - p, w - p, T_BLANK, S_INITIAL);
	if ((c = kv_run(l, p, kv_char)) > p &&              /* {CHAR}+ */
	    kv_cand(&b, c - p, c - p, T_WORD, S_INITIAL)) {
		l->key = p;
		l->keylen = c - p;
	}
	/* "-"?"-mca"{WHITE}+{CHAR}+{WHITE}+ */
	if ((c = kv_dash(l, p, "-mca", &name)) && (e = kv_run(l, c, kv_white)) > c &&
	    kv_cand(&b, e - p, e - p, T_MCAVAR, S_MCA_VALUE)) {
		/* the name as trim_name leaves it ("-mca --mcaX v" sets X) */
		l->key = name;
		l->keylen = c - name;
		if (t[p + 1] == 'm' && l->keylen >= 5 && memcmp(t + name, "--mca", 5) == 0) {
			l->key += 5;
			l->keylen -= 5;
		}
	}
	if ((c = kv_dash(l, p, "-x", &name))) {
		e = kv_run(l, c, kv_white);
		if (e < n && t[e] == '=') { /* "-"?"-x"{WHITE}+{CHAR}+{WHITE}*"="{WHITE}* */
			size_t v = kv_run(l, e + 1, kv_white);
			kv_cand(&b, v - p, v - p, T_ENVEQL, S_MCA_VALUE);
		} else if (e < n) {         /* "-"?"-x"{WHITE}+{CHAR}+{WHITE}* / [^=] */
			kv_cand(&b, e + 1 - p, e - p, T_ENVVAR, S_INITIAL);
		} else if (e > c) {         /* at the end: the last blank is the context */
			kv_cand(&b, e - p, e - 1 - p, T_ENVVAR, S_INITIAL);
		} else if (c - name >= 2) { /* or the name's last byte */
			kv_cand(&b, c - p, c - 1 - p, T_ENVVAR, S_INITIAL);
		}
	}
	kv_cand(&b, 1, 1, T_ERROR, S_INITIAL);              /* . */
	l->pos = p + b.eat;
	l->state = b.state;
	return b.tok;
}

/* The MCA_VALUE state's rules at p (< n). */
static int kv_mca_value(struct kv_lex *l, size_t p)
{
	const char *t = l->t;
	size_t n = l->n, e = kv_eol(l, p), q, w;
	struct kv_best b = { 0, 0, T_ERROR, S_INITIAL };

	for (q = p; q < e && t[q] != ' ' && t[q] != '\t'; q++) /* [^\n \t]+ */
		;
	kv_cand(&b, q - p, q - p, T_VALUE, S_INITIAL);
	if (l->q_eol != e + 1) { /* once per line */
		size_t start = e;
		while (start > 0 && t[start - 1] != '\n')
			start--;
		l->q[0] = l->q[1] = 0;
		for (q = e; q > start; q--)
			for (int k = 0; k < 2; k++)
				if (!l->q[k] && t[q - 1] == (k ? '"' : '\'') && q < n && kv_white(t[q]))
					l->q[k] = q;
		l->q_eol = e + 1;
	}
	for (int k = 0; k < 2; k++) /* "'"[^\n]*"'"{WHITE}+, the same with '"' */
		if (t[p] == (k ? '"' : '\'') && l->q[k] > p + 1) {
			w = kv_run(l, l->q[k], kv_white);
			kv_cand(&b, w - p, w - p, T_VALUE, S_INITIAL);
		}
	w = kv_run(l, p, kv_white);
	if (w < n && t[w] == '\n') /* {WHITE}*\n */
		kv_cand(&b, w + 1 - p, w + 1 - p, T_NEWLINE, S_INITIAL);
	if (!b.len) { /* ' ' and '\t' before no newline: each skipped */
		while (p < n && (t[p] == ' ' || t[p] == '\t'))
			p++;
		l->pos = p;
		return T_BLANK;
	}
	l->pos = p + b.eat;
	l->state = b.state;
	return b.tok;
}

/* The next token, blanks and skipped bytes left out. */
static int kv_next(struct kv_lex *l)
{
	const char *t = l->t;
	size_t n = l->n;

	for (;;) {
		size_t p = l->pos, q, e, w;
		int tok;

		if (p >= n)
			return T_DONE;
		switch (l->state) {
		case S_INITIAL:
			tok = kv_initial(l, p);
			break;
		case S_MCA_VALUE:
			tok = kv_mca_value(l, p);
			break;
		case S_COMMENT:
			/* \n; "*"+"/" (back to INITIAL); "*"+[^*"/"\n]*; [^*\n]* */
			if (t[p] == '\n') {
				l->pos = p + 1;
				return T_NEWLINE;
			}
			for (q = p; q < n && t[q] == '*'; q++)
				;
			if (q > p && q < n && t[q] == '/') {
				l->pos = q + 1;
				l->state = S_INITIAL;
				return T_NEWLINE;
			}
			while (q < n && t[q] != '*' && t[q] != '\n' && !(q > p && t[p] == '*' && t[q] == '/'))
				q++;
			l->pos = q;
			continue;
		default: /* S_VALUE: {WHITE}*\n, else [^\n]*[^\t \n] / [\t ]* */
			w = kv_run(l, p, kv_white);
			if (w < n && t[w] == '\n') {
				l->pos = w + 1;
				l->state = S_INITIAL;
				return T_NEWLINE;
			}
			for (e = kv_eol(l, p); e > p && (t[e - 1] == ' ' || t[e - 1] == '\t'); e--)
				;
			/* [p, e) is the value; nothing but ' ' and '\t' up to the end of
			 * the file is skipped */
			l->pos = e > p ? e : n;
			if (e > p)
				return T_VALUE;
			continue;
		}
		if (tok != T_BLANK)
			return tok;
	}
}

int dl_mca_file_names(const char *text, size_t len, const char *name)
{
	struct kv_lex l = { .t = text, .n = len, .eol_from = 1, .eol = 0 };
	size_t nl = strlen(name);
	int tok;

	while ((tok = kv_next(&l)) != T_DONE) {
		size_t key = l.key, keylen = l.keylen;
		int named = keylen == nl && memcmp(text + key, name, nl) == 0;

		if (tok == T_WORD) { /* parse_line: key, "=", a value or the end of the line */
			if (kv_next(&l) != T_EQUAL)
				continue;
			tok = kv_next(&l);
			if (named && (tok == T_VALUE || tok == T_NEWLINE || tok == T_DONE))
				return 1;
			if (tok == T_VALUE)
				kv_next(&l);
		} else if (tok == T_MCAVAR || tok == T_ENVEQL || tok == T_ENVVAR) { /* parse_line_new */
			while (tok != T_NEWLINE && tok != T_DONE) {
				named = l.keylen == nl && memcmp(text + l.key, name, nl) == 0;
				if (tok == T_MCAVAR || tok == T_ENVEQL) {
					int mca = tok == T_MCAVAR;
					if (kv_next(&l) != T_VALUE)
						break;
					if (mca && named)
						return 1;
				} else if (tok != T_ENVVAR) {
					break;
				}
				tok = kv_next(&l);
			}
		}
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
	/* Open MPI takes a parameter's long name too (opal_, its project) */
	rv = 0;
	for (const char *const *k = (const char *const[]){ "btl_tcp_if_include", "btl_tcp_if_exclude",
			"opal_btl_tcp_if_include", "opal_btl_tcp_if_exclude", NULL }; *k && !rv; k++)
		if ((rv = dl_mca_file_names(buf, got, *k)))
			snprintf(why, whylen, "%s sets %s", dl_optval_escape(path, q, sizeof(q)), *k);
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

/* 1 if a file of the list Open MPI reads from value chooses the interfaces
 * (why: which), else 0.  As Open MPI 4.1's var_set_string and read_files:
 * "~/" at the start of value and after every ':' is the home directory
 * (dropped when HOME is unset), then value is split at ','. */
static int list_chooses(const char *value, const char *home, char *why, size_t whylen)
{
	char path[4200];

	for (const char *p = value; *p;) {
		size_t n = strcspn(p, ","), k = 0;

		for (size_t i = 0; i < n; i++) {
			const char *add = NULL;
			size_t len;
			if (p[i] == '~' && i + 1 < n && p[i + 1] == '/' && ((p == value && i == 0) ||
			    (i > 0 && p[i - 1] == ':'))) {
				add = home;
				i++; /* the '/' follows home, or nothing does */
				if (!home)
					continue;
			}
			len = add ? strlen(add) + 1 : 1;
			if (k + len >= sizeof(path)) {
				snprintf(why, whylen, "OMPI_MCA_mca_base_param_files names a path of more "
					 "than %zu bytes", sizeof(path) - 1);
				return 1;
			}
			if (add) {
				memcpy(path + k, add, len - 1);
				path[k + len - 1] = '/';
			} else {
				path[k] = p[i];
			}
			k += len;
		}
		path[k] = '\0';
		if (n > 0 && file_chooses(path, why, whylen))
			return 1;
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

/* 1 if one of the parameter files Open MPI reads chooses the interfaces
 * (why: which), else 0.  Open MPI 4.1 (mca_base_var_cache_files) reads
 * the list of mca_base_param_files (the default: ~/.openmpi/mca-params.conf
 * and the site's openmpi-mca-params.conf), and when its synonym
 * mca_param_files is set, that one's list too; none of them and not the
 * override file either when the list in effect is "none". */
static int files_choose(const struct dl_ompi_env *o, char *why, size_t whylen)
{
	const char *sys = o->sysconfdir ? o->sysconfdir : DLJOB_OMPI_SYSCONFDIR;
	const char *lists[2] = { o->param_files_syn ? o->param_files_syn : o->param_files, o->param_files };
	/* An Open MPI built with sysconfdir ${prefix}/etc and moved
	 * (OPAL_PREFIX, as HPC-X and relocatable installs set it) reads its
	 * site files in OPAL_PREFIX/etc: dljob cannot tell how it was built
	 * and looks there too. */
	const char *pfx = o->sysconfdir ? NULL : o->prefix;

	if (lists[0] && strcmp(lists[0], "none") == 0)
		return 0;
	for (int i = 0; i < 2; i++) {
		if (i == 1 && lists[1] == lists[0])
			break;
		if (lists[i]) {
			if (list_chooses(lists[i], o->home, why, whylen))
				return 1;
		} else {
			const char *home = o->home;
			struct passwd pw, *pwp = NULL;
			char pwbuf[4096];
			/* Open MPI's home directory is HOME's value; unset, it
			 * reads no file of the user's, but the password entry's is
			 * looked at all the same (dljob errs on the side of
			 * choosing nothing). */
			if (!home && getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
				home = pw.pw_dir;
			if ((home && in_dir_chooses(home, ".openmpi/mca-params.conf", why, whylen)) ||
			    in_dir_chooses(sys, "openmpi-mca-params.conf", why, whylen) ||
			    (pfx && in_dir_chooses(pfx, "etc/openmpi-mca-params.conf", why, whylen)))
				return 1;
		}
	}
	/* Read whatever the list: its values beat the environment. */
	return in_dir_chooses(sys, "openmpi-mca-params-override.conf", why, whylen) ||
	       (pfx && in_dir_chooses(pfx, "etc/openmpi-mca-params-override.conf", why, whylen));
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
