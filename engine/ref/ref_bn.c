#include "config.h"

#include <math.h>

#include "engine/ref/ref_ops.h"

/* y of one element: ref_bn_forward_eval and ref_bn_relu_mask share it, so
 * that a mask recomputed from x is the forward's, bit for bit. */
static inline double bn_apply1(double x, double gamma, double beta, double mean, double inv)
{
	return gamma * (x - mean) * inv + beta;
}

void ref_bn_forward_train(const double *x, const double *gamma, const double *beta,
			  double *y, double *mean, double *var, int n, int c, int hw, double eps)
{
	ref_bn_stats(x, mean, var, n, c, hw);
	ref_bn_forward_eval(x, gamma, beta, mean, var, y, n, c, hw, eps);
}

void ref_bn_stats(const double *x, double *mean, double *var, int n, int c, int hw)
{
	double cnt = (double)n * hw;
	for (int ch = 0; ch < c; ch++) {
		double s = 0;
		for (int b = 0; b < n; b++) {
			const double *xp = x + ((size_t)b * c + ch) * hw;
			for (int i = 0; i < hw; i++)
				s += xp[i];
		}
		double m = s / cnt;
		/* Two-pass variance: the reference must not lose digits. */
		double v = 0;
		for (int b = 0; b < n; b++) {
			const double *xp = x + ((size_t)b * c + ch) * hw;
			for (int i = 0; i < hw; i++)
				v += (xp[i] - m) * (xp[i] - m);
		}
		v /= cnt;
		mean[ch] = m;
		var[ch] = v;
	}
}

void ref_bn_update_running(double *run_mean, double *run_var, const double *mean,
			   const double *var, int c, size_t count, double momentum)
{
	double unbias = count > 1 ? (double)count / (double)(count - 1) : 1.0;
	for (int ch = 0; ch < c; ch++) {
		run_mean[ch] = (1 - momentum) * run_mean[ch] + momentum * mean[ch];
		run_var[ch] = (1 - momentum) * run_var[ch] + momentum * var[ch] * unbias;
	}
}

void ref_bn_forward_eval(const double *x, const double *gamma, const double *beta,
			 const double *mean, const double *var, double *y, int n, int c,
			 int hw, double eps)
{
	for (int b = 0; b < n; b++)
		for (int ch = 0; ch < c; ch++) {
			double inv = 1.0 / sqrt(var[ch] + eps);
			const double *xp = x + ((size_t)b * c + ch) * hw;
			double *yp = y + ((size_t)b * c + ch) * hw;
			for (int i = 0; i < hw; i++)
				yp[i] = bn_apply1(xp[i], gamma[ch], beta[ch], mean[ch], inv);
		}
}

void ref_bn_relu_mask(const double *x, const double *gamma, const double *beta, const double *mean,
		      const double *var, double *dy, int n, int c, int hw, double eps)
{
	for (int b = 0; b < n; b++)
		for (int ch = 0; ch < c; ch++) {
			double inv = 1.0 / sqrt(var[ch] + eps);
			const double *xp = x + ((size_t)b * c + ch) * hw;
			double *dyp = dy + ((size_t)b * c + ch) * hw;
			for (int i = 0; i < hw; i++)
				if (!(bn_apply1(xp[i], gamma[ch], beta[ch], mean[ch], inv) > 0))
					dyp[i] = 0;
		}
}

/* With xh = (x - mean) * inv:  dbeta = sum dy, dgamma = sum dy xh,
 * dx = gamma * inv / cnt * (cnt dy - dbeta - xh dgamma). */
void ref_bn_backward(const double *x, const double *dy, const double *gamma,
		     const double *mean, const double *var, double *dx, double *dgamma,
		     double *dbeta, int n, int c, int hw, double eps)
{
	double cnt = (double)n * hw;
	for (int ch = 0; ch < c; ch++) {
		double inv = 1.0 / sqrt(var[ch] + eps);
		double sdy = 0, sdyxh = 0;
		for (int b = 0; b < n; b++) {
			const double *xp = x + ((size_t)b * c + ch) * hw;
			const double *dyp = dy + ((size_t)b * c + ch) * hw;
			for (int i = 0; i < hw; i++) {
				sdy += dyp[i];
				sdyxh += dyp[i] * (xp[i] - mean[ch]) * inv;
			}
		}
		dbeta[ch] = sdy;
		dgamma[ch] = sdyxh;
		for (int b = 0; b < n; b++) {
			const double *xp = x + ((size_t)b * c + ch) * hw;
			const double *dyp = dy + ((size_t)b * c + ch) * hw;
			double *dxp = dx + ((size_t)b * c + ch) * hw;
			for (int i = 0; i < hw; i++) {
				double xh = (xp[i] - mean[ch]) * inv;
				dxp[i] = gamma[ch] * inv / cnt * (cnt * dyp[i] - sdy - xh * sdyxh);
			}
		}
	}
}
