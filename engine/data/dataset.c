/* dl_dataset_open: pick the dataset implementation from the spec string. */
#include "config.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/data/internal.h"

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* A directory of Fashion-MNIST IDX files and no ImageFolder: what Debian's
 * dataset-fashion-mnist installs, and what --dl-data=DIR passes for it. */
static int is_fashion_mnist_dir(const char *dir)
{
	char p[4096];
	const char *names[] = {"train-images-idx3-ubyte.gz", "train-images-idx3-ubyte"};

	snprintf(p, sizeof p, "%s/train", dir);
	if (access(p, F_OK) == 0)
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, names[i]) < sizeof p && access(p, F_OK) == 0)
			return 1;
	}
	return 0;
}

int dl_dataset_open(const char *spec, const struct dl_data_options *opt,
                    struct dl_dataset **out, char *err, size_t errlen)
{
	struct dl_data_options o = {0};
	int rv;

	*out = NULL;
	if (opt)
		o = *opt;
	if (o.image_size < 0 || o.max_bad_fraction < 0 || o.max_bad_fraction > 1 || o.threads < 0) {
		dl_errf(err, errlen, "data options: image_size, threads and max_bad_fraction (0..1) must not be negative");
		return -1;
	}
	for (int c = 0; o.have_norm && c < 3; c++)
		if (!(o.std[c] > 0 && o.std[c] < 1e6f) || !(o.mean[c] > -1e6f && o.mean[c] < 1e6f)) {
			dl_errf(err, errlen, "data options: normalization std must be positive and mean finite");
			return -1;
		}
	if (o.max_bad_fraction == 0)
		o.max_bad_fraction = DL_DEFAULT_MAX_BAD;
	if (!spec || !*spec) {
		dl_errf(err, errlen, "data: empty dataset spec (want fashion-mnist:DIR, synthetic[:C,H,W,K[,N]] or DIR)");
		return -1;
	}
	if (has_prefix(spec, "fashion-mnist:")) {
		rv = dl_fashion_mnist_open(spec + strlen("fashion-mnist:"), 0, &o, out, err, errlen);
	} else if (has_prefix(spec, "fashion-mnist+aug:")) {
		rv = dl_fashion_mnist_open(spec + strlen("fashion-mnist+aug:"), 1, &o, out, err, errlen);
	} else if (strcmp(spec, "synthetic") == 0 || has_prefix(spec, "synthetic:")) {
		rv = dl_synthetic_open(spec[9] ? spec + 10 : "", &o, out, err, errlen);
	} else {
		/* A directory: packed shards when it holds our index file,
		 * otherwise an ImageFolder tree. */
		struct stat st;
		char path[4096];
		if (stat(spec, &st) != 0) {
			dl_errf(err, errlen, "%s: %s (dataset spec is neither fashion-mnist:DIR, synthetic nor an existing directory)",
			        spec, strerror(errno));
			return -1;
		}
		if (!S_ISDIR(st.st_mode)) {
			dl_errf(err, errlen, "%s: not a directory", spec);
			return -1;
		}
		snprintf(path, sizeof path, "%s/dljob-shards.idx", spec);
		if (access(path, F_OK) == 0)
			rv = dl_shards_open(spec, &o, out, err, errlen);
		else if (is_fashion_mnist_dir(spec))
			rv = dl_fashion_mnist_open(spec, 0, &o, out, err, errlen);
		else
			rv = dl_imagefolder_open(spec, &o, out, err, errlen);
	}
	if (rv == 0)
		(*out)->max_bad_fraction = o.max_bad_fraction;
	return rv;
}

int dl_dataset_save_index(struct dl_dataset *ds, const char *dir, char *err, size_t errlen)
{
	if (!ds || !ds->save_index || !dir || !*dir)
		return 0;
	return ds->save_index(ds, dir, err, errlen);
}

void dl_dataset_close(struct dl_dataset *ds)
{
	if (ds && ds->close)
		ds->close(ds);
}

const char *dl_dataset_class_name(const struct dl_dataset *ds, int c)
{
	int n;
	const char *const *names;
	if (dl_imagefolder_info(ds, &n, &names) < 0 || c < 0 || c >= n)
		return NULL;
	return names[c];
}
