#include "config.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/cpu/cpu_layers.h"

/* Our own fp32 batch norm for activations in oneDNN's nChw16c layout (tag
 * aBcd16b) with C % 16 == 0, the layout the network keeps them in.  It
 * exists because batch norm is memory-bound and oneDNN's reads x three
 * times in training forward (mean, variance, normalize); here:
 *
 *   forward (train): one pass for both statistics, one to normalize;
 *   forward + residual add + ReLU: the normalize pass also adds the
 *     shortcut and clamps, so the BN output is never written (cpu_net.c);
 *   backward: one pass for both reductions (sum dy, sum dy*(x-mean)), one
 *     for dx; a fused ReLU's mask is recomputed from x and the folded
 *     scale/shift instead of being stored;
 *   the residual add's ReLU: the fused forward above also writes its mask,
 *     one bit per value (a 16-bit word per position of a chunk), and the
 *     first BN backward to read the add's gradient applies it in its sums
 *     pass, writing the masked gradient back for the shortcut (cpu_net.c),
 *     instead of a separate ReLU backward pass that reads the add's output.
 *
 * The tensor is N*C/16 chunks of H*W*16 floats, each chunk one sample and
 * one block of 16 channels, so a chunk is contiguous and its 16 lanes are
 * 16 channels: every kernel below works on one chunk with one 16-float
 * vector per spatial position.  Chunks are spread over OpenMP threads; the
 * per-chunk sums are combined in double, in a fixed order, so results do
 * not depend on the thread count.  A training forward or backward runs its
 * two passes channel group by channel group (group_blocks) so the second
 * pass finds its input still in the cache.
 *
 * Numerics: the statistics sum (x - shift) and (x - shift)^2 with a
 * per-channel shift (the first sample's first value), so the variance does
 * not come from subtracting two large nearly equal sums; float partial sums
 * run over at most SUB positions before they are added in double. */

#define BLK 16
#define SUB 64
/* Outputs from this size up are written with streaming stores (AVX-512
 * only): a normal store first reads each destination line, a quarter to a
 * sixth of these kernels' traffic, and an output this large (half the
 * 32 MiB L3 here) would not stay cached for its reader anyway. */
#define NT_MIN_BYTES ((size_t)16 << 20)

/* 16 floats; aligned(4) so a load never assumes more than float alignment. */
typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef int v16i __attribute__((vector_size(64), aligned(4)));

#define INLINE static inline __attribute__((always_inline))

/* GCC warns that a 64-byte vector return changes the ABI without AVX-512;
 * the helpers returning one are always inlined, so no call ever has one. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* max(v, 0) without branches: keep v where v > 0. */
INLINE v16 relu16(v16 v)
{
	v16 zero = { 0 };
	return (v16)((v16i)v & (v > zero));
}

/* The ReLU mask of v: bit l set where lane l is > 0. */
INLINE uint16_t gt0_bits(v16 v)
{
	const v16i lane = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768 };
	v16 zero = { 0 };
	v16i t = (v16i)(v > zero) & lane;
	int r = 0;
	for (int l = 0; l < BLK; l++)
		r |= t[l];
	return (uint16_t)r;
}

/* g where bit l of bits is set, 0 elsewhere. */
INLINE v16 keep_bits(v16 g, uint16_t bits)
{
	const v16i lane = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768 };
	v16i b = ((v16i){ 0 } + (int)bits) & lane;
	v16i zero = { 0 };
	return (v16)((v16i)g & (b != zero));
}

/* s1, s2 (16 each) = sums over the chunk of (x - shift) and (x - shift)^2. */
INLINE void stats_body(const float *x, size_t hw, const float *shift, double *s1, double *s2)
{
	v16 sh = *(const v16 *)shift;
	for (int l = 0; l < BLK; l++)
		s1[l] = s2[l] = 0;
	for (size_t p0 = 0; p0 < hw; p0 += SUB) {
		size_t p1 = p0 + SUB < hw ? p0 + SUB : hw;
		v16 a = { 0 }, b = { 0 }, a2 = { 0 }, b2 = { 0 };
		size_t p = p0;
		for (; p + 1 < p1; p += 2) { /* two chains, as in bwd_sums_body */
			v16 d = *(const v16 *)(x + p * BLK) - sh;
			v16 d2 = *(const v16 *)(x + (p + 1) * BLK) - sh;
			a += d;
			b += d * d;
			a2 += d2;
			b2 += d2 * d2;
		}
		if (p < p1) {
			v16 d = *(const v16 *)(x + p * BLK) - sh;
			a += d;
			b += d * d;
		}
		a += a2;
		b += b2;
		for (int l = 0; l < BLK; l++) {
			s1[l] += a[l];
			s2[l] += b[l];
		}
	}
}

/* One batch norm's folded mean, scale and shift for a block of 16 channels. */
struct bn16 {
	v16 m, a, b;
};
INLINE struct bn16 bn16_at(const float *mean, const float *sc, const float *sh)
{
	return (struct bn16){ *(const v16 *)mean, *(const v16 *)sc, *(const v16 *)sh };
}

/* apply's value at p before the ReLU: bn(x) (+ res, normalized by r when
 * rn is set). */
INLINE v16 bn_res_at(const float *x, const float *res, size_t p, struct bn16 n, int rn, struct bn16 r)
{
	v16 v = (*(const v16 *)(x + p * BLK) - n.m) * n.a + n.b;
	if (rn)
		v += (*(const v16 *)(res + p * BLK) - r.m) * r.a + r.b;
	else if (res)
		v += *(const v16 *)(res + p * BLK);
	return v;
}

/* y = (x - m) * sc + sh (+ res) (ReLU'd if relu).  res may be NULL; with
 * rn (3 pointers: res's own mean, scale, shift) res is normalized too, the
 * downsampling block's shortcut BN; with mask (relu only) the ReLU's mask
 * too, one word per position. */
INLINE void apply_body(const float *x, const float *res, float *y, uint16_t *mask, size_t hw,
		       const float *mean, const float *sc, const float *sh, const float *const *rn,
		       int relu)
{
	struct bn16 n = bn16_at(mean, sc, sh), r = rn ? bn16_at(rn[0], rn[1], rn[2]) : n;
	for (size_t p = 0; p < hw; p++) {
		v16 v = bn_res_at(x, res, p, n, rn != NULL, r);
		if (mask)
			mask[p] = gt0_bits(v);
		if (relu)
			v = relu16(v);
		*(v16 *)(y + p * BLK) = v;
	}
}

/* The gradient reaching the BN: dy, masked by the fused ReLU where the
 * forward output ((x - m) * a + b, the same expression as apply_body) was
 * <= 0. */
INLINE v16 masked_dy(const float *x, const float *dy, size_t p, v16 m, v16 a, v16 b, int relu)
{
	v16 g = *(const v16 *)(dy + p * BLK);
	if (relu) {
		v16 zero = { 0 };
		v16 y = (*(const v16 *)(x + p * BLK) - m) * a + b;
		g = (v16)((v16i)g & (y > zero));
	}
	return g;
}

/* The gradient the sums pass takes at p: masked_dy, or with a residual
 * add's ReLU mask (one word per position; the BN has no ReLU of its own)
 * dy where the mask is set, written back into dyw (the shortcut's
 * gradient too). */
INLINE v16 sums_dy(const float *x, const float *dy, float *dyw, const uint16_t *mask, size_t p, v16 m,
		   v16 a, v16 b, int relu)
{
	if (!mask)
		return masked_dy(x, dy, p, m, a, b, relu);
	v16 g = keep_bits(*(const v16 *)(dy + p * BLK), mask[p]);
	*(v16 *)(dyw + p * BLK) = g;
	return g;
}

/* sdy, sdx (16 each) = sums of g and g * (x - mean), g as sums_dy. */
INLINE void bwd_sums_body(const float *x, const float *dy, float *dyw, const uint16_t *mask, size_t hw,
			  const float *mean, const float *sc, const float *sh, int relu, double *sdy,
			  double *sdx)
{
	v16 m = *(const v16 *)mean, a = *(const v16 *)sc, b = *(const v16 *)sh;
	for (int l = 0; l < BLK; l++)
		sdy[l] = sdx[l] = 0;
	for (size_t p0 = 0; p0 < hw; p0 += SUB) {
		size_t p1 = p0 + SUB < hw ? p0 + SUB : hw;
		/* Two accumulator pairs: one add chain would bound the loop by
		 * the add latency, not by memory. */
		v16 s = { 0 }, t = { 0 }, s2 = { 0 }, t2 = { 0 };
		size_t p = p0;
		for (; p + 1 < p1; p += 2) {
			v16 g = sums_dy(x, dy, dyw, mask, p, m, a, b, relu);
			v16 g2 = sums_dy(x, dy, dyw, mask, p + 1, m, a, b, relu);
			s += g;
			t += g * (*(const v16 *)(x + p * BLK) - m);
			s2 += g2;
			t2 += g2 * (*(const v16 *)(x + (p + 1) * BLK) - m);
		}
		if (p < p1) {
			v16 g = sums_dy(x, dy, dyw, mask, p, m, a, b, relu);
			s += g;
			t += g * (*(const v16 *)(x + p * BLK) - m);
		}
		s += s2;
		t += t2;
		for (int l = 0; l < BLK; l++) {
			sdy[l] += s[l];
			sdx[l] += t[l];
		}
	}
}

/* dx = k1 * g + k2 * (x - mean) + k0 (g as masked_dy); dx may be dy. */
INLINE void bwd_dx_body(const float *x, const float *dy, float *dx, size_t hw, const float *mean,
			const float *sc, const float *sh, int relu, const float *k0, const float *k2)
{
	v16 m = *(const v16 *)mean, a = *(const v16 *)sc, b = *(const v16 *)sh;
	v16 c0 = *(const v16 *)k0, c2 = *(const v16 *)k2;
	for (size_t p = 0; p < hw; p++) {
		v16 g = masked_dy(x, dy, p, m, a, b, relu);
		v16 d = *(const v16 *)(x + p * BLK) - m;
		*(v16 *)(dx + p * BLK) = a * g + c2 * d + c0;
	}
}

#ifndef __clang__
/* The writing passes again with streaming stores (dst 64-byte aligned),
 * for outputs of NT_MIN_BYTES and more; AVX-512 only.  Not with clang (the
 * sanitizer build of make check-asan), which refuses these functions'
 * calls of the baseline helpers that return vectors: it takes the plain
 * AVX-512 kernels for them (kern_avx512_nt below). */
__attribute__((target("avx512f"))) static void apply_nt(const float *x, const float *res, float *y,
							uint16_t *mask, size_t hw, const float *mean,
							const float *sc, const float *sh,
							const float *const *rn, int relu)
{
	struct bn16 n = bn16_at(mean, sc, sh), r = rn ? bn16_at(rn[0], rn[1], rn[2]) : n;
	for (size_t p = 0; p < hw; p++) {
		v16 v = bn_res_at(x, res, p, n, rn != NULL, r);
		if (mask)
			mask[p] = (uint16_t)_mm512_cmp_ps_mask((__m512)v, _mm512_setzero_ps(), _CMP_GT_OQ);
		if (relu)
			v = relu16(v);
		_mm512_stream_ps(y + p * BLK, (__m512)v);
	}
	_mm_sfence(); /* streamed lines visible before the barrier ends the pass */
}

__attribute__((target("avx512f"))) static void bwd_dx_nt(const float *x, const float *dy, float *dx,
							 size_t hw, const float *mean, const float *sc,
							 const float *sh, int relu, const float *k0,
							 const float *k2)
{
	v16 m = *(const v16 *)mean, a = *(const v16 *)sc, b = *(const v16 *)sh;
	v16 c0 = *(const v16 *)k0, c2 = *(const v16 *)k2;
	for (size_t p = 0; p < hw; p++) {
		v16 g = masked_dy(x, dy, p, m, a, b, relu);
		v16 d = *(const v16 *)(x + p * BLK) - m;
		_mm512_stream_ps(dx + p * BLK, (__m512)(a * g + c2 * d + c0));
	}
	_mm_sfence();
}
#endif

/* Each kernel twice: compiled for AVX-512 (one zmm per position) and for
 * the build's baseline (GCC splits the vectors into SSE registers); which
 * one runs is decided once, in cpu_bn_blk_init.  (The baseline set passed
 * test_ops and test_net when forced on by hand on this AVX-512 machine.) */
#define BN_KERNELS(sfx, attr)                                                                  \
	attr static void stats_##sfx(const float *x, size_t hw, const float *shift, double *s1,   \
				     double *s2)                                                   \
	{                                                                                          \
		stats_body(x, hw, shift, s1, s2);                                                  \
	}                                                                                          \
	attr static void apply_##sfx(const float *x, const float *res, float *y, uint16_t *mask,  \
				     size_t hw, const float *m, const float *sc, const float *sh,  \
				     const float *const *rn, int relu)                             \
	{                                                                                          \
		if (mask && rn)                                                                    \
			apply_body(x, res, y, mask, hw, m, sc, sh, rn, relu);                      \
		else if (mask)                                                                     \
			apply_body(x, res, y, mask, hw, m, sc, sh, NULL, relu);                    \
		else if (rn)                                                                       \
			apply_body(x, res, y, NULL, hw, m, sc, sh, rn, relu);                      \
		else if (res)                                                                      \
			apply_body(x, res, y, NULL, hw, m, sc, sh, NULL, relu);                    \
		else                                                                               \
			apply_body(x, NULL, y, NULL, hw, m, sc, sh, NULL, relu);                   \
	}                                                                                          \
	attr static void bwd_sums_##sfx(const float *x, const float *dy, size_t hw,               \
					const float *mean, const float *sc, const float *sh,       \
					int relu, double *sdy, double *sdx)                        \
	{                                                                                          \
		if (relu)                                                                          \
			bwd_sums_body(x, dy, NULL, NULL, hw, mean, sc, sh, 1, sdy, sdx);           \
		else                                                                               \
			bwd_sums_body(x, dy, NULL, NULL, hw, mean, sc, sh, 0, sdy, sdx);           \
	}                                                                                          \
	attr static void bwd_sums_mask_##sfx(const float *x, float *dy, const uint16_t *mask,     \
					     size_t hw, const float *mean, double *sdy,            \
					     double *sdx)                                          \
	{                                                                                          \
		/* no ReLU of its own: sums_dy reads no scale or shift */                         \
		bwd_sums_body(x, dy, dy, mask, hw, mean, mean, mean, 0, sdy, sdx);                 \
	}                                                                                          \
	attr static void bwd_dx_##sfx(const float *x, const float *dy, float *dx, size_t hw,      \
				      const float *mean, const float *sc, const float *sh,         \
				      int relu, const float *k0, const float *k2)                  \
	{                                                                                          \
		if (relu)                                                                          \
			bwd_dx_body(x, dy, dx, hw, mean, sc, sh, 1, k0, k2);                       \
		else                                                                               \
			bwd_dx_body(x, dy, dx, hw, mean, sc, sh, 0, k0, k2);                       \
	}                                                                                          \
	static const struct cpu_bn_kern kern_##sfx = { stats_##sfx, apply_##sfx, bwd_sums_##sfx,  \
						       bwd_sums_mask_##sfx, bwd_dx_##sfx };

BN_KERNELS(avx512, __attribute__((target("avx512f"))))
BN_KERNELS(base, )

#ifndef __clang__
static const struct cpu_bn_kern kern_avx512_nt = { stats_avx512, apply_nt, bwd_sums_avx512,
						   bwd_sums_mask_avx512, bwd_dx_nt };
#else
static const struct cpu_bn_kern kern_avx512_nt = { stats_avx512, apply_avx512, bwd_sums_avx512,
						   bwd_sums_mask_avx512, bwd_dx_avx512 };
#endif

/* The kernels for an output at dst: streaming stores where worth it. */
static const struct cpu_bn_kern *kern_for(const struct cpu_bn *l, const void *dst)
{
	size_t bytes = (size_t)l->n * l->c * l->hw * sizeof(float);
	if (l->kern == &kern_avx512 && bytes >= NT_MIN_BYTES && (uintptr_t)dst % 64 == 0)
		return &kern_avx512_nt;
	return l->kern;
}

int cpu_bn_blk_usable(struct cpu_ctx *c, const dnnl_memory_desc_t *md, int ch)
{
	dnnl_memory_desc_t want;
	if (c->act_dt != dnnl_f32 || md->ndims != 4 || md->data_type != dnnl_f32 || ch % BLK != 0 ||
	    md->dims[1] != ch)
		return 0;
	/* Dense nChw16c only: the kernels walk chunks by plain offsets. */
	if (cpu_md4_dt(c, &want, (int)md->dims[0], ch, (int)md->dims[2], (int)md->dims[3], dnnl_f32,
		       dnnl_nChw16c) < 0) {
		c->err[0] = 0;
		return 0;
	}
	return cpu_md_eq(md, &want);
}

int cpu_bn_blk_init(struct cpu_ctx *c, struct cpu_bn *l, const dnnl_memory_desc_t *md, float eps)
{
	dnnl_memory_desc_t cmd, pmd;
	l->n = (int)md->dims[0];
	l->hw = (size_t)md->dims[2] * (size_t)md->dims[3];
	l->eps = eps;
	l->kern = __builtin_cpu_supports("avx512f") ? &kern_avx512 : &kern_base;
	dnnl_dims_t cd = { l->c }, pd = { (dnnl_dim_t)l->n * l->c * 2 * 2 };
	/* Per-chunk partial sums are doubles: 2 sums x 16 lanes per chunk,
	 * held in a float memory of twice the count so the ctx owns it. */
	if (cpu_md(c, &cmd, 1, cd, dnnl_x) < 0 || cpu_md(c, &pmd, 1, pd, dnnl_x) < 0)
		goto fail;
	CHECK((l->fmean = cpu_mem(c, &cmd, NULL)) && (l->fscale = cpu_mem(c, &cmd, NULL)) &&
		      (l->fshift = cpu_mem(c, &cmd, NULL)) && (l->mlo = cpu_mem(c, &cmd, NULL)) &&
		      (l->part = cpu_mem(c, &pmd, NULL)),
	      "%s", c->err);
	return 0;
fail:
	return -1;
}

/* Sums of the chunks of channel blocks [b0, b1), per channel, in a fixed
 * order: s1, s2 are indexed by channel. */
static void chunk_sums_combine(const struct cpu_bn *l, const double *part, int b0, int b1,
			       double *s1, double *s2)
{
	int cb = l->c / BLK;
	for (int ch = b0 * BLK; ch < b1 * BLK; ch++)
		s1[ch] = s2[ch] = 0;
	for (int n = 0; n < l->n; n++)
		for (int b = b0; b < b1; b++) {
			const double *p = part + ((size_t)n * cb + b) * 2 * BLK;
			for (int k = 0; k < BLK; k++) {
				s1[b * BLK + k] += p[k];
				s2[b * BLK + k] += p[BLK + k];
			}
		}
}

/* Channel blocks per group: the passes of one operation run group by group
 * so that a group's `streams` input tensors (x; x and dy) still sit in the
 * cache when the second pass reads them again, and only the first pass
 * goes to memory.  GROUP_BYTES is a quarter of this machine's 32 MiB L3. */
#define GROUP_BYTES ((size_t)8 << 20)
static int group_blocks(const struct cpu_bn *l, int streams)
{
	size_t per = (size_t)l->n * l->hw * BLK * sizeof(float) * streams;
	size_t g = GROUP_BYTES / per;
	return g < 1 ? 1 : g > (size_t)(l->c / BLK) ? l->c / BLK : (int)g;
}

/* Chunk i of the chunks of blocks [b0, b0 + nb): sample i / nb, block
 * b0 + i % nb; its offset in floats and its channel block. */
#define CHUNK(i, b0, nb) ((((size_t)((i) / (nb)) * cb + (b0) + (i) % (nb)) * hw * BLK))
#define CBLK(i, b0, nb) (((b0) + (i) % (nb)) * BLK)

/* Training statistics of blocks [b0, b1) into mean/var/mlo, folded with
 * gamma/beta into fmean/fscale/fshift. */
static void train_stats(struct cpu_bn *l, const float *gamma, const float *beta, const float *x,
			int b0, int b1, double *s1, double *s2)
{
	float *mean = cpu_handle(l->mean), *var = cpu_handle(l->var), *fm = cpu_handle(l->fmean);
	float *sc = cpu_handle(l->fscale), *sh = cpu_handle(l->fshift), *mlo = cpu_handle(l->mlo);
	double *part = cpu_handle(l->part);
	const struct cpu_bn_kern *k = l->kern;
	int cb = l->c / BLK, nb = b1 - b0, nchunk = l->n * nb;
	size_t hw = l->hw;
	double cnt = (double)l->n * (double)hw;
	/* The shift: sample 0, position 0 of each channel. */
	for (int b = b0; b < b1; b++)
		memcpy(fm + b * BLK, x + (size_t)b * hw * BLK, BLK * sizeof(float));
#pragma omp parallel for schedule(static)
	for (int i = 0; i < nchunk; i++) {
		size_t off = CHUNK(i, b0, nb), ci = off / (hw * BLK);
		k->stats(x + off, hw, fm + CBLK(i, b0, nb), part + ci * 2 * BLK,
			 part + ci * 2 * BLK + BLK);
	}
	chunk_sums_combine(l, part, b0, b1, s1, s2);
	for (int ch = b0 * BLK; ch < b1 * BLK; ch++) {
		double m1 = s1[ch] / cnt, v = s2[ch] / cnt - m1 * m1, m = fm[ch] + m1;
		mean[ch] = (float)m;
		mlo[ch] = (float)(m - mean[ch]);
		var[ch] = (float)(v > 0 ? v : 0);
		/* y = (x - mean) * sc + sh with sc = gamma / sqrt(var + eps); x -
		 * mean rather than x * sc + (beta - mean * sc), which would lose
		 * the low bits of y to cancellation when |mean| >> std.  The
		 * float mean's rounding error (mlo) goes into the shift. */
		double a = gamma[ch] / sqrt((double)var[ch] + l->eps);
		fm[ch] = mean[ch];
		sc[ch] = (float)a;
		sh[ch] = (float)(beta[ch] - mlo[ch] * a);
	}
}

/* dst = bn(src) (+ res) (ReLU'd) over blocks [b0, b1), as folded. */
static void apply_range(struct cpu_bn *l, const struct cpu_bn_kern *k, const float *x,
			const float *r, const struct cpu_bn *lr, float *y, uint16_t *mask, int relu, int b0,
			int b1)
{
	const float *fm = cpu_handle(l->fmean), *sc = cpu_handle(l->fscale);
	const float *sh = cpu_handle(l->fshift);
	const float *rfm = lr ? cpu_handle(lr->fmean) : NULL, *rsc = lr ? cpu_handle(lr->fscale) : NULL;
	const float *rsh = lr ? cpu_handle(lr->fshift) : NULL;
	int cb = l->c / BLK, nb = b1 - b0, nchunk = l->n * nb;
	size_t hw = l->hw;
#pragma omp parallel for schedule(static)
	for (int i = 0; i < nchunk; i++) {
		size_t off = CHUNK(i, b0, nb);
		int ch = CBLK(i, b0, nb);
		const float *rn[3] = { rfm ? rfm + ch : NULL, rsc ? rsc + ch : NULL, rsh ? rsh + ch : NULL };
		k->apply(x + off, r ? r + off : NULL, y + off, mask ? mask + off / BLK : NULL, hw, fm + ch,
			 sc + ch, sh + ch, lr ? rn : NULL, relu);
	}
}

static int have_buffers(struct cpu_ctx *c, struct cpu_bn *l)
{
	CHECK(cpu_handle(l->mean) && cpu_handle(l->var) && cpu_handle(l->fmean) &&
		      cpu_handle(l->fscale) && cpu_handle(l->fshift) && cpu_handle(l->mlo) &&
		      cpu_handle(l->part),
	      "%s:%d: batch norm memory has no buffer", __FILE__, __LINE__);
	return 0;
fail:
	return -1;
}

int cpu_bn_blk_prepare(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma, const float *beta,
		       const float *run_mean, const float *run_var, dnnl_memory_t src)
{
	const float *x = cpu_handle(src);
	double s1[l->c], s2[l->c];
	CHECK(x, "%s:%d: batch norm input has no buffer", __FILE__, __LINE__);
	if (have_buffers(c, l) < 0)
		goto fail;
	if (!run_mean) {
		train_stats(l, gamma, beta, x, 0, l->c / BLK, s1, s2);
	} else {
		float *fm = cpu_handle(l->fmean), *sc = cpu_handle(l->fscale);
		float *sh = cpu_handle(l->fshift);
		for (int ch = 0; ch < l->c; ch++) {
			double a = gamma[ch] / sqrt((double)run_var[ch] + l->eps);
			fm[ch] = run_mean[ch];
			sc[ch] = (float)a;
			sh[ch] = (float)beta[ch];
		}
	}
	return 0;
fail:
	return -1;
}

int cpu_bn_blk_apply(struct cpu_ctx *c, struct cpu_bn *l, dnnl_memory_t src, dnnl_memory_t res,
		     const struct cpu_bn *lres, dnnl_memory_t dst, int relu, uint16_t *mask)
{
	const float *x = cpu_handle(src), *r = res ? cpu_handle(res) : NULL;
	float *y = cpu_handle(dst);
	CHECK(x && y && (r || !res), "%s:%d: batch norm memory has no buffer", __FILE__, __LINE__);
	CHECK(!mask || relu, "%s:%d: a ReLU mask without a ReLU", __FILE__, __LINE__);
	CHECK(!lres || (r && lres->blk && lres->c == l->c && lres->n == l->n && lres->hw == l->hw),
	      "%s:%d: the shortcut's batch norm does not match", __FILE__, __LINE__);
	apply_range(l, kern_for(l, y), x, r, lres, y, mask, relu, 0, l->c / BLK);
	return 0;
fail:
	return -1;
}

int cpu_bn_blk_forward_train(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma,
			     const float *beta, dnnl_memory_t src, dnnl_memory_t dst)
{
	const float *x = cpu_handle(src);
	float *y = cpu_handle(dst);
	int cb = l->c / BLK, g = group_blocks(l, 1);
	double s1[l->c], s2[l->c];
	CHECK(x && y, "%s:%d: batch norm memory has no buffer", __FILE__, __LINE__);
	if (have_buffers(c, l) < 0)
		goto fail;
	const struct cpu_bn_kern *k = kern_for(l, y);
	for (int b0 = 0; b0 < cb; b0 += g) {
		int b1 = b0 + g < cb ? b0 + g : cb;
		train_stats(l, gamma, beta, x, b0, b1, s1, s2);
		apply_range(l, k, x, NULL, NULL, y, NULL, l->relu, b0, b1);
	}
	return 0;
fail:
	return -1;
}

int cpu_bn_blk_backward(struct cpu_ctx *c, struct cpu_bn *l, const float *gamma, float *dgamma,
			float *dbeta, dnnl_memory_t src, dnnl_memory_t diff_dst,
			dnnl_memory_t diff_src, const uint16_t *mask)
{
	const float *x = cpu_handle(src);
	float *dy = cpu_handle(diff_dst);
	float *dx = cpu_handle(diff_src);
	const float *var = cpu_handle(l->var), *fm = cpu_handle(l->fmean);
	const float *sc = cpu_handle(l->fscale), *sh = cpu_handle(l->fshift);
	const float *mlo = cpu_handle(l->mlo);
	double *part = cpu_handle(l->part);
	int cb = l->c / BLK, relu = l->relu, g = group_blocks(l, 2);
	size_t hw = l->hw;
	double cnt = (double)l->n * (double)hw;
	float k0[l->c], k2[l->c];
	double sdy[l->c], sdx[l->c];

	CHECK(x && dy && dx, "%s:%d: batch norm memory has no buffer", __FILE__, __LINE__);
	CHECK(!mask || (!relu && dx != dy), "%s:%d: a residual ReLU mask on a BN with a ReLU or in place",
	      __FILE__, __LINE__);
	if (have_buffers(c, l) < 0)
		goto fail;
	const struct cpu_bn_kern *k = l->kern, *kd = kern_for(l, dx);
	for (int b0 = 0; b0 < cb; b0 += g) {
		int b1 = b0 + g < cb ? b0 + g : cb, nb = b1 - b0, nchunk = l->n * nb;
#pragma omp parallel for schedule(static)
		for (int i = 0; i < nchunk; i++) {
			size_t off = CHUNK(i, b0, nb), ci = off / (hw * BLK);
			int ch = CBLK(i, b0, nb);
			if (mask)
				k->bwd_sums_mask(x + off, dy + off, mask + off / BLK, hw, fm + ch,
						 part + ci * 2 * BLK, part + ci * 2 * BLK + BLK);
			else
				k->bwd_sums(x + off, dy + off, hw, fm + ch, sc + ch, sh + ch, relu,
					    part + ci * 2 * BLK, part + ci * 2 * BLK + BLK);
		}
		chunk_sums_combine(l, part, b0, b1, sdy, sdx);
		/* With g the masked dy, xc = x - mean (exact mean) and a = gamma
		 * * invstd (the forward's scale):
		 *   dx = a * (g - mean(g) - xc * invstd^2 * mean(g * xc))
		 * and sum g * xc = sum g * (x - fmean) - mlo * sum g. */
		for (int ch = b0 * BLK; ch < b1 * BLK; ch++) {
			double inv = 1 / sqrt((double)var[ch] + l->eps), a = gamma[ch] * inv;
			double sgx = sdx[ch] - (double)mlo[ch] * sdy[ch];
			double c2 = -a * inv * inv * sgx / cnt;
			dbeta[ch] = (float)sdy[ch];
			dgamma[ch] = (float)(sgx * inv);
			k2[ch] = (float)c2;
			k0[ch] = (float)(-a * sdy[ch] / cnt - c2 * mlo[ch]);
		}
#pragma omp parallel for schedule(static)
		for (int i = 0; i < nchunk; i++) {
			size_t off = CHUNK(i, b0, nb);
			int ch = CBLK(i, b0, nb);
			kd->bwd_dx(x + off, dy + off, dx + off, hw, fm + ch, sc + ch, sh + ch, relu,
				   k0 + ch, k2 + ch);
		}
	}
	return 0;
fail:
	return -1;
}
