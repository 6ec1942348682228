#include "config.h"

#include "engine/ref/ref_ops.h"

void ref_add_forward(const double *a, const double *b, double *y, size_t count)
{
	for (size_t i = 0; i < count; i++)
		y[i] = a[i] + b[i];
}
