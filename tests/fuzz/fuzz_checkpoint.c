/* fuzz_checkpoint: the safetensors reader (engine/safetensors.c) and the
 * checkpoint metadata on top of it (engine/checkpoint.c), as --resume reads
 * them.  Input: a whole checkpoint file.  Every entry's data is read byte by
 * byte (so an entry pointing outside the file shows), then the file is
 * loaded as a checkpoint of a two-tensor model "tiny": w (2,3) and
 * bn.running_mean (3), and as --init weights (dl_weights_init, strict and
 * with a new head) of a model "tiny" with a classifier fc (2,3)+(2). */
#include "config.h"
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include "engine/checkpoint.h"
#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

static const size_t esize[] = {
	[DL_ST_F32] = 4, [DL_ST_F64] = 8, [DL_ST_I64] = 8, [DL_ST_I32] = 4,
	[DL_ST_F16] = 2, [DL_ST_BF16] = 2, [DL_ST_U8] = 1, [DL_ST_OTHER] = 0,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[PATH_MAX], err[512];
	fz_write("ck.safetensors", data, size);
	fz_path(path, sizeof path, "ck.safetensors");

	volatile unsigned sum = 0;
	struct dl_safetensors *st = dl_safetensors_open(path, err, sizeof err);
	if (st) {
		for (size_t i = 0; i < dl_safetensors_count(st); i++) {
			const struct dl_st_entry *e = dl_safetensors_entry(st, i);
			size_t nb = e->count * esize[e->dtype];
			for (size_t b = 0; b < nb; b++)
				sum += ((const uint8_t *)e->data)[b];
			sum += (unsigned)strlen(e->name);
		}
		const char *m = dl_safetensors_meta(st, "epoch");
		if (m)
			sum += (unsigned)strlen(m);
		dl_safetensors_close(st);
	}

	float w[6], mean[3];
	struct dl_tensor_f32 params[1] = {{.name = "w", .ndim = 2, .dims = {2, 3}, .count = 6, .data = w}};
	struct dl_tensor_f32 buffers[1] = {{.name = "bn.running_mean", .ndim = 1, .dims = {3}, .count = 3, .data = mean}};
	struct dl_graph g = {.model = "tiny", .n_params = 1, .params = params, .n_buffers = 1, .buffers = buffers};
	struct dl_ckpt_state s;
	(void)dl_checkpoint_load(path, &g, NULL, &s, NULL, err, sizeof err);

	/* --init: w, fc.weight, fc.bias and bn.running_mean; the FC node marks
	 * the classifier */
	char ierr[4096];
	float fw[6], fb[2];
	struct dl_tensor_f32 p3[3] = {
		{.name = "w", .ndim = 2, .dims = {2, 3}, .count = 6, .data = w},
		{.name = "fc.weight", .ndim = 2, .dims = {2, 3}, .count = 6, .data = fw},
		{.name = "fc.bias", .ndim = 1, .dims = {2}, .count = 2, .data = fb},
	};
	struct dl_node fc = {.kind = DL_NODE_FC, .in = {0, -1}, .param = {1, 2}};
	struct dl_graph gi = {.model = "tiny", .n_nodes = 1, .nodes = &fc, .n_params = 3, .params = p3,
			      .n_buffers = 1, .buffers = buffers, .num_classes = 2};
	for (int head = 0; head < 2; head++)
		if (dl_weights_init(path, &gi, head, ierr, sizeof ierr) == 0)
			for (int i = 0; i < 6; i++) /* every value loaded must be readable */
				sum += (unsigned)(w[i] == w[i]) + (unsigned)(fw[i] == fw[i]);
	(void)sum; /* volatile: the reads above are not optimized away */
	return 0;
}
