#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/optim.h"
#include "engine/safetensors.h"

#define DL_CKPT_FORMAT "dljob-checkpoint-1"

static int path_join(char *out, size_t len, const char *dir, const char *name, char *err, size_t errlen)
{
	int n = snprintf(out, len, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= len) {
		snprintf(err, errlen, "checkpoint path too long: %s/%s", dir, name);
		return -1;
	}
	return 0;
}

int dl_checkpoint_save(const char *dir, const struct dl_graph *g, const struct dl_optim_state *o,
                       const struct dl_ckpt_state *s, char *err, size_t errlen)
{
	char cur[4096], prev[4096], meta[1024];
	struct dl_tensor_f32 **extra = NULL;
	size_t n_extra = o ? o->n : 0;
	int rv = -1;

	if (path_join(cur, sizeof(cur), dir, DL_CHECKPOINT_NAME, err, errlen) < 0 ||
	    path_join(prev, sizeof(prev), dir, DL_CHECKPOINT_PREV_NAME, err, errlen) < 0)
		return -1;
	if (n_extra) {
		extra = calloc(n_extra, sizeof(*extra));
		if (!extra) {
			snprintf(err, errlen, "checkpoint: out of memory");
			return -1;
		}
		for (size_t i = 0; i < n_extra; i++)
			extra[i] = &o->mom[i];
	}
	/* Model names are [a-z0-9]: nothing in the metadata needs escaping. */
	int n = snprintf(meta, sizeof(meta),
	                 "{\"format\":\"" DL_CKPT_FORMAT "\",\"model\":\"%s\",\"step\":\"%ld\","
	                 "\"epoch\":\"%d\",\"epoch_step\":\"%ld\",\"seed\":\"%" PRIu64 "\","
	                 "\"wall_s\":\"%.3f\",\"global_batch\":\"%d\",\"epochs\":\"%d\"}",
	                 s->model, s->step, s->epoch, s->epoch_step, s->seed, s->wall_s,
	                 s->global_batch, s->epochs);
	if (n < 0 || (size_t)n >= sizeof(meta)) {
		snprintf(err, errlen, "%s:%d: checkpoint metadata too long", __FILE__, __LINE__);
		goto out;
	}
	/* Keep the previous checkpoint until the new one is complete on disk:
	 * the write itself goes through a temp file and a rename. */
	if (rename(cur, prev) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", cur, prev, strerror(errno));
		goto out;
	}
	if (dl_model_state_write(cur, g, extra, n_extra, meta, err, errlen) < 0) {
		size_t k = strlen(err);
		if (access(prev, F_OK) == 0 && k < errlen)
			snprintf(err + k, errlen - k, "; the checkpoint before is kept as %s, --resume takes it", prev);
		goto out;
	}
	rv = 0;
out:
	free(extra);
	return rv;
}

/* Is name "<prefix>.tmp.<digits>", of a pid other than ours? */
static int is_stale_tmp(const char *name)
{
	static const char *const outs[] = {DL_CHECKPOINT_NAME, "model.safetensors", "metrics.png"};
	const char *t = strstr(name, ".tmp."), *d;
	size_t plen;
	if (!t)
		return 0;
	plen = (size_t)(t - name);
	d = t + 5;
	if (!*d || strspn(d, "0123456789") != strlen(d) || strtol(d, NULL, 10) == (long)getpid())
		return 0;
	for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++)
		if (plen == strlen(outs[i]) && strncmp(name, outs[i], plen) == 0)
			return 1;
	/* Not the ImageFolder index cache's: every rank may write one into
	 * --out, and another rank's (another node's pid) may be live now. */
	return 0;
}

int dl_out_remove_stale_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat sb;
	int n = 0;
	if (!d)
		return 0; /* what writes there next says why */
	while ((e = readdir(d)))
		if (is_stale_tmp(e->d_name) && fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(sb.st_mode)) {
			if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
				fprintf(stderr, "dljob: removed %s/%s, a temporary file left by a writer that was killed\n",
				        dir, e->d_name);
				n++;
			} else {
				fprintf(stderr, "dljob: cannot remove %s/%s (a temporary file left by a writer that was "
				        "killed): %s\n", dir, e->d_name, strerror(errno));
			}
		}
	closedir(d);
	return n;
}

int dl_checkpoint_find(const char *dir, char *path, size_t len)
{
	static const char *const names[] = {DL_CHECKPOINT_NAME, DL_CHECKPOINT_PREV_NAME};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int n = snprintf(path, len, "%s/%s", dir, names[i]);
		if (n < 0 || (size_t)n >= len)
			return -1;
		if (access(path, R_OK) == 0)
			return 0;
	}
	return -1;
}

/* A metadata value as an integer in [0, max], the whole string. */
static int meta_long(const struct dl_safetensors *st, const char *path, const char *key, long max, long *out,
                     char *err, size_t errlen)
{
	const char *v = dl_safetensors_meta(st, key);
	char *end;
	if (!v) {
		snprintf(err, errlen, "%s: not a dljob checkpoint (no \"%s\" in its metadata)", path, key);
		return -1;
	}
	errno = 0;
	long x = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno == ERANGE || x < 0 || x > max) {
		/* the value is the file's bytes: show it only when it is printable */
		int printable = strlen(v) <= 32;
		for (const char *c = v; printable && *c; c++)
			printable = *c >= 0x20 && *c < 0x7f;
		snprintf(err, errlen, "%s: bad \"%s\" in its metadata: %s%s%s (an integer in [0, %ld])", path, key,
		         printable ? "'" : "", printable ? v : "unprintable or too long", printable ? "'" : "", max);
		return -1;
	}
	*out = x;
	return 0;
}

int dl_checkpoint_load(const char *path, struct dl_graph *g, struct dl_optim_state *o,
                       struct dl_ckpt_state *s, char *err, size_t errlen)
{
	struct dl_safetensors *st;
	struct dl_tensor_f32 **extra = NULL;
	size_t n_extra = o ? o->n : 0;
	long epoch, gb, epochs;
	const char *v;
	char *end;
	int rv = -1;

	memset(s, 0, sizeof(*s));
	st = dl_safetensors_open(path, err, errlen);
	if (!st)
		return -1;
	v = dl_safetensors_meta(st, "format");
	if (!v || strcmp(v, DL_CKPT_FORMAT) != 0) {
		snprintf(err, errlen, "%s: not a dljob checkpoint (format '%s', expected '%s')", path,
		         v ? v : "none", DL_CKPT_FORMAT);
		goto out;
	}
	v = dl_safetensors_meta(st, "model");
	if (!v || strlen(v) >= sizeof(s->model)) {
		snprintf(err, errlen, "%s: bad \"model\" in its metadata", path);
		goto out;
	}
	snprintf(s->model, sizeof(s->model), "%s", v);
	if (strcmp(s->model, g->model) != 0) {
		snprintf(err, errlen, "%s holds a %s, not a %s", path, s->model, g->model);
		goto out;
	}
	/* epoch, epochs and global_batch become ints: range-checked first */
	if (meta_long(st, path, "step", LONG_MAX, &s->step, err, errlen) < 0 ||
	    meta_long(st, path, "epoch", INT_MAX, &epoch, err, errlen) < 0 ||
	    meta_long(st, path, "epoch_step", LONG_MAX, &s->epoch_step, err, errlen) < 0 ||
	    meta_long(st, path, "global_batch", INT_MAX, &gb, err, errlen) < 0 ||
	    meta_long(st, path, "epochs", INT_MAX, &epochs, err, errlen) < 0)
		goto out;
	if (epoch > epochs) {
		snprintf(err, errlen, "%s: bad metadata: epoch %ld is past its epochs %ld", path, epoch, epochs);
		goto out;
	}
	s->epoch = (int)epoch;
	s->global_batch = (int)gb;
	s->epochs = (int)epochs;
	v = dl_safetensors_meta(st, "seed");
	errno = 0;
	if (!v || *v == '\0' || *v == '-' || (s->seed = strtoull(v, &end, 10), *end != '\0' || errno)) {
		snprintf(err, errlen, "%s: bad \"seed\" in its metadata", path);
		goto out;
	}
	v = dl_safetensors_meta(st, "wall_s");
	s->wall_s = v ? strtod(v, &end) : 0;
	if (v && (*v == '\0' || *end != '\0' || !(s->wall_s >= 0 && s->wall_s <= 1e12))) {
		snprintf(err, errlen, "%s: bad \"wall_s\" in its metadata", path);
		goto out;
	}

	if (n_extra) {
		extra = calloc(n_extra, sizeof(*extra));
		if (!extra) {
			snprintf(err, errlen, "checkpoint: out of memory");
			goto out;
		}
		for (size_t i = 0; i < n_extra; i++)
			extra[i] = &o->mom[i];
	}
	char lerr[384];
	if (dl_model_state_load(st, g, extra, n_extra, lerr, sizeof(lerr)) < 0) {
		snprintf(err, errlen, "%s: %s", path, lerr);
		goto out;
	}
	/* The first optimizer step initialises the momentum buffers instead of
	 * accumulating into them: tell it they are already live. */
	if (o)
		o->steps = s->step;
	rv = 0;
out:
	free(extra);
	dl_safetensors_close(st);
	return rv;
}

/* ---- --init ---- */

/* One value of a tensor entry as float: F32, F64, F16 or BF16. */
static float entry_value(const struct dl_st_entry *e, size_t j)
{
	const unsigned char *p = e->data;
	switch (e->dtype) {
	case DL_ST_F32: {
		float f;
		memcpy(&f, p + 4 * j, 4);
		return f;
	}
	case DL_ST_F64: {
		double d;
		memcpy(&d, p + 8 * j, 8);
		return (float)d;
	}
	case DL_ST_BF16: {
		uint32_t u = (uint32_t)(p[2 * j] | p[2 * j + 1] << 8) << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	default: { /* DL_ST_F16 */
		unsigned h = (unsigned)(p[2 * j] | p[2 * j + 1] << 8), ex = (h >> 10) & 31, m = h & 1023;
		float v = ex == 0 ? ldexpf((float)m, -24) : ex == 31 ? (m ? NAN : INFINITY)
			: ldexpf((float)(m | 1024), (int)ex - 25);
		return h & 0x8000 ? -v : v;
	}
	}
}

/* The problems found, as one line: "missing: a, b; unexpected: c". */
struct problems {
	char missing[1024], unexpected[1024], shape[1024];
	int n_missing, n_unexpected, n_shape, head_shape;
};

static void add_name(char *list, size_t len, int *count, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_name(char *list, size_t len, int *count, const char *fmt, ...)
{
	char item[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(item, sizeof(item), fmt, ap);
	va_end(ap);
	size_t used = strlen(list);
	/* keep room for ", ..." so a long list still says it goes on */
	if (used + strlen(item) + 8 < len)
		snprintf(list + used, len - used, "%s%s", *count ? ", " : "", item);
	else if (!strstr(list, ", ..."))
		snprintf(list + used, len - used, ", ...");
	(*count)++;
}

/* A file's name shown in a message: printable, at most 80 characters. */
static const char *printable(const char *s, char *buf, size_t len)
{
	size_t i = 0;
	for (; s[i] && i + 4 < len && i < 80; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (s[i])
		buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
	buf[i] = 0;
	return buf;
}

static void dims_str(char *buf, size_t len, int ndim, const int64_t *d64, const int *d32)
{
	size_t o = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < ndim && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", d64 ? (long long)d64[i] : (long long)d32[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

/* Is name "<bn>.num_batches_tracked" for a BN layer of g? */
static int is_bn_counter(const struct dl_graph *g, const char *name)
{
	static const char suf[] = ".num_batches_tracked";
	size_t L = strlen(name), S = sizeof(suf) - 1;
	if (L <= S || strcmp(name + L - S, suf) != 0)
		return 0;
	for (int i = 0; i < g->n_buffers; i++) {
		const char *b = g->buffers[i].name, *m = strstr(b, ".running_mean");
		if (m && (size_t)(m - b) == L - S && strncmp(b, name, L - S) == 0 && m[13] == 0)
			return 1;
	}
	return 0;
}

int dl_weights_init(const char *path, struct dl_graph *g, int new_head, char *err, size_t errlen)
{
	struct problems *pr = calloc(1, sizeof(*pr));
	struct dl_safetensors *st = NULL;
	const struct dl_tensor_f32 *head[2] = {NULL, NULL};
	char nb[96], a[96], b[96];
	int rv = -1;

	if (!pr) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	if (!(st = dl_safetensors_open(path, err, errlen)))
		goto out;
	for (int i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].kind == DL_NODE_FC) {
			head[0] = &g->params[g->nodes[i].param[0]];
			head[1] = &g->params[g->nodes[i].param[1]];
		}
	const char *fmt = dl_safetensors_meta(st, "format"), *model = dl_safetensors_meta(st, "model");
	int is_ckpt = fmt && strcmp(fmt, DL_CKPT_FORMAT) == 0;
	if (model && strcmp(model, g->model) != 0) {
		snprintf(err, errlen, "%s holds a %s, not a %s", path, printable(model, nb, sizeof(nb)), g->model);
		goto out;
	}
	/* every tensor of the model: present, same shape, a float type */
	int nt = g->n_params + g->n_buffers;
	for (int i = 0; i < nt; i++) {
		struct dl_tensor_f32 *t = i < g->n_params ? &g->params[i] : &g->buffers[i - g->n_params];
		int is_head = t == head[0] || t == head[1];
		if (is_head && new_head)
			continue;
		const struct dl_st_entry *e = dl_safetensors_find(st, t->name);
		if (!e) {
			add_name(pr->missing, sizeof(pr->missing), &pr->n_missing, "%s", t->name);
			continue;
		}
		int same = e->ndim == t->ndim;
		for (int d = 0; same && d < t->ndim; d++)
			same = e->dims[d] == t->dims[d];
		if (!same) {
			dims_str(a, sizeof(a), e->ndim, e->dims, NULL);
			dims_str(b, sizeof(b), t->ndim, NULL, t->dims);
			add_name(pr->shape, sizeof(pr->shape), &pr->n_shape, "%s %s (model %s)", t->name, a, b);
			pr->head_shape |= is_head;
			continue;
		}
		if (e->dtype != DL_ST_F32 && e->dtype != DL_ST_F64 && e->dtype != DL_ST_F16 && e->dtype != DL_ST_BF16) {
			add_name(pr->shape, sizeof(pr->shape), &pr->n_shape, "%s (not a float type)", t->name);
			continue;
		}
	}
	/* every tensor of the file: one of the model's (or what the model
	 * has without keeping it as a tensor) */
	for (size_t i = 0; i < dl_safetensors_count(st); i++) {
		const struct dl_st_entry *e = dl_safetensors_entry(st, i);
		int known = 0;
		for (int k = 0; k < nt && !known; k++)
			known = strcmp(e->name, k < g->n_params ? g->params[k].name : g->buffers[k - g->n_params].name) == 0;
		if (known)
			continue;
		if (is_bn_counter(g, e->name)) {
			if (e->dtype != DL_ST_I64 || e->count != 1)
				add_name(pr->shape, sizeof(pr->shape), &pr->n_shape, "%s (not one I64)",
					 printable(e->name, nb, sizeof(nb)));
			continue;
		}
		size_t L = strlen(e->name);
		if (is_ckpt && L > 16 && strcmp(e->name + L - 16, ".momentum_buffer") == 0)
			continue; /* the optimizer starts fresh */
		add_name(pr->unexpected, sizeof(pr->unexpected), &pr->n_unexpected, "%s", printable(e->name, nb, sizeof(nb)));
	}
	if (pr->n_missing || pr->n_unexpected || pr->n_shape) {
		const struct {
			const char *what, *list;
			int n;
		} part[] = {{"missing", pr->missing, pr->n_missing}, {"unexpected", pr->unexpected, pr->n_unexpected},
			    {"mis-shaped", pr->shape, pr->n_shape}};
		snprintf(err, errlen, "%s does not fit %s with %d classes:", path, g->model, g->num_classes);
		for (size_t i = 0, sep = 0; i < 3; i++)
			if (part[i].n && strlen(err) + 32 < errlen) {
				snprintf(err + strlen(err), errlen - strlen(err), "%s %d %s: %s", sep++ ? ";" : "", part[i].n,
					 part[i].what, part[i].list);
			}
		if (pr->head_shape && !new_head && strlen(err) + 70 < errlen)
			snprintf(err + strlen(err), errlen - strlen(err),
				 "; --init-head new starts a new classifier for another class count");
		goto out;
	}
	/* all checked: copy */
	for (int i = 0; i < nt; i++) {
		struct dl_tensor_f32 *t = i < g->n_params ? &g->params[i] : &g->buffers[i - g->n_params];
		if ((t == head[0] || t == head[1]) && new_head)
			continue;
		const struct dl_st_entry *e = dl_safetensors_find(st, t->name);
		if (e->dtype == DL_ST_F32)
			memcpy(t->data, e->data, t->count * 4);
		else
			for (size_t j = 0; j < t->count; j++)
				t->data[j] = entry_value(e, j);
	}
	g->bn_batches_tracked = 0;
	for (size_t i = 0; i < dl_safetensors_count(st); i++) {
		const struct dl_st_entry *e = dl_safetensors_entry(st, i);
		if (is_bn_counter(g, e->name)) {
			int64_t v;
			memcpy(&v, e->data, 8);
			g->bn_batches_tracked = v < 0 ? 0 : v;
			break;
		}
	}
	rv = 0;
out:
	dl_safetensors_close(st);
	free(pr);
	return rv;
}
