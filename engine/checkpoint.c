#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/optim.h"
#include "engine/safetensors.h"

/* The format's version is the number at the end.  Metadata keys added
 * later are optional when read, so such an addition keeps the version:
 * it changes only when what a key or tensor means changes. */
#define DL_CKPT_FORMAT_PREFIX "dljob-checkpoint-"
#define DL_CKPT_VERSION 1
#define DL_CKPT_FORMAT DL_CKPT_FORMAT_PREFIX "1"

static int path_join(char *out, size_t len, const char *dir, const char *name, char *err, size_t errlen)
{
	int n = snprintf(out, len, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= len) {
		dl_errf(err, errlen, "checkpoint path too long: %s/%s", dir, name);
		return -1;
	}
	return 0;
}

int dl_checkpoint_save(const char *dir, const struct dl_graph *g, const struct dl_optim_state *o,
                       const struct dl_ckpt_state *s, char *err, size_t errlen)
{
	char cur[4096], prev[4096], meta[1280], fp[96] = "";
	struct dl_tensor_f32 **extra = NULL;
	size_t n_extra = o ? o->n : 0;
	int rv = -1;

	if (path_join(cur, sizeof(cur), dir, DL_CHECKPOINT_NAME, err, errlen) < 0 ||
	    path_join(prev, sizeof(prev), dir, DL_CHECKPOINT_PREV_NAME, err, errlen) < 0)
		return -1;
	if (n_extra) {
		extra = calloc(n_extra, sizeof(*extra));
		if (!extra) {
			dl_errf(err, errlen, "checkpoint: out of memory");
			return -1;
		}
		for (size_t i = 0; i < n_extra; i++)
			extra[i] = &o->mom[i];
	}
	/* the data's fingerprints, when the dataset has them (0: none) */
	if (s->data_classes || s->data_samples)
		snprintf(fp, sizeof(fp), "\"data_classes\":\"%016" PRIx64 "\",\"data_samples\":\"%016" PRIx64 "\",",
		         s->data_classes, s->data_samples);
	/* Model, schedule, precision and backend names are [a-z0-9]: nothing in
	 * the metadata needs escaping. */
	int n = snprintf(meta, sizeof(meta),
	                 "{\"format\":\"" DL_CKPT_FORMAT "\",\"model\":\"%s\",\"step\":\"%ld\","
	                 "\"epoch\":\"%d\",\"epoch_step\":\"%ld\",\"seed\":\"%" PRIu64 "\","
	                 "\"wall_s\":\"%.3f\",\"global_batch\":\"%d\",\"epochs\":\"%d\",%s"
	                 "\"ranks\":\"%d\",\"batch\":\"%d\",\"num_classes\":\"%d\",\"train_samples\":\"%ld\","
	                 "\"eval_samples\":\"%ld\",\"lr\":\"%.17g\",\"warmup_epochs\":\"%.17g\","
	                 "\"schedule\":\"%s\",\"precision\":\"%s\",\"backend\":\"%s\"",
	                 s->model, s->step, s->epoch, s->epoch_step, s->seed, s->wall_s,
	                 s->global_batch, s->epochs, fp, s->ranks, s->batch, s->num_classes, s->train_samples,
	                 s->eval_samples, s->lr, s->warmup_epochs, s->schedule, s->precision, s->backend);
	/* fp16's dynamic loss scale, only where the backend has one (optional
	 * keys: dl_checkpoint_load) */
	if (n >= 0 && (size_t)n < sizeof(meta) && o && o->loss_scale > 0)
		n += snprintf(meta + n, sizeof(meta) - (size_t)n, ",\"loss_scale\":\"%.9g\",\"loss_scale_good\":\"%ld\"",
		              o->loss_scale, o->loss_scale_good);
	if (n >= 0 && (size_t)n < sizeof(meta))
		n += snprintf(meta + n, sizeof(meta) - (size_t)n, "}");
	if (n < 0 || (size_t)n >= sizeof(meta)) {
		dl_errf(err, errlen, "%s:%d: checkpoint metadata too long", __FILE__, __LINE__);
		goto out;
	}
	/* Keep the previous checkpoint until the new one is complete on disk:
	 * the write itself goes through a temp file and a rename. */
	if (rename(cur, prev) < 0 && errno != ENOENT) {
		dl_errf(err, errlen, "cannot rename %s to %s: %s", cur, prev, strerror(errno));
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
		dl_errf(err, errlen, "%s: not a dljob checkpoint (no \"%s\" in its metadata)", path, key);
		return -1;
	}
	errno = 0;
	long x = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno == ERANGE || x < 0 || x > max) {
		/* the value is the file's bytes: show it only when it is printable */
		int printable = strlen(v) <= 32;
		for (const char *c = v; printable && *c; c++)
			printable = *c >= 0x20 && *c < 0x7f;
		dl_errf(err, errlen, "%s: bad \"%s\" in its metadata: %s%s%s (an integer in [0, %ld])", path, key,
		         printable ? "'" : "", printable ? v : "unprintable or too long", printable ? "'" : "", max);
		return -1;
	}
	*out = x;
	return 0;
}

/* An optional metadata value: absent leaves *out 0; else as meta_long. */
static int meta_opt_long(const struct dl_safetensors *st, const char *path, const char *key, long max, long *out,
                         char *err, size_t errlen)
{
	*out = 0;
	return dl_safetensors_meta(st, key) ? meta_long(st, path, key, max, out, err, errlen) : 0;
}

/* An optional metadata value as a finite double in [0, 1e9]; absent: 0. */
static int meta_opt_double(const struct dl_safetensors *st, const char *path, const char *key, double *out,
                           char *err, size_t errlen)
{
	const char *v = dl_safetensors_meta(st, key);
	char *end;
	*out = 0;
	if (!v)
		return 0;
	*out = strtod(v, &end);
	if (*v == '\0' || *end != '\0' || !(*out >= 0 && *out <= 1e9)) {
		dl_errf(err, errlen, "%s: bad \"%s\" in its metadata (a number in [0, 1e9])", path, key);
		return -1;
	}
	return 0;
}

/* An optional 64-bit value written as 16 hex digits; absent: 0. */
static int meta_opt_hex64(const struct dl_safetensors *st, const char *path, const char *key, uint64_t *out,
                          char *err, size_t errlen)
{
	const char *v = dl_safetensors_meta(st, key);
	*out = 0;
	if (!v)
		return 0;
	if (strlen(v) != 16 || strspn(v, "0123456789abcdef") != 16) {
		dl_errf(err, errlen, "%s: bad \"%s\" in its metadata (16 hex digits)", path, key);
		return -1;
	}
	*out = strtoull(v, NULL, 16);
	return 0;
}

/* An optional metadata name ([a-z0-9], shorter than len); absent: "". */
static int meta_opt_name(const struct dl_safetensors *st, const char *path, const char *key, char *out, size_t len,
                         char *err, size_t errlen)
{
	const char *v = dl_safetensors_meta(st, key);
	out[0] = 0;
	if (!v)
		return 0;
	if (!*v || strlen(v) >= len || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(v)) {
		dl_errf(err, errlen, "%s: bad \"%s\" in its metadata (a name of [a-z0-9], at most %zu)", path, key,
		         len - 1);
		return -1;
	}
	snprintf(out, len, "%s", v);
	return 0;
}

/* The "format" value: this version's, or a message saying whose it is. */
static int check_format(const char *v, const char *path, char *err, size_t errlen)
{
	const size_t P = sizeof(DL_CKPT_FORMAT_PREFIX) - 1;
	char *end;
	if (v && strcmp(v, DL_CKPT_FORMAT) == 0)
		return 0;
	if (!v || strncmp(v, DL_CKPT_FORMAT_PREFIX, P) != 0 || v[P] < '0' || v[P] > '9') {
		dl_errf(err, errlen, "%s: not a dljob checkpoint (its metadata has no \"format\": \"" DL_CKPT_FORMAT
		         "\"); --init PATH starts a new run from the weights of a safetensors file", path);
		return -1;
	}
	errno = 0;
	unsigned long ver = strtoul(v + P, &end, 10);
	if (*end || errno || ver > 1000000) {
		dl_errf(err, errlen, "%s: not a dljob checkpoint (unknown format version)", path);
		return -1;
	}
	dl_errf(err, errlen, "%s is a checkpoint of %s dljob (format version %lu; this dljob reads version %d): "
	         "resume it with the dljob that wrote it, or start a new run from its weights with --init %s",
	         path, ver > DL_CKPT_VERSION ? "a newer" : "an older", ver, DL_CKPT_VERSION, path);
	return -1;
}

/* A checkpoint of model `have` continued as `want`? */
static int other_model(const char *path, const char *have, const char *want, char *err, size_t errlen)
{
	if (strcmp(have, want) == 0)
		return 0;
	dl_errf(err, errlen, "%s holds a %s, not a %s: resume it with --model %s (another model is a new run, in "
	         "another --out)", path, have, want, have);
	return -1;
}

int dl_checkpoint_check(const char *path, const struct dl_ckpt_state *ck, const struct dl_ckpt_state *run,
                        char *err, size_t errlen)
{
	if (other_model(path, ck->model, run->model, err, errlen) < 0)
		return -1;
	/* The data: the epoch's permutation is of the training split's indices,
	 * so another split size makes the position name other samples. */
	if ((ck->train_samples && ck->train_samples != run->train_samples) ||
	    (ck->eval_samples && ck->eval_samples != run->eval_samples) ||
	    (ck->num_classes && ck->num_classes != run->num_classes)) {
		dl_errf(err, errlen, "%s was written on data of %ld training and %ld held-out samples in %d classes, "
		         "--data now has %ld, %ld and %d: the data changed since (samples or classes added or removed), "
		         "so the "
		         "checkpoint's position in the epoch would name other samples; resume on the data it was "
		         "written with, or start a new run from its weights with --init %s in another --out",
		         path, ck->train_samples, ck->eval_samples, ck->num_classes, run->train_samples,
		         run->eval_samples, run->num_classes, path);
		return -1;
	}
	/* The same sizes, other data: a tree replaced by another at the same
	 * path, classes renamed.  (A fingerprint the checkpoint lacks is not
	 * checked: written by a dljob before them, or synthetic data.) */
	int classes = ck->data_classes && ck->data_classes != run->data_classes;
	int samples = ck->data_samples && ck->data_samples != run->data_samples;
	if (classes || samples) {
		dl_errf(err, errlen, "%s was written on other data than --data holds now, though of the same size "
		         "(%ld training and %ld held-out samples in %d classes): %s; resume on the data it was "
		         "written with, or start a new run from its weights with --init %s in another --out",
		         path, run->train_samples, run->eval_samples, run->num_classes,
		         classes && samples ? "the class names and the list of samples differ (so labels would mean "
		                              "other classes, and the position in the epoch name other samples)"
		         : classes ? "the class names differ (its labels would mean other classes now)"
		                   : "the list of samples differs (other files or file names: its position in the "
		                     "epoch would name other samples)",
		         path);
		return -1;
	}
	if (ck->global_batch != run->global_batch) {
		int k = ck->ranks > 0 && ck->batch > 0
			? snprintf(err, errlen, "%s was written by %d rank%s x --batch %d = global batch %d, this run is "
			           "%d rank%s x --batch %d = %d", path, ck->ranks, ck->ranks == 1 ? "" : "s", ck->batch,
			           ck->global_batch, run->ranks, run->ranks == 1 ? "" : "s", run->batch, run->global_batch)
			: snprintf(err, errlen, "%s was written with global batch %d, this run has %d (%d rank%s x --batch "
			           "%d)", path, ck->global_batch, run->global_batch, run->ranks,
			           run->ranks == 1 ? "" : "s", run->batch);
		size_t o = k < 0 ? 0 : (size_t)k < errlen ? (size_t)k : errlen - 1;
		const char *why = ": a resumed run keeps the global batch, which its position in the data, its step "
		                  "count and its learning rate are counted in";
		if (ck->global_batch % run->ranks == 0)
			snprintf(err + o, errlen - o, "%s; resume on %d rank%s with --batch %d", why, run->ranks,
			         run->ranks == 1 ? "" : "s", ck->global_batch / run->ranks);
		else
			snprintf(err + o, errlen - o, "%s, and %d ranks cannot share %d samples evenly; resume on a rank "
			         "count N that divides %d, with --batch %d/N", why, run->ranks, ck->global_batch,
			         ck->global_batch, ck->global_batch);
		return -1;
	}
	/* The position is in epoch `epoch`, `epoch_step` batches in: a run
	 * must at least include that much. */
	long need = (long)ck->epoch + (ck->epoch_step > 0);
	if (run->epochs < need) {
		dl_errf(err, errlen, "%s is at step %ld, in epoch %ld, past --epochs %d: give --epochs %ld or more "
		         "(its run had %d)", path, ck->step, need, run->epochs, need, ck->epochs);
		return -1;
	}
	return 0;
}

int dl_checkpoint_load(const char *path, struct dl_graph *g, struct dl_optim_state *o,
                       struct dl_ckpt_state *s, const struct dl_ckpt_state *run, char *err, size_t errlen)
{
	struct dl_safetensors *st;
	struct dl_tensor_f32 **extra = NULL;
	size_t n_extra = o ? o->n : 0;
	long epoch, gb, epochs, ranks, batch, classes, good;
	double scale;
	const char *v;
	char *end;
	int rv = -1;

	memset(s, 0, sizeof(*s));
	st = dl_safetensors_open(path, err, errlen);
	if (!st)
		return -1;
	if (check_format(dl_safetensors_meta(st, "format"), path, err, errlen) < 0)
		goto out;
	v = dl_safetensors_meta(st, "model");
	if (!v || strlen(v) >= sizeof(s->model)) {
		dl_errf(err, errlen, "%s: bad \"model\" in its metadata", path);
		goto out;
	}
	snprintf(s->model, sizeof(s->model), "%s", v);
	if (other_model(path, s->model, g->model, err, errlen) < 0)
		goto out;
	/* epoch, epochs and global_batch become ints: range-checked first */
	if (meta_long(st, path, "step", LONG_MAX, &s->step, err, errlen) < 0 ||
	    meta_long(st, path, "epoch", INT_MAX, &epoch, err, errlen) < 0 ||
	    meta_long(st, path, "epoch_step", LONG_MAX, &s->epoch_step, err, errlen) < 0 ||
	    meta_long(st, path, "global_batch", INT_MAX, &gb, err, errlen) < 0 ||
	    meta_long(st, path, "epochs", INT_MAX, &epochs, err, errlen) < 0)
		goto out;
	if (epoch > epochs) {
		dl_errf(err, errlen, "%s: bad metadata: epoch %ld is past its epochs %ld", path, epoch, epochs);
		goto out;
	}
	if (gb == 0) {
		dl_errf(err, errlen, "%s: bad metadata: global batch 0", path);
		goto out;
	}
	s->epoch = (int)epoch;
	s->global_batch = (int)gb;
	s->epochs = (int)epochs;
	if (meta_opt_long(st, path, "ranks", INT_MAX, &ranks, err, errlen) < 0 ||
	    meta_opt_long(st, path, "batch", INT_MAX, &batch, err, errlen) < 0 ||
	    meta_opt_long(st, path, "num_classes", INT_MAX, &classes, err, errlen) < 0 ||
	    meta_opt_long(st, path, "train_samples", LONG_MAX, &s->train_samples, err, errlen) < 0 ||
	    meta_opt_long(st, path, "eval_samples", LONG_MAX, &s->eval_samples, err, errlen) < 0 ||
	    meta_opt_double(st, path, "lr", &s->lr, err, errlen) < 0 ||
	    meta_opt_double(st, path, "warmup_epochs", &s->warmup_epochs, err, errlen) < 0 ||
	    meta_opt_name(st, path, "schedule", s->schedule, sizeof(s->schedule), err, errlen) < 0 ||
	    meta_opt_name(st, path, "precision", s->precision, sizeof(s->precision), err, errlen) < 0 ||
	    meta_opt_name(st, path, "backend", s->backend, sizeof(s->backend), err, errlen) < 0 ||
	    meta_opt_hex64(st, path, "data_classes", &s->data_classes, err, errlen) < 0 ||
	    meta_opt_hex64(st, path, "data_samples", &s->data_samples, err, errlen) < 0)
		goto out;
	if ((ranks || batch) && ranks * batch != gb) {
		dl_errf(err, errlen, "%s: bad metadata: %ld ranks x batch %ld is not its global batch %ld", path, ranks,
		         batch, gb);
		goto out;
	}
	s->ranks = (int)ranks;
	s->batch = (int)batch;
	s->num_classes = (int)classes;
	v = dl_safetensors_meta(st, "seed");
	errno = 0;
	if (!v || *v == '\0' || *v == '-' || (s->seed = strtoull(v, &end, 10), *end != '\0' || errno)) {
		dl_errf(err, errlen, "%s: bad \"seed\" in its metadata", path);
		goto out;
	}
	v = dl_safetensors_meta(st, "wall_s");
	s->wall_s = v ? strtod(v, &end) : 0;
	if (v && (*v == '\0' || *end != '\0' || !(s->wall_s >= 0 && s->wall_s <= 1e12))) {
		dl_errf(err, errlen, "%s: bad \"wall_s\" in its metadata", path);
		goto out;
	}
	if (run && dl_checkpoint_check(path, s, run, err, errlen) < 0)
		goto out;
	/* fp16's loss scale: optional (absent in checkpoints of other backends
	 * and precisions, and of a dljob before it was kept: 0, the initial
	 * scale on resume); the backends keep it as a float, which must not
	 * round it to 0 (denormal floats are kept: what a %.9g of one reads) */
	v = dl_safetensors_meta(st, "loss_scale");
	scale = v ? strtod(v, &end) : 0;
	if (v && (*v == '\0' || *end != '\0' || !(scale > 0 && scale <= FLT_MAX && (float)scale > 0))) {
		dl_errf(err, errlen, "%s: bad \"loss_scale\" in its metadata (a number in (0, %g])", path,
		         (double)FLT_MAX);
		goto out;
	}
	if (meta_opt_long(st, path, "loss_scale_good", DL_FP16_GROWTH_INTERVAL - 1, &good, err, errlen) < 0)
		goto out;
	if (!v != !dl_safetensors_meta(st, "loss_scale_good")) {
		dl_errf(err, errlen, "%s: bad metadata: \"loss_scale\" and \"loss_scale_good\" come together", path);
		goto out;
	}

	if (n_extra) {
		extra = calloc(n_extra, sizeof(*extra));
		if (!extra) {
			dl_errf(err, errlen, "checkpoint: out of memory");
			goto out;
		}
		for (size_t i = 0; i < n_extra; i++)
			extra[i] = &o->mom[i];
	}
	/* its messages start with the path */
	if (dl_model_state_load(st, g, extra, n_extra, err, errlen) < 0)
		goto out;
	/* The first optimizer step initialises the momentum buffers instead of
	 * accumulating into them: tell it they are already live. */
	if (o) {
		o->steps = s->step;
		o->loss_scale = scale;
		o->loss_scale_good = good;
	}
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
		dl_errf(err, errlen, "%s: out of memory", path);
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
	/* any version's: their weights have torchvision's names too */
	int is_ckpt = fmt && strncmp(fmt, DL_CKPT_FORMAT_PREFIX, sizeof(DL_CKPT_FORMAT_PREFIX) - 1) == 0;
	if (model && strcmp(model, g->model) != 0) {
		dl_errf(err, errlen, "%s holds a %s, not a %s", path, printable(model, nb, sizeof(nb)), g->model);
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
		dl_errf(err, errlen, "%s does not fit %s with %d classes:", path, g->model, g->num_classes);
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
