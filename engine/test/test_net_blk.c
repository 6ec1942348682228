/* The whole "cpu" backend against the float64 reference on test_net.c's
 * tiny ResNet with a 16-channel stem and 32-channel blocks: the own batch-norm kernels and their
 * fusions with the residual add. */
#define NET_STEM 16
#define NET_CH 32
#include "engine/test/test_net.c"
