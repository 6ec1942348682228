/* dljob plan --model M --batch B [--precision P] [--backend cuda|cpu] ...
 *
 * Prints the memory a training step plans on the device: the cuda
 * backend's one allocation, laid out by lifetime (engine/memplan.h,
 * engine/cuda/cuda_arena.c: the same code the backend allocates from), so
 * that a user can tell before submitting whether a model and batch fit a
 * GPU.  Needs no GPU. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cuda/cuda_arena.h"
#include "engine/memplan.h"
#include "engine/model.h"
#include "runtime/cli.h"
#include "common/optval.h"
#include "runtime/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void usage(FILE *f)
{
	fprintf(f,
	"Usage: dljob plan --model M --batch B [--precision P] [--backend cuda|cpu]\n"
	"                  [--image CxHxW] [--classes K] [--workspace BYTES] [--sms N]\n"
	"Print the device memory one training step of the cuda backend plans (its one\n"
	"allocation, buffers sharing memory once dead), without a GPU: a line\n"
	"peak_bytes N, then its parts.\n"
	"  --model M          %s\n"
	"  --batch B          samples per GPU (1-65536)\n"
	"  --precision P      auto|fp32|bf16|fp16 (default auto: bf16, what training picks\n"
	"                     on a GPU with bf16 tensor cores, compute capability 8.0+)\n"
	"  --backend cuda|cpu cuda (default); the cpu backend does not allocate by plan\n"
	"  --image CxHxW      input shape (default 3x224x224; 3x32x32 for resnet20/32/56)\n"
	"  --classes K        classifier outputs (default 1000; 10 for resnet20/32/56)\n"
	"  --workspace BYTES  cuDNN workspace counted: the most the convolution algorithms\n"
	"                     cuDNN picks on the GPU need (default 1073741824, the least\n"
	"                     limit the backend sets; it allows up to an eighth of the free\n"
	"                     device memory, at most 8 GiB)\n"
	"  --sms N            multiprocessors of the GPU, for the BN partial sums (default 132)\n"
	"  --help             this text\n", dl_model_names());
}

static int parse_image(const char *s, int *c, int *h, int *w)
{
	char tail;
	if (sscanf(s, "%dx%dx%d%c", c, h, w, &tail) != 3 || *c < 1 || *h < 1 || *w < 1 || *c > 4096 || *h > 16384 ||
	    *w > 16384)
		return -1;
	return 0;
}

int dl_plan_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' }, { "batch", required_argument, NULL, 'b' },
		{ "precision", required_argument, NULL, 'p' }, { "backend", required_argument, NULL, 'k' },
		{ "image", required_argument, NULL, 'i' }, { "classes", required_argument, NULL, 'c' },
		{ "workspace", required_argument, NULL, 'w' }, { "sms", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *model = NULL, *image = NULL, *backend = "cuda";
	char err[1024], q[256];
	int batch = 0, prec = DL_BF16, classes = 0, sms = 132, o, ic, ih, iw;
	uint64_t ws = (uint64_t)1 << 30;

	opterr = 0;
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int bad = 0;
		switch (o) {
		case 'm':
			model = optarg;
			break;
		case 'b':
			bad = dl_optval_int("batch", optarg, 1, 65536, &batch, err, sizeof err);
			break;
		case 'p':
			/* auto: what the cuda backend picks on a GPU with bf16
			 * tensor cores (dlc_auto_precision): the GPU is not here */
			prec = dl_precision_is_auto(optarg) ? DL_BF16 : dl_precision_parse(optarg);
			if (prec < 0) {
				fprintf(stderr, "dljob plan: --precision=%s: expected auto, fp32, bf16 or fp16\n",
					dl_optval_escape(optarg, q, sizeof q));
				return DL_EXIT_USAGE;
			}
			break;
		case 'k':
			backend = optarg;
			break;
		case 'i':
			image = optarg;
			break;
		case 'c':
			bad = dl_optval_int("classes", optarg, 1, 1 << 20, &classes, err, sizeof err);
			break;
		case 'w':
			bad = dl_optval_u64("workspace", optarg, &ws, err, sizeof err);
			if (!bad && ws > ((uint64_t)1 << 40))
				bad = dl_errf(err, sizeof err, "--workspace: %s is more than 1 TiB",
					      dl_optval_escape(optarg, q, sizeof q));
			break;
		case 's':
			bad = dl_optval_int("sms", optarg, 1, 4096, &sms, err, sizeof err);
			break;
		case 'h':
			usage(stdout);
			return DL_EXIT_OK;
		default:
			fprintf(stderr, "dljob plan: unknown or incomplete option '%s' (see dljob plan --help)\n",
				dl_optval_escape(argv[optind - 1], q, sizeof q));
			return DL_EXIT_USAGE;
		}
		if (bad) {
			fprintf(stderr, "dljob plan: %s\n", err);
			return DL_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "dljob plan: unexpected argument '%s'\n", dl_optval_escape(argv[optind], q, sizeof q));
		return DL_EXIT_USAGE;
	}
	if (!model || !batch) {
		fprintf(stderr, "dljob plan: --model and --batch are required (see dljob plan --help)\n");
		return DL_EXIT_USAGE;
	}
	if (!dl_model_known(model)) {
		fprintf(stderr, "dljob plan: --model=%s: unknown (known: %s)\n", dl_optval_escape(model, q, sizeof q),
			dl_model_names());
		return DL_EXIT_USAGE;
	}
	if (strcmp(backend, "cuda") != 0) {
		if (strcmp(backend, "cpu") == 0)
			fprintf(stderr, "dljob plan: --backend=cpu: the cpu backend does not allocate from a plan (it "
				"allocates its buffers in host memory as it builds its primitives); only --backend=cuda "
				"is planned\n");
		else
			fprintf(stderr, "dljob plan: --backend=%s: expected cuda or cpu\n",
				dl_optval_escape(backend, q, sizeof q));
		return DL_EXIT_USAGE;
	}
	int cifar = !strcmp(model, "resnet20") || !strcmp(model, "resnet32") || !strcmp(model, "resnet56");
	ic = 3, ih = iw = cifar ? 32 : 224;
	if (image && parse_image(image, &ic, &ih, &iw)) {
		fprintf(stderr, "dljob plan: --image=%s: expected CxHxW such as 3x224x224\n",
			dl_optval_escape(image, q, sizeof q));
		return DL_EXIT_USAGE;
	}
	if (!classes)
		classes = cifar ? 10 : 1000;

	struct dl_graph g;
	struct dl_mp mp;
	if (dl_model_build(&g, model, ic, ih, iw, classes, 0, 0, err, sizeof err)) {
		fprintf(stderr, "dljob plan: %s\n", err);
		return DL_EXIT_USAGE;
	}
	struct dlc_arena_in in = { .n = batch, .esize = prec == DL_FP32 ? 4 : 2, .ws_bytes = (size_t)ws,
				   .bn_part_floats = dlc_arena_bn_part(&g, batch, sms) };
	if (dlc_arena_plan(&g, &in, &mp, err, sizeof err)) {
		dl_model_free(&g);
		fprintf(stderr, "dljob plan: %s\n", err);
		return DL_EXIT_ERROR;
	}
	size_t part[DL_MP_NKIND], other = 0, all = 0;
	for (int k = 0; k < DL_MP_NKIND; k++) {
		part[k] = dl_mp_persistent_bytes(&mp, k);
		if (k != DL_MP_ACT)
			other += part[k];
	}
	for (int k = 0; k < mp.n; k++)
		all += dl_mp_size(&mp, &mp.b[k]);
	printf("model %s batch %d precision %s backend cuda image %dx%dx%d classes %d\n", g.model, batch,
	       dl_precision_name((enum dl_precision)prec), ic, ih, iw, classes);
	printf("peak_bytes %zu\n", mp.total);
	printf("peak_gib %.3f\n", mp.total / GIB);
	printf("weights %zu\n", part[DL_MP_WEIGHTS]);
	printf("gradients %zu\n", part[DL_MP_GRADS]);
	printf("optimizer %zu\n", part[DL_MP_OPTIM]);
	printf("activations %zu\n", mp.total - other);
	printf("workspace %zu\n", part[DL_MP_WORK]);
	printf("io %zu\n", part[DL_MP_IO]);
	printf("live_peak_bytes %zu\n", dl_mp_live_peak(&mp, NULL));
	printf("unshared_bytes %zu\n", all);
	dl_mp_free(&mp);
	dl_model_free(&g);
	return fflush(stdout) == 0 ? DL_EXIT_OK : DL_EXIT_ERROR;
}
