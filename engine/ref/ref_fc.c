#include "config.h"

#include "engine/ref/ref_ops.h"

void ref_fc_forward(const double *x, const double *w, const double *b, double *y, int n,
		    int c, int k)
{
	for (int i = 0; i < n; i++)
		for (int o = 0; o < k; o++) {
			double s = b ? b[o] : 0;
			for (int j = 0; j < c; j++)
				s += x[(size_t)i * c + j] * w[(size_t)o * c + j];
			y[(size_t)i * k + o] = s;
		}
}

void ref_fc_backward_data(const double *dy, const double *w, double *dx, int n, int c, int k)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < c; j++) {
			double s = 0;
			for (int o = 0; o < k; o++)
				s += dy[(size_t)i * k + o] * w[(size_t)o * c + j];
			dx[(size_t)i * c + j] = s;
		}
}

void ref_fc_backward_weights(const double *x, const double *dy, double *dw, double *db, int n,
			     int c, int k)
{
	for (int o = 0; o < k; o++) {
		double sb = 0;
		for (int i = 0; i < n; i++)
			sb += dy[(size_t)i * k + o];
		if (db)
			db[o] = sb;
		for (int j = 0; j < c; j++) {
			double s = 0;
			for (int i = 0; i < n; i++)
				s += dy[(size_t)i * k + o] * x[(size_t)i * c + j];
			dw[(size_t)o * c + j] = s;
		}
	}
}
