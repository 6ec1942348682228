/* dljob pack's command line (runtime/pack.h). */
#include "config.h"
#include <stdio.h>
#include <string.h>

#include "engine/data/image.h"
#include "engine/data/pack.h"
#include "runtime/cli.h"
#include "common/optval.h"
#include "runtime/pack.h"

/* What the command line sets, in the option table's types (dl_pack takes
 * bytes). */
struct pack_args {
	long shard_mb;
	int max_side, threads, keep_png, quality, decode_mib;
};

/* dljob pack's options (runtime/opttab.h says how to read a row). */
#define PACK_OPTIONS(X, H) \
	X(SHARD, "shard-size", required_argument, "MB", LONG, 1, 1L << 20, shard_mb, \
	  "shard size, %R (default 1024)") \
	X(SIDE, "max-side", required_argument, "N", INT, 16, DL_IMAGE_MAX_SIDE, max_side, \
	  "scale down images whose short side exceeds N, %R (stored as JPEG)") \
	X(THREADS, "threads", required_argument, "N", INT, 1, 1024, threads, "workers, %R (default: one per CPU)") \
	X(KEEP_PNG, "keep-png", no_argument, NULL, NONE, 0, 0, keep_png, \
	  "store PNGs as they are (default: as JPEG, quality 95)") \
	X(QUALITY, "quality", required_argument, "Q", INT, 1, 100, quality, \
	  "quality of the JPEGs --max-side re-encodes, %R (default 90)") \
	X(DECODE_MEM, "decode-memory", required_argument, "MIB", INT, 16, 1 << 20, decode_mib, \
	  "memory the workers share for reading, decoding and re-encoding\n" \
	  "files, %R (default 2048); a file needing more is left out") \
	X(HELP, "help", no_argument, NULL, NONE, 0, 0, keep_png, "this text (also -h)")

#define DL_OPT_STRUCT struct pack_args
DL_OPT_DEFINE(PACK_OPTIONS, pack)
const struct dl_opt_table dl_pack_opttab = DL_OPT_TABLE(pack, "dljob pack");

static void usage(FILE *f)
{
	fprintf(f, "usage: dljob pack SRC DST [OPTION]...\n"
	           "  SRC is an ImageFolder tree (SRC/train/<class>/*.jpg, SRC/val/...); DST gets shard files and an index\n");
	dl_opt_usage(f, &dl_pack_opttab);
}

int dl_pack_main(int argc, char **argv)
{
	struct pack_args a = {.shard_mb = 1024, .quality = 90};
	struct dl_pack_options o = {0};
	char err[512];
	int opt;

	optind = 1;
	while ((opt = dl_opt_next(&dl_pack_opttab, ":h", argc, argv, &a, err, sizeof(err))) != -1) {
		switch (opt) {
		case OPT_KEEP_PNG: a.keep_png = 1; break;
		case 'h':
		case OPT_HELP: usage(stdout); return DL_EXIT_OK;
		case DL_OPT_ERROR:
			fprintf(stderr, "dljob pack: %s\n", err);
			return DL_EXIT_USAGE;
		default: break; /* a number, parsed by dl_opt_next */
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "dljob pack: %s\n", argc - optind < 2 ? "SRC and DST are needed" : "more than SRC and DST given");
		usage(stderr);
		return DL_EXIT_USAGE;
	}
	o.src = argv[optind];
	o.dst = argv[optind + 1];
	o.shard_bytes = (uint64_t)a.shard_mb << 20;
	o.max_side = a.max_side;
	o.threads = a.threads;
	o.keep_png = a.keep_png;
	o.quality = a.quality;
	o.decode_memory = (size_t)a.decode_mib << 20;
	return dl_pack(&o) == 0 ? DL_EXIT_OK : DL_EXIT_ERROR;
}
