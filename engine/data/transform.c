/* The torchvision transforms on decoded pixels: the crop/resize plans of
 * RandomResizedCrop+RandomHorizontalFlip (train) and Resize+CenterCrop (eval),
 * and PIL's bilinear resampling (a triangle filter widened by the downscale
 * factor, so it antialiases; two separable passes, each rounded to 8 bits as
 * PIL does) fused with the crop window, the flip and the normalization --
 * or, for the uint8 path (backends that normalize on the device), the same
 * resampling rounded to 8 bits in (H,W,C) order, with no normalization. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include "engine/data/image.h"
#include "engine/data/internal.h"

const float dl_imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
const float dl_imagenet_std[3] = {0.229f, 0.224f, 0.225f};

void dl_plan_make(struct dl_resize_plan *p, int w, int h, int size, int train, uint64_t aug_seed)
{
	memset(p, 0, sizeof *p);
	p->size = size;
	if (train) {
		/* torchvision RandomResizedCrop.get_params, scale (0.08,1),
		 * ratio (3/4,4/3); Python's round() is round-half-even, as
		 * nearbyint in the default rounding mode. */
		uint64_t st = aug_seed;
		double area = (double)w * h, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
		int ci = -1, cj = 0, ch = 0, cw = 0;
		for (int t = 0; t < 10; t++) {
			double target = area * (0.08 + 0.92 * dl_rand_unit(&st));
			double ar = exp(lr0 + (lr1 - lr0) * dl_rand_unit(&st));
			int tw = (int)nearbyint(sqrt(target * ar)), th = (int)nearbyint(sqrt(target / ar));
			if (tw > 0 && tw <= w && th > 0 && th <= h) {
				ci = (int)dl_rand_below(&st, (uint64_t)(h - th + 1));
				cj = (int)dl_rand_below(&st, (uint64_t)(w - tw + 1));
				ch = th;
				cw = tw;
				break;
			}
		}
		if (ci < 0) {
			/* fallback: centre crop with the ratio clamped */
			double in_ratio = (double)w / h;
			if (in_ratio < 3.0 / 4.0) {
				cw = w;
				ch = (int)nearbyint(cw / (3.0 / 4.0));
			} else if (in_ratio > 4.0 / 3.0) {
				ch = h;
				cw = (int)nearbyint(ch * (4.0 / 3.0));
			} else {
				cw = w;
				ch = h;
			}
			ci = (h - ch) / 2;
			cj = (w - cw) / 2;
		}
		p->x0 = cj;
		p->y0 = ci;
		p->x1 = cj + cw;
		p->y1 = ci + ch;
		p->out_w = p->out_h = size;
		p->flip = dl_rand_unit(&st) < 0.5;
	} else {
		/* Resize(s) with s = round(size/0.875): short side s, long side
		 * int(s*long/short); then CenterCrop(size) at round((out-size)/2). */
		int s = (int)nearbyint(size / 0.875);
		p->x0 = p->y0 = 0;
		p->x1 = w;
		p->y1 = h;
		if (w <= h) {
			p->out_w = s;
			p->out_h = (int)((long long)s * h / w);
		} else {
			p->out_h = s;
			p->out_w = (int)((long long)s * w / h);
		}
		p->ox = (int)nearbyint((p->out_w - size) / 2.0);
		p->oy = (int)nearbyint((p->out_h - size) / 2.0);
	}
}

int dl_plan_scale_denom(const struct dl_resize_plan *p)
{
	double rw = p->x1 - p->x0, rh = p->y1 - p->y0;
	for (int d = 8; d >= 2; d /= 2)
		if (rw / d >= 2.0 * p->out_w && rh / d >= 2.0 * p->out_h)
			return d;
	return 1;
}

void dl_plan_rescale(struct dl_resize_plan *p, int w, int h, int sw, int sh)
{
	double fx = (double)sw / w, fy = (double)sh / h;
	p->x0 *= fx;
	p->x1 *= fx;
	p->y0 *= fy;
	p->y1 *= fy;
}

/* PIL's precompute_coeffs for the bilinear filter, for outputs [o0,o0+count)
 * of resizing source span [in0,in1) to out_full, reading only [clip0,clip1). */
struct coeffs {
	int ksize;
	int *start, *n; // (count)
	float *w;       // (count, ksize)
};

static int coeffs_make(struct coeffs *c, double in0, double in1, int clip0, int clip1, int out_full,
                       int o0, int count)
{
	double scale = (in1 - in0) / out_full;
	double fscale = scale > 1.0 ? scale : 1.0;
	double support = fscale; // bilinear support 1.0, widened when downscaling
	c->ksize = (int)ceil(support) * 2 + 1;
	c->start = malloc(sizeof(int) * (size_t)count);
	c->n = malloc(sizeof(int) * (size_t)count);
	c->w = malloc(sizeof(float) * (size_t)count * (size_t)c->ksize);
	if (!c->start || !c->n || !c->w)
		return -1;
	for (int i = 0; i < count; i++) {
		double center = in0 + (o0 + i + 0.5) * scale, ww = 0;
		int xmin = (int)floor(center - support + 0.5), xmax = (int)floor(center + support + 0.5);
		float *k = c->w + (size_t)i * c->ksize;
		if (xmin < clip0)
			xmin = clip0;
		if (xmax > clip1)
			xmax = clip1;
		if (xmax - xmin > c->ksize)
			xmax = xmin + c->ksize;
		if (xmax <= xmin) // window outside the source: nearest edge pixel
			xmin = xmax > clip0 ? xmax - 1 : clip0, xmax = xmin + 1;
		for (int x = xmin; x < xmax; x++) {
			double t = fabs((x - center + 0.5) / fscale);
			k[x - xmin] = (float)(t < 1.0 ? 1.0 - t : 0.0);
			ww += k[x - xmin];
		}
		int n = xmax - xmin;
		for (int x = 0; x < n; x++)
			k[x] = (float)(ww != 0 ? k[x] / ww : (x == 0));
		/* Pad to exactly ksize taps with zero weights (staying inside the
		 * clip range), so the passes run fixed-length, unrolled loops. */
		if (n < c->ksize && clip1 - clip0 >= c->ksize) {
			int s0 = xmin + c->ksize > clip1 ? clip1 - c->ksize : xmin;
			int sh = xmin - s0;
			memmove(k + sh, k, sizeof(float) * (size_t)n);
			for (int x = 0; x < sh; x++)
				k[x] = 0;
			for (int x = sh + n; x < c->ksize; x++)
				k[x] = 0;
			xmin = s0;
			n = c->ksize;
		}
		c->start[i] = xmin;
		c->n[i] = n;
	}
	return 0;
}

static void coeffs_free(struct coeffs *c)
{
	free(c->start);
	free(c->n);
	free(c->w);
}

static void clip_bounds(double a0, double a1, int full, int *c0, int *c1)
{
	*c0 = (int)floor(a0);
	*c1 = (int)ceil(a1);
	if (*c0 < 0)
		*c0 = 0;
	if (*c1 > full)
		*c1 = full;
	if (*c1 <= *c0)
		*c1 = *c0 + 1;
}

void dl_plan_region(const struct dl_resize_plan *p, int full_w, int full_h,
                    int *x0, int *y0, int *x1, int *y1)
{
	/* The same arithmetic as coeffs_make, only the extremes. */
	int c0, c1;
	double sx = (p->x1 - p->x0) / p->out_w, sy = (p->y1 - p->y0) / p->out_h;
	double supx = sx > 1 ? sx : 1, supy = sy > 1 ? sy : 1;
	clip_bounds(p->x0, p->x1, full_w, &c0, &c1);
	/* +-(ksize+1): coeffs_make may shift taps to pad them to ksize */
	int kx = (int)ceil(supx) * 2 + 2, ky = (int)ceil(supy) * 2 + 2;
	*x0 = (int)floor(p->x0 + (p->ox + 0.5) * sx - supx + 0.5) - kx;
	*x1 = (int)floor(p->x0 + (p->ox + p->size - 0.5) * sx + supx + 0.5) + kx;
	*x0 = *x0 < c0 ? c0 : *x0;
	*x1 = *x1 > c1 ? c1 : *x1;
	clip_bounds(p->y0, p->y1, full_h, &c0, &c1);
	*y0 = (int)floor(p->y0 + (p->oy + 0.5) * sy - supy + 0.5) - ky;
	*y1 = (int)floor(p->y0 + (p->oy + p->size - 0.5) * sy + supy + 0.5) + ky;
	*y0 = *y0 < c0 ? c0 : *y0;
	*y1 = *y1 > c1 ? c1 : *y1;
}

size_t dl_resample_need(int rows, int cols, int full_w, int full_h, int size)
{
	/* resample's srcf and vrow (rowlen floats, rowlen <= 3 cols + 8), and
	 * per axis coeffs_make's start and n (size ints) and weights (size x
	 * ksize floats, ksize <= 2 (full/size + 1) + 1: its outputs are at least
	 * size wide) */
	size_t rowlen = 3 * (size_t)cols + 8;
	return sizeof(float) * ((size_t)rows + 1) * rowlen + 8 * ((size_t)full_w + (size_t)full_h) + 64 * (size_t)size +
	       4096;
}

/* 16-byte vectors: native on every x86-64 (SSE2) and aarch64 (NEON), so
 * GCC/clang emit them directly, without -march flags. */
typedef float v4f __attribute__((vector_size(16)));
typedef uint8_t v4u8 __attribute__((vector_size(4)));

/* row[0..n) = sum_j k[j] * t_j[0..n) over taps j, the t_j rows `rowlen`
 * floats apart starting at t; n a multiple of 8 (the buffers are padded).
 * One pass over the output, taps innermost, so row is stored once. */
static inline void vpass(float *restrict row, const float *restrict t, size_t rowlen, const float *k,
                         int taps, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		v4f a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
		for (int j = 0; j < taps; j++) {
			v4f kk = {k[j], k[j], k[j], k[j]}, c, d;
			memcpy(&c, t + (size_t)j * rowlen + i, sizeof c);
			memcpy(&d, t + (size_t)j * rowlen + i + 4, sizeof d);
			a += kk * c;
			b += kk * d;
		}
		memcpy(row + i, &a, sizeof a);
		memcpy(row + i + 4, &b, sizeof b);
	}
}

/* d[0..n) = s[0..n) as floats; d has room for n rounded up to 4. */
static inline void u8_to_f32(float *restrict d, const uint8_t *restrict s, size_t n)
{
	size_t i = 0;
#ifdef __SSE2__
	/* compilers do not vectorize this widening at -O2: spell it out */
	const __m128i z = _mm_setzero_si128();
	for (; i + 16 <= n; i += 16) {
		__m128i b = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i lo = _mm_unpacklo_epi8(b, z), hi = _mm_unpackhi_epi8(b, z);
		_mm_storeu_ps(d + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, z)));
		_mm_storeu_ps(d + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, z)));
		_mm_storeu_ps(d + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, z)));
		_mm_storeu_ps(d + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, z)));
	}
#endif
	for (; i + 4 <= n; i += 4) {
		v4u8 b;
		memcpy(&b, s + i, sizeof b);
		v4f f = __builtin_convertvector(b, v4f);
		memcpy(d + i, &f, sizeof f);
	}
	for (; i < n; i++)
		d[i] = s[i];
}

/* Output pixel i of the horizontal filter over vrow (RGB floats; the 4th
 * lane of each load is the next pixel's R and is ignored).  K taps (0:
 * per-output count). */
static inline v4f hpass_pixel(const float *restrict vrow, const struct coeffs *cx, int col0, int i,
                              const int K)
{
	const float *s = vrow + (size_t)(cx->start[i] - col0) * 3;
	const float *k = cx->w + (size_t)i * cx->ksize;
	int n = K ? K : cx->n[i];
	v4f acc = {0, 0, 0, 0};
#pragma GCC unroll 8
	for (int j = 0; j < n; j++) {
		v4f v, kk = {k[j], k[j], k[j], k[j]};
		memcpy(&v, s + 3 * j, sizeof v);
		acc += kk * v;
	}
	return acc;
}

/* One output row: horizontal filter of vrow (RGB floats, the 4th lane of
 * each load is the next pixel's R and is ignored) into the three planes of
 * chw, flipped if asked, normalized.  K taps (0: per-output count). */
static inline void hpass_out(const float *restrict vrow, const struct coeffs *cx, int col0, int size,
                             int flip, const float *scale, const float *shift, float *restrict o0,
                             float *restrict o1, float *restrict o2, const int K)
{
	for (int i = 0; i < size; i++) {
		v4f acc = hpass_pixel(vrow, cx, col0, i, K);
		int o = flip ? size - 1 - i : i;
		o0[o] = acc[0] * scale[0] + shift[0];
		o1[o] = acc[1] * scale[1] + shift[1];
		o2[o] = acc[2] * scale[2] + shift[2];
	}
}

/* hpass_out for the uint8 path: the same sums, rounded to nearest (half to
 * even) and saturated to [0,255], into one (size,3) row of an (H,W,C)
 * image.  Output pixels are visited left to right whatever the flip, so
 * each can be stored as 4 bytes whose 4th the next pixel overwrites (the
 * last one as 3): byte stores here cost more than the arithmetic. */
static inline void hpass_out_u8(const float *restrict vrow, const struct coeffs *cx, int col0, int size,
                                int flip, uint8_t *restrict o, const int K)
{
	for (int t = 0; t < size; t++) {
		int i = flip ? size - 1 - t : t;
		v4f acc = hpass_pixel(vrow, cx, col0, i, K);
		uint32_t px;
#ifdef __SSE2__
		__m128 a;
		memcpy(&a, &acc, sizeof a);
		__m128i v32 = _mm_cvtps_epi32(a); // nearest, half to even
		__m128i v16 = _mm_packs_epi32(v32, v32);
		px = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(v16, v16)); // saturates to [0,255]
#else
		uint8_t b[4];
		for (int c = 0; c < 4; c++) {
			float r = nearbyintf(acc[c]);
			b[c] = (uint8_t)(r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r);
		}
		memcpy(&px, b, sizeof px);
#endif
		// px's first three bytes in memory are R,G,B (SSE2: x86, little-endian)
		if (t + 1 < size)
			memcpy(o + 3 * (size_t)t, &px, 4);
		else
			memcpy(o + 3 * (size_t)t, &px, 3);
	}
}

/* The filter is separable and linear, and we keep floats between the passes
 * (PIL rounds to 8 bits in between: we differ by < 1/255), so the order of
 * the passes is free: vertical first, on whole rows with vector code, then
 * horizontal on the size output rows only. */
static inline __attribute__((always_inline)) int
resample(const struct dl_pixels *px, const struct dl_resize_plan *p, const float *mean, const float *std,
         float *chw, uint8_t *hwc, char *err, size_t errlen)
{
	struct coeffs cx = {0}, cy = {0};
	float *srcf = NULL, *vrow = NULL;
	int rv = -1, c0x, c1x, c0y, c1y, size = p->size;

	clip_bounds(p->x0, p->x1, px->full_w, &c0x, &c1x);
	clip_bounds(p->y0, p->y1, px->full_h, &c0y, &c1y);
	if (coeffs_make(&cx, p->x0, p->x1, c0x, c1x, p->out_w, p->ox, size) != 0 ||
	    coeffs_make(&cy, p->y0, p->y1, c0y, c1y, p->out_h, p->oy, size) != 0) {
		dl_errf(err, errlen, "resample: out of memory");
		goto out;
	}
	int ry0 = INT32_MAX, ry1 = 0, col0 = INT32_MAX, col1 = 0;
	for (int i = 0; i < size; i++) {
		ry0 = cy.start[i] < ry0 ? cy.start[i] : ry0;
		ry1 = cy.start[i] + cy.n[i] > ry1 ? cy.start[i] + cy.n[i] : ry1;
		col0 = cx.start[i] < col0 ? cx.start[i] : col0;
		col1 = cx.start[i] + cx.n[i] > col1 ? cx.start[i] + cx.n[i] : col1;
	}
	/* The decoder must have delivered every pixel the filter touches. */
	if (col0 < px->x0 || col1 > px->x0 + px->w || ry0 < px->y0 || ry1 > px->y0 + px->h) {
		dl_errf(err, errlen, "%s:%d: resample needs columns %d..%d rows %d..%d, decoded %d..%d, %d..%d",
		        __FILE__, __LINE__, col0, col1, ry0, ry1, px->x0, px->x0 + px->w, px->y0, px->y0 + px->h);
		goto out;
	}
	// srcf is (ry1-ry0, rowlen): the needed columns of the needed rows as floats
	size_t ncol = (size_t)(col1 - col0) * 3, rowlen = (ncol + 1 + 7) / 8 * 8;
	srcf = malloc(sizeof(float) * (size_t)(ry1 - ry0) * rowlen);
	vrow = malloc(sizeof(float) * rowlen);
	if (!srcf || !vrow) {
		dl_errf(err, errlen, "resample: out of memory");
		goto out;
	}
	for (int r = ry0; r < ry1; r++) {
		const uint8_t *src = px->rgb + (size_t)(r - px->y0) * px->stride + (size_t)(col0 - px->x0) * 3;
		float *d = srcf + (size_t)(r - ry0) * rowlen;
		u8_to_f32(d, src, ncol);
		for (size_t i = ncol; i < rowlen; i++)
			d[i] = 0;
	}
	float scale[3], shift[3]; // float path: x*scale + shift = (x/255 - mean)/std
	if (!mean || !std)
		mean = dl_imagenet_mean, std = dl_imagenet_std;
	for (int c = 0; c < 3; c++) {
		scale[c] = 1.0f / (255.0f * std[c]);
		shift[c] = -mean[c] / std[c];
	}
	int uniform = 1;
	for (int i = 0; i < size; i++)
		uniform &= cx.n[i] == cx.ksize;
	size_t plane = (size_t)size * size;
	for (int y = 0; y < size; y++) {
		const float *k = cy.w + (size_t)y * cy.ksize;
		vpass(vrow, srcf + (size_t)(cy.start[y] - ry0) * rowlen, rowlen, k, cy.n[y], rowlen);
		if (hwc) {
			// hwc is (size,size,3)
			uint8_t *o = hwc + (size_t)y * size * 3;
			if (uniform && cx.ksize == 3)
				hpass_out_u8(vrow, &cx, col0, size, p->flip, o, 3);
			else if (uniform && cx.ksize == 5)
				hpass_out_u8(vrow, &cx, col0, size, p->flip, o, 5);
			else if (uniform && cx.ksize == 7)
				hpass_out_u8(vrow, &cx, col0, size, p->flip, o, 7);
			else
				hpass_out_u8(vrow, &cx, col0, size, p->flip, o, 0);
			continue;
		}
		// chw is (3,size,size)
		float *o0 = chw + (size_t)y * size, *o1 = o0 + plane, *o2 = o1 + plane;
		if (uniform && cx.ksize == 3)
			hpass_out(vrow, &cx, col0, size, p->flip, scale, shift, o0, o1, o2, 3);
		else if (uniform && cx.ksize == 5)
			hpass_out(vrow, &cx, col0, size, p->flip, scale, shift, o0, o1, o2, 5);
		else if (uniform && cx.ksize == 7)
			hpass_out(vrow, &cx, col0, size, p->flip, scale, shift, o0, o1, o2, 7);
		else
			hpass_out(vrow, &cx, col0, size, p->flip, scale, shift, o0, o1, o2, 0);
	}
	rv = 0;
out:
	coeffs_free(&cx);
	coeffs_free(&cy);
	free(srcf);
	free(vrow);
	return rv;
}

/* The two entry points: each inlines resample with one output pointer NULL,
 * so neither pays for the other's branch. */
int dl_resample_chw(const struct dl_pixels *px, const struct dl_resize_plan *p, const float *mean,
                    const float *std, float *chw, char *err, size_t errlen)
{
	return resample(px, p, mean, std, chw, NULL, err, errlen);
}

int dl_resample_hwc8(const struct dl_pixels *px, const struct dl_resize_plan *p, uint8_t *hwc,
                     char *err, size_t errlen)
{
	return resample(px, p, NULL, NULL, NULL, hwc, err, errlen);
}

size_t dl_resize_rgb8_need(int in_w, int in_h, int out_w, int out_h)
{
	/* vrow (3 in_w floats), the output, and per axis coeffs_make's start
	 * and n (out ints) and weights (out x ksize floats, ksize <= 2 (in/out
	 * + 1) + 1, so at most 2 in + 3 out of them) */
	return sizeof(float) * 3 * (size_t)in_w + 3 * (size_t)out_w * (size_t)out_h +
	       8 * ((size_t)in_w + (size_t)in_h) + 20 * ((size_t)out_w + (size_t)out_h) + 4096;
}

int dl_resize_rgb8(const struct dl_pixels *px, int out_w, int out_h, struct dl_pixels *out,
                   char *err, size_t errlen)
{
	struct coeffs cx = {0}, cy = {0};
	float *vrow = NULL;
	int rv = -1;

	memset(out, 0, sizeof *out);
	if (coeffs_make(&cx, 0, px->w, 0, px->w, out_w, 0, out_w) != 0 ||
	    coeffs_make(&cy, 0, px->h, 0, px->h, out_h, 0, out_h) != 0)
		goto oom;
	vrow = malloc(sizeof(float) * (size_t)px->w * 3);
	out->rgb = malloc((size_t)out_w * out_h * 3);
	if (!vrow || !out->rgb)
		goto oom;
	out->w = out->full_w = out_w;
	out->h = out->full_h = out_h;
	out->stride = (size_t)out_w * 3;
	for (int y = 0; y < out_h; y++) {
		const float *k = cy.w + (size_t)y * cy.ksize;
		memset(vrow, 0, sizeof(float) * (size_t)px->w * 3);
		for (int j = 0; j < cy.n[y]; j++) {
			const uint8_t *s = px->rgb + (size_t)(cy.start[y] + j) * px->stride;
			for (int i = 0; i < px->w * 3; i++)
				vrow[i] += k[j] * s[i];
		}
		uint8_t *o = out->rgb + (size_t)y * out->stride;
		for (int x = 0; x < out_w; x++) {
			const float *kx = cx.w + (size_t)x * cx.ksize;
			for (int c = 0; c < 3; c++) {
				float a = 0.5f;
				for (int j = 0; j < cx.n[x]; j++)
					a += kx[j] * vrow[(size_t)(cx.start[x] + j) * 3 + c];
				o[3 * x + c] = (uint8_t)(a < 0 ? 0 : a > 255 ? 255 : a);
			}
		}
	}
	rv = 0;
	goto out;
oom:
	dl_errf(err, errlen, "resize: out of memory");
	free(out->rgb);
	out->rgb = NULL;
out:
	coeffs_free(&cx);
	coeffs_free(&cy);
	free(vrow);
	return rv;
}
