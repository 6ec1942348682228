/* dljob pack's command line (runtime/pack.h). */
#include "config.h"
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "engine/data/image.h"
#include "engine/data/pack.h"
#include "runtime/cli.h"
#include "common/optval.h"
#include "runtime/pack.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dljob pack SRC DST [--shard-size MB] [--max-side N] [--threads N] [--keep-png] [--quality Q] [--decode-memory MIB]\n"
	           "  SRC is an ImageFolder tree (SRC/train/<class>/*.jpg, SRC/val/...); DST gets shard files and an index\n"
	           "  --shard-size MB  shard size, 1..1048576 (default 1024)\n"
	           "  --max-side N     scale down images whose short side exceeds N, 16..%d (stored as JPEG)\n"
	           "  --threads N      workers, 1..1024 (default: one per CPU)\n"
	           "  --keep-png       store PNGs as they are (default: as JPEG, quality 95)\n"
	           "  --quality Q      quality of the JPEGs --max-side re-encodes, 1..100 (default 90)\n"
	           "  --decode-memory MIB  memory the workers share for reading, decoding and re-encoding\n"
	           "                   files, 16..1048576 (default 2048); a file needing more is left out\n",
	        DL_IMAGE_MAX_SIDE);
}

int dl_pack_main(int argc, char **argv)
{
	enum { OPT_SHARD = 256, OPT_SIDE, OPT_THREADS, OPT_KEEP_PNG, OPT_QUALITY, OPT_DECODE_MEM, OPT_HELP };
	static const struct option opts[] = {
		{"shard-size", required_argument, NULL, OPT_SHARD},
		{"max-side", required_argument, NULL, OPT_SIDE},
		{"threads", required_argument, NULL, OPT_THREADS},
		{"keep-png", no_argument, NULL, OPT_KEEP_PNG},
		{"quality", required_argument, NULL, OPT_QUALITY},
		{"decode-memory", required_argument, NULL, OPT_DECODE_MEM},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	struct dl_pack_options o = {.shard_bytes = 1024ull << 20, .quality = 90};
	char err[256];
	long mb;
	int opt, rv, mib;

	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_SHARD:
			rv = dl_optval_long("shard-size", optarg, 1, 1L << 20, &mb, err, sizeof(err));
			o.shard_bytes = rv == 0 ? (uint64_t)mb << 20 : 0;
			break;
		case OPT_SIDE: rv = dl_optval_int("max-side", optarg, 16, DL_IMAGE_MAX_SIDE, &o.max_side, err, sizeof(err)); break;
		case OPT_THREADS: rv = dl_optval_int("threads", optarg, 1, 1024, &o.threads, err, sizeof(err)); break;
		case OPT_QUALITY: rv = dl_optval_int("quality", optarg, 1, 100, &o.quality, err, sizeof(err)); break;
		case OPT_DECODE_MEM:
			rv = dl_optval_int("decode-memory", optarg, 16, 1 << 20, &mib, err, sizeof(err));
			o.decode_memory = rv == 0 ? (size_t)mib << 20 : 0;
			break;
		case OPT_KEEP_PNG: o.keep_png = 1; rv = 0; break;
		case 'h':
		case OPT_HELP: usage(stdout); return DL_EXIT_OK;
		case ':':
			fprintf(stderr, "dljob pack: option '%s' needs a value\n", argv[optind - 1]);
			usage(stderr);
			return DL_EXIT_USAGE;
		default:
			/* '?' for a long option given a value it does not take
			 * (optopt: its value), as for one that does not exist */
			if (optopt >= OPT_SHARD)
				fprintf(stderr, "dljob pack: option '%s' takes no value\n", argv[optind - 1]);
			else
				fprintf(stderr, "dljob pack: unknown option '%s'\n",
				        dl_optval_unknown(argv, optind, optopt, err, sizeof(err)));
			usage(stderr);
			return DL_EXIT_USAGE;
		}
		if (rv < 0) {
			fprintf(stderr, "dljob pack: %s\n", err);
			return DL_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "dljob pack: %s\n", argc - optind < 2 ? "SRC and DST are needed" : "more than SRC and DST given");
		usage(stderr);
		return DL_EXIT_USAGE;
	}
	o.src = argv[optind];
	o.dst = argv[optind + 1];
	return dl_pack(&o) == 0 ? DL_EXIT_OK : DL_EXIT_ERROR;
}
