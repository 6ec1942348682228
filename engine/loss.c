#include "config.h"

/* Softmax cross-entropy, computed in double with the max subtracted so large
 * logits do not overflow. */

#include <math.h>
#include <stddef.h>

#include "engine/loss.h"

double dl_softmax_xent(const float *logits, const int *labels, int n, int k, float label_smoothing,
                       float *dlogits, int *top1_correct, int *top5_correct)
{
	double total = 0.0;
	double eps = label_smoothing;
	int top1 = 0, top5 = 0, topk = k < 5 ? k : 5;
	for (int i = 0; i < n; i++) {
		// row is (k,)
		const float *row = logits + (size_t)i * k;
		int y = labels[i];
		if (y < 0 || y >= k)
			return NAN;
		double mx = row[0];
		for (int j = 1; j < k; j++)
			if (row[j] > mx)
				mx = row[j];
		double sum = 0.0, sum_z = 0.0;
		for (int j = 0; j < k; j++) {
			sum += exp((double)row[j] - mx);
			sum_z += (double)row[j] - mx;
		}
		double lse = log(sum); // log-sum-exp of the shifted row
		double nll = lse - ((double)row[y] - mx);
		// mean over classes of -log p[j] = lse - mean(z - mx)
		double smooth = lse - sum_z / k;
		total += (1.0 - eps) * nll + eps * smooth;
		if (dlogits) {
			float *d = dlogits + (size_t)i * k;
			for (int j = 0; j < k; j++) {
				double p = exp((double)row[j] - mx - lse);
				double target = eps / k + (j == y ? 1.0 - eps : 0.0);
				d[j] = (float)((p - target) / n);
			}
		}
		// rank of the label: how many logits beat it (ties count against it)
		int above = 0;
		for (int j = 0; j < k; j++)
			if (j != y && row[j] >= row[y])
				above++;
		top1 += above < 1;
		top5 += above < topk;
	}
	if (top1_correct)
		*top1_correct = top1;
	if (top5_correct)
		*top5_correct = top5;
	return n > 0 ? total / n : 0.0;
}
