#include "config.h"

/* safetensors reader/writer.  The reader loads the whole file; its header
 * is untrusted JSON and is parsed by jansson (duplicate keys refused), then
 * every entry is checked against the file: known dtype, non-negative
 * integer dims whose byte count does not overflow, data_offsets inside the
 * data section spanning exactly those bytes, no two tensors overlapping,
 * __metadata__ an object of strings.  The writer builds its header with
 * jansson too. */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "common/err.h"
#include "engine/file.h"
#include "engine/safetensors.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

struct dl_safetensors {
	char *path;
	unsigned char *file;   /* whole file */
	size_t size;
	size_t data_start;     /* 8 + header length */
	json_t *root;          /* the parsed header: owns the names and metadata */
	json_t *meta;          /* root's __metadata__ (borrowed), or NULL */
	size_t n;
	struct dl_st_entry *entries; /* names point into root */
};


/* The header for tensors and scalars at consecutive offsets, padded with
 * spaces so that 8 + its length is a multiple of 8 (the data is then
 * aligned).  NULL with err on a bad metadata_json or no memory; free(). */
static char *header_build(const char *path, struct dl_tensor_f32 *const *tensors, size_t n,
			  const struct dl_st_scalar *scalars, size_t n_scalars, const char *metadata_json,
			  size_t *hlen, char *err, size_t errlen)
{
	json_t *root = json_object(), *meta = NULL;
	char *text = NULL, *h = NULL;
	size_t off = 0;
	int oom = !root;

	if (metadata_json && *metadata_json) {
		/* a malformed __metadata__ would make the whole file unreadable:
		 * refuse it here */
		json_error_t je;
		meta = json_loads(metadata_json, JSON_REJECT_DUPLICATES, &je);
		const char *key;
		json_t *v;
		int bad = !meta || !json_is_object(meta);
		if (!bad)
			json_object_foreach(meta, key, v) bad |= !json_is_string(v);
		if (bad) {
			dl_errf(err, errlen, "%s: bad safetensors header: __metadata__ must be one object of strings%s%s",
				 path, meta ? "" : ": ", meta ? "" : je.text);
			goto out;
		}
		oom |= json_object_set(root, "__metadata__", meta) != 0;
	}
	for (size_t i = 0; i < n + n_scalars && !oom; i++) {
		const struct dl_tensor_f32 *t = i < n ? tensors[i] : NULL;
		size_t nbytes = t ? t->count * 4 : 8;
		json_t *shape = json_array();
		for (int d = 0; t && shape && d < t->ndim; d++)
			oom |= json_array_append_new(shape, json_integer(t->dims[d])) != 0;
		json_t *e = json_pack("{s:s, s:o, s:[I,I]}", "dtype", t ? "F32" : "I64", "shape", shape,
				      "data_offsets", (json_int_t)off, (json_int_t)(off + nbytes));
		oom |= !shape || !e || json_object_set_new(root, t ? t->name : scalars[i - n].name, e) != 0;
		off += nbytes;
	}
	if (!oom)
		text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text || !(h = malloc(strlen(text) + 8))) {
		dl_errf(err, errlen, "%s: out of memory building the header", path);
		goto out;
	}
	*hlen = strlen(text);
	memcpy(h, text, *hlen);
	while (*hlen % 8 != 0) /* 8 + header is then 8-aligned, so the data is too */
		h[(*hlen)++] = ' ';
out:
	free(text);
	json_decref(meta);
	json_decref(root);
	return h;
}

int dl_safetensors_write_ex(const char *path, struct dl_tensor_f32 *const *tensors, size_t n,
                            const struct dl_st_scalar *scalars, size_t n_scalars,
                            const char *metadata_json, char *err, size_t errlen)
{
	int rv = -1, fd = -1;
	char *tmp = NULL, *dircopy = NULL;
	size_t hl = 0;
	char *h = header_build(path, tensors, n, scalars, n_scalars, metadata_json, &hl, err, errlen);

	if (!h)
		return -1;
	size_t plen = strlen(path) + 32;
	tmp = malloc(plen);
	dircopy = strdup(path);
	if (!tmp || !dircopy) {
		dl_errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		dl_errf(err, errlen, "cannot write %s: %s (its temporary file %s could not be made)", path,
			 strerror(errno), tmp);
		goto out;
	}
	uint64_t hlen = hl;
	if (dl_write_all(fd, &hlen, 8) || dl_write_all(fd, h, hl))
		goto werr;
	for (size_t i = 0; i < n; i++)
		if (dl_write_all(fd, tensors[i]->data, tensors[i]->count * 4))
			goto werr;
	for (size_t i = 0; i < n_scalars; i++)
		if (dl_write_all(fd, &scalars[i].value, 8))
			goto werr;
	if (fsync(fd) != 0)
		goto werr;
	if (close(fd) != 0) {
		fd = -1;
		goto werr;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		dl_errf(err, errlen, "cannot write %s: %s (its temporary file %s could not be renamed to it and was removed)",
			 path, strerror(errno), tmp);
		unlink(tmp);
		goto out;
	}
	/* Make the rename itself durable.  A directory that cannot be synced
	 * leaves the file in place but not known to be on disk: a failure,
	 * since the caller counts on it surviving a crash. */
	const char *dir = dirname(dircopy);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) != 0) {
		dl_errf(err, errlen, "cannot write %s: %s (syncing its directory %s)", path, strerror(errno), dir);
		if (dfd >= 0)
			close(dfd);
		goto out;
	}
	if (close(dfd) != 0) {
		dl_errf(err, errlen, "cannot write %s: %s (closing its directory %s)", path, strerror(errno), dir);
		goto out;
	}
	rv = 0;
	goto out;
werr:
	dl_errf(err, errlen, "cannot write %s: %s (its temporary file %s was removed)", path, strerror(errno), tmp);
	if (fd >= 0)
		close(fd);
	fd = -1;
	unlink(tmp);
out:
	if (fd >= 0)
		close(fd);
	free(h);
	free(tmp);
	free(dircopy);
	return rv;
}

int dl_safetensors_write(const char *path, struct dl_tensor_f32 *const *tensors, size_t n,
                         const char *metadata_json, char *err, size_t errlen)
{
	return dl_safetensors_write_ex(path, tensors, n, NULL, 0, metadata_json, err, errlen);
}

/* ---- reader: the header is untrusted JSON, parsed by jansson ---- */

static enum dl_st_dtype dtype_parse(const char *s, size_t *size)
{
	static const struct {
		const char *name;
		enum dl_st_dtype t;
		size_t size;
	} tab[] = {{"F32", DL_ST_F32, 4}, {"F64", DL_ST_F64, 8}, {"I64", DL_ST_I64, 8}, {"I32", DL_ST_I32, 4},
	           {"F16", DL_ST_F16, 2}, {"BF16", DL_ST_BF16, 2}, {"U8", DL_ST_U8, 1}, {"I8", DL_ST_OTHER, 1},
	           {"BOOL", DL_ST_OTHER, 1}, {"I16", DL_ST_OTHER, 2}, {"U16", DL_ST_OTHER, 2},
	           {"U32", DL_ST_OTHER, 4}, {"U64", DL_ST_OTHER, 8}};
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (strcmp(s, tab[i].name) == 0) {
			*size = tab[i].size;
			return tab[i].t;
		}
	*size = 0;
	return DL_ST_OTHER;
}

/* A JSON integer in [0, INT64_MAX] (jansson refuses integers past long
 * long; a real such as 1.0 is not an integer here). */
static int json_nonneg(const json_t *v, int64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (int64_t)json_integer_value(v);
	return 0;
}

/* Printable form of a name from the file, for messages: at most 64
 * characters, control bytes as '?'. */
static const char *shown(const char *name, char *buf, size_t len)
{
	size_t i = 0;
	for (; name[i] && i + 4 < len && i < 64; i++)
		buf[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
	if (name[i])
		buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
	buf[i] = 0;
	return buf;
}

/* One tensor entry {"dtype", "shape", "data_offsets"} into e; its bytes
 * must lie inside the data section and be exactly what dtype and shape
 * need.  off_out: [begin, end) relative to the data section. */
static int entry_parse(const struct dl_safetensors *st, const char *name, const json_t *v,
		       struct dl_st_entry *e, size_t off_out[2], char *err, size_t errlen)
{
	char nb[80];
	const json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
		     *offs = json_object_get(v, "data_offsets");
	size_t esize = 0;
	int64_t off[2];

	memset(e, 0, sizeof(*e));
	e->name = name;
	if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs)) {
		dl_errf(err, errlen, "%s: tensor %s: missing or malformed dtype, shape or data_offsets", st->path,
			 shown(name, nb, sizeof(nb)));
		return -1;
	}
	e->dtype = dtype_parse(json_string_value(dt), &esize);
	if (esize == 0) {
		dl_errf(err, errlen, "%s: tensor %s: unknown dtype", st->path, shown(name, nb, sizeof(nb)));
		return -1;
	}
	if (json_array_size(shape) > 8) {
		dl_errf(err, errlen, "%s: tensor %s: more than 8 dimensions", st->path, shown(name, nb, sizeof(nb)));
		return -1;
	}
	e->ndim = (int)json_array_size(shape);
	/* the shape's bytes must be what data_offsets span; a product that
	 * overflows (say [2^62,4] of F32 claiming 0 bytes) is refused */
	size_t nbytes = esize;
	e->count = 1;
	for (int i = 0; i < e->ndim; i++) {
		if (json_nonneg(json_array_get(shape, (size_t)i), &e->dims[i]) < 0) {
			dl_errf(err, errlen, "%s: tensor %s: a dimension is not a non-negative integer", st->path,
				 shown(name, nb, sizeof(nb)));
			return -1;
		}
		if ((uint64_t)e->dims[i] > SIZE_MAX ||
		    __builtin_mul_overflow(e->count, (size_t)e->dims[i], &e->count) ||
		    __builtin_mul_overflow(nbytes, (size_t)e->dims[i], &nbytes)) {
			dl_errf(err, errlen, "%s: tensor %s: shape too large (its size overflows)", st->path,
				 shown(name, nb, sizeof(nb)));
			return -1;
		}
	}
	size_t data_len = st->size - st->data_start;
	if (json_array_size(offs) != 2 || json_nonneg(json_array_get(offs, 0), &off[0]) < 0 ||
	    json_nonneg(json_array_get(offs, 1), &off[1]) < 0 || off[1] < off[0] ||
	    (uint64_t)off[1] > data_len || (uint64_t)(off[1] - off[0]) != nbytes) {
		dl_errf(err, errlen, "%s: tensor %s: data_offsets do not fit its shape (%zu bytes) or the file (%zu "
			 "bytes of data)", st->path, shown(name, nb, sizeof(nb)), nbytes, data_len);
		return -1;
	}
	e->data = st->file + st->data_start + (size_t)off[0];
	off_out[0] = (size_t)off[0];
	off_out[1] = (size_t)off[1];
	return 0;
}

static int cmp_span(const void *a, const void *b)
{
	const size_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Parse the header of the file image in st: every entry checked against
 * the file, no two tensors' bytes overlapping. */
static int header_parse(struct dl_safetensors *st, char *err, size_t errlen)
{
	json_error_t je;
	const char *key;
	json_t *v;
	size_t (*spans)[2] = NULL, n = 0;
	int rv = -1;

	st->root = json_loadb((const char *)st->file + 8, st->data_start - 8, JSON_REJECT_DUPLICATES, &je);
	if (!st->root) {
		dl_errf(err, errlen, "%s: bad safetensors header: %s (at byte %d of the header)", st->path, je.text,
			 je.position);
		return -1;
	}
	if (!json_is_object(st->root)) {
		dl_errf(err, errlen, "%s: bad safetensors header: not a JSON object", st->path);
		return -1;
	}
	size_t cap = json_object_size(st->root);
	st->entries = calloc(cap ? cap : 1, sizeof(*st->entries));
	spans = calloc(cap ? cap : 1, sizeof(*spans));
	if (!st->entries || !spans) {
		dl_errf(err, errlen, "%s: out of memory for %zu header entries", st->path, cap);
		goto out;
	}
	json_object_foreach(st->root, key, v) {
		if (strcmp(key, "__metadata__") == 0) {
			const char *mk;
			json_t *mv;
			int bad = !json_is_object(v);
			if (!bad)
				json_object_foreach(v, mk, mv) bad |= !json_is_string(mv);
			if (bad) {
				dl_errf(err, errlen, "%s: bad safetensors header: __metadata__ is not an object of strings",
					 st->path);
				goto out;
			}
			st->meta = v;
			continue;
		}
		if (entry_parse(st, key, v, &st->entries[st->n], spans[n], err, errlen) < 0)
			goto out;
		if (st->entries[st->n].count > 0) /* empty tensors take no bytes */
			n++;
		st->n++;
	}
	qsort(spans, n, sizeof(*spans), cmp_span);
	for (size_t i = 1; i < n; i++)
		if (spans[i][0] < spans[i - 1][1]) {
			dl_errf(err, errlen, "%s: bad safetensors header: two tensors share bytes %zu..%zu of the data",
				 st->path, spans[i][0], spans[i - 1][1]);
			goto out;
		}
	rv = 0;
out:
	free(spans);
	return rv;
}

void dl_safetensors_close(struct dl_safetensors *st)
{
	if (!st)
		return;
	json_decref(st->root);
	free(st->entries);
	free(st->file);
	free(st->path);
	free(st);
}

struct dl_safetensors *dl_safetensors_open(const char *path, char *err, size_t errlen)
{
	struct dl_safetensors *st = calloc(1, sizeof(*st));
	struct stat sb;
	int fd = -1;
	if (!st || !(st->path = strdup(path))) {
		dl_errf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	// not fopen: a FIFO in place of the file must not block us
	if ((fd = dl_open_regular(path, &sb, err, errlen)) < 0)
		goto fail;
	st->size = (size_t)sb.st_size;
	if (st->size < 8) {
		dl_errf(err, errlen, "%s: not a safetensors file (only %zu bytes)", path, st->size);
		goto fail;
	}
	st->file = malloc(st->size);
	if (!st->file) {
		dl_errf(err, errlen, "%s: out of memory reading %zu bytes", path, st->size);
		goto fail;
	}
	for (size_t got = 0; got < st->size;) {
		ssize_t r = read(fd, st->file + got, st->size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			dl_errf(err, errlen, "%s: %s", path, r < 0 ? strerror(errno) : "short read (file shrank)");
			goto fail;
		}
		got += (size_t)r;
	}
	close(fd);
	fd = -1;
	uint64_t hlen;
	memcpy(&hlen, st->file, 8);
	if (hlen > st->size - 8) {
		dl_errf(err, errlen, "%s: not a safetensors file (header length %llu exceeds the file)", path,
		         (unsigned long long)hlen);
		goto fail;
	}
	st->data_start = 8 + (size_t)hlen;
	if (header_parse(st, err, errlen) < 0)
		goto fail;
	return st;
fail:
	if (fd >= 0)
		close(fd);
	dl_safetensors_close(st);
	return NULL;
}

size_t dl_safetensors_count(const struct dl_safetensors *st)
{
	return st->n;
}

const struct dl_st_entry *dl_safetensors_entry(const struct dl_safetensors *st, size_t i)
{
	return i < st->n ? &st->entries[i] : NULL;
}

const struct dl_st_entry *dl_safetensors_find(const struct dl_safetensors *st, const char *name)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->entries[i].name, name) == 0)
			return &st->entries[i];
	return NULL;
}

const char *dl_safetensors_meta(const struct dl_safetensors *st, const char *key)
{
	return st->meta ? json_string_value(json_object_get(st->meta, key)) : NULL;
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *dims)
{
	size_t o = 0;
	o += (size_t)snprintf(buf + o, len - o, "[");
	for (int i = 0; i < ndim && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", (long long)dims[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

int dl_safetensors_load(const struct dl_safetensors *st, struct dl_tensor_f32 *const *tensors, size_t n,
                        char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		struct dl_tensor_f32 *t = tensors[i];
		const struct dl_st_entry *e = dl_safetensors_find(st, t->name);
		if (!e) {
			dl_errf(err, errlen, "%s: tensor %s is missing", st->path, t->name);
			return -1;
		}
		int64_t want[8] = {0};
		for (int d = 0; d < t->ndim; d++)
			want[d] = t->dims[d];
		int same = e->ndim == t->ndim;
		for (int d = 0; same && d < t->ndim; d++)
			same = e->dims[d] == t->dims[d];
		if (!same) {
			char a[96], b[96];
			shape_str(a, sizeof(a), e->ndim, e->dims);
			shape_str(b, sizeof(b), t->ndim, want);
			dl_errf(err, errlen, "%s: tensor %s has shape %s, the model needs %s", st->path, t->name, a, b);
			return -1;
		}
		if (e->dtype == DL_ST_F32) {
			memcpy(t->data, e->data, t->count * 4);
		} else if (e->dtype == DL_ST_F64) {
			const unsigned char *src = e->data;
			for (size_t j = 0; j < t->count; j++) {
				double v;
				memcpy(&v, src + 8 * j, 8);
				t->data[j] = (float)v;
			}
		} else {
			dl_errf(err, errlen, "%s: tensor %s is not F32 or F64", st->path, t->name);
			return -1;
		}
	}
	return 0;
}

/* BN layer names: every param named "<bn>.running_mean" in buffers gives one. */
static int bn_scalars(const struct dl_graph *g, struct dl_st_scalar **out, char **names_out, size_t *n_out)
{
	size_t n = 0;
	for (int i = 0; i < g->n_buffers; i++)
		if (strstr(g->buffers[i].name, ".running_mean"))
			n++;
	struct dl_st_scalar *s = calloc(n ? n : 1, sizeof(*s));
	char *names = calloc(n ? n : 1, 128);
	if (!s || !names) {
		free(s);
		free(names);
		return -1;
	}
	size_t k = 0;
	for (int i = 0; i < g->n_buffers; i++) {
		const char *nm = g->buffers[i].name, *suf = strstr(nm, ".running_mean");
		if (!suf)
			continue;
		snprintf(names + 128 * k, 128, "%.*s.num_batches_tracked", (int)(suf - nm), nm);
		s[k].name = names + 128 * k;
		s[k].value = g->bn_batches_tracked;
		k++;
	}
	*out = s;
	*names_out = names;
	*n_out = n;
	return 0;
}

int dl_model_state_write(const char *path, const struct dl_graph *g, struct dl_tensor_f32 *const *extra,
                         size_t n_extra, const char *metadata_json, char *err, size_t errlen)
{
	int rv = -1;
	size_t nt = (size_t)g->n_params + (size_t)g->n_buffers + n_extra, k = 0, ns = 0;
	struct dl_tensor_f32 **t = calloc(nt ? nt : 1, sizeof(*t));
	struct dl_st_scalar *sc = NULL;
	char *names = NULL;
	if (!t || bn_scalars(g, &sc, &names, &ns)) {
		dl_errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (int i = 0; i < g->n_params; i++)
		t[k++] = &g->params[i];
	for (int i = 0; i < g->n_buffers; i++)
		t[k++] = &g->buffers[i];
	for (size_t i = 0; i < n_extra; i++)
		t[k++] = extra[i];
	rv = dl_safetensors_write_ex(path, t, nt, sc, ns, metadata_json, err, errlen);
out:
	free(t);
	free(sc);
	free(names);
	return rv;
}

int dl_model_state_load(const struct dl_safetensors *st, struct dl_graph *g, struct dl_tensor_f32 *const *extra,
                        size_t n_extra, char *err, size_t errlen)
{
	int rv = -1;
	size_t nt = (size_t)g->n_params + (size_t)g->n_buffers, k = 0;
	struct dl_tensor_f32 **t = calloc(nt ? nt : 1, sizeof(*t));
	if (!t) {
		dl_errf(err, errlen, "%s: out of memory", st->path);
		return -1;
	}
	for (int i = 0; i < g->n_params; i++)
		t[k++] = &g->params[i];
	for (int i = 0; i < g->n_buffers; i++)
		t[k++] = &g->buffers[i];
	if (dl_safetensors_load(st, t, nt, err, errlen) || (n_extra && dl_safetensors_load(st, extra, n_extra, err, errlen)))
		goto out;
	for (size_t i = 0; i < st->n; i++) {
		const struct dl_st_entry *e = &st->entries[i];
		size_t L = strlen(e->name);
		if (L > 20 && strcmp(e->name + L - 20, ".num_batches_tracked") == 0 && e->dtype == DL_ST_I64 &&
		    e->count == 1) {
			memcpy(&g->bn_batches_tracked, e->data, 8);
			break;
		}
	}
	rv = 0;
out:
	free(t);
	return rv;
}
