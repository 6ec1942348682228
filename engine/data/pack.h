/* dljob pack: turn an ImageFolder tree into a few large shard files plus an
 * index, so training reads big files with pread instead of opening 1.3M
 * small ones (see engine/data/shards.h for the layout). */
#ifndef DLJOB_ENGINE_DATA_PACK_H
#define DLJOB_ENGINE_DATA_PACK_H

/* argv[0] is the sub-command name ("pack"), then
 *   SRC DST [--shard-size MB] [--max-side N] [--threads N] [--keep-png] [--quality Q]
 * Returns the process exit status (0 ok, 1 error, 2 usage). */
int dl_pack_main(int argc, char **argv);

#endif
