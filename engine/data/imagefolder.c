/* ImageFolder: DIR/train/<class>/<image>, DIR/val/<class>/<image>. */
#include "config.h"
#include "engine/data/internal.h"

int dl_imagefolder_open(const char *dir, const struct dl_data_options *opt,
                        struct dl_dataset **out, char *err, size_t errlen)
{
	dl_errf(err, errlen, "%s: ImageFolder datasets are not implemented yet", dir);
	return -1;
}
