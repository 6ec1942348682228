/* dljob pack: turn an ImageFolder tree into a few large shard files plus an
 * index, so training reads big files with pread instead of opening 1.3M
 * small ones (see engine/data/shards.h for the layout).  The command line
 * (`dljob pack SRC DST [options]`) is runtime/pack.c's. */
#ifndef DLJOB_ENGINE_DATA_PACK_H
#define DLJOB_ENGINE_DATA_PACK_H

#include <stddef.h>
#include <stdint.h>

struct dl_pack_options {
	const char *src, *dst;   /* ImageFolder tree; output directory (made if missing) */
	uint64_t shard_bytes;    /* a shard closes at this size (> 0) */
	int max_side;            /* images with a longer short side scaled down to it (as JPEG); 0: none */
	int threads;             /* workers; 0: one per CPU */
	int keep_png;            /* PNGs stored as they are instead of as JPEG */
	int quality;             /* quality of the JPEGs max_side re-encodes, 1..100 */
	size_t decode_memory;    /* bytes the workers may hold at once for reading, decoding and
	                          * re-encoding files (0: DL_DEFAULT_DECODE_MEMORY); a file needing
	                          * more is skipped, one needing less waits its turn */
};

/* Pack o->src into o->dst, with progress and every skipped file on stderr
 * ("dljob pack: ...").  Returns 0, or 1 after saying what failed. */
int dl_pack(const struct dl_pack_options *o);

#endif
