#include "config.h"

#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/ref/ref_backend.h"

/* The CUDA backend (engine/cuda/) is built when configure found CUDA. */
#ifdef DLJOB_HAVE_CUDA
extern const struct dl_backend_ops dl_backend_cuda;
#endif

const struct dl_backend_ops *dl_backend_find(const char *name)
{
	static const struct dl_backend_ops *const all[] = {
		&dl_backend_cpu,
		&dl_backend_ref,
#ifdef DLJOB_HAVE_CUDA
		&dl_backend_cuda,
#endif
	};
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(all[i]->name, name) == 0)
			return all[i];
	return NULL;
}

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
