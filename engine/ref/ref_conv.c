#include "config.h"

#include <string.h>

#include "engine/ref/ref_ops.h"

/* All three passes walk the same (n, co, ci, kh, kw, oh, ow) index space; the
 * only difference is which of x, w, y is written. */

void ref_conv_forward(const double *x, const double *w, double *y, int n, int ci, int h,
		      int wd, int co, int k, int stride, int pad)
{
	int ho = ref_out_side(h, k, stride, pad), wo = ref_out_side(wd, k, stride, pad);
	memset(y, 0, sizeof(*y) * (size_t)n * co * ho * wo);
	for (int b = 0; b < n; b++)
		for (int o = 0; o < co; o++) {
			double *yp = y + ((size_t)b * co + o) * ho * wo;
			for (int i = 0; i < ci; i++) {
				const double *xp = x + ((size_t)b * ci + i) * h * wd;
				for (int kh = 0; kh < k; kh++)
					for (int kw = 0; kw < k; kw++) {
						double wv = w[(((size_t)o * ci + i) * k + kh) * k + kw];
						for (int oh = 0; oh < ho; oh++) {
							int ih = oh * stride - pad + kh;
							if (ih < 0 || ih >= h)
								continue;
							for (int ow = 0; ow < wo; ow++) {
								int iw = ow * stride - pad + kw;
								if (iw < 0 || iw >= wd)
									continue;
								yp[oh * wo + ow] += wv * xp[ih * wd + iw];
							}
						}
					}
			}
		}
}

void ref_conv_backward_data(const double *dy, const double *w, double *dx, int n, int ci,
			    int h, int wd, int co, int k, int stride, int pad)
{
	int ho = ref_out_side(h, k, stride, pad), wo = ref_out_side(wd, k, stride, pad);
	memset(dx, 0, sizeof(*dx) * (size_t)n * ci * h * wd);
	for (int b = 0; b < n; b++)
		for (int o = 0; o < co; o++) {
			const double *dyp = dy + ((size_t)b * co + o) * ho * wo;
			for (int i = 0; i < ci; i++) {
				double *dxp = dx + ((size_t)b * ci + i) * h * wd;
				for (int kh = 0; kh < k; kh++)
					for (int kw = 0; kw < k; kw++) {
						double wv = w[(((size_t)o * ci + i) * k + kh) * k + kw];
						for (int oh = 0; oh < ho; oh++) {
							int ih = oh * stride - pad + kh;
							if (ih < 0 || ih >= h)
								continue;
							for (int ow = 0; ow < wo; ow++) {
								int iw = ow * stride - pad + kw;
								if (iw < 0 || iw >= wd)
									continue;
								dxp[ih * wd + iw] += wv * dyp[oh * wo + ow];
							}
						}
					}
			}
		}
}

void ref_conv_backward_weights(const double *x, const double *dy, double *dw, int n, int ci,
			       int h, int wd, int co, int k, int stride, int pad)
{
	int ho = ref_out_side(h, k, stride, pad), wo = ref_out_side(wd, k, stride, pad);
	memset(dw, 0, sizeof(*dw) * (size_t)co * ci * k * k);
	for (int b = 0; b < n; b++)
		for (int o = 0; o < co; o++) {
			const double *dyp = dy + ((size_t)b * co + o) * ho * wo;
			for (int i = 0; i < ci; i++) {
				const double *xp = x + ((size_t)b * ci + i) * h * wd;
				for (int kh = 0; kh < k; kh++)
					for (int kw = 0; kw < k; kw++) {
						double s = 0;
						for (int oh = 0; oh < ho; oh++) {
							int ih = oh * stride - pad + kh;
							if (ih < 0 || ih >= h)
								continue;
							for (int ow = 0; ow < wo; ow++) {
								int iw = ow * stride - pad + kw;
								if (iw < 0 || iw >= wd)
									continue;
								s += dyp[oh * wo + ow] * xp[ih * wd + iw];
							}
						}
						dw[(((size_t)o * ci + i) * k + kh) * k + kw] += s;
					}
			}
		}
}
