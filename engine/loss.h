/* Softmax cross-entropy with torch.nn.CrossEntropyLoss semantics. */
#ifndef DLJOB_ENGINE_LOSS_H
#define DLJOB_ENGINE_LOSS_H

/* logits (n,k), labels n ints in [0,k).  Returns the mean loss over the
 * batch, as torch does with reduction='mean' and label_smoothing:
 *   loss_i = (1-eps) * -log p[y_i] + eps/k * sum_j -log p[j]
 * dlogits (n,k), may be NULL: d(mean loss)/d(logits).  top1_correct /
 * top5_correct, may be NULL: how many samples have their label among the
 * 1 / min(5,k) largest logits (ties count against the label).  Returns NaN
 * if a label is out of range. */
double dl_softmax_xent(const float *logits, const int *labels, int n, int k, float label_smoothing,
                       float *dlogits, int *top1_correct, int *top5_correct);

/* pred[i] = the index of the largest of logits row i (n,k); the first
 * one on ties, as torch.argmax.  Inline: the CUDA module (linked -z defs,
 * engine/cuda/local.mk) uses it without the engine library. */
#include <stddef.h>
static inline void dl_argmax_rows(const float *logits, int n, int k, int *pred)
{
	for (int i = 0; i < n; i++) {
		const float *row = logits + (size_t)i * (size_t)k;
		int best = 0;
		for (int j = 1; j < k; j++)
			if (row[j] > row[best])
				best = j;
		pred[i] = best;
	}
}

#endif
