#include "config.h"

#include <math.h>

#include "engine/ref/ref_ops.h"

void ref_relu_forward(const double *x, double *y, size_t count)
{
	for (size_t i = 0; i < count; i++)
		y[i] = x[i] > 0 ? x[i] : 0;
}

/* Masking on the output is the same as on the input (y > 0 iff x > 0), and
 * the output is what a fused BN+ReLU or ADD+ReLU keeps. */
void ref_relu_backward(const double *y, const double *dy, double *dx, size_t count)
{
	for (size_t i = 0; i < count; i++)
		dx[i] = y[i] > 0 ? dy[i] : 0;
}

double ref_relu_margin(const double *x, size_t count)
{
	double ss = 0, lo = INFINITY;
	for (size_t i = 0; i < count; i++) {
		ss += x[i] * x[i];
		lo = fmin(lo, fabs(x[i]));
	}
	return ss > 0 ? lo / sqrt(ss / (double)count) : INFINITY;
}
