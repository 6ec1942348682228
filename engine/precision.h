/* The step's precision and the cpu backend's convolution algorithm: their
 * enums and names.  A leaf: the trainer (engine/train.c), the backend
 * registry (engine/backend.c) and the backends it includes (engine/cpu,
 * engine/ref) all use these, and this file uses none of them, so no
 * backend calls back into the registry that includes it. */
#ifndef DLJOB_ENGINE_PRECISION_H
#define DLJOB_ENGINE_PRECISION_H

/* Arithmetic precision of the step.  Every backend honours a precision or
 * refuses it in create() with an error naming it ("--precision bf16 is not
 * supported by the ref backend (fp32 only)"):
 *   ref:  fp32 only (float64 inside; its fp32 means "float32 at the edges").
 *   cpu:  fp32; bf16 (bf16 activations and conv weights, fp32 masters,
 *         gradients, BN statistics and logits).
 *   cuda: fp32 (TF32 off), bf16 as cpu, fp16 with dynamic loss scaling: a
 *         step with an inf/NaN gradient is skipped and the scale halved
 *         (dl_step_result.nonfinite = 1, .skipped = 1), the scale doubles
 *         after DL_FP16_GROWTH_INTERVAL clean steps. */
enum dl_precision { DL_FP32 = 0, DL_BF16 = 1, DL_FP16 = 2 };
#define DL_FP16_GROWTH_INTERVAL 2000
/* "fp32", "bf16", "fp16" (NULL: fp32) -> enum dl_precision; -1 otherwise
 * ("auto" too: a backend resolves it, dl_backend_precision in backend.h). */
int dl_precision_parse(const char *name);
const char *dl_precision_name(enum dl_precision p);
/* --precision auto (the default of training and dljob eval): the backend
 * picks, and what it picked is what the run logs and its checkpoints
 * record, never "auto".  cpu, ref: fp32; cuda: bf16 on a GPU with bf16
 * tensor cores (compute capability 8.0 or newer), fp16 on one with fp16
 * tensor cores only (7.x), else fp32. */
#define DL_PRECISION_AUTO "auto"
/* What --precision accepts, for messages. */
#define DL_PRECISION_NAMES "auto, fp32, bf16, fp16"
/* 1: name is "auto" or one dl_precision_parse knows; 0 otherwise. */
int dl_precision_valid(const char *name);
/* 1: name is "auto". */
int dl_precision_is_auto(const char *name);

/* How the cpu backend computes 3x3 convolutions.  Winograd F(4x4,3x3) does
 * about half the arithmetic of the direct method at a somewhat larger
 * rounding error (see engine/test/test_ops.c); oneDNN has it for f32
 * 3x3 stride-1 convolutions only, everything else stays direct.  Other
 * backends accept DL_CONV_AUTO only. */
enum dl_conv_algo {
	DL_CONV_AUTO = 0,     /* Winograd where it measured faster here: f32 3x3 stride 1,
	                       * both channel counts >= 32; direct elsewhere */
	DL_CONV_DIRECT = 1,   /* direct everywhere (torch's choice on CPU) */
	DL_CONV_WINOGRAD = 2, /* Winograd wherever oneDNN has it */
};

/* "auto", "direct" or "winograd" -> enum dl_conv_algo; -1 for anything else. */
int dl_conv_algo_parse(const char *name);

#endif
