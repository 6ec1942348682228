/* Model zoo: builds a dl_graph that matches torchvision's ResNet v1.5
 * (resnet18/34/50/101/152) or the CIFAR-style ResNets of He et al. 2015
 * (resnet20/32/56, option-B shortcuts), with parameters named exactly as
 * torchvision's state_dict so checkpoints load in either direction. */
#ifndef DLJOB_ENGINE_MODEL_H
#define DLJOB_ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "engine/graph.h"

/* Build model `model` for inputs (in_channels, in_h, in_w) and num_classes
 * outputs, with torchvision's initialisation drawn from `seed`
 * (deterministic: same seed, same weights).  zero_init_residual: the last BN
 * gamma of every residual block starts at 0.  g is overwritten; on error
 * returns -1 with one line in err and g holds nothing to free. */
int dl_model_build(struct dl_graph *g, const char *model, int in_channels, int in_h, int in_w,
                   int num_classes, int zero_init_residual, uint64_t seed, char *err, size_t errlen);
void dl_model_free(struct dl_graph *g);
/* 1 if `model` is a name dl_model_build knows, else 0. */
int dl_model_known(const char *model);
/* Comma-separated list of known names, for help and error messages. */
const char *dl_model_names(void);
/* Parameter count (sum of params[i].count). */
size_t dl_model_n_weights(const struct dl_graph *g);

#endif
