/* The torchvision transforms on decoded pixels: the crop/resize plans of
 * RandomResizedCrop+RandomHorizontalFlip (train) and Resize+CenterCrop (eval),
 * and PIL's bilinear resampling (a triangle filter widened by the downscale
 * factor, so it antialiases; two separable passes, each rounded to 8 bits as
 * PIL does) fused with the crop window, the flip and the normalization. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/data/image.h"
#include "engine/data/internal.h"

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

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
		c->start[i] = xmin;
		c->n[i] = xmax - xmin;
		for (int x = 0; x < c->n[i]; x++)
			k[x] = (float)(ww != 0 ? k[x] / ww : (x == 0));
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
	*x0 = (int)floor(p->x0 + (p->ox + 0.5) * sx - supx + 0.5) - 1;
	*x1 = (int)floor(p->x0 + (p->ox + p->size - 0.5) * sx + supx + 0.5) + 1;
	*x0 = *x0 < c0 ? c0 : *x0;
	*x1 = *x1 > c1 ? c1 : *x1;
	clip_bounds(p->y0, p->y1, full_h, &c0, &c1);
	*y0 = (int)floor(p->y0 + (p->oy + 0.5) * sy - supy + 0.5) - 1;
	*y1 = (int)floor(p->y0 + (p->oy + p->size - 0.5) * sy + supy + 0.5) + 1;
	*y0 = *y0 < c0 ? c0 : *y0;
	*y1 = *y1 > c1 ? c1 : *y1;
}

static inline float round8(float v)
{
	v = nearbyintf(v);
	return v < 0 ? 0 : v > 255 ? 255 : v;
}

int dl_resample_chw(const struct dl_pixels *px, const struct dl_resize_plan *p, float *chw,
                    char *err, size_t errlen)
{
	struct coeffs cx = {0}, cy = {0};
	float *tmp = NULL, *row = NULL;
	int rv = -1, c0x, c1x, c0y, c1y, size = p->size;

	clip_bounds(p->x0, p->x1, px->full_w, &c0x, &c1x);
	clip_bounds(p->y0, p->y1, px->full_h, &c0y, &c1y);
	if (coeffs_make(&cx, p->x0, p->x1, c0x, c1x, p->out_w, p->ox, size) != 0 ||
	    coeffs_make(&cy, p->y0, p->y1, c0y, c1y, p->out_h, p->oy, size) != 0) {
		dl_errf(err, errlen, "resample: out of memory");
		goto out;
	}
	int ry0 = cy.start[0], ry1 = cy.start[size - 1] + cy.n[size - 1];
	for (int i = 0; i < size; i++) {
		if (cy.start[i] < ry0)
			ry0 = cy.start[i];
		if (cy.start[i] + cy.n[i] > ry1)
			ry1 = cy.start[i] + cy.n[i];
	}
	/* The decoder must have delivered every pixel the filter touches. */
	for (int i = 0; i < size; i++) {
		if (cx.start[i] < px->x0 || cx.start[i] + cx.n[i] > px->x0 + px->w) {
			dl_errf(err, errlen, "%s:%d: resample needs columns %d..%d, decoded %d..%d", __FILE__,
			        __LINE__, cx.start[i], cx.start[i] + cx.n[i], px->x0, px->x0 + px->w);
			goto out;
		}
	}
	if (ry0 < px->y0 || ry1 > px->y0 + px->h) {
		dl_errf(err, errlen, "%s:%d: resample needs rows %d..%d, decoded %d..%d", __FILE__, __LINE__,
		        ry0, ry1, px->y0, px->y0 + px->h);
		goto out;
	}
	// tmp is (ry1-ry0, size, 3): the horizontal pass of the rows needed
	tmp = malloc(sizeof(float) * (size_t)(ry1 - ry0) * (size_t)size * 3);
	row = malloc(sizeof(float) * (size_t)size * 3);
	if (!tmp || !row) {
		dl_errf(err, errlen, "resample: out of memory");
		goto out;
	}
	for (int r = ry0; r < ry1; r++) {
		const uint8_t *src = px->rgb + (size_t)(r - px->y0) * px->stride;
		float *t = tmp + (size_t)(r - ry0) * size * 3;
		for (int i = 0; i < size; i++) {
			const uint8_t *s = src + (size_t)(cx.start[i] - px->x0) * 3;
			const float *k = cx.w + (size_t)i * cx.ksize;
			float a0 = 0, a1 = 0, a2 = 0;
			for (int j = 0; j < cx.n[i]; j++) {
				a0 += k[j] * s[3 * j];
				a1 += k[j] * s[3 * j + 1];
				a2 += k[j] * s[3 * j + 2];
			}
			t[3 * i] = round8(a0);
			t[3 * i + 1] = round8(a1);
			t[3 * i + 2] = round8(a2);
		}
	}
	float scale[3], shift[3];
	for (int c = 0; c < 3; c++) {
		scale[c] = 1.0f / (255.0f * imagenet_std[c]);
		shift[c] = -imagenet_mean[c] / imagenet_std[c];
	}
	size_t plane = (size_t)size * size;
	for (int y = 0; y < size; y++) {
		const float *k = cy.w + (size_t)y * cy.ksize;
		memset(row, 0, sizeof(float) * (size_t)size * 3);
		for (int j = 0; j < cy.n[y]; j++) {
			const float *t = tmp + (size_t)(cy.start[y] + j - ry0) * size * 3;
			float kj = k[j];
			for (int i = 0; i < size * 3; i++)
				row[i] += kj * t[i];
		}
		// chw is (3,size,size); a flipped sample reads the row backwards
		for (int c = 0; c < 3; c++) {
			float *o = chw + c * plane + (size_t)y * size;
			for (int i = 0; i < size; i++) {
				int si = p->flip ? size - 1 - i : i;
				o[i] = round8(row[3 * si + c]) * scale[c] + shift[c];
			}
		}
	}
	rv = 0;
out:
	coeffs_free(&cx);
	coeffs_free(&cy);
	free(tmp);
	free(row);
	return rv;
}
