/* out_swap: an LD_PRELOAD shim for tests/train/test_cli.sh that makes the
 * race on the output directory's path deterministic.  dljob resolves the
 * output path and checks it (runtime/cli.c: resolve_out, check_out_base,
 * which resolves DLJOB_OUT_BASE's directory), then makes what is missing.
 * Right after realpath() returns for the path OUTSWAP_AFTER, once, this
 * does what another user who can write to a directory of that path could
 * do at that moment:
 *   OUTSWAP_LINK=PATH:TARGET  PATH (a directory) renamed to PATH.orig and a
 *                             symbolic link to TARGET put in its place;
 *   OUTSWAP_DIR=PATH:UID      a directory PATH made, owned by UID.
 * And independently of OUTSWAP_AFTER:
 *   OUTSWAP_VANISH=NAME:N     the first N times dljob makes a directory
 *                             NAME (mkdirat), the directory is made and
 *                             removed again and dljob told EEXIST: what it
 *                             sees when another rank of the job, on a shared
 *                             file system, makes the same output directory
 *                             and removes it when its own run fails.
 * A failure is said on stderr with "out_swap:" (the test then fails). */
#include "config.h"
#undef _FORTIFY_SOURCE /* realpath is defined here, not the fortified inline */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);

static int done, vanished;

/* Splits "A:B" at its last ':' into a and b; 0, or -1 when malformed. */
static int split(const char *v, char *a, char *b)
{
	const char *c = strrchr(v, ':');

	if (!c || (size_t)(c - v) >= PATH_MAX || strlen(c + 1) >= PATH_MAX)
		return -1;
	memcpy(a, v, (size_t)(c - v));
	a[c - v] = '\0';
	strcpy(b, c + 1);
	return 0;
}

static void after(const char *path)
{
	const char *when = getenv("OUTSWAP_AFTER"), *link = getenv("OUTSWAP_LINK"), *dir = getenv("OUTSWAP_DIR");
	char a[PATH_MAX], b[PATH_MAX], orig[PATH_MAX + 8];

	if (done || !when || !path || strcmp(path, when) != 0)
		return;
	done = 1;
	if (link) {
		if (split(link, a, b) < 0 || snprintf(orig, sizeof(orig), "%s.orig", a) < 0 || rename(a, orig) < 0 ||
		    symlink(b, a) < 0)
			fprintf(stderr, "out_swap: OUTSWAP_LINK=%s failed\n", link);
	}
	if (dir) {
		char *end;

		if (split(dir, a, b) < 0 || mkdir(a, 0755) < 0 ||
		    chown(a, (uid_t)strtoul(b, &end, 10), (gid_t)-1) < 0 || *end)
			fprintf(stderr, "out_swap: OUTSWAP_DIR=%s failed\n", dir);
	}
}

char *realpath(const char *path, char *resolved)
{
	char *(*real)(const char *, char *);
	char *r;
	int e;

	*(void **)&real = dlsym(RTLD_NEXT, "realpath");
	r = real ? real(path, resolved) : NULL;
	e = errno; /* what the caller reads when r is NULL */
	after(path);
	errno = e;
	return r;
}

char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	char *(*real)(const char *, char *, size_t);
	char *r;
	int e;

	*(void **)&real = dlsym(RTLD_NEXT, "__realpath_chk");
	r = real ? real(path, resolved, resolvedlen) : NULL;
	e = errno;
	after(path);
	errno = e;
	return r;
}

int mkdirat(int dfd, const char *name, mode_t mode)
{
	int (*real)(int, const char *, mode_t);
	const char *v = getenv("OUTSWAP_VANISH");
	char a[PATH_MAX], b[PATH_MAX];

	*(void **)&real = dlsym(RTLD_NEXT, "mkdirat");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (!v || split(v, a, b) < 0 || strcmp(name, a) != 0 || vanished >= atoi(b))
		return real(dfd, name, mode);
	vanished++;
	if (real(dfd, name, mode) < 0 || unlinkat(dfd, name, AT_REMOVEDIR) < 0) {
		fprintf(stderr, "out_swap: OUTSWAP_VANISH=%s failed: %s\n", v, strerror(errno));
		return -1;
	}
	errno = EEXIST;
	return -1;
}
