#include "config.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	if (dl_model_state_write(cur, g, extra, n_extra, meta, err, errlen) < 0)
		goto out;
	rv = 0;
out:
	free(extra);
	return rv;
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

/* A metadata value as an integer, the whole string. */
static int meta_long(const struct dl_safetensors *st, const char *path, const char *key, long *out,
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
	if (*v == '\0' || *end != '\0' || errno == ERANGE || x < 0) {
		snprintf(err, errlen, "%s: bad \"%s\" in its metadata: '%s'", path, key, v);
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
	if (meta_long(st, path, "step", &s->step, err, errlen) < 0 ||
	    meta_long(st, path, "epoch", &epoch, err, errlen) < 0 ||
	    meta_long(st, path, "epoch_step", &s->epoch_step, err, errlen) < 0 ||
	    meta_long(st, path, "global_batch", &gb, err, errlen) < 0 ||
	    meta_long(st, path, "epochs", &epochs, err, errlen) < 0)
		goto out;
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
	s->wall_s = v ? strtod(v, NULL) : 0;

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
