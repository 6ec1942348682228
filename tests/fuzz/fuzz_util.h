/* Shared by the libFuzzer targets in tests/fuzz/: a private scratch
 * directory per process (removed at exit) and whole-file writes, for parsers
 * that read files by path rather than from memory.  Any failure here is a
 * harness bug, not a finding: it aborts with a message. */
#ifndef DLJOB_TESTS_FUZZ_UTIL_H
#define DLJOB_TESTS_FUZZ_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fz_dir[PATH_MAX];

static void fz_die(const char *what, const char *path)
{
	fprintf(stderr, "fuzz harness: %s %s failed\n", what, path);
	abort();
}

static int fz_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(p);
	return 0;
}

static void fz_cleanup(void)
{
	if (fz_dir[0])
		nftw(fz_dir, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The scratch directory, created on first use. */
static const char *fz_tmpdir(void)
{
	if (!fz_dir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(fz_dir, sizeof fz_dir, "%s/dljob-fuzz-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(fz_dir))
			fz_die("mkdtemp", fz_dir);
		atexit(fz_cleanup);
	}
	return fz_dir;
}

/* DIR/rel (DIR the scratch directory) into out. */
static void fz_path(char *out, size_t len, const char *rel)
{
	if ((size_t)snprintf(out, len, "%s/%s", fz_tmpdir(), rel) >= len)
		fz_die("path", rel);
}

/* Replace the file DIR/rel with the n bytes at p. */
static void fz_write(const char *rel, const void *p, size_t n)
{
	char path[PATH_MAX];
	fz_path(path, sizeof path, rel);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		fz_die("open", path);
	for (const char *c = p; n > 0;) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			fz_die("write", path);
		c += w;
		n -= (size_t)w;
	}
	close(fd);
}

/* mkdir -p of DIR/rel (one level at a time, rel relative). */
static inline void fz_mkdir(const char *rel)
{
	char path[PATH_MAX];
	fz_path(path, sizeof path, rel);
	for (char *s = path + strlen(fz_tmpdir()) + 1; ; s++) {
		if (*s == '/' || *s == 0) {
			char c = *s;
			*s = 0;
			if (mkdir(path, 0700) != 0 && access(path, F_OK) != 0)
				fz_die("mkdir", path);
			*s = c;
			if (!c)
				break;
		}
	}
}

#endif
