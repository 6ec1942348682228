/* The op interface every compute backend implements (CPU/oneDNN, CPU
 * reference, CUDA).  A backend compiles a dl_graph for one batch size and
 * runs forward and backward over it.  Inputs and outputs that cross this
 * interface are plain float32: images (N,C,H,W), logits (N,K), and the
 * graph's own param/grad/buffer arrays (torchvision layouts).  Inside, a
 * backend keeps whatever layouts are fastest. */
#ifndef DLJOB_ENGINE_BACKEND_H
#define DLJOB_ENGINE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "engine/graph.h"

struct dl_backend;

/* Optional settings for create_ex; all-zero means create()'s behaviour. */
struct dl_backend_opts {
	/* Mixed precision: bf16 activations and conv weights inside the
	 * backend, f32 params, grads, BN statistics and logits. */
	int bf16;
	/* Convolution algorithm (enum dl_conv_algo); 0 is the backend's
	 * default choice. */
	int conv_algo;
};

/* How the cpu backend computes 3x3 convolutions.  Winograd F(4x4,3x3) does
 * about half the arithmetic of the direct method at a somewhat larger
 * rounding error (see tests/engine/test_ops.c); oneDNN has it for f32
 * 3x3 stride-1 convolutions only, everything else stays direct. */
enum dl_conv_algo {
	DL_CONV_AUTO = 0,     /* Winograd where it measured faster here: f32 3x3 stride 1,
	                       * both channel counts >= 32; direct elsewhere */
	DL_CONV_DIRECT = 1,   /* direct everywhere (torch's choice on CPU) */
	DL_CONV_WINOGRAD = 2, /* Winograd wherever oneDNN has it */
};

struct dl_backend_ops {
	const char *name; /* "cpu" (oneDNN), "ref" (plain C, float64 inside), "cuda" */
	/* Prepare to run g at batch size n.  g must outlive the backend.  On error
	 * returns NULL with a message in err. */
	struct dl_backend *(*create)(struct dl_graph *g, int n, char *err, size_t errlen);
	/* Forward pass.  x is (N,C,H,W) plain float32.  train=1: batch-norm uses
	 * batch statistics and updates g's running buffers (momentum, unbiased
	 * var as torch does); train=0: running statistics.  Returns 0 or -1. */
	int (*forward)(struct dl_backend *b, const float *x, int train);
	/* Logits of the last forward, (N,K) plain float32, owned by the backend. */
	const float *(*logits)(struct dl_backend *b);
	/* Backward from dlogits (N,K): overwrites every g->params[i].grad.
	 * Valid only after forward(train=1). */
	int (*backward)(struct dl_backend *b, const float *dlogits);
	void (*destroy)(struct dl_backend *b);
	/* Last error message of this backend (never NULL). */
	const char *(*error)(struct dl_backend *b);
	/* create() with options; NULL if the backend has none (then only
	 * all-zero options are valid). */
	struct dl_backend *(*create_ex)(struct dl_graph *g, int n, const struct dl_backend_opts *o,
					char *err, size_t errlen);
	/* (Added) forward() from a uint8 batch normalized inside the backend
	 * (on the GPU): nhwc is (N,H,W,C) uint8 as the data loader's
	 * DL_BATCH_U8_NHWC layout gives it, and the input is
	 * (nhwc/255 - mean[c]) / std[c], c < C.  nhwc is read before the call
	 * returns.  NULL for backends without it (cpu; ref has it so the
	 * trainer's uint8 feed runs in tests without a GPU). */
	int (*forward_u8)(struct dl_backend *b, const uint8_t *nhwc, const float mean[], const float std[],
			  int train);
	/* (Added) Host memory the backend copies from fastest (pinned, for
	 * CUDA), in the data loader's allocator-hook shape; NULL: plain malloc
	 * is as good.  host_alloc returns NULL on failure. */
	void *(*host_alloc)(size_t bytes, void *ctx);
	void (*host_free)(void *p, void *ctx);
};

/* "auto", "direct" or "winograd" -> enum dl_conv_algo; -1 for anything else. */
int dl_conv_algo_parse(const char *name);

/* Look up a backend by name ("cpu", "ref", "cuda"); NULL if not built in. */
const struct dl_backend_ops *dl_backend_find(const char *name);

#endif
