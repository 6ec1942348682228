/* Opening a file that must be a regular file (a checkpoint, a dataset file,
 * an image) without blocking: open(2) of a FIFO waits for a writer, so a FIFO
 * named like a data file would hang the reader forever, and opening a device
 * node acts on the device (a tape rewinds, a serial line rises, a writer
 * blocked on a FIFO goes on).  So the path is stat'ed first and only a
 * regular file is opened; as it may have been swapped since, the open still
 * uses O_NONBLOCK (which returns at once for a FIFO) and O_NOCTTY (a terminal
 * must not become our controlling one), the descriptor is checked with
 * fstat, and O_NONBLOCK is cleared again for the reads. */
#ifndef DLJOB_ENGINE_FILE_H
#define DLJOB_ENGINE_FILE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

/* Returns an O_RDONLY|O_CLOEXEC descriptor of the regular file `path` and its
 * stat in *st, or -1 with "PATH: reason" in err. */
static inline int dl_open_regular(const char *path, struct stat *st, char *err, size_t errlen)
{
	if (stat(path, st) != 0) {
		dl_errf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		dl_errf(err, errlen, "%s: not a regular file", path);
		return -1;
	}
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), fl;
	if (fd < 0) {
		dl_errf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, st) != 0) {
		dl_errf(err, errlen, "%s: fstat: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st->st_mode)) {
		dl_errf(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		dl_errf(err, errlen, "%s: fcntl: %s", path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* Write all n bytes of buf to fd, going on after EINTR and short writes.
 * Returns 0, or -1 with errno that of the failed write (EIO when write
 * returned 0). */
static inline int dl_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Append n bytes to fd (opened O_APPEND, written only by us) as a whole or
 * not at all: a record of a log that fails part-way (the disk filled, an
 * I/O error) is cut off again, so the file still ends where a record
 * ended.  Returns 0, or -1 with errno that of the failed write (or of the
 * fstat before it). */
static inline int dl_append_whole(int fd, const void *buf, size_t n)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -1;
	if (dl_write_all(fd, buf, n) == 0)
		return 0;
	int e = errno;
	if (ftruncate(fd, st.st_size) != 0) {
		/* then readers skip the torn last record and the next run
		 * cuts it (dl_metrics_open) */
	}
	errno = e;
	return -1;
}

#endif
