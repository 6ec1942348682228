/* The training-step interface every compute backend implements (cpu on
 * oneDNN, ref in float64, cuda on cuDNN/NCCL).  The trainer has exactly one
 * path through it.
 *
 * A backend owns the model state while it trains: parameters, their
 * gradients, the optimizer state (SGD momentum) and the BN running
 * statistics, in whatever layout and memory it likes (oneDNN blocked
 * layouts, GPU memory, bf16 working copies beside fp32 masters).  create()
 * takes that state from the graph; from then on the graph's arrays are NOT
 * the training state: state_out() copies it back at the boundaries
 * (checkpoint, export), state_in() replaces it (--resume, --init).
 *
 * One call runs a whole optimizer step: the batch and its labels go in;
 * forward, softmax cross-entropy with label smoothing, backward, gradient
 * reduction across ranks (bucketed, overlapped with backward), averaging,
 * the non-finite check and the SGD/LARS update happen inside; the host gets
 * back one dl_step_result.  Evaluation runs on the resident weights too.
 *
 * Calls on one backend come from one thread (the one that created it); a
 * backend may run threads of its own (compute, the engine's communication
 * thread).  Every call that can fail returns 0 or -1 with the reason in
 * error(b). */
#ifndef DLJOB_ENGINE_BACKEND_H
#define DLJOB_ENGINE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "engine/comm.h"
#include "engine/graph.h"
#include "engine/optim.h"
#include "engine/precision.h"

struct dl_backend;

/* Gradient bucket size when dl_backend_opts.bucket_bytes is 0, and the cap
 * on the first bucket (the last layers' gradients, ready first), as torch
 * DDP has them: a small first bucket starts communication early even for a
 * model whose gradients fit in one 25 MiB bucket (resnet20: 1.1 MB). */
#define DL_BUCKET_BYTES_DEFAULT ((size_t)25 << 20)
#define DL_FIRST_BUCKET_BYTES ((size_t)1 << 20)

struct dl_backend_opts {
	enum dl_precision precision;
	int conv_algo;              /* enum dl_conv_algo */
	/* cuda: device index ("1") or PCI bus id ("0000:3b:00.0") among the
	 * visible devices; NULL: device 0 of the visible ones.  Others: must
	 * be NULL. */
	const char *device;
	struct dl_optim_config optim; /* momentum, weight decay, Nesterov, LARS (optim.h) */
	double label_smoothing;     /* torch.nn.CrossEntropyLoss(label_smoothing=) */
	/* Gradient reduction across ranks.  NULL or size 1: none, and no
	 * gradient is copied anywhere for it.  The backend calls into it only
	 * from inside train_step (on its communication thread, one call at a
	 * time); between calls the caller may use it. */
	struct dl_comm *comm;
	/* Bytes of gradient per reduction bucket; 0: DL_BUCKET_BYTES_DEFAULT;
	 * the first bucket closes at DL_FIRST_BUCKET_BYTES.  A bucket closes
	 * with the parameter that brings it to the size or beyond.
	 * Buckets are filled in the order backward produces gradients (last
	 * layer first); a bucket's reduction starts as soon as its last
	 * gradient is written, while backward goes on.  SIZE_MAX: one bucket,
	 * reduced after backward ends (no overlap; same result). */
	size_t bucket_bytes;
};

/* One batch.  Exactly one of x / x_u8 is set; n is the batch size create()
 * was given (train_step) or at most that (eval_step: rows past n_valid are
 * ignored but must be readable).  Everything is read before the call
 * returns; the caller may reuse the buffers afterwards. */
struct dl_batch {
	const float *x;        /* (N,C,H,W) float32, normalized */
	const uint8_t *x_u8;   /* (N,H,W,C) uint8 (the loader's DL_BATCH_U8_NHWC): the
	                        * input is (x_u8/255 - mean[c]) / std[c] */
	const float *mean, *std; /* (C) for x_u8; std[c] > 0 */
	const int *labels;     /* (N), each in [0, num_classes) */
};

/* What one train_step did.  Times are seconds; t_* are CLOCK_MONOTONIC
 * timestamps (seconds), 0 when the step had no reduction. */
struct dl_step_result {
	double loss;           /* mean loss over the global batch (all ranks) */
	int stop;              /* some rank passed stop_request = 1 */
	/* A gradient or the loss was not finite on some rank, so no rank
	 * applied the update (weights, momentum unchanged; BN running stats
	 * did change).  fp16: the loss scale was halved and skipped = 1, the
	 * trainer goes on; otherwise the trainer stops ("training diverged"). */
	int nonfinite;
	int skipped;
	/* Phase times of this step (rank-local): compute_s = forward + loss +
	 * backward + update on the compute threads; comm_s = time the
	 * reductions ran (on the communication thread / stream, overlapping
	 * compute); exposed_comm_s = time the step waited for reductions after
	 * its backward had ended (comm not hidden). */
	double compute_s, comm_s, exposed_comm_s;
	/* For tests and benchmarks: when the first bucket's reduction started
	 * and when backward ended; n_buckets reductions were run. */
	double t_first_bucket_start, t_backward_end;
	int n_buckets;
};

/* Held-out results of one eval_step over the first n_valid rows. */
struct dl_eval_result {
	double loss_sum;       /* sum over the rows of the (unsmoothed) cross-entropy */
	int top1, top5;        /* rows whose label is among the 1 / min(5,K) largest logits */
};

struct dl_backend_ops {
	const char *name; /* "cpu" (oneDNN), "ref" (plain C, float64 inside), "cuda" */
	/* 1: train_step/eval_step take x_u8 batches (and the trainer feeds
	 * them when the dataset can give them); 0: x only. */
	int takes_u8;
	/* Prepare to train g's network at batch size n (per rank) with the
	 * options o (NULL: all defaults, no reduction).  Takes g's params,
	 * buffers and bn_batches_tracked as the initial state, momentum zero
	 * with no step taken.  g must outlive the backend; the backend may
	 * keep using g's arrays as scratch or as its own state (ref does), so
	 * read the state only through state_out.  On error returns NULL with
	 * one line in err (an unsupported precision, device or algorithm is
	 * named). */
	struct dl_backend *(*create)(struct dl_graph *g, int n, const struct dl_backend_opts *o, char *err,
				     size_t errlen);
	/* One optimizer step: forward in train mode (BN batch statistics;
	 * running stats updated with momentum and unbiased variance, as torch;
	 * bn_batches_tracked += 1), loss with label smoothing (mean over the
	 * rank's batch), backward, gradients summed over ranks and divided by
	 * the rank count (the loss and stop_request ride in the last
	 * reduction), the non-finite check, then (lr finite, all finite) the
	 * update of opts.optim with learning rate lr exactly as dl_sgd_step
	 * (optim.h) defines it.  res is filled on success.  Returns -1 on an
	 * error (a peer died: the caller must stop; no further step). */
	int (*train_step)(struct dl_backend *b, const struct dl_batch *in, double lr, int stop_request,
			  struct dl_step_result *res);
	/* Eval-mode forward (BN running statistics) on the resident weights
	 * and the loss/top-k counts over rows [0, n_valid), 0 <= n_valid <= n.
	 * pred (may be NULL): each valid row's predicted class (dl_argmax_rows).
	 * No reduction across ranks (the caller sums the counts). */
	int (*eval_step)(struct dl_backend *b, const struct dl_batch *in, int n_valid, int *pred,
			 struct dl_eval_result *res);
	/* Copy the training state out, in torchvision layouts (float32): g's
	 * params and buffers (the g given to create), g->bn_batches_tracked,
	 * and into st (optim.h: from dl_optim_state_init for g) the momentum
	 * buffers, the step count and the dynamic loss scale with its clean
	 * steps (fp16 on cuda; every other backend and precision sets both to
	 * 0, "none").  st may be NULL. */
	int (*state_out)(struct dl_backend *b, struct dl_optim_state *st);
	/* Replace the training state with g's params, buffers and
	 * bn_batches_tracked and st's momentum, step count and (fp16 on cuda)
	 * loss scale (st NULL: momentum zero, no step taken; st NULL or
	 * st->loss_scale 0: the initial loss scale).  A backend without dynamic
	 * loss scaling ignores st's. */
	int (*state_in)(struct dl_backend *b, const struct dl_optim_state *st);
	/* For tests: the logits (N,K) of the last train_step's forward into
	 * logits (may be NULL), and its reduced, averaged gradients (what the
	 * update used) into g->params[i].grad (torchvision layouts). */
	int (*last_step_out)(struct dl_backend *b, float *logits);
	void (*destroy)(struct dl_backend *b);
	/* Last error message of this backend (never NULL). */
	const char *(*error)(struct dl_backend *b);
	/* Host memory the backend copies from fastest (pinned, for CUDA), in
	 * the data loader's allocator-hook shape; NULL: plain malloc is as
	 * good.  host_alloc returns NULL on failure.  ctx is the device
	 * string the backend will be created with (dl_backend_opts.device),
	 * so pinning opens no context on another GPU. */
	void *(*host_alloc)(size_t bytes, void *ctx);
	void (*host_free)(void *p, void *ctx);
	/* Devices this backend can train on (cuda: the visible GPUs, 0 when
	 * there is no usable GPU or driver); NULL for the host backends.
	 * --backend auto takes a backend with devices over cpu. */
	int (*device_count)(void);
	/* --precision auto on this backend: the precision it trains in best
	 * on device (dl_backend_opts.device), with one line in msg saying
	 * why ("GPU 0, NVIDIA H100 80GB HBM3, compute capability 9.0: bf16
	 * tensor cores").  Returns an enum dl_precision, or -1 with the reason
	 * in msg (no such device).  Opens no context on the device.  NULL:
	 * fp32 (cpu, ref). */
	int (*auto_precision)(const char *device, char *msg, size_t msglen);
};

/* The CUDA backend is a module, dlopen'ed only when it is asked for, so the
 * dljob executable links no CUDA library and starts as fast on a CPU node
 * as a CPU-only build (tests/bench/RESULTS.md, "Launch").  The module
 * (DL_BACKEND_MODULE, installed in $(pkglibdir)) exports one symbol,
 * DL_BACKEND_ENTRY, a function returning its struct dl_backend_ops.  The
 * symbol's name carries DL_BACKEND_ABI: bump it whenever this header, or a
 * struct that crosses it (graph.h, comm.h, optim.h), changes, so a module
 * built against another layout is refused by name instead of crashing.
 * Where the module is looked for: dl_backend_find below. */
#define DL_BACKEND_ABI 3
#define DL_BACKEND_MODULE "dljob-cuda.so"
#define DL_BACKEND_PASTE_(a, b) a##b
#define DL_BACKEND_PASTE(a, b) DL_BACKEND_PASTE_(a, b)
#define DL_BACKEND_STR_(a) #a
#define DL_BACKEND_STR(a) DL_BACKEND_STR_(a)
#define DL_BACKEND_ENTRY DL_BACKEND_PASTE(dljob_backend_v, DL_BACKEND_ABI)
#define DL_BACKEND_ENTRY_NAME DL_BACKEND_STR(DL_BACKEND_ENTRY)
/* The module's entry point (defined in engine/cuda/cuda_module.c only). */
const struct dl_backend_ops *DL_BACKEND_ENTRY(void);

/* Look up a backend by name: "cpu" and "ref" are built in; "auto" and
 * "cuda" are below.  "cuda" loads the module, from the first of these that
 * exists:
 *   $DLJOB_MODULE_DIR/dljob-cuda.so when that variable is set (only there:
 *     the build tree's tests point it at engine/cuda/.libs; it is the
 *     user's own process, so it is the user's own choice what to load);
 *   <dir of /proc/self/exe>/../lib/dljob/dljob-cuda.so (a relocated tree);
 *   DLJOB_PKGLIBDIR/dljob-cuda.so (configure's pkglibdir).
 * NULL with one line in err: an unknown name, a build without CUDA, a
 * missing module (the paths looked at), a dlopen error (the file and
 * dlerror(), e.g. a missing libcudnn.so.9), a module without
 * DL_BACKEND_ENTRY (another dljob version).  The module stays loaded for
 * the life of the process.  err may be NULL.
 * "auto" (--backend auto): the backend with a device where this dljob was built with
 * CUDA and the node may have an NVIDIA GPU (/dev/nvidiactl exists and
 * CUDA_VISIBLE_DEVICES is not set to an empty list), else cpu.  On a node
 * without the NVIDIA driver the module is not even loaded.  A node that has
 * the driver but where the module cannot be loaded is an error (NULL, err),
 * not a silent fall-back to cpu: --backend cpu says so explicitly. */
const struct dl_backend_ops *dl_backend_find(const char *name, char *err, size_t errlen);

/* --precision NAME for training (or evaluating) on backend ops, on device
 * (dl_backend_opts.device): "fp32", "bf16" or "fp16" (NULL: fp32) as
 * named; "auto" (DL_PRECISION_AUTO, precision.h) what ops->auto_precision
 * picks for the device, fp32 for a backend without one.  Returns an enum
 * dl_precision with, for auto, one line in msg saying what was picked and
 * why ("" otherwise); -1 with the reason in msg: an unknown name, or a
 * device the backend cannot query.  The backend's create() still refuses a
 * named precision it does not support. */
int dl_backend_precision(const struct dl_backend_ops *ops, const char *name, const char *device, char *msg,
			 size_t msglen);

#endif
