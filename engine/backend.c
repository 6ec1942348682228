#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/ref/ref_backend.h"

#ifdef DLJOB_HAVE_CUDA
/* The module's path into path[pathlen]: the first candidate of backend.h's
 * list that exists.  0: found; -1: none exists (err lists the places). */
static int module_path(char *path, size_t pathlen, char *err, size_t errlen)
{
	char exe[PATH_MAX], cand[3][PATH_MAX + 64];
	int n = 0;
	const char *dir = getenv("DLJOB_MODULE_DIR");

	if (dir && *dir) {
		snprintf(cand[n++], sizeof(cand[0]), "%s/%s", dir, DL_BACKEND_MODULE);
	} else {
		ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (len > 0 && (size_t)len < sizeof(exe) - 1) {
			exe[len] = 0;
			char *slash = strrchr(exe, '/');
			if (slash) {
				*slash = 0;
				snprintf(cand[n++], sizeof(cand[0]), "%s/../lib/dljob/%s", exe, DL_BACKEND_MODULE);
			}
		}
		snprintf(cand[n++], sizeof(cand[0]), "%s/%s", DLJOB_PKGLIBDIR, DL_BACKEND_MODULE);
	}
	for (int i = 0; i < n; i++) {
		if (access(cand[i], F_OK) == 0) {
			if (strlen(cand[i]) >= pathlen)
				break;
			strcpy(path, cand[i]);
			return 0;
		}
	}
	dl_errf(err, errlen, "the CUDA backend module %s is not installed (looked for %s%s%s%s)", DL_BACKEND_MODULE, cand[0],
		n > 1 ? ", " : "", n > 1 ? cand[1] : "", dir && *dir ? ": DLJOB_MODULE_DIR is set" : "");
	return -1;
}

/* dlopen the CUDA module and take its backend.  The handle is never closed:
 * the backend's code must stay mapped while any of its objects lives, and a
 * second call gets the same handle back from the loader. */
static const struct dl_backend_ops *load_cuda(char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	if (module_path(path, sizeof(path), err, errlen) < 0)
		return NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		dl_errf(err, errlen, "cannot load the CUDA backend %s: %s", path, e ? e : "unknown dlopen error");
		return NULL;
	}
	typedef const struct dl_backend_ops *(*entry_fn)(void);
	entry_fn entry;
	/* ISO C has no cast from void * to a function pointer: copy the bits */
	void *sym = dlsym(h, DL_BACKEND_ENTRY_NAME);
	if (!sym) {
		dl_errf(err, errlen, "%s is not a CUDA backend for this dljob: it has no %s (a module of another dljob version?)",
			path, DL_BACKEND_ENTRY_NAME);
		dlclose(h);
		return NULL;
	}
	memcpy(&entry, &sym, sizeof(entry));
	const struct dl_backend_ops *ops = entry();
	if (!ops || !ops->name || strcmp(ops->name, "cuda") != 0) {
		dl_errf(err, errlen, "%s: %s returned no cuda backend", path, DL_BACKEND_ENTRY_NAME);
		dlclose(h);
		return NULL;
	}
	return ops;
}
#endif

static const struct dl_backend_ops *backend_auto(char *err, size_t errlen);

const struct dl_backend_ops *dl_backend_find(const char *name, char *err, size_t errlen)
{
	static const struct dl_backend_ops *const builtin[] = { &dl_backend_cpu, &dl_backend_ref };
	if (!name) {
		dl_errf(err, errlen, "no backend named");
		return NULL;
	}
	if (strcmp(name, "auto") == 0)
		return backend_auto(err, errlen);
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (strcmp(builtin[i]->name, name) == 0)
			return builtin[i];
	if (strcmp(name, "cuda") == 0) {
#ifdef DLJOB_HAVE_CUDA
		return load_cuda(err, errlen);
#else
		dl_errf(err, errlen, "backend 'cuda' is not built into this dljob (configured --without-cuda)");
		return NULL;
#endif
	}
	dl_errf(err, errlen, "unknown backend '%s' (cpu, ref, cuda)", name);
	return NULL;
}

static const struct dl_backend_ops *backend_auto(char *err, size_t errlen)
{
#ifdef DLJOB_HAVE_CUDA
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	if (access("/dev/nvidiactl", F_OK) == 0 && !(vis && !*vis)) {
		const struct dl_backend_ops *cuda = load_cuda(err, errlen);
		if (!cuda) {
			size_t len = err ? strnlen(err, errlen) : errlen;
			if (len + 1 < errlen)
				snprintf(err + len, errlen - len,
					 " (this node has the NVIDIA driver; --backend cpu trains without the GPU)");
			return NULL;
		}
		if (cuda->device_count && cuda->device_count() > 0)
			return cuda;
	}
#endif
	return dl_backend_find("cpu", err, errlen);
}

int dl_backend_precision(const struct dl_backend_ops *ops, const char *name, const char *device, char *msg,
			 size_t msglen)
{
	char why[256];
	if (msg && msglen)
		msg[0] = 0;
	if (!dl_precision_is_auto(name)) {
		int p = dl_precision_parse(name);
		if (p < 0)
			dl_errf(msg, msglen, "unknown precision '%s' (%s)", name, DL_PRECISION_NAMES);
		return p;
	}
	if (!ops->auto_precision) {
		if (msg && msglen)
			snprintf(msg, msglen, "--precision auto: fp32 (the %s backend)", ops->name);
		return DL_FP32;
	}
	why[0] = 0;
	int p = ops->auto_precision(device, why, sizeof(why));
	if (p < 0) {
		dl_errf(msg, msglen, "%s", why[0] ? why : "--precision auto: the backend did not say why it failed");
		return -1;
	}
	if (p != DL_FP32 && p != DL_BF16 && p != DL_FP16) {
		dl_errf(msg, msglen, "--precision auto: the %s backend picked precision %d", ops->name, p);
		return -1;
	}
	if (msg && msglen)
		snprintf(msg, msglen, "--precision auto: %s (%s)", dl_precision_name((enum dl_precision)p), why);
	return p;
}
