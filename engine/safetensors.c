#include "config.h"

/* safetensors reader/writer.  The reader loads the whole file and parses the
 * header with a small JSON parser that accepts exactly what the format
 * allows (objects, arrays, strings, integers). */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	size_t n, cap;
	struct dl_st_entry *entries;
	char **names;          /* owned copies of entries[i].name */
	size_t n_meta, cap_meta;
	char **meta_keys, **meta_vals;
};

/* ---- growable string buffer for the writer ---- */

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_put(struct sbuf *s, const char *data, size_t n)
{
	if (s->oom)
		return;
	if (s->len + n + 1 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 4096;
		while (ncap < s->len + n + 1)
			ncap *= 2;
		char *np = realloc(s->p, ncap);
		if (!np) {
			s->oom = 1;
			return;
		}
		s->p = np;
		s->cap = ncap;
	}
	memcpy(s->p + s->len, data, n);
	s->len += n;
	s->p[s->len] = 0;
}

static void sb_printf(struct sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *s, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		s->oom = 1;
		return;
	}
	sb_put(s, tmp, (size_t)n);
}

static void sb_json_string(struct sbuf *s, const char *str)
{
	sb_put(s, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
		if (*c == '"' || *c == '\\') {
			char e[2] = {'\\', (char)*c};
			sb_put(s, e, 2);
		} else if (*c < 0x20) {
			sb_printf(s, "\\u%04x", *c);
		} else {
			sb_put(s, (const char *)c, 1);
		}
	}
	sb_put(s, "\"", 1);
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int metadata_check(const char *json, const char *path, char *err, size_t errlen);

int dl_safetensors_write_ex(const char *path, struct dl_tensor_f32 *const *tensors, size_t n,
                            const struct dl_st_scalar *scalars, size_t n_scalars,
                            const char *metadata_json, char *err, size_t errlen)
{
	int rv = -1, fd = -1;
	struct sbuf h = {0};
	char *tmp = NULL, *dircopy = NULL;
	size_t off = 0;

	// a malformed __metadata__ would make the whole file unreadable: refuse it
	if (metadata_json && *metadata_json && metadata_check(metadata_json, path, err, errlen))
		return -1;
	sb_put(&h, "{", 1);
	if (metadata_json && *metadata_json) {
		sb_put(&h, "\"__metadata__\":", 15);
		sb_put(&h, metadata_json, strlen(metadata_json));
		sb_put(&h, ",", 1);
	}
	for (size_t i = 0; i < n; i++) {
		const struct dl_tensor_f32 *t = tensors[i];
		sb_json_string(&h, t->name);
		sb_put(&h, ":{\"dtype\":\"F32\",\"shape\":[", 25);
		for (int d = 0; d < t->ndim; d++)
			sb_printf(&h, "%s%d", d ? "," : "", t->dims[d]);
		sb_printf(&h, "],\"data_offsets\":[%zu,%zu]},", off, off + t->count * 4);
		off += t->count * 4;
	}
	for (size_t i = 0; i < n_scalars; i++) {
		sb_json_string(&h, scalars[i].name);
		sb_printf(&h, ":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[%zu,%zu]},", off, off + 8);
		off += 8;
	}
	if (h.len > 1)
		h.len--; // drop the trailing comma
	sb_put(&h, "}", 1);
	while (h.len % 8 != 0) // 8 + header is then 8-aligned, so the data is too
		sb_put(&h, " ", 1);
	if (h.oom) {
		snprintf(err, errlen, "%s: out of memory building the header", path);
		goto out;
	}

	size_t plen = strlen(path) + 32;
	tmp = malloc(plen);
	dircopy = strdup(path);
	if (!tmp || !dircopy) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
		goto out;
	}
	uint64_t hlen = h.len;
	if (write_all(fd, &hlen, 8) || write_all(fd, h.p, h.len))
		goto werr;
	for (size_t i = 0; i < n; i++)
		if (write_all(fd, tensors[i]->data, tensors[i]->count * 4))
			goto werr;
	for (size_t i = 0; i < n_scalars; i++)
		if (write_all(fd, &scalars[i].value, 8))
			goto werr;
	if (fsync(fd) != 0)
		goto werr;
	if (close(fd) != 0) {
		fd = -1;
		goto werr;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	// make the rename itself durable
	int dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	rv = 0;
	goto out;
werr:
	snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(errno));
	if (fd >= 0)
		close(fd);
	fd = -1;
	unlink(tmp);
out:
	if (fd >= 0)
		close(fd);
	free(h.p);
	free(tmp);
	free(dircopy);
	return rv;
}

int dl_safetensors_write(const char *path, struct dl_tensor_f32 *const *tensors, size_t n,
                         const char *metadata_json, char *err, size_t errlen)
{
	return dl_safetensors_write_ex(path, tensors, n, NULL, 0, metadata_json, err, errlen);
}

/* ---- reader: a JSON parser for the header ---- */

struct parser {
	const char *p, *end;
	const char *path;
	char *err;
	size_t errlen;
	int failed;
};

static int perr(struct parser *ps, const char *what)
{
	if (!ps->failed)
		snprintf(ps->err, ps->errlen, "%s: bad safetensors header: %s", ps->path, what);
	ps->failed = 1;
	return -1;
}

static void ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
		ps->p++;
}

static int expect(struct parser *ps, char c)
{
	ws(ps);
	if (ps->p >= ps->end || *ps->p != c) {
		char msg[32];
		snprintf(msg, sizeof(msg), "expected '%c'", c);
		return perr(ps, msg);
	}
	ps->p++;
	return 0;
}

static int peek(struct parser *ps, char c)
{
	ws(ps);
	return ps->p < ps->end && *ps->p == c;
}

/* Parse a JSON string into a malloc'd C string (\uXXXX kept to ASCII/UTF-8 BMP). */
static char *parse_string(struct parser *ps)
{
	if (expect(ps, '"'))
		return NULL;
	size_t cap = 64, len = 0;
	char *s = malloc(cap);
	if (!s) {
		perr(ps, "out of memory");
		return NULL;
	}
	while (ps->p < ps->end && *ps->p != '"') {
		char buf[4];
		size_t nb = 1;
		char c = *ps->p++;
		if (c == '\\') {
			if (ps->p >= ps->end)
				break;
			c = *ps->p++;
			switch (c) {
			case 'n': buf[0] = '\n'; break;
			case 't': buf[0] = '\t'; break;
			case 'r': buf[0] = '\r'; break;
			case 'b': buf[0] = '\b'; break;
			case 'f': buf[0] = '\f'; break;
			case 'u': {
				if (ps->end - ps->p < 4) {
					free(s);
					perr(ps, "truncated \\u escape");
					return NULL;
				}
				char hex[5] = {ps->p[0], ps->p[1], ps->p[2], ps->p[3], 0};
				ps->p += 4;
				unsigned v = (unsigned)strtoul(hex, NULL, 16);
				if (v < 0x80) {
					buf[0] = (char)v;
				} else if (v < 0x800) {
					buf[0] = (char)(0xc0 | (v >> 6));
					buf[1] = (char)(0x80 | (v & 0x3f));
					nb = 2;
				} else {
					buf[0] = (char)(0xe0 | (v >> 12));
					buf[1] = (char)(0x80 | ((v >> 6) & 0x3f));
					buf[2] = (char)(0x80 | (v & 0x3f));
					nb = 3;
				}
				break;
			}
			default: buf[0] = c; break;
			}
		} else {
			buf[0] = c;
		}
		if (len + nb + 1 > cap) {
			cap *= 2;
			char *ns = realloc(s, cap);
			if (!ns) {
				free(s);
				perr(ps, "out of memory");
				return NULL;
			}
			s = ns;
		}
		memcpy(s + len, buf, nb);
		len += nb;
	}
	if (ps->p >= ps->end) {
		free(s);
		perr(ps, "unterminated string");
		return NULL;
	}
	ps->p++;
	s[len] = 0;
	return s;
}

/* A JSON integer, read only up to ps->end (the header is not terminated:
 * the tensor data follows it). */
static int parse_int(struct parser *ps, int64_t *v)
{
	ws(ps);
	const char *p = ps->p;
	int neg = p < ps->end && *p == '-';
	uint64_t x = 0;
	p += neg;
	if (p >= ps->end || *p < '0' || *p > '9')
		return perr(ps, "expected an integer");
	for (; p < ps->end && *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (x > ((uint64_t)INT64_MAX - d) / 10)
			return perr(ps, "integer out of range");
		x = x * 10 + d;
	}
	ps->p = p;
	*v = neg ? -(int64_t)x : (int64_t)x;
	return 0;
}

/* Skip any JSON value (for fields we do not use). */
static int skip_value(struct parser *ps, int depth)
{
	ws(ps);
	if (depth > 32 || ps->p >= ps->end)
		return perr(ps, "value nested too deep or truncated");
	char c = *ps->p;
	if (c == '"') {
		char *s = parse_string(ps);
		free(s);
		return s ? 0 : -1;
	}
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		ps->p++;
		if (peek(ps, close)) {
			ps->p++;
			return 0;
		}
		for (;;) {
			if (c == '{') {
				char *k = parse_string(ps);
				if (!k)
					return -1;
				free(k);
				if (expect(ps, ':'))
					return -1;
			}
			if (skip_value(ps, depth + 1))
				return -1;
			if (peek(ps, ',')) {
				ps->p++;
				continue;
			}
			return expect(ps, close);
		}
	}
	// number, true, false, null
	while (ps->p < ps->end && *ps->p != ',' && *ps->p != '}' && *ps->p != ']')
		ps->p++;
	return 0;
}

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

static int parse_metadata(struct parser *ps, struct dl_safetensors *st)
{
	if (expect(ps, '{'))
		return -1;
	if (peek(ps, '}')) {
		ps->p++;
		return 0;
	}
	for (;;) {
		char *k = parse_string(ps);
		if (!k)
			return -1;
		if (expect(ps, ':')) {
			free(k);
			return -1;
		}
		char *v = NULL;
		if (peek(ps, '"')) {
			v = parse_string(ps);
		} else {
			// not a string (the format says strings, but be lenient): keep its text
			const char *b = ps->p;
			if (skip_value(ps, 1) == 0)
				v = strndup(b, (size_t)(ps->p - b));
		}
		if (!v) {
			free(k);
			return perr(ps, "bad __metadata__ value");
		}
		if (st->n_meta == st->cap_meta) {
			size_t nc = st->cap_meta ? st->cap_meta * 2 : 8;
			char **nk = realloc(st->meta_keys, nc * sizeof(char *));
			if (nk)
				st->meta_keys = nk;
			char **nv = realloc(st->meta_vals, nc * sizeof(char *));
			if (nv)
				st->meta_vals = nv;
			if (!nk || !nv) {
				free(k);
				free(v);
				return perr(ps, "out of memory");
			}
			st->cap_meta = nc;
		}
		st->meta_keys[st->n_meta] = k;
		st->meta_vals[st->n_meta++] = v;
		if (peek(ps, ',')) {
			ps->p++;
			continue;
		}
		return expect(ps, '}');
	}
}

/* 0 if json is one object of string values and nothing else. */
static int metadata_check(const char *json, const char *path, char *err, size_t errlen)
{
	struct dl_safetensors tmp = {0};
	struct parser ps = {.p = json, .end = json + strlen(json), .path = path, .err = err, .errlen = errlen};
	int r = parse_metadata(&ps, &tmp);
	ws(&ps);
	if (r == 0 && ps.p != ps.end)
		r = perr(&ps, "trailing text after the __metadata__ object");
	for (size_t i = 0; i < tmp.n_meta; i++) {
		free(tmp.meta_keys[i]);
		free(tmp.meta_vals[i]);
	}
	free(tmp.meta_keys);
	free(tmp.meta_vals);
	return r;
}

static int parse_entry(struct parser *ps, struct dl_safetensors *st, char *name)
{
	struct dl_st_entry e = {.name = name, .dtype = DL_ST_OTHER};
	int have_dtype = 0, have_shape = 0, have_off = 0;
	size_t esize = 0;
	int64_t off[2] = {0, 0};
	if (expect(ps, '{'))
		return -1;
	while (!peek(ps, '}')) {
		char *k = parse_string(ps);
		if (!k || expect(ps, ':')) {
			free(k);
			return -1;
		}
		int r = 0;
		if (strcmp(k, "dtype") == 0) {
			char *d = parse_string(ps);
			if (!d)
				r = -1;
			else
				e.dtype = dtype_parse(d, &esize), have_dtype = esize > 0;
			free(d);
		} else if (strcmp(k, "shape") == 0 || strcmp(k, "data_offsets") == 0) {
			int is_shape = k[0] == 's', cnt = 0;
			r = expect(ps, '[');
			while (r == 0 && !peek(ps, ']')) {
				int64_t v;
				if ((r = parse_int(ps, &v)))
					break;
				if (is_shape ? cnt >= 8 : cnt >= 2) {
					r = perr(ps, "too many dimensions or offsets");
					break;
				}
				if (v < 0) {
					r = perr(ps, "negative shape or offset");
					break;
				}
				if (is_shape)
					e.dims[cnt++] = v;
				else
					off[cnt++] = v;
				if (peek(ps, ','))
					ps->p++;
			}
			if (r == 0)
				r = expect(ps, ']');
			if (is_shape)
				e.ndim = cnt, have_shape = 1;
			else
				have_off = cnt == 2;
		} else {
			r = skip_value(ps, 1);
		}
		free(k);
		if (r)
			return -1;
		if (peek(ps, ','))
			ps->p++;
	}
	ps->p++;
	if (!have_dtype || !have_shape || !have_off) {
		snprintf(ps->err, ps->errlen, "%s: tensor %s: missing or unknown dtype, shape or data_offsets", ps->path,
		         name);
		ps->failed = 1;
		return -1;
	}
	/* the shape's bytes must be what data_offsets span; a product that
	 * overflows (say [2^62,4] of F32 claiming 0 bytes) is refused */
	size_t nbytes = esize;
	e.count = 1;
	for (int i = 0; i < e.ndim; i++) {
		if (__builtin_mul_overflow(e.count, (size_t)e.dims[i], &e.count) ||
		    __builtin_mul_overflow(nbytes, (size_t)e.dims[i], &nbytes)) {
			snprintf(ps->err, ps->errlen, "%s: tensor %s: shape too large (its size overflows)", ps->path,
			         name);
			ps->failed = 1;
			return -1;
		}
	}
	size_t data_len = st->size - st->data_start;
	if (off[1] < off[0] || (uint64_t)off[1] > data_len || (uint64_t)(off[1] - off[0]) != nbytes) {
		snprintf(ps->err, ps->errlen, "%s: tensor %s: data_offsets [%lld,%lld] do not fit its shape or the file",
		         ps->path, name, (long long)off[0], (long long)off[1]);
		ps->failed = 1;
		return -1;
	}
	e.data = st->file + st->data_start + off[0];
	if (st->n == st->cap) {
		size_t nc = st->cap ? st->cap * 2 : 64;
		struct dl_st_entry *ne = realloc(st->entries, nc * sizeof(*ne));
		if (!ne)
			return perr(ps, "out of memory");
		st->entries = ne;
		char **nn = realloc(st->names, nc * sizeof(*nn));
		if (!nn)
			return perr(ps, "out of memory");
		st->names = nn;
		st->cap = nc;
	}
	st->names[st->n] = name;
	st->entries[st->n++] = e;
	return 0;
}

void dl_safetensors_close(struct dl_safetensors *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n; i++)
		free(st->names[i]);
	for (size_t i = 0; i < st->n_meta; i++) {
		free(st->meta_keys[i]);
		free(st->meta_vals[i]);
	}
	free(st->names);
	free(st->entries);
	free(st->meta_keys);
	free(st->meta_vals);
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
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	// not fopen: a FIFO in place of the file must not block us
	if ((fd = dl_open_regular(path, &sb, err, errlen)) < 0)
		goto fail;
	st->size = (size_t)sb.st_size;
	if (st->size < 8) {
		snprintf(err, errlen, "%s: not a safetensors file (only %zu bytes)", path, st->size);
		goto fail;
	}
	st->file = malloc(st->size + 1);
	if (!st->file) {
		snprintf(err, errlen, "%s: out of memory reading %zu bytes", path, st->size);
		goto fail;
	}
	for (size_t got = 0; got < st->size;) {
		ssize_t r = read(fd, st->file + got, st->size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(err, errlen, "%s: %s", path, r < 0 ? strerror(errno) : "short read (file shrank)");
			goto fail;
		}
		got += (size_t)r;
	}
	st->file[st->size] = 0;
	close(fd);
	fd = -1;
	uint64_t hlen;
	memcpy(&hlen, st->file, 8);
	if (hlen > st->size - 8) {
		snprintf(err, errlen, "%s: not a safetensors file (header length %llu exceeds the file)", path,
		         (unsigned long long)hlen);
		goto fail;
	}
	st->data_start = 8 + (size_t)hlen;
	struct parser ps = {.p = (const char *)st->file + 8, .end = (const char *)st->file + 8 + hlen,
	                    .path = path, .err = err, .errlen = errlen};
	if (expect(&ps, '{'))
		goto fail;
	while (!peek(&ps, '}')) {
		char *name = parse_string(&ps);
		if (!name)
			goto fail;
		if (expect(&ps, ':')) {
			free(name);
			goto fail;
		}
		if (strcmp(name, "__metadata__") == 0) {
			free(name);
			if (parse_metadata(&ps, st))
				goto fail;
		} else if (parse_entry(&ps, st, name)) {
			if (st->n == 0 || st->names[st->n - 1] != name)
				free(name);
			goto fail;
		}
		if (peek(&ps, ','))
			ps.p++;
		else if (!peek(&ps, '}')) {
			perr(&ps, "expected ',' or '}'");
			goto fail;
		}
	}
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
	for (size_t i = 0; i < st->n_meta; i++)
		if (strcmp(st->meta_keys[i], key) == 0)
			return st->meta_vals[i];
	return NULL;
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
			snprintf(err, errlen, "%s: tensor %s is missing", st->path, t->name);
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
			snprintf(err, errlen, "%s: tensor %s has shape %s, the model needs %s", st->path, t->name, a, b);
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
			snprintf(err, errlen, "%s: tensor %s is not F32 or F64", st->path, t->name);
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
		snprintf(err, errlen, "%s: out of memory", path);
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
		snprintf(err, errlen, "%s: out of memory", st->path);
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
