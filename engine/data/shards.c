/* Packed shards written by dljob pack. */
#include "config.h"
#include "engine/data/internal.h"

int dl_shards_open(const char *dir, const struct dl_data_options *opt,
                   struct dl_dataset **out, char *err, size_t errlen)
{
	dl_errf(err, errlen, "%s: packed shards are not implemented yet", dir);
	return -1;
}
