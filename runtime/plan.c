/* dljob plan --model M --batch B [--precision P] [--backend cuda|cpu] ...
 *
 * Prints the memory a training step plans on the device: the cuda
 * backend's one allocation, laid out by lifetime (engine/memplan.h,
 * engine/cuda/cuda_arena.c: the same code the backend allocates from), so
 * that a user can tell before submitting whether a model and batch fit a
 * GPU.  Needs no GPU.  --layout fused plans the layout of BN+ReLU fused
 * into the next convolution (dlc_arena_in.fused), which the backend does
 * not run yet. */
#include "config.h"

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

/* What the command line sets, in the option table's types. */
struct plan_args {
	const char *model, *image, *backend, *layout;
	int batch, prec, classes, sms;
	uint64_t ws;
};

/* dljob plan's options (runtime/opttab.h says how to read a row). */
#define PLAN_OPTIONS(X, H) \
	X(MODEL, "model", required_argument, "M", NONE, 0, 0, model, "the model (required; below)") \
	X(BATCH, "batch", required_argument, "B", INT, DL_BATCH_MIN, DL_BATCH_MAX, batch, \
	  "samples per GPU, %R (required)") \
	X(PRECISION, "precision", required_argument, "P", NONE, 0, 0, prec, "auto|fp32|bf16|fp16 (default auto: bf16, what training picks\n" \
	  "on a GPU with bf16 tensor cores, compute capability 8.0+)") \
	X(BACKEND, "backend", required_argument, "cuda|cpu", NONE, 0, 0, backend, \
	  "cuda (default); the cpu backend does not allocate by plan") \
	X(IMAGE, "image", required_argument, "CxHxW", NONE, 0, 0, image, \
	  "input shape (default 3x224x224; 3x32x32 for resnet20/32/56)") \
	X(CLASSES, "classes", required_argument, "K", INT, 1, 1 << 20, classes, \
	  "classifier outputs, %R (default 1000; 10 for resnet20/32/56)") \
	X(WORKSPACE, "workspace", required_argument, "BYTES", U64, 0, (double)((uint64_t)1 << 40), ws, \
	  "cuDNN workspace counted, %R: the most the convolution\n" \
	  "algorithms cuDNN picks on the GPU need (default 1073741824, the\n" \
	  "least limit the backend sets; it allows up to an eighth of the\n" \
	  "free device memory, at most 8 GiB)") \
	X(SMS, "sms", required_argument, "N", INT, 1, 4096, sms, \
	  "multiprocessors of the GPU, for the BN partial sums, %R\n(default 132)") \
	X(LAYOUT, "layout", required_argument, "plain|fused", NONE, 0, 0, layout, \
	  "plain (default): the layout the backend runs now; fused:\n" \
	  "each BN+ReLU output that only convolutions read is computed\n" \
	  "in their prologue, never stored (planned, not yet run)") \
	X(HELP, "help", no_argument, NULL, NONE, 0, 0, model, "this text")

#define DL_OPT_STRUCT struct plan_args
DL_OPT_DEFINE(PLAN_OPTIONS, plan)
const struct dl_opt_table dl_plan_opttab = DL_OPT_TABLE(plan, "dljob plan");

static void usage(FILE *f)
{
	fprintf(f,
	"Usage: dljob plan --model M --batch B [--precision P] [--backend cuda|cpu]\n"
	"                  [--image CxHxW] [--classes K] [--workspace BYTES] [--sms N]\n"
	"                  [--layout plain|fused]\n"
	"Print the device memory one training step of the cuda backend plans (its one\n"
	"allocation, buffers sharing memory once dead), without a GPU: a line\n"
	"peak_bytes N, then its parts.\n");
	dl_opt_usage(f, &dl_plan_opttab);
	fprintf(f, "Models: %s\n", dl_model_names());
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
	struct plan_args a = {.backend = "cuda", .layout = "plain", .prec = DL_BF16, .sms = 132, .ws = (uint64_t)1 << 30};
	const char *model, *image, *backend;
	char err[1024], q[256];
	int batch, prec, classes, sms, o, ic, ih, iw;
	uint64_t ws;

	optind = 1;
	while ((o = dl_opt_next(&dl_plan_opttab, ":", argc, argv, &a, err, sizeof err)) != -1) {
		switch (o) {
		case OPT_MODEL:
			a.model = optarg;
			break;
		case OPT_PRECISION:
			/* auto: what the cuda backend picks on a GPU with bf16
			 * tensor cores (dlc_auto_precision): the GPU is not here */
			a.prec = dl_precision_is_auto(optarg) ? DL_BF16 : dl_precision_parse(optarg);
			if (a.prec < 0) {
				fprintf(stderr, "dljob plan: --precision=%s: expected auto, fp32, bf16 or fp16\n",
					dl_optval_escape(optarg, q, sizeof q));
				return DL_EXIT_USAGE;
			}
			break;
		case OPT_BACKEND:
			a.backend = optarg;
			break;
		case OPT_IMAGE:
			a.image = optarg;
			break;
		case OPT_LAYOUT:
			if (strcmp(optarg, "plain") && strcmp(optarg, "fused")) {
				fprintf(stderr, "dljob plan: --layout=%s: expected plain or fused\n",
					dl_optval_escape(optarg, q, sizeof q));
				return DL_EXIT_USAGE;
			}
			a.layout = optarg;
			break;
		case OPT_HELP:
			usage(stdout);
			return DL_EXIT_OK;
		case DL_OPT_ERROR:
			fprintf(stderr, "dljob plan: %s\n", err);
			return DL_EXIT_USAGE;
		default: /* a number, parsed by dl_opt_next */
			break;
		}
	}
	model = a.model;
	image = a.image;
	backend = a.backend;
	batch = a.batch;
	prec = a.prec;
	classes = a.classes;
	sms = a.sms;
	ws = a.ws;
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
				   .bn_part_floats = dlc_arena_bn_part(&g, batch, sms),
				   .fused = !strcmp(a.layout, "fused") };
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
	printf("layout %s\n", in.fused ? "fused" : "plain");
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
