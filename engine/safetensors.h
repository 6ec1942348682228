/* safetensors files (https://huggingface.co/docs/safetensors): 8-byte
 * little-endian header length, a JSON header {"name": {"dtype", "shape",
 * "data_offsets": [begin, end]}, "__metadata__": {"key": "value"}}, padded
 * with spaces to a multiple of 8, then the raw little-endian data. */
#ifndef DLJOB_ENGINE_SAFETENSORS_H
#define DLJOB_ENGINE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "engine/graph.h"

/* An int64 scalar written as a 0-dim "I64" tensor (torch's num_batches_tracked). */
struct dl_st_scalar {
	const char *name;
	int64_t value;
};

/* Write tensors (F32) atomically: PATH.tmp.PID, fsync, rename, fsync the
 * directory.  metadata_json is a JSON object of string values, e.g.
 * {"epoch":"3"}, copied verbatim as __metadata__ (NULL: none). */
int dl_safetensors_write(const char *path, struct dl_tensor_f32 *const *tensors, size_t n,
                         const char *metadata_json, char *err, size_t errlen);
/* Same, plus int64 scalars. */
int dl_safetensors_write_ex(const char *path, struct dl_tensor_f32 *const *tensors, size_t n,
                            const struct dl_st_scalar *scalars, size_t n_scalars,
                            const char *metadata_json, char *err, size_t errlen);

enum dl_st_dtype { DL_ST_F32, DL_ST_F64, DL_ST_I64, DL_ST_I32, DL_ST_F16, DL_ST_BF16, DL_ST_U8, DL_ST_OTHER };

struct dl_safetensors; /* an opened file, read entirely into memory */

struct dl_st_entry {
	const char *name;
	enum dl_st_dtype dtype;
	int ndim;
	int64_t dims[8];
	size_t count;       /* elements */
	const void *data;   /* raw little-endian data inside the file image */
};

struct dl_safetensors *dl_safetensors_open(const char *path, char *err, size_t errlen);
void dl_safetensors_close(struct dl_safetensors *st);
size_t dl_safetensors_count(const struct dl_safetensors *st);
const struct dl_st_entry *dl_safetensors_entry(const struct dl_safetensors *st, size_t i);
const struct dl_st_entry *dl_safetensors_find(const struct dl_safetensors *st, const char *name);
/* Value of __metadata__[key] (unescaped), or NULL. */
const char *dl_safetensors_meta(const struct dl_safetensors *st, const char *key);
/* Copy the entries named like tensors[i]->name into tensors[i]->data.  The
 * shape must match exactly; F32 or F64 data is accepted.  A missing tensor
 * is an error naming it.  Returns 0 or -1. */
int dl_safetensors_load(const struct dl_safetensors *st, struct dl_tensor_f32 *const *tensors, size_t n,
                        char *err, size_t errlen);

/* A whole model state as torchvision's state_dict: params, buffers, and
 * "<bn>.num_batches_tracked" (I64) for every BN layer, plus `extra` tensors
 * (e.g. optimizer momentum buffers).  Atomic like dl_safetensors_write. */
int dl_model_state_write(const char *path, const struct dl_graph *g, struct dl_tensor_f32 *const *extra,
                         size_t n_extra, const char *metadata_json, char *err, size_t errlen);
/* Load params and buffers (and extra, if n_extra) from an opened file;
 * num_batches_tracked, if present, sets g->bn_batches_tracked.  Every tensor
 * must be present with its shape; error names the first that is not. */
int dl_model_state_load(const struct dl_safetensors *st, struct dl_graph *g, struct dl_tensor_f32 *const *extra,
                        size_t n_extra, char *err, size_t errlen);

#endif
