/* fuse_probe: which MLPerf-style fused convolution graphs does this GPU's
 * cuDNN (9, backend/graph API) support in bf16 NHWC, are their numbers
 * right, and how fast are they against the unfused legacy calls (issue 37,
 * part 2).  A design probe for one short GPU session, not a test: it links
 * cuDNN and cudart only, and prints what it finds.
 *
 * For each of three resnet50 bottleneck shapes it builds these operation
 * graphs (tensors NHWC, filters KRSC, per-channel vectors float):
 *   conv          Y = conv(X, W)                              (plain fprop)
 *   conv_stats    Y = conv(X, W); sum, sqsum of Y per channel (genstats)
 *   sbr_conv_stats  A = relu(X*s + b) (virtual, the previous BN's apply as
 *                 prologue); Y = conv(A, W); sum, sqsum of Y
 *   bn_finalize   sum, sqsum, gamma, beta, running mean/var -> eq scale/bias
 *                 (the next prologue's s, b), saved mean/invstd, new running
 *   dgrad_drelu_dbnw  dA = dgrad(dY, W) (virtual); dZ = relu_bwd(dA,
 *                 X*s + b) (stored); BN backward weights on (X, dZ, mean,
 *                 invstd, gamma) -> dgamma, dbeta and the coefficients of
 *                 dX = c_dy*dZ + c_x*X + c_b (the dBN apply, not fused)
 *   wgrad_sbr     A = relu(X*s + b) (virtual); dW = wgrad(A, dY), dW 16-bit
 *   wgrad_sbr_f32 the same with dW in float
 * Each graph: heuristics mode A, then FALLBACK; the first engine config
 * whose execution plan finalizes runs the numeric check; at the timing batch
 * up to 3 plans are timed and the fastest kept.  A graph that cuDNN refuses
 * in bf16 is tried again with its BN scale/bias vectors in bf16 instead of
 * float ("bf16/sb16"), then both ways in fp16 (the engines behind these
 * patterns were fp16-only in cuDNN 8), so the log says which types work.
 *
 * Checks (batch --check-batch, default 2): against a float CPU reference in
 * this program, from the same bf16/fp16-rounded inputs.  Error measure: max
 * |got - ref| / max |ref| over a tensor (per-channel sums: over the sum of
 * |y|), which must be <= 2^-6 for bf16 (8-bit mantissa, an output rounding
 * of 2^-9 plus float accumulation in another order) and 2^-8 for fp16.
 * Timing (batch --batch, default 256): CUDA events, median of --iters
 * (default 20) after 5 warm-up runs.  Unfused, with legacy cuDNN calls on
 * the same shape: forward = cudnnConvolutionForward + BN training with ReLU
 * (cudnnBatchNormalizationForwardTrainingEx); backward = BN backward with
 * dReLU (cudnnBatchNormalizationBackwardEx) + backward data + backward
 * filter.  Fused: forward = sbr_conv_stats + bn_finalize; backward =
 * dgrad_drelu_dbnw + wgrad_sbr, plus one elementwise dBN apply that this
 * probe does not run (noted in the line).
 *
 * Output: stdout, and $OUT/fuse_probe.log when OUT is set; the last lines
 * are "SUMMARY ..." one per shape and graph.  Exit: 0 when everything that
 * ran computed the right numbers (unsupported graphs are findings, not
 * failures), 1 when a supported graph gave wrong numbers or a CUDA call
 * failed, 77 when no CUDA device is visible or it is older than sm_80.
 * Options: --batch N  --check-batch N  --iters N  --shape NAME (repeatable)
 *          --budget S  seconds from the start after which nothing more is
 *                      timed (default 240; the checks and the summary go on)
 *          --no-time  --no-check
 *          --selftest  what needs no GPU (see selftest()), exit 0 or 1
 */
#define _POSIX_C_SOURCE 200809L
#include <cudnn.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- output ------------------------------------------------------------ */
static FILE *logf_;
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (logf_) {
		va_start(ap, fmt);
		vfprintf(logf_, fmt, ap);
		va_end(ap);
		fflush(logf_);
	}
	fflush(stdout);
}

static int cuda_failed;
static bool cuda_ok(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return true;
	say("CUDA error: %s: %s\n", what, cudaGetErrorString(e));
	cuda_failed = 1;
	return false;
}

/* ---- 16-bit floats on the host ---------------------------------------- */
static uint16_t f2bf(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
	return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static uint16_t f2h(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint32_t sign = (u >> 16) & 0x8000u;
	int32_t e = (int32_t)((u >> 23) & 0xff) - 127 + 15;
	uint32_t m = u & 0x7fffffu;
	if (((u >> 23) & 0xff) == 0xff)
		return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		m |= 0x800000u;
		uint32_t shift = (uint32_t)(14 - e);
		uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (hm & 1u)))
			hm++;
		return (uint16_t)(sign | hm);
	}
	uint32_t hm = m >> 13, rem = m & 0x1fffu;
	uint32_t r = sign | ((uint32_t)e << 10) | hm;
	if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u)))
		r++;
	return (uint16_t)r;
}
static float h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
	if (e == 0) {
		if (m == 0) {
			u = sign;
		} else {
			e = 127 - 15 + 1;
			while (!(m & 0x400u)) {
				m <<= 1;
				e--;
			}
			u = sign | (e << 23) | ((m & 0x3ffu) << 13);
		}
	} else if (e == 31) {
		u = sign | 0x7f800000u | (m << 13);
	} else {
		u = sign | ((e + 127 - 15) << 23) | (m << 13);
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static bool g_half; /* current 16-bit type: false bf16, true fp16 */
static uint16_t to16(float f) { return g_half ? f2h(f) : f2bf(f); }
static float from16(uint16_t h) { return g_half ? h2f(h) : bf2f(h); }
static cudnnDataType_t dt16(void) { return g_half ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16; }
static const char *dt16name(void) { return g_half ? "fp16" : "bf16"; }
/* the BN apply's scale and bias (and bn_finalize's eq scale/bias) in the
 * 16-bit type instead of float: cuDNN's samples of these patterns had them
 * so, and an engine may take only that */
static bool g_sb16;
static const char *variant(void)
{
	static const char *v[4] = { "bf16", "bf16/sb16", "fp16", "fp16/sb16" };
	return v[(g_half ? 2 : 0) + (g_sb16 ? 1 : 0)];
}

/* ---- shapes ------------------------------------------------------------- */
struct shape {
	const char *name;
	int64_t c, k, h, w, r, s, stride, pad;
};
static const struct shape shapes[] = {
	/* the stage-1 bottleneck's first convolution */
	{ "1x1_64to64_56", 64, 64, 56, 56, 1, 1, 1, 0 },
	/* its 3x3 */
	{ "3x3_64to64_56", 64, 64, 56, 56, 3, 3, 1, 1 },
	/* stage 2's projection shortcut: 256 -> 512, 1x1, stride 2 */
	{ "1x1s2_256to512_56", 256, 512, 56, 56, 1, 1, 2, 0 },
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
static int64_t out_p(const struct shape *sh) { return (sh->h + 2 * sh->pad - sh->r) / sh->stride + 1; }
static int64_t out_q(const struct shape *sh) { return (sh->w + 2 * sh->pad - sh->s) / sh->stride + 1; }

/* ---- graph building with a sticky first error ------------------------- */
#define MAXOBJ 96
struct gb {
	cudnnStatus_t st;
	char step[200];
	char detail[512];
	cudnnBackendDescriptor_t obj[MAXOBJ];
	int nobj;
};
static void gb_fail(struct gb *g, cudnnStatus_t st, const char *step)
{
	if (g->st != CUDNN_STATUS_SUCCESS)
		return;
	g->st = st;
	snprintf(g->step, sizeof g->step, "%s", step);
	cudnnGetLastErrorString(g->detail, sizeof g->detail);
	for (char *p = g->detail; *p; p++)
		if (*p == '\n')
			*p = ' ';
}
static cudnnBackendDescriptor_t gb_new(struct gb *g, cudnnBackendDescriptorType_t t, const char *what)
{
	cudnnBackendDescriptor_t d = NULL;
	if (g->st != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (g->nobj == MAXOBJ) {
		gb_fail(g, CUDNN_STATUS_INTERNAL_ERROR, "probe: too many descriptors");
		return NULL;
	}
	cudnnStatus_t st = cudnnBackendCreateDescriptor(t, &d);
	if (st != CUDNN_STATUS_SUCCESS) {
		char b[200];
		snprintf(b, sizeof b, "create %s", what);
		gb_fail(g, st, b);
		return NULL;
	}
	g->obj[g->nobj++] = d;
	return d;
}
static void gb_set(struct gb *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
		   cudnnBackendAttributeType_t t, int64_t n, const void *v, const char *what)
{
	if (g->st != CUDNN_STATUS_SUCCESS)
		return;
	cudnnStatus_t st = cudnnBackendSetAttribute(d, a, t, n, v);
	if (st != CUDNN_STATUS_SUCCESS) {
		char b[200];
		snprintf(b, sizeof b, "set attribute %d of %s", (int)a, what);
		gb_fail(g, st, b);
	}
}
static void gb_fin(struct gb *g, cudnnBackendDescriptor_t d, const char *what)
{
	if (g->st != CUDNN_STATUS_SUCCESS)
		return;
	cudnnStatus_t st = cudnnBackendFinalize(d);
	if (st != CUDNN_STATUS_SUCCESS) {
		char b[200];
		snprintf(b, sizeof b, "finalize %s", what);
		gb_fail(g, st, b);
	}
}
static void gb_free(struct gb *g)
{
	for (int i = g->nobj - 1; i >= 0; i--)
		cudnnBackendDestroyDescriptor(g->obj[i]);
	g->nobj = 0;
}

/* a tensor [n, c, h, w] in NHWC (or a filter [k, c, r, s] in KRSC) */
static cudnnBackendDescriptor_t tens(struct gb *g, const char *name, int64_t uid, cudnnDataType_t dt, int64_t n,
				     int64_t c, int64_t h, int64_t w, bool virt)
{
	cudnnBackendDescriptor_t t = gb_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, name);
	int64_t dim[4] = { n, c, h, w }, str[4] = { h * w * c, 1, w * c, c };
	int64_t align = 16;
	bool v = virt;
	gb_set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v, name);
	gb_fin(g, t, name);
	return t;
}
/* a per-channel float vector [1, c, 1, 1] */
static cudnnBackendDescriptor_t vec(struct gb *g, const char *name, int64_t uid, int64_t c)
{
	return tens(g, name, uid, CUDNN_DATA_FLOAT, 1, c, 1, 1, false);
}
/* the scale/bias vectors: float, or 16-bit with g_sb16 */
static cudnnBackendDescriptor_t sbvec(struct gb *g, const char *name, int64_t uid, int64_t c)
{
	return tens(g, name, uid, g_sb16 ? dt16() : CUDNN_DATA_FLOAT, 1, c, 1, 1, false);
}
/* a scalar passed by value (host memory in the variant pack) */
static cudnnBackendDescriptor_t scalar(struct gb *g, const char *name, int64_t uid, cudnnDataType_t dt)
{
	cudnnBackendDescriptor_t t = gb_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, name);
	int64_t dim[4] = { 1, 1, 1, 1 }, str[4] = { 1, 1, 1, 1 }, align = 8;
	bool byval = true;
	gb_set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, name);
	gb_set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval, name);
	gb_fin(g, t, name);
	return t;
}
static cudnnBackendDescriptor_t convdesc(struct gb *g, const struct shape *sh)
{
	cudnnBackendDescriptor_t c = gb_new(g, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution");
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
	int64_t nd = 2, dil[2] = { 1, 1 }, str[2] = { sh->stride, sh->stride }, pad[2] = { sh->pad, sh->pad };
	gb_set(g, c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "convolution");
	gb_set(g, c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "convolution");
	gb_set(g, c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nd, "convolution");
	gb_set(g, c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "convolution");
	gb_set(g, c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, "convolution");
	gb_set(g, c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "convolution");
	gb_set(g, c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "convolution");
	gb_fin(g, c, "convolution");
	return c;
}
static cudnnBackendDescriptor_t conv_op(struct gb *g, cudnnBackendDescriptorType_t kind, cudnnBackendDescriptor_t cd,
					cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
					cudnnBackendDescriptor_t out, const char *name)
{
	/* fprop: a = X, b = W, out = Y; dgrad: a = dY, b = W, out = dX;
	 * wgrad: a = X, b = dY, out = dW */
	cudnnBackendDescriptor_t op = gb_new(g, kind, name);
	float alpha = 1.0f, beta = 0.0f;
	cudnnBackendAttributeName_t aA, aB, aO, aC, aAl, aBe;
	if (kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR) {
		aA = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X;
		aB = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W;
		aO = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y;
		aC = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC;
		aAl = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA;
		aBe = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
	} else if (kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR) {
		aA = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
		aB = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
		aO = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
		aC = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
		aAl = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA;
		aBe = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
	} else {
		aA = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
		aB = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
		aO = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
		aC = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
		aAl = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
		aBe = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
	}
	gb_set(g, op, aA, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, name);
	gb_set(g, op, aB, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, name);
	gb_set(g, op, aO, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out, name);
	gb_set(g, op, aC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd, name);
	gb_set(g, op, aAl, CUDNN_TYPE_FLOAT, 1, &alpha, name);
	gb_set(g, op, aBe, CUDNN_TYPE_FLOAT, 1, &beta, name);
	gb_fin(g, op, name);
	return op;
}
/* y = mode(x, b) (b NULL for unary); for RELU_BWD: dx = relu_bwd(dy = x, fwd input = b) */
static cudnnBackendDescriptor_t pw_op(struct gb *g, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
				      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, const char *name)
{
	cudnnBackendDescriptor_t pd = gb_new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name);
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	gb_set(g, pd, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, name);
	gb_set(g, pd, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, name);
	gb_fin(g, pd, name);
	cudnnBackendDescriptor_t op = gb_new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, name);
	gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pd, name);
	if (mode == CUDNN_POINTWISE_RELU_BWD) {
		gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, name);
		gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, name);
		gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, name);
	} else {
		gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, name);
		if (b)
			gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, name);
		gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, name);
	}
	gb_fin(g, op, name);
	return op;
}
static cudnnBackendDescriptor_t genstats_op(struct gb *g, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t sum,
					    cudnnBackendDescriptor_t sq)
{
	cudnnBackendDescriptor_t op = gb_new(g, CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, "genstats");
	cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	gb_set(g, op, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode, "genstats");
	gb_set(g, op, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "genstats");
	gb_set(g, op, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "genstats");
	gb_set(g, op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sum, "genstats");
	gb_set(g, op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sq, "genstats");
	gb_fin(g, op, "genstats");
	return op;
}
static void set_desc(struct gb *g, cudnnBackendDescriptor_t op, cudnnBackendAttributeName_t a,
		     cudnnBackendDescriptor_t v, const char *name)
{
	gb_set(g, op, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, name);
}

/* ---- plans ---------------------------------------------------------- */
#define MAXPLANS 3
struct plans {
	int n;
	cudnnBackendDescriptor_t plan[MAXPLANS];
	int64_t engine[MAXPLANS], ws[MAXPLANS];
	bool rtc[MAXPLANS];
	int tried;             /* engine configs tried */
	cudnnStatus_t last_st; /* the last plan failure, when none worked */
	char last_detail[512];
	char heur[160];
};
static void plans_free(struct plans *p)
{
	for (int i = 0; i < p->n; i++)
		cudnnBackendDestroyDescriptor(p->plan[i]);
	p->n = 0;
}
/* the operation graph of ops; then heuristics A and FALLBACK; keep up to
 * want finalized plans */
static void make_plans(struct gb *g, cudnnHandle_t h, cudnnBackendDescriptor_t *ops, int nops, int want,
		       struct plans *p)
{
	memset(p, 0, sizeof *p);
	cudnnBackendDescriptor_t og = gb_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
	gb_set(g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "operation graph");
	gb_set(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops, "operation graph");
	gb_fin(g, og, "operation graph");
	if (g->st != CUDNN_STATUS_SUCCESS)
		return;
	cudnnBackendHeurMode_t modes[2] = { CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK };
	const char *mname[2] = { "A", "FALLBACK" };
	for (int m = 0; m < 2 && p->n < want; m++) {
		cudnnBackendDescriptor_t heur = NULL;
		cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
						      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
						      &modes[m]);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendFinalize(heur);
		int64_t count = 0;
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
						      CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL);
		size_t len = strlen(p->heur);
		snprintf(p->heur + len, sizeof p->heur - len, "%sheur %s: %s, %lld configs", len ? "; " : "", mname[m],
			 cudnnGetErrorString(st), (long long)count);
		if (st != CUDNN_STATUS_SUCCESS || count <= 0) {
			if (st != CUDNN_STATUS_SUCCESS) {
				p->last_st = st;
				cudnnGetLastErrorString(p->last_detail, sizeof p->last_detail);
			}
			if (heur)
				cudnnBackendDestroyDescriptor(heur);
			continue;
		}
		if (count > 64)
			count = 64;
		cudnnBackendDescriptor_t cfg[64];
		int64_t made = 0;
		for (int64_t i = 0; i < count; i++) {
			if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]) !=
			    CUDNN_STATUS_SUCCESS)
				break;
			made++;
		}
		int64_t got = 0;
		st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, made,
					      &got, cfg);
		if (st != CUDNN_STATUS_SUCCESS)
			got = 0;
		for (int64_t i = 0; i < got && p->n < want; i++) {
			p->tried++;
			cudnnBackendDescriptor_t plan = NULL;
			st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
			if (st == CUDNN_STATUS_SUCCESS)
				st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
							      1, &h);
			if (st == CUDNN_STATUS_SUCCESS)
				st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
							      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
			if (st == CUDNN_STATUS_SUCCESS)
				st = cudnnBackendFinalize(plan);
			if (st != CUDNN_STATUS_SUCCESS) {
				p->last_st = st;
				cudnnGetLastErrorString(p->last_detail, sizeof p->last_detail);
				if (plan)
					cudnnBackendDestroyDescriptor(plan);
				continue;
			}
			int k = p->n++;
			p->plan[k] = plan;
			p->engine[k] = -1;
			int64_t ws = 0, one = 0;
			if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
						     1, &one, &ws) == CUDNN_STATUS_SUCCESS)
				p->ws[k] = ws;
			cudnnBackendDescriptor_t eng = NULL;
			if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) ==
			    CUDNN_STATUS_SUCCESS) {
				if (cudnnBackendGetAttribute(cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE,
							     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one,
							     &eng) == CUDNN_STATUS_SUCCESS) {
					int64_t idx = -1;
					if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
								     CUDNN_TYPE_INT64, 1, &one,
								     &idx) == CUDNN_STATUS_SUCCESS)
						p->engine[k] = idx;
					cudnnBackendBehaviorNote_t notes[16];
					int64_t nn = 0;
					if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
								     CUDNN_TYPE_BEHAVIOR_NOTE, 16, &nn,
								     notes) == CUDNN_STATUS_SUCCESS)
						for (int64_t j = 0; j < nn && j < 16; j++)
							if (notes[j] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
								p->rtc[k] = true;
				}
				cudnnBackendDestroyDescriptor(eng);
			}
		}
		for (int64_t i = 0; i < made; i++)
			cudnnBackendDestroyDescriptor(cfg[i]);
		cudnnBackendDestroyDescriptor(heur);
	}
}

/* ---- device buffers ---------------------------------------------------- */
struct buf {
	int64_t uid;
	void *d; /* device memory, or host memory for by-value scalars */
	size_t bytes;
};
#define MAXBUF 24
struct bufs {
	struct buf b[MAXBUF];
	int n;
};
static void *dalloc(struct bufs *bs, int64_t uid, size_t bytes)
{
	if (bs->n == MAXBUF)
		return NULL;
	void *d = NULL;
	if (!cuda_ok(cudaMalloc(&d, bytes), "cudaMalloc"))
		return NULL;
	bs->b[bs->n++] = (struct buf){ uid, d, bytes };
	return d;
}
static void bufs_free(struct bufs *bs)
{
	for (int i = 0; i < bs->n; i++)
		if (bs->b[i].uid >= 0)
			cudaFree(bs->b[i].d);
	bs->n = 0;
}
static void *find(struct bufs *bs, int64_t uid)
{
	for (int i = 0; i < bs->n; i++)
		if (bs->b[i].uid == uid)
			return bs->b[i].d;
	return NULL;
}

/* run plan k once with the buffers (uids) and a workspace */
/* the variant pack of the buffers (uids) and a workspace; *vp NULL on error */
static cudnnStatus_t make_vpack(struct bufs *bs, void *ws, cudnnBackendDescriptor_t *vp, struct gb *err)
{
	int64_t uids[MAXBUF];
	void *ptrs[MAXBUF];
	int n = 0;
	for (int i = 0; i < bs->n; i++) {
		uids[n] = bs->b[i].uid < 0 ? -bs->b[i].uid : bs->b[i].uid;
		ptrs[n++] = bs->b[i].d;
	}
	*vp = NULL;
	cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, vp);
	const char *step = "create variant pack";
	if (st == CUDNN_STATUS_SUCCESS) {
		step = "variant pack ids";
		st = cudnnBackendSetAttribute(*vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
	}
	if (st == CUDNN_STATUS_SUCCESS) {
		step = "variant pack pointers";
		st = cudnnBackendSetAttribute(*vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
	}
	if (st == CUDNN_STATUS_SUCCESS) {
		step = "variant pack workspace";
		st = cudnnBackendSetAttribute(*vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
	}
	if (st == CUDNN_STATUS_SUCCESS) {
		step = "finalize variant pack";
		st = cudnnBackendFinalize(*vp);
	}
	if (st != CUDNN_STATUS_SUCCESS) {
		if (err)
			gb_fail(err, st, step);
		if (*vp)
			cudnnBackendDestroyDescriptor(*vp);
		*vp = NULL;
	}
	return st;
}
static cudnnStatus_t run_plan(cudnnHandle_t h, struct plans *p, int k, cudnnBackendDescriptor_t vp, struct gb *err)
{
	cudnnStatus_t st = cudnnBackendExecute(h, p->plan[k], vp);
	if (st != CUDNN_STATUS_SUCCESS && err)
		gb_fail(err, st, "cudnnBackendExecute");
	return st;
}
/* run plan k once with the buffers and a workspace */
static cudnnStatus_t execute(cudnnHandle_t h, struct plans *p, int k, struct bufs *bs, void *ws, struct gb *err)
{
	cudnnBackendDescriptor_t vp;
	cudnnStatus_t st = make_vpack(bs, ws, &vp, err);
	if (st != CUDNN_STATUS_SUCCESS)
		return st;
	st = run_plan(h, p, k, vp, err);
	cudnnBackendDestroyDescriptor(vp);
	return st;
}

/* ---- the graphs -------------------------------------------------------- */
enum graph {
	G_CONV,
	G_CONV_STATS,
	G_SBR_CONV_STATS,
	G_BN_FINALIZE,
	G_DGRAD_DRELU_DBNW,
	G_WGRAD_SBR,
	G_WGRAD_SBR_F32,
	NGRAPHS
};
static const char *gname[NGRAPHS] = { "conv",      "conv_stats",   "sbr_conv_stats", "bn_finalize", "dgrad_drelu_dbnw",
				      "wgrad_sbr", "wgrad_sbr_f32" };
/* unique ids; by-value scalars are stored in struct bufs with a negative uid */
enum {
	U_X = 1,
	U_W,
	U_Y,
	U_SUM,
	U_SQ,
	U_S,
	U_B,
	U_DY,
	U_DZ,
	U_DW,
	U_MEAN,
	U_ISTD,
	U_GAMMA,
	U_BETA,
	U_RM,
	U_RV,
	U_NRM,
	U_NRV,
	U_EQS,
	U_EQB,
	U_EPS,
	U_MOM,
	U_CNT,
	U_DG,
	U_DB,
	U_CDY,
	U_CX,
	U_CB,
	U_VA = 100,
	U_VB,
	U_VC,
	U_VD,
	U_VE
};

/* Builds graph gr for shape sh at batch n into g; fills ops.  The tensors:
 * X [n,c,h,w], W [k,c,r,s], Y/dY [n,k,p,q]; s, b, mean, istd, gamma over
 * c (the BN whose apply is the prologue), sum, sqsum over k. */
static int build(struct gb *g, enum graph gr, const struct shape *sh, int64_t n, cudnnBackendDescriptor_t *ops)
{
	int64_t c = sh->c, k = sh->k, hh = sh->h, ww = sh->w, p = out_p(sh), q = out_q(sh);
	cudnnDataType_t d = dt16(), f = CUDNN_DATA_FLOAT;
	int nops = 0;
	switch (gr) {
	case G_CONV:
	case G_CONV_STATS:
	case G_SBR_CONV_STATS: {
		cudnnBackendDescriptor_t x = tens(g, "X", U_X, d, n, c, hh, ww, false);
		cudnnBackendDescriptor_t w = tens(g, "W", U_W, d, k, c, sh->r, sh->s, false);
		cudnnBackendDescriptor_t y = tens(g, "Y", U_Y, d, n, k, p, q, false);
		cudnnBackendDescriptor_t in = x;
		if (gr == G_SBR_CONV_STATS) {
			cudnnBackendDescriptor_t s = sbvec(g, "scale", U_S, c), b = sbvec(g, "bias", U_B, c);
			cudnnBackendDescriptor_t va = tens(g, "X*s", U_VA, f, n, c, hh, ww, true);
			cudnnBackendDescriptor_t vb = tens(g, "X*s+b", U_VB, f, n, c, hh, ww, true);
			cudnnBackendDescriptor_t vc = tens(g, "relu", U_VC, d, n, c, hh, ww, true);
			ops[nops++] = pw_op(g, CUDNN_POINTWISE_MUL, x, s, va, "scale");
			ops[nops++] = pw_op(g, CUDNN_POINTWISE_ADD, va, b, vb, "bias");
			ops[nops++] = pw_op(g, CUDNN_POINTWISE_RELU_FWD, vb, NULL, vc, "relu");
			in = vc;
		}
		cudnnBackendDescriptor_t cd = convdesc(g, sh);
		ops[nops++] =
			conv_op(g, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, cd, in, w, y, "conv fprop");
		if (gr != G_CONV) {
			cudnnBackendDescriptor_t sum = vec(g, "sum", U_SUM, k), sq = vec(g, "sqsum", U_SQ, k);
			ops[nops++] = genstats_op(g, y, sum, sq);
		}
		break;
	}
	case G_BN_FINALIZE: {
		/* the BN over the k output channels of this shape */
		cudnnBackendDescriptor_t op =
			gb_new(g, CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR, "bn finalize");
		cudnnBnFinalizeStatsMode_t mode = CUDNN_BN_FINALIZE_STATISTICS_TRAINING;
		gb_set(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_STATS_MODE, CUDNN_TYPE_BN_FINALIZE_STATS_MODE, 1, &mode,
		       "bn finalize");
		gb_set(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f, "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SUM_DESC, vec(g, "sum", U_SUM, k), "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SQ_SUM_DESC, vec(g, "sqsum", U_SQ, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_SCALE_DESC, vec(g, "gamma", U_GAMMA, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_BIAS_DESC, vec(g, "beta", U_BETA, k), "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_MEAN_DESC, vec(g, "rmean", U_RM, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_VAR_DESC, vec(g, "rvar", U_RV, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_UPDATED_RUNNING_MEAN_DESC,
			 vec(g, "new rmean", U_NRM, k), "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_UPDATED_RUNNING_VAR_DESC, vec(g, "new rvar", U_NRV, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_SAVED_MEAN_DESC, vec(g, "mean", U_MEAN, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_SAVED_INV_STD_DESC, vec(g, "invstd", U_ISTD, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_EQ_SCALE_DESC, sbvec(g, "eq scale", U_EQS, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_EQ_BIAS_DESC, sbvec(g, "eq bias", U_EQB, k),
			 "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_ACCUM_COUNT_DESC,
			 scalar(g, "count", U_CNT, CUDNN_DATA_INT64), "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_EPSILON_DESC,
			 scalar(g, "epsilon", U_EPS, CUDNN_DATA_DOUBLE), "bn finalize");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_FINALIZE_EXP_AVERATE_FACTOR_DESC,
			 scalar(g, "momentum", U_MOM, CUDNN_DATA_DOUBLE), "bn finalize");
		gb_fin(g, op, "bn finalize");
		ops[nops++] = op;
		break;
	}
	case G_DGRAD_DRELU_DBNW: {
		cudnnBackendDescriptor_t dy = tens(g, "dY", U_DY, d, n, k, p, q, false);
		cudnnBackendDescriptor_t w = tens(g, "W", U_W, d, k, c, sh->r, sh->s, false);
		cudnnBackendDescriptor_t x = tens(g, "X", U_X, d, n, c, hh, ww, false);
		cudnnBackendDescriptor_t da = tens(g, "dA", U_VA, f, n, c, hh, ww, true);
		cudnnBackendDescriptor_t va = tens(g, "X*s", U_VB, f, n, c, hh, ww, true);
		cudnnBackendDescriptor_t vb = tens(g, "X*s+b", U_VC, f, n, c, hh, ww, true);
		cudnnBackendDescriptor_t dz = tens(g, "dZ", U_DZ, d, n, c, hh, ww, false);
		cudnnBackendDescriptor_t cd = convdesc(g, sh);
		ops[nops++] = conv_op(g, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, cd, dy, w, da,
				      "conv dgrad");
		ops[nops++] = pw_op(g, CUDNN_POINTWISE_MUL, x, sbvec(g, "scale", U_S, c), va, "scale");
		ops[nops++] = pw_op(g, CUDNN_POINTWISE_ADD, va, sbvec(g, "bias", U_B, c), vb, "bias");
		ops[nops++] = pw_op(g, CUDNN_POINTWISE_RELU_BWD, da, vb, dz, "relu bwd");
		cudnnBackendDescriptor_t op =
			gb_new(g, CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR, "bn bwd weights");
		gb_set(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f,
		       "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, vec(g, "mean", U_MEAN, c),
			 "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, vec(g, "invstd", U_ISTD, c),
			 "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, vec(g, "gamma", U_GAMMA, c),
			 "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, x, "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, dz, "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, vec(g, "dgamma", U_DG, c),
			 "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, vec(g, "dbeta", U_DB, c),
			 "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, vec(g, "c_dy", U_CDY, c),
			 "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, vec(g, "c_x", U_CX, c),
			 "bn bwd weights");
		set_desc(g, op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, vec(g, "c_b", U_CB, c), "bn bwd weights");
		gb_fin(g, op, "bn bwd weights");
		ops[nops++] = op;
		break;
	}
	case G_WGRAD_SBR:
	case G_WGRAD_SBR_F32: {
		cudnnBackendDescriptor_t x = tens(g, "X", U_X, d, n, c, hh, ww, false);
		cudnnBackendDescriptor_t dy = tens(g, "dY", U_DY, d, n, k, p, q, false);
		cudnnBackendDescriptor_t dw = tens(g, "dW", U_DW, gr == G_WGRAD_SBR ? d : f, k, c, sh->r, sh->s, false);
		cudnnBackendDescriptor_t va = tens(g, "X*s", U_VA, f, n, c, hh, ww, true);
		cudnnBackendDescriptor_t vb = tens(g, "X*s+b", U_VB, f, n, c, hh, ww, true);
		cudnnBackendDescriptor_t vc = tens(g, "relu", U_VC, d, n, c, hh, ww, true);
		ops[nops++] = pw_op(g, CUDNN_POINTWISE_MUL, x, sbvec(g, "scale", U_S, c), va, "scale");
		ops[nops++] = pw_op(g, CUDNN_POINTWISE_ADD, va, sbvec(g, "bias", U_B, c), vb, "bias");
		ops[nops++] = pw_op(g, CUDNN_POINTWISE_RELU_FWD, vb, NULL, vc, "relu");
		ops[nops++] = conv_op(g, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
				      convdesc(g, sh), vc, dy, dw, "conv wgrad");
		break;
	}
	default: break;
	}
	return nops;
}

/* ---- host data and the CPU reference --------------------------------- */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(float lo, float hi)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}
/* n values in [lo, hi], rounded to the 16-bit type (f) and its bits (h) */
static bool fill16(float *f, uint16_t *h, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++) {
		h[i] = to16(urand(lo, hi));
		f[i] = from16(h[i]);
	}
	return true;
}
static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		say("fuse_probe: out of host memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

/* y[n,p,q,k] = sum x[n,h,w,c] w[k,r,s,c] (NHWC, KRSC) */
static void ref_conv(const struct shape *sh, int64_t n, const float *x, const float *w, float *y)
{
	int64_t p = out_p(sh), q = out_q(sh);
	for (int64_t in = 0; in < n; in++)
		for (int64_t ip = 0; ip < p; ip++)
			for (int64_t iq = 0; iq < q; iq++) {
				float *yo = y + ((in * p + ip) * q + iq) * sh->k;
				for (int64_t k = 0; k < sh->k; k++) {
					double acc = 0;
					for (int64_t r = 0; r < sh->r; r++) {
						int64_t ih = ip * sh->stride - sh->pad + r;
						if (ih < 0 || ih >= sh->h)
							continue;
						for (int64_t s = 0; s < sh->s; s++) {
							int64_t iw = iq * sh->stride - sh->pad + s;
							if (iw < 0 || iw >= sh->w)
								continue;
							const float *xi = x + ((in * sh->h + ih) * sh->w + iw) * sh->c;
							const float *wi = w + ((k * sh->r + r) * sh->s + s) * sh->c;
							for (int64_t c = 0; c < sh->c; c++)
								acc += (double)xi[c] * wi[c];
						}
					}
					yo[k] = (float)acc;
				}
			}
}
/* dx = dgrad(dy, w) */
static void ref_dgrad(const struct shape *sh, int64_t n, const float *dy, const float *w, float *dx)
{
	int64_t p = out_p(sh), q = out_q(sh);
	memset(dx, 0, sizeof(float) * (size_t)(n * sh->h * sh->w * sh->c));
	for (int64_t in = 0; in < n; in++)
		for (int64_t ip = 0; ip < p; ip++)
			for (int64_t iq = 0; iq < q; iq++) {
				const float *g = dy + ((in * p + ip) * q + iq) * sh->k;
				for (int64_t r = 0; r < sh->r; r++) {
					int64_t ih = ip * sh->stride - sh->pad + r;
					if (ih < 0 || ih >= sh->h)
						continue;
					for (int64_t s = 0; s < sh->s; s++) {
						int64_t iw = iq * sh->stride - sh->pad + s;
						if (iw < 0 || iw >= sh->w)
							continue;
						float *xo = dx + ((in * sh->h + ih) * sh->w + iw) * sh->c;
						for (int64_t k = 0; k < sh->k; k++) {
							const float *wi = w + ((k * sh->r + r) * sh->s + s) * sh->c;
							for (int64_t c = 0; c < sh->c; c++)
								xo[c] += g[k] * wi[c];
						}
					}
				}
			}
}
/* dw = wgrad(x, dy) */
static void ref_wgrad(const struct shape *sh, int64_t n, const float *x, const float *dy, float *dw)
{
	int64_t p = out_p(sh), q = out_q(sh);
	memset(dw, 0, sizeof(float) * (size_t)(sh->k * sh->r * sh->s * sh->c));
	for (int64_t in = 0; in < n; in++)
		for (int64_t ip = 0; ip < p; ip++)
			for (int64_t iq = 0; iq < q; iq++) {
				const float *g = dy + ((in * p + ip) * q + iq) * sh->k;
				for (int64_t r = 0; r < sh->r; r++) {
					int64_t ih = ip * sh->stride - sh->pad + r;
					if (ih < 0 || ih >= sh->h)
						continue;
					for (int64_t s = 0; s < sh->s; s++) {
						int64_t iw = iq * sh->stride - sh->pad + s;
						if (iw < 0 || iw >= sh->w)
							continue;
						const float *xi = x + ((in * sh->h + ih) * sh->w + iw) * sh->c;
						for (int64_t k = 0; k < sh->k; k++) {
							float *wo = dw + ((k * sh->r + r) * sh->s + s) * sh->c;
							for (int64_t c = 0; c < sh->c; c++)
								wo[c] += g[k] * xi[c];
						}
					}
				}
			}
}
/* max |got - ref| / max(|ref|) (or over den when den > 0) */
static double relerr(const float *got, const float *ref, size_t n, double den)
{
	double e = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		if (d > e || d != d)
			e = d != d ? INFINITY : d;
		if (fabs(ref[i]) > m)
			m = fabs(ref[i]);
	}
	if (den > 0)
		m = den;
	return e / (m > 1e-30 ? m : 1e-30);
}

/* ---- per-graph results -------------------------------------------------- */
struct result {
	bool built, supported;
	char why[800];
	char engine[160];
	int check; /* 0 not run, 1 ok, -1 failed */
	double err;
	double ms; /* median at the timing batch, <0 not timed */
	const char *dt;
};

static float ms_median(float *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			float t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n ? v[n / 2] : -1.0f;
}

struct opts {
	int64_t batch, check_batch;
	int iters;
	bool time, check;
	double budget; /* seconds: past it, no more timing (checks go on) */
};
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double t_start;
static bool over_budget(const struct opts *o) { return now_s() - t_start > o->budget; }

static double g_tol(void) { return g_half ? 1.0 / 256 : 1.0 / 64; }

/* Upload a float host array as 16-bit or float to a device buffer */
static bool up16(void *d, const uint16_t *h, size_t n)
{
	return cuda_ok(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}
static bool upf(void *d, const float *h, size_t n)
{
	return cuda_ok(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}
static bool down16(float *f, const void *d, size_t n)
{
	uint16_t *h = xmalloc(n * 2);
	bool ok = cuda_ok(cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
	for (size_t i = 0; ok && i < n; i++)
		f[i] = from16(h[i]);
	free(h);
	return ok;
}
static bool downf(float *f, const void *d, size_t n)
{
	return cuda_ok(cudaMemcpy(f, d, n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

/* The inputs of one graph at batch n, on the host (float values of the
 * 16-bit data) and on the device. */
struct data {
	int64_t n, nx, ny, nw;
	float *x, *w, *dy, *s, *b, *gamma, *beta, *mean, *istd;
	uint16_t *hx, *hw, *hdy;
	float *sum, *sq; /* genstats inputs of bn_finalize (over k) */
	double cnt_d;
	int64_t cnt;
	double eps, mom;
};
static void data_make(struct data *dd, const struct shape *sh, int64_t n)
{
	memset(dd, 0, sizeof *dd);
	dd->n = n;
	dd->nx = n * sh->h * sh->w * sh->c;
	dd->ny = n * out_p(sh) * out_q(sh) * sh->k;
	dd->nw = sh->k * sh->r * sh->s * sh->c;
	dd->x = xmalloc(sizeof(float) * (size_t)dd->nx);
	dd->hx = xmalloc(2 * (size_t)dd->nx);
	dd->w = xmalloc(sizeof(float) * (size_t)dd->nw);
	dd->hw = xmalloc(2 * (size_t)dd->nw);
	dd->dy = xmalloc(sizeof(float) * (size_t)dd->ny);
	dd->hdy = xmalloc(2 * (size_t)dd->ny);
	float ws = 1.0f / sqrtf((float)(sh->c * sh->r * sh->s));
	/* random samples for the first two images, copies of them after
	 * (the timing batch: seconds of random numbers saved, the same work) */
	int64_t base = n < 2 ? n : 2, sx = dd->nx / n, sy = dd->ny / n;
	fill16(dd->x, dd->hx, (size_t)(base * sx), -1.0f, 1.5f);
	fill16(dd->w, dd->hw, (size_t)dd->nw, -ws, ws);
	fill16(dd->dy, dd->hdy, (size_t)(base * sy), -1.0f, 1.0f);
	for (int64_t i = base; i < n; i++) {
		memcpy(dd->x + i * sx, dd->x + (i % base) * sx, sizeof(float) * (size_t)sx);
		memcpy(dd->hx + i * sx, dd->hx + (i % base) * sx, 2 * (size_t)sx);
		memcpy(dd->dy + i * sy, dd->dy + (i % base) * sy, sizeof(float) * (size_t)sy);
		memcpy(dd->hdy + i * sy, dd->hdy + (i % base) * sy, 2 * (size_t)sy);
	}
	int64_t cm = sh->c > sh->k ? sh->c : sh->k;
	dd->s = xmalloc(sizeof(float) * (size_t)cm);
	dd->b = xmalloc(sizeof(float) * (size_t)cm);
	dd->gamma = xmalloc(sizeof(float) * (size_t)cm);
	dd->beta = xmalloc(sizeof(float) * (size_t)cm);
	dd->mean = xmalloc(sizeof(float) * (size_t)cm);
	dd->istd = xmalloc(sizeof(float) * (size_t)cm);
	dd->sum = xmalloc(sizeof(float) * (size_t)cm);
	dd->sq = xmalloc(sizeof(float) * (size_t)cm);
	/* X stands for the previous convolution's output y_{L-1}: its batch
	 * statistics give mean/istd, gamma/beta the BN's parameters, s/b the
	 * equivalent scale and bias of its apply */
	for (int64_t c = 0; c < sh->c; c++) {
		double m = 0, v = 0, cntc = (double)(dd->nx / sh->c);
		for (int64_t i = c; i < dd->nx; i += sh->c)
			m += dd->x[i];
		m /= cntc;
		for (int64_t i = c; i < dd->nx; i += sh->c)
			v += (dd->x[i] - m) * (dd->x[i] - m);
		v /= cntc;
		dd->mean[c] = (float)m;
		dd->istd[c] = (float)(1.0 / sqrt(v + 1e-5));
		dd->gamma[c] = urand(0.5f, 1.5f);
		dd->beta[c] = urand(-0.3f, 0.3f);
		dd->s[c] = dd->gamma[c] * dd->istd[c];
		dd->b[c] = dd->beta[c] - dd->mean[c] * dd->s[c];
		if (g_sb16) {
			dd->s[c] = from16(to16(dd->s[c]));
			dd->b[c] = from16(to16(dd->b[c]));
		}
	}
	/* bn_finalize over k: sums as a convolution would give them */
	dd->cnt = n * out_p(sh) * out_q(sh);
	dd->eps = 1e-5;
	dd->mom = 0.1;
	for (int64_t k = 0; k < sh->k; k++) {
		double mu = urand(-0.5f, 0.5f), var = urand(0.2f, 2.0f);
		dd->sum[k] = (float)(mu * (double)dd->cnt);
		dd->sq[k] = (float)((var + mu * mu) * (double)dd->cnt);
	}
}
static void data_free(struct data *dd)
{
	free(dd->x), free(dd->hx), free(dd->w), free(dd->hw), free(dd->dy), free(dd->hdy);
	free(dd->s), free(dd->b), free(dd->gamma), free(dd->beta), free(dd->mean), free(dd->istd);
	free(dd->sum), free(dd->sq);
}

/* a scale/bias vector: float, or 16-bit with g_sb16 */
static bool sbup(struct bufs *bs, int64_t uid, const float *src, size_t n)
{
	void *p = dalloc(bs, uid, n * (g_sb16 ? 2 : 4));
	if (!p || !src)
		return p != NULL;
	if (!g_sb16)
		return upf(p, src, n);
	uint16_t *h = xmalloc(2 * n);
	for (size_t i = 0; i < n; i++)
		h[i] = to16(src[i]);
	bool ok = up16(p, h, n);
	free(h);
	return ok;
}
/* device buffers for graph gr, filled from dd */
static bool bind(enum graph gr, const struct shape *sh, struct data *dd, struct bufs *bs)
{
	size_t c = (size_t)sh->c, k = (size_t)sh->k;
	size_t nx = (size_t)dd->nx, ny = (size_t)dd->ny, nw = (size_t)dd->nw;
	void *p;
#define A16(uid, n, src) ((p = dalloc(bs, uid, (n)*2)) != NULL && (!(src) || up16(p, src, n)))
#define AF(uid, n, src) ((p = dalloc(bs, uid, (n)*4)) != NULL && (!(src) || upf(p, src, n)))
	switch (gr) {
	case G_CONV:
	case G_CONV_STATS:
	case G_SBR_CONV_STATS:
		if (!A16(U_X, nx, dd->hx) || !A16(U_W, nw, dd->hw) || !A16(U_Y, ny, NULL))
			return false;
		if (gr != G_CONV && (!AF(U_SUM, k, NULL) || !AF(U_SQ, k, NULL)))
			return false;
		if (gr == G_SBR_CONV_STATS && (!sbup(bs, U_S, dd->s, c) || !sbup(bs, U_B, dd->b, c)))
			return false;
		return true;
	case G_BN_FINALIZE: {
		float *ones = xmalloc(4 * k), *zeros = xmalloc(4 * k);
		for (size_t i = 0; i < k; i++)
			ones[i] = 1.0f;
		bool ok = AF(U_SUM, k, dd->sum) && AF(U_SQ, k, dd->sq) && AF(U_GAMMA, k, dd->gamma) &&
			  AF(U_BETA, k, dd->beta) && AF(U_RM, k, zeros) && AF(U_RV, k, ones) && AF(U_NRM, k, NULL) &&
			  AF(U_NRV, k, NULL) && AF(U_MEAN, k, NULL) && AF(U_ISTD, k, NULL) &&
			  sbup(bs, U_EQS, NULL, k) && sbup(bs, U_EQB, NULL, k);
		free(ones), free(zeros);
		if (!ok || bs->n + 3 > MAXBUF)
			return false;
		bs->b[bs->n++] = (struct buf){ -U_CNT, &dd->cnt, 8 };
		bs->b[bs->n++] = (struct buf){ -U_EPS, &dd->eps, 8 };
		bs->b[bs->n++] = (struct buf){ -U_MOM, &dd->mom, 8 };
		return true;
	}
	case G_DGRAD_DRELU_DBNW:
		return A16(U_DY, ny, dd->hdy) && A16(U_W, nw, dd->hw) && A16(U_X, nx, dd->hx) && A16(U_DZ, nx, NULL) &&
		       sbup(bs, U_S, dd->s, c) && sbup(bs, U_B, dd->b, c) && AF(U_MEAN, c, dd->mean) &&
		       AF(U_ISTD, c, dd->istd) && AF(U_GAMMA, c, dd->gamma) && AF(U_DG, c, NULL) && AF(U_DB, c, NULL) &&
		       AF(U_CDY, c, NULL) && AF(U_CX, c, NULL) && AF(U_CB, c, NULL);
	case G_WGRAD_SBR:
	case G_WGRAD_SBR_F32:
		return A16(U_X, nx, dd->hx) && A16(U_DY, ny, dd->hdy) &&
		       (gr == G_WGRAD_SBR ? A16(U_DW, nw, NULL) : AF(U_DW, nw, NULL)) && sbup(bs, U_S, dd->s, c) &&
		       sbup(bs, U_B, dd->b, c);
	default: return false;
	}
#undef A16
#undef AF
}

/* relu(x*s + b) per element, rounded to the 16-bit type as the graph's
 * virtual tensor is */
static float *sbr(const struct shape *sh, const struct data *dd)
{
	float *a = xmalloc(sizeof(float) * (size_t)dd->nx);
	for (int64_t i = 0; i < dd->nx; i++) {
		int64_t c = i % sh->c;
		float v = dd->x[i] * dd->s[c] + dd->b[c];
		a[i] = from16(to16(v > 0 ? v : 0));
	}
	return a;
}

static bool report_err(const char *what, double e, double *worst)
{
	bool ok = e <= g_tol();
	say("    %-10s max err %.3g (limit %.3g) %s\n", what, e, g_tol(), ok ? "ok" : "FAIL");
	if (e > *worst)
		*worst = e;
	return ok;
}

/* compare the device results of graph gr (batch dd->n) with the reference */
static int check(enum graph gr, const struct shape *sh, struct data *dd, struct bufs *bs, double *worst)
{
	size_t c = (size_t)sh->c, k = (size_t)sh->k, nx = (size_t)dd->nx, ny = (size_t)dd->ny, nw = (size_t)dd->nw;
	bool ok = true;
	*worst = 0;
	switch (gr) {
	case G_CONV:
	case G_CONV_STATS:
	case G_SBR_CONV_STATS: {
		float *in = gr == G_SBR_CONV_STATS ? sbr(sh, dd) : dd->x;
		float *ref = xmalloc(4 * ny), *got = xmalloc(4 * ny);
		ref_conv(sh, dd->n, in, dd->w, ref);
		if (!down16(got, find(bs, U_Y), ny))
			ok = false;
		else
			ok &= report_err("Y", relerr(got, ref, ny, 0), worst);
		if (ok && gr != G_CONV) {
			/* reference sums from the unrounded float outputs; the
			 * measure's denominator is the largest sum of |y| */
			double *rs = calloc(k, sizeof(double)), *rq = calloc(k, sizeof(double)), den = 0, denq = 0;
			float *gs = xmalloc(4 * k), *gq = xmalloc(4 * k), *fs = xmalloc(4 * k), *fq = xmalloc(4 * k);
			double *ra = calloc(k, sizeof(double));
			if (!rs || !rq || !ra) {
				say("fuse_probe: out of host memory\n");
				exit(1);
			}
			for (size_t i = 0; i < ny; i++) {
				rs[i % k] += ref[i];
				rq[i % k] += (double)ref[i] * ref[i];
				ra[i % k] += fabs(ref[i]);
			}
			for (size_t j = 0; j < k; j++) {
				fs[j] = (float)rs[j], fq[j] = (float)rq[j];
				if (ra[j] > den)
					den = ra[j];
				if (rq[j] > denq)
					denq = rq[j];
			}
			if (downf(gs, find(bs, U_SUM), k) && downf(gq, find(bs, U_SQ), k)) {
				ok &= report_err("sum", relerr(gs, fs, k, den), worst);
				ok &= report_err("sqsum", relerr(gq, fq, k, denq), worst);
			} else {
				ok = false;
			}
			free(rs), free(rq), free(ra), free(gs), free(gq), free(fs), free(fq);
		}
		free(ref), free(got);
		if (in != dd->x)
			free(in);
		break;
	}
	case G_BN_FINALIZE: {
		float r[8][1024], gbuf[8][1024];
		int64_t uids[6] = { U_MEAN, U_ISTD, U_EQS, U_EQB, U_NRM, U_NRV };
		const char *names[6] = { "mean", "invstd", "eq_scale", "eq_bias", "run_mean", "run_var" };
		if (k > 1024)
			return -1;
		for (size_t j = 0; j < k; j++) {
			double mu = (double)dd->sum[j] / (double)dd->cnt;
			double var = (double)dd->sq[j] / (double)dd->cnt - mu * mu;
			double is = 1.0 / sqrt(var + dd->eps);
			double ub = var * (double)dd->cnt / (double)(dd->cnt - 1);
			r[0][j] = (float)mu;
			r[1][j] = (float)is;
			r[2][j] = (float)(dd->gamma[j] * is);
			r[3][j] = (float)(dd->beta[j] - mu * dd->gamma[j] * is);
			r[4][j] = (float)(dd->mom * mu);                       /* prev mean 0 */
			r[5][j] = (float)((1 - dd->mom) * 1.0 + dd->mom * ub); /* prev var 1 */
		}
		for (int i = 0; i < 6; i++) {
			bool is16 = g_sb16 && (uids[i] == U_EQS || uids[i] == U_EQB);
			if (!(is16 ? down16(gbuf[i], find(bs, uids[i]), k) : downf(gbuf[i], find(bs, uids[i]), k)))
				return -1;
			/* float arithmetic on sums of ~1e5: allow 2^-12 beyond the tolerance's scale */
			double e = relerr(gbuf[i], r[i], k, 0);
			ok &= report_err(names[i], e, worst);
		}
		if (!ok)
			say("    (running variance: this probe expects the unbiased variance, momentum %.2f on the new "
			    "value; a mismatch there only, of exactly cnt/(cnt-1), is a convention, not an error)\n",
			    dd->mom);
		break;
	}
	case G_DGRAD_DRELU_DBNW: {
		float *da = xmalloc(4 * nx), *dz = xmalloc(4 * nx), *got = xmalloc(4 * nx);
		ref_dgrad(sh, dd->n, dd->dy, dd->w, da);
		for (size_t i = 0; i < nx; i++) {
			size_t ch = i % c;
			float z = dd->x[i] * dd->s[ch] + dd->b[ch];
			dz[i] = z > 0 ? da[i] : 0.0f;
		}
		if (!down16(got, find(bs, U_DZ), nx)) {
			ok = false;
		} else {
			/* where X*s + b is within rounding of 0 the mask may go
			 * either way (fma or not): take the device's value there */
			for (size_t i = 0; i < nx; i++) {
				size_t ch = i % c;
				if (fabsf(dd->x[i] * dd->s[ch] + dd->b[ch]) < 1e-5f)
					dz[i] = got[i];
			}
			ok &= report_err("dZ", relerr(got, dz, nx, 0), worst);
		}
		/* dgamma, dbeta and dX = c_dy*dZ + c_x*X + c_b against the
		 * textbook BN backward (from the device's dZ, so that the
		 * coefficients are checked on their own) */
		double *sdz = calloc(c, sizeof(double)), *sdzx = calloc(c, sizeof(double));
		float *rdg = xmalloc(4 * c), *rdb = xmalloc(4 * c), *gdg = xmalloc(4 * c), *gdb = xmalloc(4 * c);
		float *cdy = xmalloc(4 * c), *cx = xmalloc(4 * c), *cb = xmalloc(4 * c);
		if (!sdz || !sdzx) {
			say("fuse_probe: out of host memory\n");
			exit(1);
		}
		for (size_t i = 0; i < nx; i++) {
			size_t ch = i % c;
			double xh = (dd->x[i] - dd->mean[ch]) * (double)dd->istd[ch];
			sdz[ch] += got[i];
			sdzx[ch] += got[i] * xh;
		}
		for (size_t j = 0; j < c; j++)
			rdg[j] = (float)sdzx[j], rdb[j] = (float)sdz[j];
		if (ok && downf(gdg, find(bs, U_DG), c) && downf(gdb, find(bs, U_DB), c) &&
		    downf(cdy, find(bs, U_CDY), c) && downf(cx, find(bs, U_CX), c) && downf(cb, find(bs, U_CB), c)) {
			ok &= report_err("dgamma", relerr(gdg, rdg, c, 0), worst);
			ok &= report_err("dbeta", relerr(gdb, rdb, c, 0), worst);
			double m = (double)(nx / c);
			float *rdx = da; /* reuse */
			for (size_t i = 0; i < nx; i++) {
				size_t ch = i % c;
				double xh = (dd->x[i] - dd->mean[ch]) * (double)dd->istd[ch];
				rdx[i] = (float)(dd->gamma[ch] * dd->istd[ch] *
						 (got[i] - sdz[ch] / m - xh * sdzx[ch] / m));
				dz[i] = cdy[ch] * got[i] + cx[ch] * dd->x[i] + cb[ch];
			}
			ok &= report_err("dX(coef)", relerr(dz, rdx, nx, 0), worst);
		} else {
			ok = false;
		}
		free(sdz), free(sdzx), free(rdg), free(rdb), free(gdg), free(gdb), free(cdy), free(cx), free(cb);
		free(da), free(dz), free(got);
		break;
	}
	case G_WGRAD_SBR:
	case G_WGRAD_SBR_F32: {
		float *a = sbr(sh, dd), *ref = xmalloc(4 * nw), *got = xmalloc(4 * nw);
		ref_wgrad(sh, dd->n, a, dd->dy, ref);
		if (gr == G_WGRAD_SBR ? down16(got, find(bs, U_DW), nw) : downf(got, find(bs, U_DW), nw))
			ok &= report_err("dW", relerr(got, ref, nw, 0), worst);
		else
			ok = false;
		free(a), free(ref), free(got);
		break;
	}
	default: break;
	}
	return ok ? 1 : -1;
}

/* times plan k: median ms of iters runs after 5 warm-up runs; <0 on error */
static double time_plan(cudnnHandle_t h, struct plans *p, int k, struct bufs *bs, int iters, struct gb *err)
{
	void *ws = NULL;
	if (p->ws[k] > 0 && !cuda_ok(cudaMalloc(&ws, (size_t)p->ws[k]), "cudaMalloc workspace"))
		return -1;
	cudaEvent_t e0 = NULL, e1 = NULL;
	cudnnBackendDescriptor_t vp = NULL;
	float *v = xmalloc(sizeof(float) * (size_t)iters);
	double res = -1;
	/* the variant pack is made once, as an engine would */
	if (!cuda_ok(cudaEventCreate(&e0), "cudaEventCreate") || !cuda_ok(cudaEventCreate(&e1), "cudaEventCreate") ||
	    make_vpack(bs, ws, &vp, err) != CUDNN_STATUS_SUCCESS)
		goto out;
	for (int i = 0; i < 5; i++)
		if (run_plan(h, p, k, vp, err) != CUDNN_STATUS_SUCCESS)
			goto out;
	for (int i = 0; i < iters; i++) {
		cudaEventRecord(e0, 0);
		if (run_plan(h, p, k, vp, err) != CUDNN_STATUS_SUCCESS)
			goto out;
		cudaEventRecord(e1, 0);
		if (!cuda_ok(cudaEventSynchronize(e1), "cudaEventSynchronize"))
			goto out;
		cudaEventElapsedTime(&v[i], e0, e1);
	}
	res = ms_median(v, iters);
out:
	if (vp)
		cudnnBackendDestroyDescriptor(vp);
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	free(v);
	cudaFree(ws);
	return res;
}

/* one graph on one shape, in the current 16-bit type */
static void probe_graph(cudnnHandle_t h, enum graph gr, const struct shape *sh, const struct opts *o,
			struct result *res)
{
	memset(res, 0, sizeof *res);
	res->ms = -1;
	res->dt = variant();
	/* build and plan at the check batch (the numbers), then the timing batch */
	for (int pass = 0; pass < 2; pass++) {
		int64_t n = pass == 0 ? o->check_batch : o->batch;
		if (pass == 0 && !o->check)
			continue;
		if (pass == 1 && !o->time)
			continue;
		if (pass == 1 && over_budget(o)) {
			say("  %-17s %s: not timed: past the --budget of %.0f s\n", gname[gr], res->dt, o->budget);
			continue;
		}
		struct gb g;
		memset(&g, 0, sizeof g);
		cudnnBackendDescriptor_t ops[16];
		int nops = build(&g, gr, sh, n, ops);
		struct plans pl;
		memset(&pl, 0, sizeof pl);
		if (g.st == CUDNN_STATUS_SUCCESS)
			make_plans(&g, h, ops, nops, pass == 0 ? 1 : MAXPLANS, &pl);
		if (g.st != CUDNN_STATUS_SUCCESS) {
			snprintf(res->why, sizeof res->why, "%s at \"%s\" (N=%lld)%s%s", cudnnGetErrorString(g.st),
				 g.step, (long long)n, g.detail[0] ? ": " : "", g.detail);
			gb_free(&g);
			return;
		}
		res->built = true;
		if (pl.n == 0) {
			snprintf(res->why, sizeof res->why, "no engine: %s; %d configs tried%s%s%s%s (N=%lld)", pl.heur,
				 pl.tried, pl.tried || pl.last_st ? ", last: " : "",
				 pl.tried || pl.last_st ? cudnnGetErrorString(pl.last_st) : "",
				 pl.last_detail[0] ? ": " : "", pl.last_detail, (long long)n);
			gb_free(&g);
			return;
		}
		res->supported = true;
		struct data dd;
		data_make(&dd, sh, n);
		struct bufs bs;
		memset(&bs, 0, sizeof bs);
		if (!bind(gr, sh, &dd, &bs)) {
			snprintf(res->why, sizeof res->why, "device buffers (N=%lld): see the CUDA error above",
				 (long long)n);
			res->check = -1;
			goto done;
		}
		if (pass == 0) {
			snprintf(res->engine, sizeof res->engine, "engine %lld%s ws %lld B", (long long)pl.engine[0],
				 pl.rtc[0] ? " (runtime-compiled)" : "", (long long)pl.ws[0]);
			say("  %-17s %s: supported, %s; %s\n", gname[gr], res->dt, res->engine, pl.heur);
			void *ws = NULL;
			struct gb eg;
			memset(&eg, 0, sizeof eg);
			if (pl.ws[0] > 0 && !cuda_ok(cudaMalloc(&ws, (size_t)pl.ws[0]), "cudaMalloc workspace")) {
				res->check = -1;
			} else if (execute(h, &pl, 0, &bs, ws, &eg) != CUDNN_STATUS_SUCCESS) {
				say("    execute: %s at %s: %s\n", cudnnGetErrorString(eg.st), eg.step, eg.detail);
				res->check = -1;
				snprintf(res->why, sizeof res->why, "execute failed: %s", cudnnGetErrorString(eg.st));
			} else if (cuda_ok(cudaDeviceSynchronize(), "after execute")) {
				res->check = check(gr, sh, &dd, &bs, &res->err);
			} else {
				res->check = -1;
			}
			cudaFree(ws);
		} else {
			double best = -1;
			int bk = -1;
			for (int k = 0; k < pl.n; k++) {
				struct gb eg;
				memset(&eg, 0, sizeof eg);
				double t = time_plan(h, &pl, k, &bs, o->iters, &eg);
				say("    N=%lld plan %d (engine %lld%s, ws %lld B): %s", (long long)n, k,
				    (long long)pl.engine[k], pl.rtc[k] ? " rtc" : "", (long long)pl.ws[k],
				    t >= 0 ? "" : "failed");
				if (t >= 0)
					say("%.3f ms\n", t);
				else
					say(" %s at %s\n", cudnnGetErrorString(eg.st), eg.step);
				if (t >= 0 && (best < 0 || t < best))
					best = t, bk = k;
			}
			res->ms = best;
			if (bk >= 0 && !res->engine[0])
				snprintf(res->engine, sizeof res->engine, "engine %lld", (long long)pl.engine[bk]);
			if (!o->check)
				say("  %-17s %s: supported at N=%lld, best %.3f ms\n", gname[gr], res->dt, (long long)n,
				    best);
		}
	done:
		bufs_free(&bs);
		data_free(&dd);
		plans_free(&pl);
		gb_free(&g);
	}
}

/* ---- the unfused legacy sequence --------------------------------------- */
struct legacy {
	double conv, bn_fwd, bn_bwd, dgrad, wgrad;
	char why[400];
};
#define LCHK(call, what) \
	do { \
		cudnnStatus_t s_ = (call); \
		if (s_ != CUDNN_STATUS_SUCCESS) { \
			char d_[256]; \
			cudnnGetLastErrorString(d_, sizeof d_); \
			snprintf(L->why + strlen(L->why), sizeof L->why - strlen(L->why), "%s: %s %s; ", what, \
				 cudnnGetErrorString(s_), d_); \
			goto fail; \
		} \
	} while (0)

/* time one legacy call: body runs 5 times, then iters times timed; a
 * failure leaves dst at -1, says why, and goes on with the next call */
static bool lcall(struct legacy *L, cudnnStatus_t s, const char *what)
{
	if (s == CUDNN_STATUS_SUCCESS)
		return true;
	char d[256];
	cudnnGetLastErrorString(d, sizeof d);
	snprintf(L->why + strlen(L->why), sizeof L->why - strlen(L->why), "%s: %s %s; ", what, cudnnGetErrorString(s),
		 d);
	return false;
}
#define LTIME(dst, what, body) \
	do { \
		bool ok_ = true; \
		for (int i_ = 0; ok_ && i_ < 5; i_++) \
			ok_ = lcall(L, body, what); \
		for (int i_ = 0; ok_ && i_ < o->iters; i_++) { \
			cudaEventRecord(e0, 0); \
			ok_ = lcall(L, body, what); \
			cudaEventRecord(e1, 0); \
			cudaEventSynchronize(e1); \
			cudaEventElapsedTime(&tv[i_], e0, e1); \
		} \
		dst = ok_ ? ms_median(tv, o->iters) : -1; \
	} while (0)

static void legacy_time(cudnnHandle_t h, const struct shape *sh, const struct opts *o, struct legacy *L)
{
	memset(L, 0, sizeof *L);
	L->conv = L->bn_fwd = L->bn_bwd = L->dgrad = L->wgrad = -1;
	int64_t n = o->batch, p = out_p(sh), q = out_q(sh);
	cudnnTensorDescriptor_t xd = NULL, yd = NULL, bnk = NULL, bnc = NULL;
	cudnnFilterDescriptor_t wd = NULL;
	cudnnConvolutionDescriptor_t cd = NULL;
	cudnnActivationDescriptor_t relu = NULL;
	void *x = NULL, *w = NULL, *y = NULL, *y2 = NULL, *dx = NULL, *dx2 = NULL, *dw = NULL, *ws = NULL, *vec = NULL,
	     *res = NULL;
	size_t wsz = 0, nx = (size_t)(n * sh->h * sh->w * sh->c), ny = (size_t)(n * p * q * sh->k);
	size_t nw = (size_t)(sh->k * sh->r * sh->s * sh->c), cm = (size_t)(sh->c > sh->k ? sh->c : sh->k);
	float alpha = 1, beta = 0;
	float *tv = xmalloc(sizeof(float) * (size_t)o->iters);
	cudaEvent_t e0 = NULL, e1 = NULL;
	cudnnDataType_t d = dt16();
	if (!cuda_ok(cudaEventCreate(&e0), "cudaEventCreate") || !cuda_ok(cudaEventCreate(&e1), "cudaEventCreate"))
		goto fail;
	LCHK(cudnnCreateTensorDescriptor(&xd), "tensor");
	LCHK(cudnnCreateTensorDescriptor(&yd), "tensor");
	LCHK(cudnnCreateTensorDescriptor(&bnk), "tensor");
	LCHK(cudnnCreateTensorDescriptor(&bnc), "tensor");
	LCHK(cudnnCreateFilterDescriptor(&wd), "filter");
	LCHK(cudnnCreateConvolutionDescriptor(&cd), "convolution");
	LCHK(cudnnCreateActivationDescriptor(&relu), "activation");
	LCHK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, d, (int)n, (int)sh->c, (int)sh->h, (int)sh->w),
	     "x desc");
	LCHK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, d, (int)n, (int)sh->k, (int)p, (int)q), "y desc");
	LCHK(cudnnSetTensor4dDescriptor(bnk, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, (int)sh->k, 1, 1), "bn desc");
	LCHK(cudnnSetTensor4dDescriptor(bnc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, (int)sh->c, 1, 1), "bn desc");
	LCHK(cudnnSetFilter4dDescriptor(wd, d, CUDNN_TENSOR_NHWC, (int)sh->k, (int)sh->c, (int)sh->r, (int)sh->s),
	     "w desc");
	LCHK(cudnnSetConvolution2dDescriptor(cd, (int)sh->pad, (int)sh->pad, (int)sh->stride, (int)sh->stride, 1, 1,
					     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
	     "conv desc");
	LCHK(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH), "math type");
	LCHK(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0), "relu");
	if (!cuda_ok(cudaMalloc(&x, nx * 2), "cudaMalloc") || !cuda_ok(cudaMalloc(&w, nw * 2), "cudaMalloc") ||
	    !cuda_ok(cudaMalloc(&y, ny * 2), "cudaMalloc") || !cuda_ok(cudaMalloc(&y2, ny * 2), "cudaMalloc") ||
	    !cuda_ok(cudaMalloc(&dx, nx * 2), "cudaMalloc") || !cuda_ok(cudaMalloc(&dx2, nx * 2), "cudaMalloc") ||
	    !cuda_ok(cudaMalloc(&dw, nw * 2), "cudaMalloc") || !cuda_ok(cudaMalloc(&vec, cm * 4 * 8), "cudaMalloc"))
		goto fail;
	/* small values: the timing does not depend on them, NaNs would not matter either */
	cudaMemset(x, 0x3c, nx * 2);
	cudaMemset(w, 0x1c, nw * 2);
	cudaMemset(y, 0x3c, ny * 2);
	cudaMemset(vec, 0, cm * 4 * 8);
	float *v = vec;
	/* algorithms: cudnnFind*Ex (as engine/cuda does), the fastest with a
	 * workspace of at most 1 GiB */
	cudnnConvolutionFwdAlgoPerf_t fa[8];
	cudnnConvolutionBwdDataAlgoPerf_t da[8];
	cudnnConvolutionBwdFilterAlgoPerf_t fwa[8];
	int cnt = 0, fi = -1, di = -1, wi = -1;
	size_t need = 0, cap = (size_t)1 << 30;
	if (!cuda_ok(cudaMalloc(&ws, cap), "cudaMalloc find workspace"))
		goto fail;
	LCHK(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x, wd, w, cd, yd, y, 8, &cnt, fa, ws, cap), "fwd find");
	for (int i = cnt - 1; i >= 0; i--)
		if (fa[i].status == CUDNN_STATUS_SUCCESS && fa[i].memory <= cap)
			fi = i;
	LCHK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, w, yd, y, cd, xd, dx, 8, &cnt, da, ws, cap),
	     "bwd data find");
	for (int i = cnt - 1; i >= 0; i--)
		if (da[i].status == CUDNN_STATUS_SUCCESS && da[i].memory <= cap)
			di = i;
	LCHK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, x, yd, y, cd, wd, dw, 8, &cnt, fwa, ws, cap),
	     "bwd filter find");
	for (int i = cnt - 1; i >= 0; i--)
		if (fwa[i].status == CUDNN_STATUS_SUCCESS && fwa[i].memory <= cap)
			wi = i;
	cudaFree(ws);
	ws = NULL;
	if (fi < 0 || di < 0 || wi < 0) {
		snprintf(L->why + strlen(L->why), sizeof L->why - strlen(L->why),
			 "cudnnFind: no algorithm (fwd %d, bwd data %d, bwd filter %d); ", fi, di, wi);
		goto fail;
	}
	wsz = fa[fi].memory;
	if (da[di].memory > wsz)
		wsz = da[di].memory;
	if (fwa[wi].memory > wsz)
		wsz = fwa[wi].memory;
	/* the BN calls may refuse bf16 (then bn_ok is false, they are not
	 * timed, and the caller tries fp16) */
	size_t bws = 0, bres = 0;
	bool bn_ok = lcall(L,
			   cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
				   h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, yd, NULL,
				   yd, bnk, relu, &bws),
			   "bn fwd ws");
	bn_ok = bn_ok && lcall(L,
			       cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT,
										 CUDNN_BATCHNORM_OPS_BN_ACTIVATION, xd,
										 xd, xd, NULL, xd, bnc, relu, &need),
			       "bn bwd ws");
	if (bn_ok && need > bws)
		bws = need;
	bn_ok = bn_ok && lcall(L,
			       cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
				       h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, relu,
				       yd, &bres),
			       "bn reserve");
	bn_ok = bn_ok && lcall(L,
			       cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
				       h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, relu,
				       xd, &need),
			       "bn reserve");
	if (bn_ok && need > bres)
		bres = need;
	if (bws > wsz)
		wsz = bws;
	if ((wsz && !cuda_ok(cudaMalloc(&ws, wsz), "cudaMalloc workspace")) ||
	    (bres && !cuda_ok(cudaMalloc(&res, bres), "cudaMalloc reserve")))
		goto fail;
	say("  legacy %s: fwd algo %d, bwd data algo %d, bwd filter algo %d (cudnnFind), workspace %zu B\n", dt16name(),
	    (int)fa[fi].algo, (int)da[di].algo, (int)fwa[wi].algo, wsz);
	LTIME(L->conv, "cudnnConvolutionForward",
	      cudnnConvolutionForward(h, &alpha, xd, x, wd, w, cd, fa[fi].algo, ws, wsz, &beta, yd, y));
	/* BN training + ReLU on the convolution's output (k channels) */
	if (bn_ok)
		LTIME(L->bn_fwd, "cudnnBatchNormalizationForwardTrainingEx",
		      cudnnBatchNormalizationForwardTrainingEx(
			      h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, &alpha, &beta,
			      yd, y, NULL, NULL, yd, y2, bnk, v, v + cm, 0.1, v + 2 * cm, v + 3 * cm, 1e-5, v + 4 * cm,
			      v + 5 * cm, relu, ws, wsz, res, bres));
	/* backward of the layer whose input BN (c channels) is the prologue:
	 * dgrad, wgrad, then BN backward with dReLU on [n, c, h, w] */
	LTIME(L->dgrad, "cudnnConvolutionBackwardData",
	      cudnnConvolutionBackwardData(h, &alpha, wd, w, yd, y, cd, da[di].algo, ws, wsz, &beta, xd, dx));
	LTIME(L->wgrad, "cudnnConvolutionBackwardFilter",
	      cudnnConvolutionBackwardFilter(h, &alpha, xd, x, yd, y, cd, fwa[wi].algo, ws, wsz, &beta, wd, dw));
	if (bn_ok)
		LTIME(L->bn_bwd, "cudnnBatchNormalizationBackwardEx",
		      cudnnBatchNormalizationBackwardEx(
			      h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, &alpha, &beta,
			      &alpha, &beta, xd, x, xd, x, xd, dx, NULL, NULL, xd, dx2, bnc, v, v + cm, v + 6 * cm,
			      v + 7 * cm, 1e-5, v + 2 * cm, v + 3 * cm, relu, ws, wsz, res, bres));
fail:
	cudaDeviceSynchronize();
	cudaFree(x), cudaFree(w), cudaFree(y), cudaFree(y2), cudaFree(dx), cudaFree(dx2), cudaFree(dw), cudaFree(ws),
		cudaFree(vec);
	cudaFree(res);
	if (xd)
		cudnnDestroyTensorDescriptor(xd);
	if (yd)
		cudnnDestroyTensorDescriptor(yd);
	if (bnk)
		cudnnDestroyTensorDescriptor(bnk);
	if (bnc)
		cudnnDestroyTensorDescriptor(bnc);
	if (wd)
		cudnnDestroyFilterDescriptor(wd);
	if (cd)
		cudnnDestroyConvolutionDescriptor(cd);
	if (relu)
		cudnnDestroyActivationDescriptor(relu);
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	free(tv);
}

static const char *fmt_ms(char *b, size_t n, double ms)
{
	if (ms < 0)
		snprintf(b, n, "-");
	else
		snprintf(b, n, "%.3f", ms);
	return b;
}

/* ---- --selftest: what runs without a GPU ------------------------------
 * the float16 conversions, the CPU reference's three convolutions against
 * each other (<conv(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x, dy)>),
 * and every graph's tensors and operations built and finalized (no handle:
 * the operation graph, heuristics and plans need the GPU) */
static double dotf(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}
static int selftest(void)
{
	int bad = 0;
	float fv[] = { 0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f, -0.33333f, 6.1e-5f };
	for (size_t i = 0; i < sizeof fv / sizeof fv[0]; i++) {
		float h = h2f(f2h(fv[i])), b = bf2f(f2bf(fv[i]));
		double eh = fabs(h - fv[i]), eb = fabs(b - fv[i]), a = fabs(fv[i]);
		if (eh > a / 2048 + 3e-8 || eb > a / 256) {
			say("selftest: 16-bit rounding of %g: fp16 %g bf16 %g FAIL\n", fv[i], h, b);
			bad++;
		}
	}
	for (size_t si = 0; si < NSHAPES; si++) {
		const struct shape *sh = &shapes[si];
		struct data dd;
		data_make(&dd, sh, 1);
		float *y = xmalloc(4 * (size_t)dd.ny), *dx = xmalloc(4 * (size_t)dd.nx),
		      *dw = xmalloc(4 * (size_t)dd.nw);
		ref_conv(sh, 1, dd.x, dd.w, y);
		ref_dgrad(sh, 1, dd.dy, dd.w, dx);
		ref_wgrad(sh, 1, dd.x, dd.dy, dw);
		double a = dotf(y, dd.dy, (size_t)dd.ny), b = dotf(dd.x, dx, (size_t)dd.nx),
		       c = dotf(dd.w, dw, (size_t)dd.nw);
		double tol = 1e-4 * (fabs(a) + 1);
		bool ok = fabs(a - b) < tol && fabs(a - c) < tol;
		say("selftest: %s: <conv,dy> %.6g <x,dgrad> %.6g <w,wgrad> %.6g %s\n", sh->name, a, b, c,
		    ok ? "ok" : "FAIL");
		bad += !ok;
		free(y), free(dx), free(dw);
		data_free(&dd);
		for (int v = 0; v < 4; v++) {
			g_half = v >= 2;
			g_sb16 = v & 1;
			for (int gr = 0; gr < NGRAPHS; gr++) {
				struct gb g;
				memset(&g, 0, sizeof g);
				cudnnBackendDescriptor_t ops[16];
				int nops = build(&g, (enum graph)gr, sh, 2, ops);
				if (g.st != CUDNN_STATUS_SUCCESS) {
					say("selftest: %s %s %s: %s at \"%s\": %s\n", sh->name, gname[gr], variant(),
					    cudnnGetErrorString(g.st), g.step, g.detail);
					bad++;
				} else if (si == 0) {
					say("selftest: %s %s: %d operations finalized\n", gname[gr], variant(), nops);
				}
				gb_free(&g);
			}
		}
		g_half = g_sb16 = false;
	}
	say("selftest: %s\n", bad ? "FAILED" : "ok");
	return bad ? 1 : 0;
}

static void usage(void)
{
	say("usage: fuse_probe [--batch N] [--check-batch N] [--iters N] [--budget S] [--shape NAME]...\n"
	    "                  [--no-time] [--no-check] | --selftest\n"
	    "shapes:");
	for (size_t i = 0; i < NSHAPES; i++)
		say(" %s", shapes[i].name);
	say("\n");
}

int main(int argc, char **argv)
{
	struct opts o = { 256, 2, 20, true, true, 240 };
	t_start = now_s();
	bool want[NSHAPES];
	bool any_shape = false;
	memset(want, 0, sizeof want);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		if (!strcmp(a, "--no-time")) {
			o.time = false;
		} else if (!strcmp(a, "--no-check")) {
			o.check = false;
		} else if (!strcmp(a, "--selftest")) {
			return selftest();
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			return 0;
		} else if (v && (!strcmp(a, "--batch") || !strcmp(a, "--check-batch") || !strcmp(a, "--iters") ||
				 !strcmp(a, "--budget"))) {
			long long x = strtoll(v, &end, 10);
			if (!*v || *end || x < 1 || x > 4096) {
				fprintf(stderr, "fuse_probe: %s wants a number from 1 to 4096, not '%s'\n", a, v);
				return 2;
			}
			if (!strcmp(a, "--batch"))
				o.batch = x;
			else if (!strcmp(a, "--budget"))
				o.budget = (double)x;
			else if (!strcmp(a, "--check-batch"))
				o.check_batch = x;
			else
				o.iters = (int)x;
			i++;
		} else if (v && !strcmp(a, "--shape")) {
			size_t j;
			for (j = 0; j < NSHAPES; j++)
				if (!strcmp(v, shapes[j].name))
					break;
			if (j == NSHAPES) {
				fprintf(stderr, "fuse_probe: no shape '%s'\n", v);
				usage();
				return 2;
			}
			want[j] = any_shape = true;
			i++;
		} else {
			fprintf(stderr, "fuse_probe: unknown or incomplete option '%s'\n", a);
			usage();
			return 2;
		}
	}
	if (o.check_batch > 16) {
		fprintf(stderr, "fuse_probe: --check-batch above 16 makes the CPU reference too slow\n");
		return 2;
	}
	const char *out = getenv("OUT");
	if (out && *out) {
		char path[4096];
		snprintf(path, sizeof path, "%s/fuse_probe.log", out);
		logf_ = fopen(path, "w");
		if (!logf_)
			fprintf(stderr, "fuse_probe: cannot write %s (stdout only)\n", path);
	}
	int ndev = 0;
	cudaError_t ce = cudaGetDeviceCount(&ndev);
	if (ce != cudaSuccess || ndev < 1) {
		say("fuse_probe: no CUDA device is visible (cudaGetDeviceCount: %s)\n",
		    ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
		return 77;
	}
	struct cudaDeviceProp prop;
	if (!cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"))
		return 1;
	int rtv = 0, drv = 0;
	cudaRuntimeGetVersion(&rtv);
	cudaDriverGetVersion(&drv);
	say("fuse_probe: %s (sm_%d%d, %d SMs), cuDNN %zu (built against %d), CUDA runtime %d, driver %d\n", prop.name,
	    prop.major, prop.minor, prop.multiProcessorCount, cudnnGetVersion(), CUDNN_VERSION, rtv, drv);
	if (prop.major < 8) {
		say("fuse_probe: %s is sm_%d%d; the fused patterns need sm_80 or newer\n", prop.name, prop.major,
		    prop.minor);
		return 77;
	}
	say("fuse_probe: batch %lld (timing), %lld (check), median of %d runs after 5 warm-up; tolerance "
	    "max|err|/max|ref| <= 2^-6 (bf16), 2^-8 (fp16)\n",
	    (long long)o.batch, (long long)o.check_batch, o.iters);
	cudnnHandle_t h;
	cudnnStatus_t st = cudnnCreate(&h);
	if (st != CUDNN_STATUS_SUCCESS) {
		say("fuse_probe: cudnnCreate: %s\n", cudnnGetErrorString(st));
		return 1;
	}
	static struct result res[NSHAPES][NGRAPHS];
	static struct legacy leg[NSHAPES];
	int wrong = 0;
	for (size_t si = 0; si < NSHAPES; si++) {
		const struct shape *sh = &shapes[si];
		if (any_shape && !want[si])
			continue;
		say("\n== %s: C=%lld K=%lld %lldx%lld filter %lldx%lld stride %lld pad %lld -> %lldx%lld\n", sh->name,
		    (long long)sh->c, (long long)sh->k, (long long)sh->h, (long long)sh->w, (long long)sh->r,
		    (long long)sh->s, (long long)sh->stride, (long long)sh->pad, (long long)out_p(sh),
		    (long long)out_q(sh));
		for (int gr = 0; gr < NGRAPHS; gr++) {
			/* bf16, then (for graphs with a BN scale/bias) bf16 with
			 * 16-bit scale/bias, then the same two in fp16: the
			 * first supported one is the result */
			bool has_sb = gr == G_SBR_CONV_STATS || gr == G_BN_FINALIZE || gr == G_DGRAD_DRELU_DBNW ||
				      gr == G_WGRAD_SBR || gr == G_WGRAD_SBR_F32;
			for (int v = 0; v < 4; v++) {
				g_half = v >= 2;
				g_sb16 = v & 1;
				if (g_sb16 && !has_sb)
					continue;
				struct result r;
				probe_graph(h, (enum graph)gr, sh, &o, &r);
				if (v == 0 || r.supported)
					res[si][gr] = r;
				if (r.supported)
					break;
				say("  %-17s %s: NOT supported: %s\n", gname[gr], variant(), r.why);
			}
			g_half = g_sb16 = false;
			if (res[si][gr].check < 0)
				wrong++;
		}
		if (o.time && over_budget(&o)) {
			say("  legacy: not timed: past the --budget of %.0f s\n", o.budget);
		} else if (o.time) {
			g_half = false;
			legacy_time(h, sh, &o, &leg[si]);
			if (leg[si].why[0])
				say("  legacy bf16: %s\n", leg[si].why);
			if (leg[si].bn_fwd < 0 || leg[si].bn_bwd < 0) {
				/* the legacy BN fast paths may be fp16-only */
				struct legacy l16;
				g_half = true;
				legacy_time(h, sh, &o, &l16);
				g_half = false;
				say("  legacy fp16: conv %.3f bn_fwd %.3f bn_bwd %.3f dgrad %.3f wgrad %.3f ms%s%s\n",
				    l16.conv, l16.bn_fwd, l16.bn_bwd, l16.dgrad, l16.wgrad, l16.why[0] ? "; " : "",
				    l16.why);
				if (leg[si].bn_fwd < 0)
					leg[si].bn_fwd = l16.bn_fwd;
				if (leg[si].bn_bwd < 0)
					leg[si].bn_bwd = l16.bn_bwd;
			}
			struct legacy *L = &leg[si];
			struct result *r = res[si];
			char a[32], b[32], c[32], d[32];
			double uf = L->conv >= 0 && L->bn_fwd >= 0 ? L->conv + L->bn_fwd : -1;
			double ff = r[G_SBR_CONV_STATS].ms >= 0 && r[G_BN_FINALIZE].ms >= 0
					    ? r[G_SBR_CONV_STATS].ms + r[G_BN_FINALIZE].ms
					    : -1;
			double ub =
				L->dgrad >= 0 && L->wgrad >= 0 && L->bn_bwd >= 0 ? L->dgrad + L->wgrad + L->bn_bwd : -1;
			double fb = r[G_DGRAD_DRELU_DBNW].ms >= 0 && r[G_WGRAD_SBR].ms >= 0
					    ? r[G_DGRAD_DRELU_DBNW].ms + r[G_WGRAD_SBR].ms
					    : -1;
			say("  timing N=%lld: legacy conv %s ms, BN fwd+ReLU %s ms, dgrad %s ms, wgrad %s ms, BN bwd+dReLU "
			    "%s ms\n",
			    (long long)o.batch, fmt_ms(a, 32, L->conv), fmt_ms(b, 32, L->bn_fwd),
			    fmt_ms(c, 32, L->dgrad), fmt_ms(d, 32, L->wgrad), fmt_ms(a, 32, L->bn_bwd));
			say("  FORWARD  unfused (conv + BN fwd/ReLU) %s ms | fused (sbr_conv_stats + bn_finalize) %s ms",
			    fmt_ms(a, 32, uf), fmt_ms(b, 32, ff));
			if (uf > 0 && ff > 0)
				say(" | speed-up %.2fx", uf / ff);
			say("\n  BACKWARD unfused (dgrad + wgrad + BN bwd/dReLU) %s ms | fused (dgrad_drelu_dbnw + wgrad_sbr) %s "
			    "ms",
			    fmt_ms(a, 32, ub), fmt_ms(b, 32, fb));
			if (ub > 0 && fb > 0)
				say(" | speed-up %.2fx", ub / fb);
			say(" (fused lacks the dBN apply pass)\n");
		}
	}
	say("\n");
	for (size_t si = 0; si < NSHAPES; si++) {
		if (any_shape && !want[si])
			continue;
		for (int gr = 0; gr < NGRAPHS; gr++) {
			struct result *r = &res[si][gr];
			char t[32], u[32];
			double base = -1;
			struct legacy *L = &leg[si];
			switch (gr) {
			case G_CONV:
			case G_CONV_STATS: base = L->conv; break;
			case G_SBR_CONV_STATS: base = L->conv >= 0 && L->bn_fwd >= 0 ? L->conv + L->bn_fwd : -1; break;
			case G_DGRAD_DRELU_DBNW:
				base = L->dgrad >= 0 && L->bn_bwd >= 0 ? L->dgrad + L->bn_bwd : -1;
				break;
			case G_WGRAD_SBR:
			case G_WGRAD_SBR_F32: base = L->wgrad; break;
			default: break;
			}
			if (!o.time)
				base = -1;
			say("SUMMARY %-17s %-16s %s %s check=%s err=%.2g ms=%s unfused_ms=%s %s\n", shapes[si].name,
			    gname[gr], r->supported ? r->dt : "-", r->supported ? "supported" : "UNSUPPORTED",
			    r->check > 0   ? "ok"
			    : r->check < 0 ? "FAIL"
					   : "-",
			    r->err, fmt_ms(t, 32, r->ms), fmt_ms(u, 32, base), r->supported ? r->engine : r->why);
			if (r->supported && r->why[0])
				say("SUMMARY %-17s %-16s   (but: %s)\n", shapes[si].name, gname[gr], r->why);
		}
	}
	say("fuse_probe: %s\n", wrong || cuda_failed ? "WRONG NUMBERS or CUDA errors (see above)" : "done");
	cudnnDestroy(h);
	if (logf_)
		fclose(logf_);
	return wrong || cuda_failed ? 1 : 0;
}
