/* The whole "cpu" backend in bf16 mixed precision against the float64
 * reference: test_net.c's tiny ResNet with NET_BF16 set. */
#define NET_BF16 1
#include "engine/test/test_net.c"
