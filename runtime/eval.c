/* `dljob eval`: top-1/top-5, loss, per-class accuracy and the confusion
 * matrix of a model's weights on a dataset's held-out split (or its training
 * split), as a table on stdout and as JSON.  Under srun it runs like
 * training: every rank evaluates its share of the split (the loader's
 * rank/world sharding, every sample exactly once) and the counts are summed
 * through the job's dl_comm.  The weights go in through the backend's
 * state_in (dl_weights_init: torchvision state_dict names, strict).  The
 * eval transform is the data pipeline's: torchvision's Resize(round(size /
 * 0.875)) + CenterCrop(size), /255, normalize (--image-size, --normalize). */
#include "config.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <omp.h>

#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/data/dataset.h"
#include "engine/model.h"
#include "runtime/cli.h"
#include "runtime/eval.h"
#include "runtime/opttab.h"
#include "common/optval.h"
#include "world/world.h"

struct eval_opts {
	const char *model, *weights, *data, *backend, *json, *precision;
	int split;             /* DL_SPLIT_EVAL or DL_SPLIT_TRAIN */
	int image_size, batch, threads, loader_threads, decode_memory_mib;
	double timeout_s;
	struct dl_data_options norm;
	int help;
};

/* Everything one evaluation owns, so cleanup is one function. */
struct eval_run {
	struct dl_dataset *ds;
	struct dl_world world;
	int world_open, have_graph;
	struct dl_graph g;
	const struct dl_backend_ops *ops;
	struct dl_backend *be;
	struct dl_loader *loader;
	int *pred;
	/* top1, top5, loss sum, samples; then per class (K each) samples and
	 * correct; then, with have_conf, the K x K confusion counts (rows: true
	 * class) */
	double *acc;
	int have_conf;
	const char *precision; /* the one --precision resolved to (never "auto") */
	char prec_msg[448];    /* what auto resolved to, and why ("" when named) */
};

/* Past this many classes the confusion matrix (K^2 counts, reduced over the
 * ranks) is left out; per-class accuracy stays. */
#define EVAL_MAX_CONF_CLASSES 2048

/* dljob eval's options (runtime/opttab.h says how to read a row). */
#define EVAL_OPTIONS(X, H) \
	X(MODEL, "model", required_argument, "NAME", NONE, 0, 0, model, \
	  "the architecture the weights are for (required)") \
	X(WEIGHTS, "weights", required_argument, "PATH", NONE, 0, 0, weights, \
	  "safetensors with torchvision state_dict names (required)") \
	X(DATA, "data", required_argument, "SPEC", NONE, 0, 0, data, \
	  "as for training: an ImageFolder, shards, IDX files\n(default " DL_DEFAULT_DATA ")") \
	X(SPLIT, "split", required_argument, "val|train", NONE, 0, 0, split, "which split (default val)") \
	X(SIZE, "image-size", required_argument, "N", INT, 0, 4096, image_size, \
	  "input side for JPEG/PNG data (default 224): Resize(round(N/0.875)),\nCenterCrop(N), as torchvision") \
	X(NORM, "normalize", required_argument, "N", NONE, 0, 0, norm, "imagenet (default), none, or MR,MG,MB:SR,SG,SB") \
	X(BATCH, "batch", required_argument, "N", INT, DL_BATCH_MIN, DL_BATCH_MAX, batch, \
	  "samples per rank per forward (default 64)") \
	X(BACKEND, "backend", required_argument, "B", NONE, 0, 0, backend, "auto|cpu|ref|cuda (default auto)") \
	X(PRECISION, "precision", required_argument, "P", NONE, 0, 0, precision, "auto|fp32|bf16|fp16 (default auto: bf16 on a GPU with\n" \
	  "tensor cores, fp32 on the cpu, as for training)") \
	X(JSON, "json", required_argument, "PATH", NONE, 0, 0, json, \
	  "also write the results as JSON to PATH ('-': stdout, no table)") \
	X(THREADS, "threads", required_argument, "N", INT, 0, 4096, threads, \
	  "compute threads (default 0: all CPUs of the task)") \
	X(LTHREADS, "loader-threads", required_argument, "N", INT, 0, 4096, loader_threads, \
	  "data worker threads (default 0: automatic)") \
	X(DECODE_MEM, "decode-memory", required_argument, "MIB", INT, 16, 1 << 20, decode_memory_mib, \
	  "memory the data threads share for reading and decoding\n" \
	  "JPEG/PNG samples (default 2048; an image needing more is a bad sample)") \
	X(TIMEOUT, "timeout", required_argument, "S", DBL, DL_TIMEOUT_MIN, DL_TIMEOUT_MAX, timeout_s, \
	  "seconds to wait for peers (default 300)") \
	X(HELP, "help", no_argument, NULL, NONE, 0, 0, help, "this text")

#define DL_OPT_STRUCT struct eval_opts
DL_OPT_DEFINE(EVAL_OPTIONS, eval)
const struct dl_opt_table dl_eval_opttab = DL_OPT_TABLE(eval, "dljob eval");

static void eval_usage(FILE *f)
{
	fprintf(f,
	"Usage: dljob eval --model NAME --weights PATH [OPTION]...\n"
	"Evaluate weights on a dataset: top-1/top-5, loss, per-class accuracy and the\n"
	"confusion matrix (rows: true class, columns: predicted), as a table and JSON.\n"
	"Under srun every rank evaluates its share and the counts are summed.\n"
	"\n");
	dl_opt_usage(f, &dl_eval_opttab);
}

static int eval_parse(struct eval_opts *o, int argc, char **argv, char *err, size_t errlen)
{
	int opt;
	memset(o, 0, sizeof(*o));
	o->data = DL_DEFAULT_DATA;
	o->backend = "auto";
	o->precision = DL_PRECISION_AUTO;
	o->split = DL_SPLIT_EVAL;
	o->image_size = 224;
	o->batch = 64;
	o->timeout_s = 300;
	optind = 1;
	while ((opt = dl_opt_next(&dl_eval_opttab, ":", argc, argv, o, err, errlen)) != -1) {
		int rv = 0;
		switch (opt) {
		case DL_OPT_ERROR: return -1;
		case OPT_MODEL: o->model = optarg; break;
		case OPT_WEIGHTS: o->weights = optarg; break;
		case OPT_DATA: o->data = optarg; break;
		case OPT_SPLIT:
			if (strcmp(optarg, "val") && strcmp(optarg, "train"))
				rv = dl_errf(err, errlen, "--split: '%s' is not val or train", optarg);
			o->split = strcmp(optarg, "train") == 0 ? DL_SPLIT_TRAIN : DL_SPLIT_EVAL;
			break;
		case OPT_NORM: rv = dl_cli_parse_norm(optarg, &o->norm, err, errlen); break;
		case OPT_BACKEND: rv = dl_cli_engine_opt("backend", optarg, &o->backend, err, errlen); break;
		case OPT_PRECISION: rv = dl_cli_engine_opt("precision", optarg, &o->precision, err, errlen); break;
		case OPT_JSON:
			if (*optarg == '\0')
				rv = dl_errf(err, errlen, "--json: empty path");
			o->json = optarg;
			break;
		case OPT_HELP: o->help = 1; break;
		default: break; /* a number, parsed by dl_opt_next */
		}
		if (rv < 0)
			return -1;
	}
	if (o->help)
		return 0;
	if (optind < argc)
		return dl_errf(err, errlen, "unexpected argument '%s' (see dljob eval --help)", argv[optind]);
	if (!o->model)
		return dl_errf(err, errlen, "--model is required (the architecture of --weights, e.g. resnet18)");
	if (!dl_model_known(o->model))
		return dl_errf(err, errlen, "--model: unknown model '%s' (known: %s)", o->model, dl_model_names());
	if (!o->weights)
		return dl_errf(err, errlen, "--weights is required (a safetensors file)");
	return 0;
}

/* The name of class c: the ImageFolder's directory name, else its number. */
static const char *class_name(const struct dl_dataset *ds, int c, char *buf, size_t len)
{
	const char *name = dl_dataset_class_name(ds, c);
	if (name)
		return name;
	snprintf(buf, len, "%d", c);
	return buf;
}

/* class_name for the terminal: control bytes as '?' (a directory name is
 * the user's, not ours to send to a terminal), at most len-1 bytes. */
static const char *class_label(const struct dl_dataset *ds, int c, char *buf, size_t len)
{
	char nb[32];
	const char *name = class_name(ds, c, nb, sizeof(nb));
	size_t i = 0;
	for (; name[i] && i + 1 < len; i++)
		buf[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
	buf[i] = 0;
	return buf;
}

/* The results as one JSON document (rank 0); NULL when out of memory. */
static json_t *results_json(const struct eval_opts *o, const struct eval_run *r, const char *backend, int ranks)
{
	int K = r->g.num_classes;
	const double *acc = r->acc, *cls_n = r->acc + 4, *cls_ok = cls_n + K, *conf = cls_ok + K;
	char nb[32], norm[160];
	struct dl_data_options dn = o->norm;
	const float *m = r->ds->u8_mean, *s = r->ds->u8_std;
	/* what the dataset really normalizes with (IDX data keeps its own) */
	if (m && s && r->ds->channels == 3) {
		dn.have_norm = 1;
		memcpy(dn.mean, m, sizeof(dn.mean));
		memcpy(dn.std, s, sizeof(dn.std));
	}
	if (m && s && r->ds->channels == 1)
		snprintf(norm, sizeof(norm), "%g:%g", m[0], s[0]);
	else
		dl_cli_norm_str(&dn, norm, sizeof(norm));
	json_t *root = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:i}",
				 "model", o->model, "weights", o->weights, "data", o->data,
				 "dataset", r->ds->kind, "split", o->split == DL_SPLIT_TRAIN ? "train" : "val",
				 "image_size", r->ds->height, "channels", r->ds->channels,
				 "normalize", norm, "backend", backend, "precision", r->precision, "ranks", ranks, "samples", (int)acc[3],
				 "top1", acc[3] > 0 ? acc[0] / acc[3] : 0.0, "top5", acc[3] > 0 ? acc[1] / acc[3] : 0.0,
				 "loss", acc[3] > 0 ? acc[2] / acc[3] : 0.0, "correct", (int)acc[0]);
	json_t *classes = json_array(), *per = json_array(), *cm = r->have_conf ? json_array() : json_null();
	int oom = !root || !classes || !per || !cm;
	for (int t = 0; t < K && !oom; t++) {
		if (r->have_conf) {
			json_t *row = json_array();
			oom |= !row;
			for (int p = 0; p < K && !oom; p++)
				oom |= json_array_append_new(row, json_integer((json_int_t)conf[(size_t)t * K + p])) != 0;
			oom |= json_array_append_new(cm, row) != 0;
		}
		/* a directory name that is not UTF-8 cannot be a JSON string:
		 * the class number instead */
		json_t *name = json_string(class_name(r->ds, t, nb, sizeof(nb)));
		if (!name) {
			snprintf(nb, sizeof(nb), "%d", t);
			name = json_string(nb);
		}
		json_t *pc = json_pack("{s:O, s:i, s:i, s:f}", "class", name, "samples", (int)cls_n[t], "correct",
				       (int)cls_ok[t], "accuracy", cls_n[t] > 0 ? cls_ok[t] / cls_n[t] : 0.0);
		oom |= json_array_append_new(classes, name) != 0 || json_array_append_new(per, pc) != 0;
	}
	oom = oom || json_object_set(root, "classes", classes) || json_object_set(root, "per_class", per) ||
	      json_object_set(root, "confusion", cm);
	json_decref(classes);
	json_decref(per);
	json_decref(cm);
	if (oom) {
		json_decref(root);
		return NULL;
	}
	return root;
}

static void print_table(FILE *f, const struct eval_opts *o, const struct eval_run *r, const json_t *res)
{
	int K = r->g.num_classes;
	const double *acc = r->acc, *cls_n = r->acc + 4, *cls_ok = cls_n + K, *conf = cls_ok + K;
	char nb[32];
	fprintf(f, "model %s  weights %s\ndata %s (%s split, %d samples, %dx%d, normalize %s)\n", o->model, o->weights,
		o->data, o->split == DL_SPLIT_TRAIN ? "train" : "val", (int)acc[3], r->ds->height, r->ds->width,
		json_string_value(json_object_get(res, "normalize")));
	fprintf(f, "top-1 %.2f%% (%d/%d)  top-5 %.2f%%  loss %.4f\n", acc[3] > 0 ? 100 * acc[0] / acc[3] : 0.0,
		(int)acc[0], (int)acc[3], acc[3] > 0 ? 100 * acc[1] / acc[3] : 0.0, acc[3] > 0 ? acc[2] / acc[3] : 0.0);
	fprintf(f, "\n%-24s %8s %8s %9s\n", "class", "samples", "correct", "accuracy");
	for (int t = 0; t < K; t++)
		fprintf(f, "%-24.24s %8d %8d %8.2f%%\n", class_label(r->ds, t, nb, sizeof(nb)), (int)cls_n[t],
			(int)cls_ok[t], cls_n[t] > 0 ? 100 * cls_ok[t] / cls_n[t] : 0.0);
	if (K > 20) {
		if (r->have_conf)
			fprintf(f, "\n(confusion matrix of %d classes: in the JSON, --json)\n", K);
		else
			fprintf(f, "\n(no confusion matrix past %d classes)\n", EVAL_MAX_CONF_CLASSES);
		return;
	}
	fprintf(f, "\nconfusion (rows: true class, columns: predicted)\n%-12s", "");
	for (int p = 0; p < K; p++)
		fprintf(f, " %7.7s", class_label(r->ds, p, nb, sizeof(nb)));
	fprintf(f, "\n");
	for (int t = 0; t < K; t++) {
		fprintf(f, "%-12.12s", class_label(r->ds, t, nb, sizeof(nb)));
		for (int p = 0; p < K; p++)
			fprintf(f, " %7d", (int)conf[(size_t)t * K + p]);
		fprintf(f, "\n");
	}
}

/* Build, load, run and reduce; rank 0 reports.  0 or -1 with err. */
static int eval_run(const struct eval_opts *o, struct eval_run *r, char *err, size_t errlen)
{
	char lerr[4096];
	struct dl_data_options dopt = o->norm;
	dopt.image_size = o->image_size;
	dopt.threads = o->loader_threads;
	dopt.decode_memory = (size_t)o->decode_memory_mib << 20;
	dopt.max_bad_fraction = 0.01;
	dopt.cache_dir = NULL;
	if (dl_dataset_open(o->data, &dopt, &r->ds, lerr, sizeof(lerr)) < 0)
		return dl_errf(err, errlen, "--data %s: %s", o->data, lerr);
	if (r->ds->count[o->split] == 0)
		return dl_errf(err, errlen, "--data %s has no %s split", o->data, o->split == DL_SPLIT_TRAIN ? "train" : "val");
	if (dl_world_open(&r->world, o->timeout_s, lerr, sizeof(lerr)) < 0)
		return dl_errf(err, errlen, "joining the job: %s", lerr);
	r->world_open = 1;
	struct dl_comm *comm = &r->world.comm;
	if (o->threads > 0)
		omp_set_num_threads(o->threads);
	if (dl_model_build(&r->g, o->model, r->ds->channels, r->ds->height, r->ds->width, r->ds->num_classes, 0, 0,
			   err, errlen) < 0)
		return -1;
	r->have_graph = 1;
	r->ops = dl_backend_find(o->backend, lerr, sizeof(lerr));
	if (!r->ops)
		return dl_errf(err, errlen, "--backend %s: %s", o->backend, lerr);
	const char *backend = r->ops->name;
	int prec = dl_backend_precision(r->ops, o->precision, NULL, r->prec_msg, sizeof(r->prec_msg));
	if (prec < 0)
		return dl_errf(err, errlen, "%s", r->prec_msg);
	r->precision = dl_precision_name((enum dl_precision)prec);
	struct dl_backend_opts bo = {.precision = (enum dl_precision)prec};
	if (!(r->be = r->ops->create(&r->g, o->batch, &bo, err, errlen)))
		return -1;
	/* the weights, checked against the model, then into the backend */
	if (dl_weights_init(o->weights, &r->g, 0, lerr, sizeof(lerr)) < 0)
		return dl_errf(err, errlen, "--weights: %s", lerr);
	if (r->ops->state_in(r->be, NULL) < 0)
		return dl_errf(err, errlen, "loading %s into the %s backend: %s", o->weights, backend, r->ops->error(r->be));
	struct dl_loader_options lo = {.batch = o->batch, .threads = o->loader_threads, .prefetch = 2,
				       .rank = comm->rank, .world = comm->size, .shuffle = 0, .drop_last = 0};
	if (!(r->loader = dl_loader_create(r->ds, (enum dl_split)o->split, &lo, err, errlen)))
		return -1;
	size_t K = (size_t)r->g.num_classes;
	r->pred = calloc((size_t)o->batch, sizeof(int));
	r->have_conf = K <= EVAL_MAX_CONF_CLASSES;
	size_t n_acc = 4 + 2 * K + (r->have_conf ? K * K : 0);
	r->acc = calloc(n_acc, sizeof(double));
	if (!r->pred || !r->acc)
		return dl_errf(err, errlen, "out of memory for a %zu x %zu confusion matrix", K, K);
	if (dl_loader_start_epoch(r->loader, 0, 0, err, errlen) < 0)
		return -1;
	for (;;) {
		const float *x;
		const int *y;
		int n, got = dl_loader_next_ref(r->loader, &x, &y, &n, err, errlen);
		if (got < 0)
			return -1;
		if (got == 0)
			break;
		if (n == 0)
			continue; /* this rank's share ran out one batch early */
		struct dl_batch in = {.x = x, .labels = y};
		struct dl_eval_result er;
		if (r->ops->eval_step(r->be, &in, n, r->pred, &er) < 0)
			return dl_errf(err, errlen, "eval: %s", r->ops->error(r->be));
		r->acc[0] += er.top1;
		r->acc[1] += er.top5;
		r->acc[2] += er.loss_sum;
		r->acc[3] += n;
		double *cls_n = r->acc + 4, *cls_ok = cls_n + K, *conf = cls_ok + K;
		for (int i = 0; i < n; i++) {
			cls_n[y[i]] += 1;
			cls_ok[y[i]] += r->pred[i] == y[i];
			if (r->have_conf)
				conf[(size_t)y[i] * K + (size_t)r->pred[i]] += 1;
		}
	}
	struct dl_loader_stats ls;
	dl_loader_get_stats(r->loader, &ls);
	if (ls.bad_samples && comm->rank == 0)
		fprintf(stderr, "dljob: eval: %llu unreadable samples were replaced by others (see above)\n",
			(unsigned long long)ls.bad_samples);
	if (comm->allreduce_sum_f64(comm, r->acc, n_acc, err, errlen) < 0)
		return -1;
	if (comm->rank != 0)
		return 0;
	if (r->prec_msg[0])
		fprintf(stderr, "dljob eval: %s\n", r->prec_msg);
	json_t *res = results_json(o, r, backend, comm->size);
	if (!res)
		return dl_errf(err, errlen, "out of memory for the results");
	int rv = 0;
	if (!o->json || strcmp(o->json, "-") != 0)
		print_table(stdout, o, r, res);
	if (o->json && json_dump_file(res, strcmp(o->json, "-") == 0 ? "/dev/stdout" : o->json,
				      JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8)) != 0)
		rv = dl_errf(err, errlen, "--json: cannot write %s: %s", o->json, strerror(errno));
	if (o->json && strcmp(o->json, "-") == 0)
		printf("\n");
	json_decref(res);
	return rv;
}

int dl_eval_main(int argc, char **argv)
{
	struct eval_opts o;
	struct eval_run r;
	char err[4608];
	int rv = DL_EXIT_ERROR;

	memset(&r, 0, sizeof(r));
	if (eval_parse(&o, argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob eval: %s\n", err);
		return DL_EXIT_USAGE;
	}
	if (o.help) {
		eval_usage(stdout);
		return DL_EXIT_OK;
	}
	if (eval_run(&o, &r, err, sizeof(err)) < 0) {
		if (r.world_open && r.world.comm.size > 1)
			fprintf(stderr, "dljob eval: rank %d: %s\n", r.world.comm.rank, err);
		else
			fprintf(stderr, "dljob eval: %s\n", err);
		if (r.world_open)
			dl_world_abort(&r.world, err);
	} else {
		rv = DL_EXIT_OK;
	}
	if (r.loader)
		dl_loader_destroy(r.loader);
	if (r.be)
		r.ops->destroy(r.be);
	if (r.have_graph)
		dl_model_free(&r.g);
	if (r.world_open)
		dl_world_close(&r.world);
	if (r.ds)
		dl_dataset_close(r.ds);
	free(r.pred);
	free(r.acc);
	return rv;
}
