#include "config.h"

#include <math.h>
#include <string.h>

#include "engine/ref/ref_ops.h"

/* Index (into the H*W plane) of the first maximum of window (oh, ow); padding
 * counts as -inf, so it never wins unless the window is all padding, which
 * torch's pad <= k/2 rule excludes.  -1 if the window is empty. */
static int window_argmax(const double *xp, int h, int wd, int k, int stride, int pad, int oh,
			 int ow)
{
	int best = -1;
	double bv = -INFINITY;
	for (int kh = 0; kh < k; kh++) {
		int ih = oh * stride - pad + kh;
		if (ih < 0 || ih >= h)
			continue;
		for (int kw = 0; kw < k; kw++) {
			int iw = ow * stride - pad + kw;
			if (iw < 0 || iw >= wd)
				continue;
			if (best < 0 || xp[ih * wd + iw] > bv) {
				bv = xp[ih * wd + iw];
				best = ih * wd + iw;
			}
		}
	}
	return best;
}

void ref_maxpool_forward(const double *x, double *y, int n, int c, int h, int wd, int k,
			 int stride, int pad)
{
	int ho = ref_out_side(h, k, stride, pad), wo = ref_out_side(wd, k, stride, pad);
	for (size_t p = 0; p < (size_t)n * c; p++) {
		const double *xp = x + p * h * wd;
		for (int oh = 0; oh < ho; oh++)
			for (int ow = 0; ow < wo; ow++) {
				int a = window_argmax(xp, h, wd, k, stride, pad, oh, ow);
				y[(p * ho + oh) * wo + ow] = a < 0 ? -INFINITY : xp[a];
			}
	}
}

void ref_maxpool_backward(const double *x, const double *dy, double *dx, int n, int c, int h,
			  int wd, int k, int stride, int pad)
{
	int ho = ref_out_side(h, k, stride, pad), wo = ref_out_side(wd, k, stride, pad);
	memset(dx, 0, sizeof(*dx) * (size_t)n * c * h * wd);
	for (size_t p = 0; p < (size_t)n * c; p++) {
		const double *xp = x + p * h * wd;
		for (int oh = 0; oh < ho; oh++)
			for (int ow = 0; ow < wo; ow++) {
				int a = window_argmax(xp, h, wd, k, stride, pad, oh, ow);
				if (a >= 0)
					dx[p * h * wd + a] += dy[(p * ho + oh) * wo + ow];
			}
	}
}

double ref_maxpool_margin(const double *x, int n, int c, int h, int wd, int k, int stride, int pad)
{
	int ho = ref_out_side(h, k, stride, pad), wo = ref_out_side(wd, k, stride, pad);
	size_t count = (size_t)n * c * h * wd;
	double ss = 0, lo = INFINITY;
	for (size_t i = 0; i < count; i++)
		ss += x[i] * x[i];
	for (size_t p = 0; p < (size_t)n * c; p++) {
		const double *xp = x + p * h * wd;
		for (int oh = 0; oh < ho; oh++)
			for (int ow = 0; ow < wo; ow++) {
				double m1 = -INFINITY, m2 = -INFINITY;
				for (int kh = 0; kh < k; kh++) {
					int ih = oh * stride - pad + kh;
					for (int kw = 0; kw < k && ih >= 0 && ih < h; kw++) {
						int iw = ow * stride - pad + kw;
						if (iw < 0 || iw >= wd)
							continue;
						double v = xp[ih * wd + iw];
						if (v > m1) {
							m2 = m1;
							m1 = v;
						} else if (v > m2) {
							m2 = v;
						}
					}
				}
				if (m1 > 0 && m2 > -INFINITY)
					lo = fmin(lo, m1 - m2);
			}
	}
	return ss > 0 ? lo / sqrt(ss / (double)count) : INFINITY;
}

void ref_gap_forward(const double *x, double *y, int n, int c, int hw)
{
	for (size_t p = 0; p < (size_t)n * c; p++) {
		double s = 0;
		for (int i = 0; i < hw; i++)
			s += x[p * hw + i];
		y[p] = s / hw;
	}
}

void ref_gap_backward(const double *dy, double *dx, int n, int c, int hw)
{
	for (size_t p = 0; p < (size_t)n * c; p++)
		for (int i = 0; i < hw; i++)
			dx[p * hw + i] = dy[p] / hw;
}
