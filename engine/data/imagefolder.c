/* ImageFolder: DIR/train/<class>/<image> and DIR/val/<class>/<image>, as
 * torchvision.datasets.ImageFolder: class index = position of the class
 * directory name in strcmp order, samples in (class, file name) order.
 * Images are .jpg/.jpeg/.png in any letter case, directly in the class dir.
 *
 * Scanning 1.3M files is slow on network file systems, so class dirs are
 * listed by parallel threads and the result is cached in opt->cache_dir,
 * keyed by the tree's path and reused while DIR/train, DIR/val and every
 * class dir keep their stamp: mtime, ctime (ns) and inode number.  Adding,
 * removing or renaming a file changes its directory's mtime and ctime; the
 * mtime alone is not enough, as users and tools set it back (rsync -a,
 * cp -p, touch -d restore a directory's old mtime after replacing what it
 * holds), but nobody can set the ctime: any change, the mtime's restoring
 * included, moves it to the current time.  A directory replaced by another
 * (mv, rsync into a new dir) has another inode.  (The device number is not
 * part of the stamp: NFS mounts get a new one at every mount, which would
 * throw the cache away at every reboot.)
 *
 * A directory changed just before or during the scan may change again
 * without its ctime moving (timestamps are a clock tick coarse, a second on
 * some NFS servers), leaving the cache to list it as it was forever; so, as
 * git does for "racily clean" files, a scan that saw a directory whose ctime
 * (or mtime) is less than RACY_NS before the scan began, or later, is not
 * cached: the next run scans again.  (An NFS server whose clock is that far
 * behind the node's defeats this.)
 *
 * The cache file is used only as a regular file of this user, in a
 * directory of this user, neither writable by group or others (as
 * fashion_mnist.c's node cache); else the tree is scanned, with one note on
 * stderr.  It is read and written relative to the directory opened and
 * checked, never through a symlink. */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "engine/data/image.h"
#include "engine/data/internal.h"

#define RACY_NS 2000000000ll
static const char *split_dir[2] = {"train", "val"};

/* What a directory's listing is cached against (see the top of this file). */
struct dir_stamp {
	int64_t mtime, ctime; // ns
	uint64_t ino;
};
static const struct dir_stamp ABSENT = {INT64_MIN, INT64_MIN, 0};

struct if_split {
	size_t count;
	uint32_t *cls;      // (count)
	size_t *name_off;   // (count) into arena
};

struct imagefolder {
	char *root;
	int nclass;
	char **classes;     // (nclass) sorted
	struct dir_stamp *stamp[2];   // (nclass) per split: DIR/<split>/<class>
	struct dir_stamp split_stamp[2]; // DIR/train, DIR/val (ABSENT: no val)
	char *arena;        // file names, NUL separated
	size_t arena_len, arena_cap;
	struct if_split split[2];
	int size;
	float mean[3], std[3]; /* normalization (dl_data_options) */
	char *cached_in;    // the cache_dir the index was read from (NULL: scanned)
	struct dl_decode_budget *budget; // shared by the loading threads
	int racy;           // a directory changed too recently to cache the scan
	int cache_noted;    // the cache dir was refused, and stderr told why
};

/* snprintf for paths: -1 when the path does not fit (a truncated path names
 * another file: DIR/train/abcdef cut to DIR/train/abc is another class). */
__attribute__((format(printf, 3, 4))) static int path_fmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < len ? 0 : -1;
}

static struct dir_stamp stamp_of(const struct stat *st)
{
	struct dir_stamp d = {(int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
	                      (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec, (uint64_t)st->st_ino};
	return d;
}

static int stamp_eq(struct dir_stamp a, struct dir_stamp b)
{
	return a.mtime == b.mtime && a.ctime == b.ctime && a.ino == b.ino;
}

/* Changed less than RACY_NS before `recent`'s time, or later. */
static int stamp_racy(struct dir_stamp d, int64_t recent)
{
	return d.ctime != INT64_MIN && (d.ctime >= recent || d.mtime >= recent);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_image_name(const char *n)
{
	const char *dot = strrchr(n, '.');
	return dot && dot != n && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 ||
	                           strcasecmp(dot, ".png") == 0);
}

struct strlist {
	char **v;
	size_t n, cap;
};

static int strlist_add(struct strlist *l, const char *s)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		char **v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strdup(s)))
		return -1;
	l->n++;
	return 0;
}

static void strlist_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* Sorted subdirectory names of path. */
static int list_dirs(const char *path, struct strlist *out, char *err, size_t errlen)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (!d) {
		dl_errf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((errno = 0, e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		int isdir = e->d_type == DT_DIR;
		if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
			struct stat st;
			isdir = fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
		}
		if (isdir && strlist_add(out, e->d_name) != 0) {
			closedir(d);
			dl_errf(err, errlen, "%s: out of memory", path);
			return -1;
		}
	}
	if (errno) {
		dl_errf(err, errlen, "%s: readdir: %s", path, strerror(errno));
		closedir(d);
		return -1;
	}
	closedir(d);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof *out->v, cmp_str);
	return 0;
}

/* One class dir of one split, listed by a scan thread. */
struct scan_task {
	int split, cls;
	struct strlist files;
	struct dir_stamp stamp;
	char err[512];
	int failed;
};

struct scan {
	struct imagefolder *f;
	struct scan_task *tasks;
	int ntasks, next;
	pthread_mutex_t mu;
};

static void scan_one(struct imagefolder *f, struct scan_task *t)
{
	char path[PATH_MAX];
	struct stat st;
	DIR *d;
	struct dirent *e;

	if (path_fmt(path, sizeof path, "%s/%s/%s", f->root, split_dir[t->split], f->classes[t->cls]) != 0) {
		dl_errf(t->err, sizeof t->err, "%s/%s: path longer than PATH_MAX (in %s)", split_dir[t->split],
		        f->classes[t->cls], f->root);
		t->failed = 1;
		return;
	}
	if (!(d = opendir(path)) || fstat(dirfd(d), &st) != 0) {
		dl_errf(t->err, sizeof t->err, "%s: %s", path, strerror(errno));
		t->failed = 1;
		if (d)
			closedir(d);
		return;
	}
	t->stamp = stamp_of(&st);
	while ((errno = 0, e = readdir(d))) {
		if (e->d_name[0] != '.' && is_image_name(e->d_name) && strlist_add(&t->files, e->d_name) != 0) {
			dl_errf(t->err, sizeof t->err, "%s: out of memory", path);
			t->failed = 1;
			break;
		}
	}
	if (!t->failed && errno) {
		dl_errf(t->err, sizeof t->err, "%s: readdir: %s", path, strerror(errno));
		t->failed = 1;
	}
	closedir(d);
	if (!t->failed && t->files.n == 0) {
		dl_errf(t->err, sizeof t->err, "%s: empty class directory (no .jpg, .jpeg or .png images)", path);
		t->failed = 1;
	}
	if (t->files.n > 1)
		qsort(t->files.v, t->files.n, sizeof *t->files.v, cmp_str);
}

static void *scan_worker(void *arg)
{
	struct scan *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int i = s->next < s->ntasks ? s->next++ : -1;
		pthread_mutex_unlock(&s->mu);
		if (i < 0)
			return NULL;
		scan_one(s->f, &s->tasks[i]);
	}
}

static int arena_add(struct imagefolder *f, const char *s, size_t *off)
{
	size_t n = strlen(s) + 1;
	if (f->arena_len + n > f->arena_cap) {
		size_t cap = f->arena_cap ? f->arena_cap * 2 : 1 << 16;
		while (cap < f->arena_len + n)
			cap *= 2;
		char *a = realloc(f->arena, cap);
		if (!a)
			return -1;
		f->arena = a;
		f->arena_cap = cap;
	}
	memcpy(f->arena + f->arena_len, s, n);
	*off = f->arena_len;
	f->arena_len += n;
	return 0;
}

static int alloc_split(struct if_split *sp, size_t n)
{
	sp->count = n;
	sp->cls = malloc((n ? n : 1) * sizeof *sp->cls);
	sp->name_off = malloc((n ? n : 1) * sizeof *sp->name_off);
	return sp->cls && sp->name_off ? 0 : -1;
}

static int scan_tree(struct imagefolder *f, int nthreads, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct strlist cls[2] = {{0}};
	struct stat st;
	struct scan s = {.f = f};
	pthread_t *th = NULL;
	int started = 0, rv = -1, nsplit = 1;

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t recent = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - RACY_NS;

	pthread_mutex_init(&s.mu, NULL);
	if (path_fmt(path, sizeof path, "%s/train", f->root) != 0) {
		dl_errf(err, errlen, "train: path longer than PATH_MAX (in %s)", f->root);
		goto out;
	}
	/* Only a train/ that is not there is "missing": any other errno
	 * (EACCES: a directory the user cannot search) is named as it is. */
	int missing = stat(path, &st) != 0;

	if (missing && errno != ENOENT) {
		dl_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (missing || !S_ISDIR(st.st_mode)) {
		dl_errf(err, errlen, "%s: missing (an ImageFolder dataset needs DIR/train/<class>/<image files>)", path);
		goto out;
	}
	f->split_stamp[0] = stamp_of(&st);
	if (list_dirs(path, &cls[0], err, errlen) != 0)
		goto out;
	if (cls[0].n == 0) {
		dl_errf(err, errlen, "%s: no class directories", path);
		goto out;
	}
	f->split_stamp[1] = ABSENT;
	if (path_fmt(path, sizeof path, "%s/val", f->root) != 0) {
		dl_errf(err, errlen, "val: path longer than PATH_MAX (in %s)", f->root);
		goto out;
	}
	int have_val = stat(path, &st) == 0;

	if (!have_val && errno != ENOENT && errno != ENOTDIR) {
		dl_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (have_val && S_ISDIR(st.st_mode)) {
		f->split_stamp[1] = stamp_of(&st);
		if (list_dirs(path, &cls[1], err, errlen) != 0)
			goto out;
		for (size_t i = 0; i < cls[0].n || i < cls[1].n; i++) {
			const char *a = i < cls[0].n ? cls[0].v[i] : NULL, *b = i < cls[1].n ? cls[1].v[i] : NULL;
			if (!a || !b || strcmp(a, b) != 0) {
				const char *only = !a ? b : !b ? a : strcmp(a, b) < 0 ? a : b;
				int in_train = only == a;
				dl_errf(err, errlen, "%s/val: classes differ from %s/train: '%s' is only in %s (%zu vs %zu classes)",
				        f->root, f->root, only, in_train ? "train" : "val", cls[0].n, cls[1].n);
				goto out;
			}
		}
		nsplit = 2;
	}
	f->nclass = (int)cls[0].n;
	f->classes = cls[0].v;
	cls[0].v = NULL;
	cls[0].n = 0;
	f->stamp[0] = calloc((size_t)f->nclass, sizeof(struct dir_stamp));
	f->stamp[1] = calloc((size_t)f->nclass, sizeof(struct dir_stamp));
	s.ntasks = f->nclass * nsplit;
	s.tasks = calloc((size_t)s.ntasks, sizeof *s.tasks);
	if (nthreads > s.ntasks)
		nthreads = s.ntasks;
	th = calloc((size_t)nthreads, sizeof *th);
	if (!f->stamp[0] || !f->stamp[1] || !s.tasks || !th) {
		dl_errf(err, errlen, "%s: out of memory", f->root);
		goto out;
	}
	for (int i = 0; i < s.ntasks; i++) {
		s.tasks[i].split = i / f->nclass;
		s.tasks[i].cls = i % f->nclass;
	}
	for (int i = 1; i < nthreads; i++) {
		if (pthread_create(&th[i], NULL, scan_worker, &s) != 0)
			break;
		started++;
	}
	scan_worker(&s);
	for (int i = 1; i <= started; i++)
		pthread_join(th[i], NULL);
	size_t n[2] = {0, 0};
	for (int i = 0; i < s.ntasks; i++) {
		if (s.tasks[i].failed) {
			dl_errf(err, errlen, "%s", s.tasks[i].err);
			goto out;
		}
		n[s.tasks[i].split] += s.tasks[i].files.n;
		f->stamp[s.tasks[i].split][s.tasks[i].cls] = s.tasks[i].stamp;
		f->racy |= stamp_racy(s.tasks[i].stamp, recent);
	}
	f->racy |= stamp_racy(f->split_stamp[0], recent) || stamp_racy(f->split_stamp[1], recent);
	if (alloc_split(&f->split[0], n[0]) != 0 || alloc_split(&f->split[1], n[1]) != 0) {
		dl_errf(err, errlen, "%s: out of memory", f->root);
		goto out;
	}
	size_t k[2] = {0, 0};
	for (int i = 0; i < s.ntasks; i++) {
		struct scan_task *t = &s.tasks[i];
		for (size_t j = 0; j < t->files.n; j++) {
			struct if_split *sp = &f->split[t->split];
			sp->cls[k[t->split]] = (uint32_t)t->cls;
			if (arena_add(f, t->files.v[j], &sp->name_off[k[t->split]]) != 0) {
				dl_errf(err, errlen, "%s: out of memory", f->root);
				goto out;
			}
			k[t->split]++;
		}
	}
	rv = 0;
out:
	if (s.tasks)
		for (int i = 0; i < s.ntasks; i++)
			strlist_free(&s.tasks[i].files);
	free(s.tasks);
	free(th);
	strlist_free(&cls[0]);
	strlist_free(&cls[1]);
	pthread_mutex_destroy(&s.mu);
	return rv;
}

/* ---- the index cache --------------------------------------------------- */

/* The cache file, integers u64 in host order (the cache is per node or per
 * file system of one architecture), strings as u64 length + bytes:
 *   "DLJOBIF2", root, nclass,
 *   stamps (2 + 2*nclass) x {mtime, ctime, ino}: DIR/train, DIR/val, then
 *     DIR/train/<class c>, DIR/val/<class c> for each c (ABSENT: no val),
 *   class names (nclass), then for train and val: count, (class, name) x count.
 * A file in another layout (an older dljob's "DLJOBIF1") is not used. */
#define CACHE_MAGIC "DLJOBIF2"

struct wbuf {
	FILE *f;
	int bad;
};

static void put(struct wbuf *w, const void *p, size_t n)
{
	if (!w->bad && fwrite(p, 1, n, w->f) != n)
		w->bad = 1;
}

static void put_u64(struct wbuf *w, uint64_t v)
{
	put(w, &v, sizeof v);
}

static void put_str(struct wbuf *w, const char *s)
{
	put_u64(w, strlen(s));
	put(w, s, strlen(s));
}

static void put_stamp(struct wbuf *w, struct dir_stamp d)
{
	put_u64(w, (uint64_t)d.mtime);
	put_u64(w, (uint64_t)d.ctime);
	put_u64(w, d.ino);
}

/* The cache file's name in the cache directory: FNV-1a of the tree's path
 * (the fingerprints' hash, engine/data/internal.h). */
static void cache_name(const char *root, char out[64])
{
	uint64_t h = DL_FP_INIT;
	dl_fp_bytes(&h, root, strlen(root));
	snprintf(out, 64, "imagefolder-%016llx.idx", (unsigned long long)h);
}

/* Whether the cache file or directory st may be trusted, as the node cache of
 * fashion_mnist.c is: of this user and writable by nobody else, or another
 * user could hand us any listing (the names are checked, but not that they
 * are the tree's) or swap the file under us.  NULL, or why not. */
static const char *untrusted(const struct stat *st, int dir)
{
	if (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
		return dir ? "not a directory" : "not a regular file";
	if (st->st_uid != geteuid())
		return "owned by another user";
	if (st->st_mode & S_IWOTH)
		return "writable by others";
	if (st->st_mode & S_IWGRP)
		return "writable by its group";
	return NULL;
}

/* The cache directory, opened, when it may be trusted (a symlink to it is
 * followed: what is checked and used is the directory opened).  -1 when it
 * is not there (quietly) or is refused (said on stderr unless *noted, which
 * is then set: once per dataset). */
static int cache_dir_open(const char *dir, int *noted)
{
	struct stat st;
	const char *why = NULL;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0) {
		if (errno != ENOENT && !*noted) {
			fprintf(stderr, "dljob: data: not using the index cache in %s: %s; scanning the tree\n", dir,
			        strerror(errno));
			*noted = 1;
		}
		return -1;
	}
	if (fstat(dfd, &st) != 0)
		why = strerror(errno);
	else
		why = untrusted(&st, 1);
	if (why) {
		if (!*noted)
			fprintf(stderr, "dljob: data: not using the index cache in %s: the directory is %s; scanning the tree\n",
			        dir, why);
		*noted = 1;
		close(dfd);
		return -1;
	}
	return dfd;
}

static void cache_write(const struct imagefolder *f, const char *cache_dir)
{
	char name[64], tmp[96];
	struct wbuf w = {0};

	if (f->racy)
		return; // the next run scans again (see the top of this file)
	cache_name(f->root, name);
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", name, (long)getpid());
	if (mkdir(cache_dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "dljob: data: cannot write the index cache in %s: %s (continuing without)\n", cache_dir,
		        strerror(errno));
		return;
	}
	/* only into a directory of ours that nobody else may write (said once:
	 * not again when cache_read refused it) */
	int noted = f->cache_noted, dfd = cache_dir_open(cache_dir, &noted);
	if (dfd < 0)
		return;
	/* O_NOFOLLOW: the write never goes through a symlink (none can be
	 * planted in this directory, but one of ours may be left there); the
	 * rename replaces whatever has the final name, a symlink included,
	 * without following it */
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || !(w.f = fdopen(fd, "wb"))) {
		fprintf(stderr, "dljob: data: cannot write the index cache %s/%s: %s (continuing without)\n", cache_dir,
		        tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		close(dfd);
		return;
	}
	put(&w, CACHE_MAGIC, 8);
	put_str(&w, f->root);
	put_u64(&w, (uint64_t)f->nclass);
	put_stamp(&w, f->split_stamp[0]);
	put_stamp(&w, f->split_stamp[1]);
	for (int c = 0; c < f->nclass; c++) {
		put_stamp(&w, f->stamp[0][c]);
		put_stamp(&w, f->stamp[1][c]);
	}
	for (int c = 0; c < f->nclass; c++)
		put_str(&w, f->classes[c]);
	for (int s = 0; s < 2; s++) {
		put_u64(&w, f->split[s].count);
		for (size_t i = 0; i < f->split[s].count; i++) {
			put_u64(&w, f->split[s].cls[i]);
			put_str(&w, f->arena + f->split[s].name_off[i]);
		}
	}
	if (fflush(w.f) != 0 || fsync(fileno(w.f)) != 0)
		w.bad = 1;
	if (fclose(w.f) != 0)
		w.bad = 1;
	if (w.bad || renameat(dfd, tmp, dfd, name) != 0) {
		fprintf(stderr, "dljob: data: cannot write the index cache %s/%s: %s (continuing without)\n", cache_dir,
		        name, strerror(errno));
		(void)unlinkat(dfd, tmp, 0);
	}
	close(dfd);
}

struct rbuf {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t get_u64(struct rbuf *r)
{
	uint64_t v = 0;
	if (r->end - r->p < 8) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p, 8);
	r->p += 8;
	return v;
}

/* Returns a pointer into the buffer and the length; the caller copies. */
static const char *get_str(struct rbuf *r, size_t *n)
{
	*n = (size_t)get_u64(r);
	if (r->bad || *n > 4096 || (size_t)(r->end - r->p) < *n) {
		r->bad = 1;
		return NULL;
	}
	const char *s = (const char *)r->p;
	r->p += *n;
	return s;
}

/* A class or file name from the cache is what a scan could have found: one
 * path component, not empty, not starting with '.' (so not "." or ".."; the
 * scan skips dot names), no '/', no NUL or other control bytes, at most
 * NAME_MAX bytes.  The cache file may have been written by someone else,
 * and the names become paths. */
static int component_ok(const char *s, size_t n)
{
	if (n == 0 || n > NAME_MAX || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || (unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 0;
	return 1;
}

static struct dir_stamp get_stamp(struct rbuf *r)
{
	struct dir_stamp d;
	d.mtime = (int64_t)get_u64(r);
	d.ctime = (int64_t)get_u64(r);
	d.ino = get_u64(r);
	return d;
}

/* The stamp of directory path now (ABSENT when it is not a directory). */
static struct dir_stamp stamp_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return ABSENT;
	return stamp_of(&st);
}

/* The cache file opened, with its stat, when it may be trusted; -1 when it
 * is not there (quietly) or is refused (said on stderr). */
static int cache_open(struct imagefolder *f, const char *cache_dir, struct stat *st)
{
	char name[64];
	const char *why = NULL;
	int dfd = cache_dir_open(cache_dir, &f->cache_noted), fd;

	if (dfd < 0)
		return -1;
	cache_name(f->root, name);
	/* O_NONBLOCK: a FIFO must not block us (engine/file.h); O_NOFOLLOW:
	 * not through a symlink */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	close(dfd);
	if (fd < 0) {
		if (errno == ENOENT)
			return -1;
		why = errno == ELOOP ? "a symlink" : strerror(errno);
	} else if (fstat(fd, st) != 0) {
		why = strerror(errno);
	} else {
		why = untrusted(st, 0);
	}
	if (why) {
		fprintf(stderr, "dljob: data: not using the index cache %s/%s: %s; scanning the tree\n", cache_dir, name,
		        why);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Fill f from the cache when it is there, may be trusted and still matches
 * the tree. */
static int cache_read(struct imagefolder *f, const char *cache_dir)
{
	char path[PATH_MAX], err[256];
	uint8_t *buf = NULL;
	size_t len, n;
	int rv = -1;
	struct stat st;
	int fd = cache_open(f, cache_dir, &st);

	if (fd < 0)
		return -1;
	rv = dl_read_fd(fd, &st, cache_dir, SIZE_MAX / 2, &buf, &len, err, sizeof err);
	close(fd);
	if (rv != 0)
		return -1;
	rv = -1;
	struct rbuf r = {buf, buf + len, 0};
	if (len < 8 || memcmp(buf, CACHE_MAGIC, 8) != 0)
		goto out;
	r.p += 8;
	const char *root = get_str(&r, &n);
	if (r.bad || n != strlen(f->root) || memcmp(root, f->root, n) != 0)
		goto out;
	uint64_t nc = get_u64(&r);
	// each class takes 48 bytes of stamps and at least 9 of name: check before allocating
	if (r.bad || nc == 0 || nc > 1000000 || nc > (uint64_t)(r.end - r.p) / 57)
		goto out;
	for (int s = 0; s < 2; s++) {
		f->split_stamp[s] = get_stamp(&r);
		if (path_fmt(path, sizeof path, "%s/%s", f->root, split_dir[s]) != 0 ||
		    !stamp_eq(stamp_path(path), f->split_stamp[s]))
			goto out;
	}
	if (f->split_stamp[0].ctime == INT64_MIN)
		goto out;
	int nsplit = f->split_stamp[1].ctime == INT64_MIN ? 1 : 2;
	f->nclass = (int)nc;
	f->classes = calloc(nc, sizeof *f->classes);
	f->stamp[0] = calloc(nc, sizeof(struct dir_stamp));
	f->stamp[1] = calloc(nc, sizeof(struct dir_stamp));
	if (!f->classes || !f->stamp[0] || !f->stamp[1])
		goto out;
	for (int c = 0; c < f->nclass; c++) {
		f->stamp[0][c] = get_stamp(&r);
		f->stamp[1][c] = get_stamp(&r);
	}
	for (int c = 0; c < f->nclass; c++) {
		const char *s = get_str(&r, &n);
		if (r.bad || !component_ok(s, n) || !(f->classes[c] = malloc(n + 1)))
			goto out;
		memcpy(f->classes[c], s, n);
		f->classes[c][n] = 0;
		// sorted and distinct, as a scan finds them: the order is the labels
		if (c > 0 && strcmp(f->classes[c - 1], f->classes[c]) >= 0)
			goto out;
		for (int sp = 0; sp < nsplit; sp++) {
			if (path_fmt(path, sizeof path, "%s/%s/%s", f->root, split_dir[sp], f->classes[c]) != 0 ||
			    !stamp_eq(stamp_path(path), f->stamp[sp][c]))
				goto out;
		}
	}
	for (int s = 0; s < 2; s++) {
		uint64_t cnt = get_u64(&r);
		if (r.bad || cnt > (uint64_t)(r.end - r.p) / 16 || alloc_split(&f->split[s], cnt) != 0)
			goto out;
		for (size_t i = 0; i < cnt; i++) {
			uint64_t c = get_u64(&r);
			const char *s2 = get_str(&r, &n);
			char name[4097];
			if (r.bad || c >= nc || !component_ok(s2, n))
				goto out;
			memcpy(name, s2, n);
			name[n] = 0;
			if (!is_image_name(name))
				goto out;
			// in (class, name) order without repeats, as a scan lists them
			if (i > 0 && (c < f->split[s].cls[i - 1] ||
			              (c == f->split[s].cls[i - 1] &&
			               strcmp(f->arena + f->split[s].name_off[i - 1], name) >= 0)))
				goto out;
			f->split[s].cls[i] = (uint32_t)c;
			if (arena_add(f, name, &f->split[s].name_off[i]) != 0)
				goto out;
		}
	}
	rv = r.p == r.end ? 0 : -1;
out:
	free(buf);
	return rv;
}

/* ---- the dataset ------------------------------------------------------- */

/* ds->fp_classes and fp_samples (engine/data/dataset.h); shards.c hashes
 * its index the same way. */
static void fingerprint(const struct imagefolder *f, struct dl_dataset *ds)
{
	uint64_t hc = DL_FP_INIT, hs = DL_FP_INIT;
	for (int c = 0; c < f->nclass; c++)
		dl_fp_str(&hc, f->classes[c], strlen(f->classes[c]));
	for (int s = 0; s < 2; s++) {
		dl_fp_u64(&hs, f->split[s].count);
		for (size_t i = 0; i < f->split[s].count; i++) {
			const char *name = f->arena + f->split[s].name_off[i];
			dl_fp_u64(&hs, f->split[s].cls[i]);
			dl_fp_str(&hs, name, strlen(name));
		}
	}
	ds->fp_classes = dl_fp_end(hc);
	ds->fp_samples = dl_fp_end(hs);
}

static void folder_free(struct imagefolder *f)
{
	if (!f)
		return;
	for (int c = 0; f->classes && c < f->nclass; c++)
		free(f->classes[c]);
	free(f->classes);
	free(f->cached_in);
	free(f->stamp[0]);
	free(f->stamp[1]);
	free(f->arena);
	for (int s = 0; s < 2; s++) {
		free(f->split[s].cls);
		free(f->split[s].name_off);
	}
	free(f->root);
	dl_decode_budget_destroy(f->budget);
	free(f);
}

static int folder_fetch(void *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	return dl_read_file(path, DL_IMAGE_MAX_BYTES, buf, len, err, errlen);
}

/* One of chw (load) and hwc (load_u8) is set. */
static int folder_sample(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                         float *chw, uint8_t *hwc, int *label, char *err, size_t errlen)
{
	struct imagefolder *f = ds->impl;
	int s = split == DL_SPLIT_EVAL;
	const struct if_split *sp = &f->split[s];
	char path[PATH_MAX + 256];
	struct stat st;

	if (index >= sp->count) {
		dl_errf(err, errlen, "%s: sample %zu of %s out of range", f->root, index, split_dir[s]);
		return -1;
	}
	if (path_fmt(path, sizeof path, "%s/%s/%s/%s", f->root, split_dir[s], f->classes[sp->cls[index]],
	             f->arena + sp->name_off[index]) != 0) {
		dl_errf(err, errlen, "%s/%s/%s: path longer than PATH_MAX (in %s)", split_dir[s],
		        f->classes[sp->cls[index]], f->arena + sp->name_off[index], f->root);
		return -1;
	}
	/* the file's size, to take from the budget before reading it (0: let
	 * the read say what is wrong) */
	size_t hint = stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	              (uint64_t)st.st_size <= DL_IMAGE_MAX_BYTES ? (size_t)st.st_size : 0;
	int rc = dl_image_load(f->budget, hint, folder_fetch, path, path, f->size, !s, aug_seed, f->mean, f->std, chw,
	                       hwc, err, errlen);
	*label = (int)sp->cls[index];
	return rc;
}

static int folder_load(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                       float *chw, int *label, char *err, size_t errlen)
{
	return folder_sample(ds, split, index, aug_seed, chw, NULL, label, err, errlen);
}

static int folder_load_u8(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                          uint8_t *hwc, int *label, char *err, size_t errlen)
{
	return folder_sample(ds, split, index, aug_seed, NULL, hwc, label, err, errlen);
}

static int folder_save_index(struct dl_dataset *ds, const char *dir, char *err, size_t errlen)
{
	const struct imagefolder *f = ds->impl;
	(void)err;
	(void)errlen;
	if (f->cached_in && strcmp(f->cached_in, dir) == 0)
		return 0; // the index came from there and is still current
	cache_write(f, dir); // best effort: says why on stderr if it cannot
	return 0;
}

static void folder_close(struct dl_dataset *ds)
{
	folder_free(ds->impl);
	free(ds);
}

int dl_imagefolder_open(const char *dir, const struct dl_data_options *opt,
                        struct dl_dataset **out, char *err, size_t errlen)
{
	struct imagefolder *f = calloc(1, sizeof *f);
	struct dl_dataset *ds = calloc(1, sizeof *ds);
	char real[PATH_MAX];

	if (!f || !ds) {
		dl_errf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	f->root = strdup(realpath(dir, real) ? real : dir);
	if (!f->root) {
		dl_errf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	f->size = opt->image_size > 0 ? opt->image_size : DL_DEFAULT_IMAGE_SIZE;
	const char *cache = opt->cache_dir && *opt->cache_dir ? opt->cache_dir : NULL;
	if (!cache || cache_read(f, cache) != 0) {
		/* no cache, or stale: throw away what was half read, scan */
		char *root = f->root;
		int noted = f->cache_noted;
		f->root = NULL;
		folder_free(f);
		if (!(f = calloc(1, sizeof *f))) {
			free(root);
			dl_errf(err, errlen, "%s: out of memory", dir);
			goto fail;
		}
		f->root = root;
		f->cache_noted = noted;
		f->size = opt->image_size > 0 ? opt->image_size : DL_DEFAULT_IMAGE_SIZE;
		if (scan_tree(f, opt->threads > 0 ? opt->threads : dl_cpu_count() * 2, err, errlen) != 0)
			goto fail;
		if (cache && !opt->cache_deferred)
			cache_write(f, cache);
	} else if (!(f->cached_in = strdup(cache))) {
		dl_errf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	if (dl_decode_budget_create(opt->decode_memory ? opt->decode_memory : DL_DEFAULT_DECODE_MEMORY, &f->budget) != 0) {
		dl_errf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	snprintf(ds->kind, sizeof ds->kind, "imagefolder");
	fingerprint(f, ds);
	ds->channels = 3;
	ds->height = ds->width = f->size;
	ds->num_classes = f->nclass;
	ds->count[0] = f->split[0].count;
	ds->count[1] = f->split[1].count;
	ds->load = folder_load;
	ds->load_u8 = folder_load_u8;
	memcpy(f->mean, opt->have_norm ? opt->mean : dl_imagenet_mean, sizeof(f->mean));
	memcpy(f->std, opt->have_norm ? opt->std : dl_imagenet_std, sizeof(f->std));
	ds->u8_mean = f->mean;
	ds->u8_std = f->std;
	ds->close = folder_close;
	ds->save_index = folder_save_index;
	ds->impl = f;
	*out = ds;
	return 0;
fail:
	folder_free(f);
	free(ds);
	return -1;
}

/* For dljob pack: class names and (class, path) of sample i. */
int dl_imagefolder_info(const struct dl_dataset *ds, int *nclass, const char *const **classes)
{
	const struct imagefolder *f = ds->impl;
	if (strcmp(ds->kind, "imagefolder") != 0)
		return -1;
	*nclass = f->nclass;
	*classes = (const char *const *)f->classes;
	return 0;
}

int dl_imagefolder_path(const struct dl_dataset *ds, int split, size_t i, char *path, size_t len, int *label)
{
	const struct imagefolder *f = ds->impl;
	const struct if_split *sp = &f->split[split];
	if (i >= sp->count)
		return -1;
	*label = (int)sp->cls[i];
	return path_fmt(path, len, "%s/%s/%s/%s", f->root, split_dir[split], f->classes[sp->cls[i]],
	                f->arena + sp->name_off[i]);
}
