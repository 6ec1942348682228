#include "config.h"

/* See cuda_plan.h.  Plain C, no CUDA. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_plan.h"

int dlc_param_writers(const struct dl_graph *g, int *writer, char *err, size_t errlen)
{
	for (int p = 0; p < g->n_params; p++)
		writer[p] = -1;
	for (int i = 0; i < g->n_nodes; i++)
		for (int k = 0; k < 2; k++) {
			int p = g->nodes[i].param[k];
			if (p < 0)
				continue;
			if (p >= g->n_params) {
				dl_errf(err, errlen, "cuda backend: node %d: bad param index %d", i, p);
				return -1;
			}
			if (writer[p] >= 0) {
				dl_errf(err, errlen, "cuda backend: param %s is used by nodes %d and %d (shared weights are not supported)",
					 g->params[p].name, writer[p], i);
				return -1;
			}
			writer[p] = i;
		}
	return 0;
}

int dlc_plan_buckets(const struct dl_graph *g, const int *writer, const size_t *p_off, size_t bucket_bytes,
		     struct dlc_bucket **out, int *n_out, char *err, size_t errlen)
{
	size_t cap = bucket_bytes ? bucket_bytes : DL_BUCKET_BYTES_DEFAULT;
	/* the first bucket (the last layers, ready first) is small, as the
	 * cpu/ref reducer and torch DDP have it, unless one bucket is asked for */
	size_t first_cap = cap == SIZE_MAX || cap < DL_FIRST_BUCKET_BYTES ? cap : DL_FIRST_BUCKET_BYTES;
	struct dlc_bucket *bk = calloc((size_t)g->n_params + 1, sizeof *bk);
	int n = 0;
	if (!bk) {
		dl_errf(err, errlen, "cuda backend: out of host memory planning the reduction buckets");
		return -1;
	}
	int hi = g->n_params - 1;
	while (hi >= 0) {
		int lo = hi;
		size_t bytes = g->params[hi].count * sizeof(float);
		while (lo > 0 && bytes < (n == 0 ? first_cap : cap)) {
			lo--;
			bytes += g->params[lo].count * sizeof(float);
		}
		int node = -1;
		for (int p = lo; p <= hi; p++)
			if (writer[p] >= 0 && (node < 0 || writer[p] < node))
				node = writer[p];
		/* the bucket holding param 0 also holds the slots before it, and
		 * each bucket the (zero) alignment gap after its last param, so
		 * the buckets tile the flat array */
		size_t off = lo == 0 ? 0 : p_off[lo];
		size_t end = hi + 1 < g->n_params ? p_off[hi + 1] : p_off[hi] + g->params[hi].count;
		bk[n].off = off;
		bk[n].count = end - off;
		bk[n].done_by = node < 0 ? 0 : node;
		/* a later bucket must not be ready before an earlier one (NCCL
		 * calls go out in plan order on every rank) */
		if (n > 0 && bk[n].done_by > bk[n - 1].done_by)
			bk[n].done_by = bk[n - 1].done_by;
		n++;
		hi = lo - 1;
	}
	if (g->n_params == 0) {
		/* nothing to train, but the slots still ride in one reduction */
		bk[0].off = 0;
		bk[0].count = DLC_SLOTS;
		bk[0].done_by = 0;
		n = 1;
	}
	*out = bk;
	*n_out = n;
	return 0;
}

int dlc_parse_device(const char *s, int *index)
{
	*index = 0;
	if (!s || !*s)
		return 0;
	size_t len = strlen(s);
	if (len > 32)
		return -1;
	if (strspn(s, "0123456789") == len) {
		if (len > 4)
			return -1;
		*index = atoi(s);
		return 0;
	}
	if (strspn(s, "0123456789abcdefABCDEF:.") == len && strchr(s, ':') && s[0] != ':')
		return 1;
	return -1;
}

int dlc_auto_precision(int major)
{
	return major >= 8 ? DL_BF16 : major == 7 ? DL_FP16 : DL_FP32;
}
