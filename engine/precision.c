/* Names of the step's precisions and convolution algorithms
 * (engine/precision.h). */
#include "config.h"

#include <string.h>

#include "engine/precision.h"

int dl_conv_algo_parse(const char *name)
{
	static const char *const names[] = { "auto", "direct", "winograd" };
	for (int i = 0; name && i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

int dl_precision_parse(const char *name)
{
	static const char *const names[] = { "fp32", "bf16", "fp16" };
	if (!name)
		return DL_FP32;
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

int dl_precision_is_auto(const char *name)
{
	return name && strcmp(name, DL_PRECISION_AUTO) == 0;
}

int dl_precision_valid(const char *name)
{
	return dl_precision_is_auto(name) || dl_precision_parse(name) >= 0;
}

const char *dl_precision_name(enum dl_precision p)
{
	switch (p) {
	case DL_FP32:
		return "fp32";
	case DL_BF16:
		return "bf16";
	case DL_FP16:
		return "fp16";
	}
	return "unknown";
}
