/* The packed-shard layout written by dljob pack and read by the "shards"
 * dataset, internal to engine/data/.
 *
 * DIR/dljob-shards.idx   the index (written last, atomically: a directory
 *                        without it is not a dataset)
 * DIR/shard-NNNNN.bin    encoded images back to back (JPEG, or PNG when
 *                        packed with --keep-png)
 *
 * Index, little-endian:
 *   "DLJOBSH1"  u64 version (1)  u64 nshards  u64 nclass
 *   nclass x { u64 len, bytes }                  class names, sorted
 *   2 x { u64 count, count x record }            train, then eval
 *   record: u32 shard, u32 label, u64 offset, u32 size, u8 format,
 *           u8 0, u16 name_len, name bytes (the source path below SRC) */
#ifndef DLJOB_ENGINE_DATA_SHARDS_H
#define DLJOB_ENGINE_DATA_SHARDS_H

#define DL_SHARDS_INDEX "dljob-shards.idx"
#define DL_SHARDS_MAGIC "DLJOBSH1"
#define DL_SHARDS_VERSION 1

#endif
