/* Plain-C types of the CUDA backend that its planner needs on machines
 * without CUDA (engine/cuda/cuda_arena.c sizes the arena from them): the
 * working dtypes and the per-tensor, per-chunk and per-step records the
 * kernels read (engine/cuda/cuda_kernels.h includes this). */
#ifndef DLJOB_ENGINE_CUDA_CUDA_TYPES_H
#define DLJOB_ENGINE_CUDA_CUDA_TYPES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dlc_dtype { DLC_F32 = 0, DLC_BF16 = 1, DLC_F16 = 2 };

/* One parameter tensor as the optimizer kernels see it: a slice of the flat
 * fp32 master/grad/momentum arrays, its chunks, and where its working copy
 * lives. */
struct dlc_ptensor {
	size_t off;       /* first element in the flat arrays */
	size_t count;     /* elements */
	float wd;         /* weight decay for this tensor (0 when it is not decayed) */
	double wd_d;      /* the same in double, for the LARS ratio (as dl_sgd_step) */
	int lars;         /* LARS scales this tensor's step (LARS on and the tensor is decayed) */
	int chunk0, nchunk; /* its chunks: [chunk0, chunk0 + nchunk) of the chunk array */
	int map;          /* DLC_MAP_* */
	int o, i, kh, kw, ip; /* DLC_MAP_OIHW_KRSC: (O,I,kh,kw) -> (O,kh,kw,ip), ip >= i */
	void *work;       /* working copy in the backend dtype, NULL for DLC_MAP_NONE */
};
enum { DLC_MAP_NONE = 0, DLC_MAP_PLAIN = 1, DLC_MAP_OIHW_KRSC = 2 };

/* A block-sized piece of one tensor, so one launch covers all tensors. */
struct dlc_chunk {
	int tensor;
	int len;
	size_t start; /* element offset inside the tensor */
};
#define DLC_CHUNK 16384

/* Per-step values the host writes before each step (device copy read by
 * the kernels, so a captured CUDA graph sees each step's values). */
struct dlc_ctl {
	float lr;
	float stop;   /* this rank's stop request, 0 or 1 */
	int first;    /* no optimizer step applied yet: momentum buffers not live */
	int pad;
};

/* Optimizer state that lives on the device, and what one step reports. */
struct dlc_optdev {
	float scale;     /* loss scale: 1, or fp16's dynamic scale */
	int good;        /* fp16: clean steps since the scale last changed */
	float inv;       /* 1/(scale*world): this step's gradient multiplier */
	int bad;         /* this step was not applied: DLC_BAD_GRAD (the loss or a gradient was
			    not finite: fp16 skips it) | DLC_BAD_LR (lr was not finite) */
	float loss_sum;  /* sum over ranks of each rank's mean loss */
	float stop_sum;  /* sum over ranks of the stop requests */
};

enum { DLC_BAD_GRAD = 1, DLC_BAD_LR = 2 };

/* Per-chunk partial sums for LARS and the finite check. */
struct dlc_part {
	double w2, g2;   /* sum of w^2 and of (averaged gradient)^2 */
	int bad;         /* a gradient in the chunk is not finite */
	int pad;
};

/* The flat gradient array starts with DLC_SLOTS floats that ride in the
 * last reduction: [0] this rank's mean loss, [1] its stop request. */
#define DLC_SLOTS 64

#ifdef __cplusplus
}
#endif

#endif
