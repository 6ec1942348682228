/* dljob's training command line.  Order matters here: every option, the
 * model and the backend are checked before the output directory is
 * created, and a run that fails after it (a dataset or resume file that
 * cannot be read, a peer that never came) removes the directories it
 * created while still empty, so a typo never leaves an empty run directory
 * behind (or clobbers a real one). */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/data/dataset.h"
#include "engine/model.h"
#include "runtime/cli.h"
#include "runtime/opttab.h"
#include "runtime/eval.h"
#include "runtime/pack.h"
#include "runtime/plan.h"
#include "runtime/report.h"
#include "runtime/topo.h"
#include "world/env.h"
#include "common/handoff.h"
#include "common/models.h"
#include "common/optval.h"
#include "runtime/plot.h"
#include "world/world.h"

/* dljob's subcommands (runtime/main.c dispatches; --help lists them).
 * Adding one: a row here. */
const struct dl_subcommand dl_subcommands[] = {
	{ "pack", dl_pack_main, "SRC DST [OPTION]...  pack an image folder into shards", &dl_pack_opttab },
	{ "topo", dl_topo_main, "--tasks N [--xml FILE] [--gpus LIST]  explain the node mapping", &dl_topo_opttab },
	{ "report", dl_report_main, "RUN_DIR...         throughput, phases, scaling of runs (--help)", &dl_report_opttab },
	{ "eval", dl_eval_main, "--model M --weights PATH [OPTION]...  evaluate weights (dljob eval --help)", &dl_eval_opttab },
	{ "plan", dl_plan_main, "--model M --batch B [OPTION]...  planned GPU memory of a step (--help)", &dl_plan_opttab },
};
const size_t dl_n_subcommands = sizeof(dl_subcommands) / sizeof(dl_subcommands[0]);

/* The one piece of global state: what the signal handler may touch.  The
 * engine only sees it through dl_train_config.stop. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	stop_requested = sig;
}

/* The training command line: one row per option, in the order --help
 * lists them.  Usage, getopt's table and the limits of the numeric
 * options all come from here (runtime/opttab.h says how to read a row);
 * adding an option is a row (and, unless it is a plain number, a case in
 * dl_cli_parse's switch).  field: a member of struct dl_cli. */
#define CLI_OPTIONS(X, H) \
	H("Model and data:") \
	X(MODEL, "model", required_argument, "NAME", NONE, 0, 0, cfg, \
	  "resnet18|34|50|101|152, resnet20|32|56, convnet (required)") \
	X(DATA, "data", required_argument, "SPEC", NONE, 0, 0, cfg, \
	  "fashion-mnist[+aug]:DIR, synthetic[:C,H,W,K[,N]] or DIR\n(default " DL_DEFAULT_DATA ")") \
	X(SYNTHETIC, "synthetic", no_argument, NULL, NONE, 0, 0, cfg, "same as --data synthetic") \
	X(IMAGE_SIZE, "image-size", required_argument, "N", INT, 0, 4096, cfg.image_size, \
	  "input side for JPEG/PNG data (default: 224; 0: native)") \
	X(NORMALIZE, "normalize", required_argument, "N", NONE, 0, 0, cfg, \
	  "JPEG/PNG data: imagenet (default), none, or MR,MG,MB:SR,SG,SB\n(per-channel mean and std of x/255)") \
	X(INIT, "init", required_argument, "PATH", NONE, 0, 0, cfg, \
	  "start from these weights (safetensors, torchvision names;\n" \
	  "strict: every missing, unexpected or mis-shaped tensor named)") \
	X(INIT_HEAD, "init-head", required_argument, "load|new", NONE, 0, 0, cfg, \
	  "new: a fresh classifier, for another class count (default load)") \
	H("Optimization:") \
	X(EPOCHS, "epochs", required_argument, "N", INT, DL_EPOCHS_MIN, DL_EPOCHS_MAX, cfg.epochs, \
	  "passes over the training split (default 90)") \
	X(BATCH, "batch", required_argument, "N", INT, DL_BATCH_MIN, DL_BATCH_MAX, cfg.batch, \
	  "samples per process per step (default 128)") \
	X(LR, "lr", required_argument, "X", DBL_MIN_OPEN, DL_LR_MIN, DL_LR_MAX, cfg.lr, \
	  "base learning rate for a global batch of 256 (default 0.1)") \
	X(SCHEDULE, "schedule", required_argument, "S", NONE, 0, 0, cfg, "step|cosine|poly|constant (default cosine)") \
	X(WARMUP, "warmup-epochs", required_argument, "X", DBL, 0, 100000, cfg.warmup_epochs, \
	  "linear warmup length in epochs, at most --epochs (default 0)") \
	X(MOMENTUM, "momentum", required_argument, "X", DBL_MAX_OPEN, 0, 1, cfg.momentum, \
	  "SGD momentum (default 0.9)") \
	X(NESTEROV, "nesterov", no_argument, NULL, NONE, 0, 0, cfg, "Nesterov momentum") \
	X(WD, "weight-decay", required_argument, "X", DBL_MAX_OPEN, 0, 1, cfg.weight_decay, \
	  "L2 penalty, not on BN/bias (default 1e-4)") \
	X(LS, "label-smoothing", required_argument, "X", DBL_MAX_OPEN, 0, 1, cfg.label_smoothing, "(default 0)") \
	X(LARS, "lars", no_argument, NULL, NONE, 0, 0, cfg, "layer-wise adaptive rate scaling") \
	X(ZIR, "zero-init-residual", no_argument, NULL, NONE, 0, 0, cfg, \
	  "zero the last BN gamma of every residual block") \
	X(SEED, "seed", required_argument, "N", U64, 0, 0, cfg.seed, \
	  "seed for init, shuffling, augmentation (default 0)") \
	H("Run control:") \
	X(OUT, "out", required_argument, "DIR", NONE, 0, 0, cfg, \
	  "output directory (default ./dljob-$SLURM_JOB_ID or ./dljob-out)") \
	X(RESUME, "resume", optional_argument, "[=PATH]", NONE, 0, 0, cfg, \
	  "continue from PATH, or from the newest checkpoint in --out") \
	X(STEPS, "steps", required_argument, "N", LONG, 0, (double)LONG_MAX, cfg.max_steps, \
	  "stop after N optimizer steps in total (0: no limit)") \
	X(EVAL, "eval", required_argument, "0|1", INT, 0, 1, cfg.eval, \
	  "evaluate on the held-out split every epoch (default 1)") \
	X(PRINT, "print-every", required_argument, "N", INT, 1, INT_MAX, cfg.print_every, \
	  "progress line and metrics record every N steps (default 50)") \
	X(BACKEND, "backend", required_argument, "B", NONE, 0, 0, cfg, \
	  "auto|cpu|ref|cuda (default auto: cuda if a GPU is visible, else cpu)") \
	X(PRECISION, "precision", required_argument, "P", NONE, 0, 0, cfg, \
	  "auto|fp32|bf16|fp16 (default auto: bf16 on a GPU with tensor\n" \
	  "cores, fp16 on one without bf16 ones (compute capability 7.x),\n" \
	  "fp32 on the cpu; the run says which); bf16 runs convolutions and\n" \
	  "activations in bfloat16 with fp32 master weights (cpu, cuda);\n" \
	  "fp16 with dynamic loss scaling (cuda only)") \
	X(CONV_ALGO, "conv-algo", required_argument, "A", NONE, 0, 0, cfg, \
	  "auto|direct|winograd: 3x3 convolutions of the cpu backend\n" \
	  "(default auto: Winograd for 3x3 stride-1 where it measured\n" \
	  "faster, direct elsewhere; ref and cuda: auto only)") \
	X(THREADS, "threads", required_argument, "N", INT, 0, 4096, cfg.threads, \
	  "compute threads (default 0: all CPUs of the task)") \
	X(LTHREADS, "loader-threads", required_argument, "N", INT, 0, 4096, cfg.loader_threads, \
	  "data worker threads (default 0: automatic)") \
	X(DECODE_MEM, "decode-memory", required_argument, "MIB", INT, 16, 1 << 20, cfg.decode_memory_mib, \
	  "memory the data threads share for reading and decoding\n" \
	  "JPEG/PNG samples (default 2048; an image needing more is a bad sample)") \
	X(TIMEOUT, "timeout", required_argument, "S", DBL, DL_TIMEOUT_MIN, DL_TIMEOUT_MAX, timeout_s, \
	  "seconds to wait for peers at startup and in collectives (default 300)") \
	X(HELP, "help", no_argument, NULL, NONE, 0, 0, cfg, "this text") \
	X(VERSION, "version", no_argument, NULL, NONE, 0, 0, cfg, "version and build information")

#define DL_OPT_STRUCT struct dl_cli
DL_OPT_DEFINE(CLI_OPTIONS, cli)
static const struct dl_opt_table cli_table = DL_OPT_TABLE(cli, "dljob");

void dl_cli_usage(FILE *f)
{
	fprintf(f,
	"Usage: dljob --model NAME [OPTION]...  train a ResNet (data-parallel under Slurm)\n");
	for (size_t i = 0; i < dl_n_subcommands; i++)
		fprintf(f, "       dljob %s %s\n", dl_subcommands[i].name, dl_subcommands[i].usage);
	dl_opt_usage(f, &cli_table);
}

/* dljob --list-options (runtime/cli.h). */
int dl_cli_list_options(FILE *f)
{
	dl_opt_list(f, "option ", &cli_table);
	for (size_t i = 0; i < dl_n_subcommands; i++) {
		char prefix[64];

		fprintf(f, "subcommand %s\n", dl_subcommands[i].name);
		snprintf(prefix, sizeof(prefix), "suboption %s ", dl_subcommands[i].name);
		dl_opt_list(f, prefix, dl_subcommands[i].opts);
	}
	for (size_t i = 0; i < DL_HO_COUNT; i++)
		fprintf(f, "handoff %s\n", dl_handoff_vars[i].name);
	for (size_t i = 0; i < DL_MODEL_COUNT; i++)
		fprintf(f, "model %s\n", dl_model_list[i].name);
	return DL_EXIT_OK;
}

int dl_cli_parse_norm(const char *s, struct dl_data_options *o, char *err, size_t errlen)
{
	float v[6];
	const char *p = s;
	if (strcmp(s, "imagenet") == 0) {
		o->have_norm = 0;
		return 0;
	}
	if (strcmp(s, "none") == 0) {
		o->have_norm = 1;
		for (int c = 0; c < 3; c++)
			o->mean[c] = 0, o->std[c] = 1;
		return 0;
	}
	for (int i = 0; i < 6; i++) {
		char *end;
		errno = 0;
		double x = strtod(p, &end);
		char want = i == 5 ? '\0' : i == 2 ? ':' : ',';
		if (end == p || *end != want || errno || !(x > -1e3 && x < 1e3) || (i >= 3 && !(x > 0)) ||
		    (p[strspn(p, " +-.0123456789")] && strchr("xXnNiI", p[strspn(p, " +-.0123456789")])))
			return dl_errf(err, errlen, "--normalize: '%s' is not imagenet, none or MR,MG,MB:SR,SG,SB (std > 0)",
				    s);
		v[i] = (float)x;
		p = end + (i < 5);
	}
	o->have_norm = 1;
	memcpy(o->mean, v, sizeof(o->mean));
	memcpy(o->std, v + 3, sizeof(o->std));
	return 0;
}

void dl_cli_norm_str(const struct dl_data_options *o, char *buf, size_t len)
{
	const float *m = o->have_norm ? o->mean : (const float[3]){0.485f, 0.456f, 0.406f};
	const float *s = o->have_norm ? o->std : (const float[3]){0.229f, 0.224f, 0.225f};
	snprintf(buf, len, "%g,%g,%g:%g,%g,%g", m[0], m[1], m[2], s[0], s[1], s[2]);
}

int dl_cli_engine_opt(const char *opt, const char *val, const char **out, char *err, size_t errlen)
{
	char q[96];

	dl_optval_escape(val, q, sizeof(q));
	if (strcmp(opt, "backend") == 0) {
		if (strcmp(val, "auto") && strcmp(val, "cpu") && strcmp(val, "ref") && strcmp(val, "cuda"))
			return dl_errf(err, errlen, "--backend: unknown backend '%s' (auto, cpu, ref, cuda)", q);
	} else if (strcmp(opt, "precision") == 0) {
		if (!dl_precision_valid(val))
			return dl_errf(err, errlen, "--precision: unknown precision '%s' (%s)", q, DL_PRECISION_NAMES);
	} else {
		return dl_errf(err, errlen, "%s:%d: dl_cli_engine_opt: no option '%s'", __FILE__, __LINE__, opt);
	}
	*out = val;
	return 0;
}

/* The --dl-* values the plugin passes to the runtime under srun
 * --dl-job=MODEL are the rows of common/handoff.h that name an option:
 * dl_cli_plugin_argv puts them first, as the options they stand for. */

char **dl_cli_plugin_argv(int argc, char **argv, char *const *envp, const struct dl_run_env *re,
			  int *nargc, int *nfixed)
{
	char **v;
	int n = 0;

	*nfixed = 0;
	v = calloc((size_t)argc + 2 * DL_HO_COUNT + 1, sizeof(*v));
	if (!v)
		return NULL;
	v[n++] = argv[0];
	if (re->model)
		for (size_t i = 0; i < DL_HO_COUNT; i++) {
			const struct dl_opt *o = dl_opt_named(&cli_table, dl_handoff_vars[i].opt);
			char *val = (char *)dl_env_get(envp, dl_handoff_vars[i].name);

			if (!o || !val)
				continue;
			v[n++] = (char *)o->dashed;
			v[n++] = val;
			*nfixed += 2;
		}
	/* Slurm 23.11 and later: the plugin prepended this runtime to the
	 * task's command line, so argv[1] is the user's word "dljob" (checked
	 * by the plugin), not an argument. */
	int first = re->prepended && argc > 1 ? 2 : 1;

	for (int i = first; i < argc; i++)
		v[n++] = argv[i];
	v[n] = NULL;
	*nargc = n;
	return v;
}

static const char *opt_name(int code)
{
	const struct dl_opt *o = dl_opt_find(&cli_table, code);

	return o ? o->name : "?";
}

/* In model mode (nfixed > 0): is opt one the plugin already set? */
static int plugin_owned(int opt, int argc, char **argv, int nfixed)
{
	if (nfixed <= 0)
		return 0;
	if (opt == OPT_SYNTHETIC)
		opt = OPT_DATA;
	for (int i = 1; i <= nfixed && i < argc; i += 2)
		for (size_t k = 0; k < DL_HO_COUNT; k++)
			if (dl_handoff_vars[k].opt && dl_opt_named(&cli_table, dl_handoff_vars[k].opt) == dl_opt_find(&cli_table, opt) &&
			    !strcmp(argv[i], dl_opt_find(&cli_table, opt)->dashed))
				return 1;
	return 0;
}

int dl_cli_parse(struct dl_cli *cli, int argc, char **argv, int nfixed, const struct dl_run_env *re,
		 char *err, size_t errlen)
{
	struct dl_train_config *c = &cli->cfg;
	int opt;

	memset(cli, 0, sizeof(*cli));
	dl_train_config_defaults(c);
	c->data = DL_DEFAULT_DATA;
	cli->timeout_s = 300;
	/* Under Slurm each job gets its own directory, so two jobs submitted from
	 * the same place never write into each other's checkpoints. */
	if (re->job_id >= 0)
		snprintf(cli->out_buf, sizeof(cli->out_buf), "./dljob-%ld", re->job_id);
	else
		snprintf(cli->out_buf, sizeof(cli->out_buf), "./dljob-out");
	c->out_dir = cli->out_buf;

		optind = 1; /* ":" below: we report errors ourselves, as one line */
	while ((opt = getopt_long(argc, argv, ":", cli_table.long_opts, NULL)) != -1) {
		int rv = 0;
		/* optind is past this option's words: beyond the plugin's? */
		if (optind > nfixed + 1 && plugin_owned(opt, argc, argv, nfixed))
			return dl_errf(err, errlen, "option '--%s' is already set by srun --dl-*: drop it from the command "
				    "(see spank-dljob(8))", opt_name(opt));
		const struct dl_opt *row = dl_opt_find(&cli_table, opt);

		if (row && row->kind != DL_OPTK_NONE)
			rv = dl_opt_number(row, optarg, cli, err, errlen);
		else switch (opt) {
		case OPT_MODEL: c->model = optarg; break;
		case OPT_DATA: c->data = optarg; break;
		case OPT_SYNTHETIC: c->data = "synthetic"; break;
		case OPT_SCHEDULE:
			if (strcmp(optarg, "step") && strcmp(optarg, "cosine") && strcmp(optarg, "poly") &&
			    strcmp(optarg, "constant"))
				rv = dl_errf(err, errlen, "--schedule: unknown schedule '%s' (step, cosine, poly, constant)", optarg);
			c->schedule = optarg;
			break;
		case OPT_NESTEROV: c->nesterov = 1; break;
		case OPT_LARS: c->lars = 1; break;
		case OPT_ZIR: c->zero_init_residual = 1; break;
		case OPT_OUT:
			if (*optarg == '\0')
				rv = dl_errf(err, errlen, "--out: empty directory name");
			c->out_dir = optarg;
			break;
		case OPT_RESUME:
			if (optarg && *optarg == '\0')
				rv = dl_errf(err, errlen, "--resume=: empty path");
			c->resume = optarg ? optarg : "";
			break;
		case OPT_BACKEND: rv = dl_cli_engine_opt("backend", optarg, &c->backend, err, errlen); break;
		case OPT_PRECISION: rv = dl_cli_engine_opt("precision", optarg, &c->precision, err, errlen); break;
		case OPT_CONV_ALGO:
			if (dl_conv_algo_parse(optarg) < 0)
				rv = dl_errf(err, errlen, "--conv-algo: unknown algorithm '%s' (auto, direct, winograd)",
					  optarg);
			c->conv_algo = optarg;
			break;
		case OPT_INIT:
			if (*optarg == '\0')
				rv = dl_errf(err, errlen, "--init: empty path");
			c->init = optarg;
			break;
		case OPT_INIT_HEAD:
			if (strcmp(optarg, "load") && strcmp(optarg, "new"))
				rv = dl_errf(err, errlen, "--init-head: '%s' is not load or new", optarg);
			c->init_head_new = strcmp(optarg, "new") == 0;
			break;
		case OPT_NORMALIZE: rv = dl_cli_parse_norm(optarg, &cli->norm, err, errlen); break;
		case OPT_HELP: cli->help = 1; break;
		case OPT_VERSION: cli->version = 1; break;
		case ':':
		case '?':
		default:
			return dl_opt_refused(&cli_table, opt, argv, err, errlen);
		}
		if (rv < 0)
			return -1;
	}
	if (cli->help || cli->version)
		return 0;
	if (optind < argc)
		return dl_errf(err, errlen, "unexpected argument '%s' (see dljob --help)", argv[optind]);
	if (!c->model)
		return dl_errf(err, errlen, "--model is required (e.g. --model resnet50)");
	if (!dl_model_known(c->model))
		return dl_errf(err, errlen, "--model: unknown model '%s' (known: %s)", c->model, dl_model_names());
	if (c->init && c->resume)
		return dl_errf(err, errlen, "--init and --resume exclude each other (--resume continues a run, --init "
			    "starts one from weights)");
	if (c->init_head_new && !c->init)
		return dl_errf(err, errlen, "--init-head needs --init");
	if (c->warmup_epochs > c->epochs)
		return dl_errf(err, errlen, "--warmup-epochs: %g is longer than --epochs %d", c->warmup_epochs, c->epochs);
	c->gpu = re->gpu; /* the GPU the plugin chose for this task, or NULL */
	return 0;
}

/* DIR/train-images-idx3-ubyte[.gz] and no DIR/train or shard index. */
static int install_stop_handlers(char *err, size_t errlen)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	/* Restart interrupted reads and waits: the loop polls the flag once per
	 * step, nothing needs to be woken early. */
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGUSR1, &sa, NULL) < 0)
		return dl_errf(err, errlen, "sigaction: %s", strerror(errno));
	return 0;
}

/* Model mode: DLJOB_DATA_ID is the directory the plugin checked against
 * data_allow where it ran (on the node, unless a container plugin ran
 * before it).  The directory opened here, possibly inside a container,
 * must be that one: a bind mount of it keeps its device and inode, another
 * directory mounted over its path does not (spank-dljob(8), CONTAINERS). */
static int check_data_id(const char *data, const struct dl_run_env *re, char *err, size_t errlen)
{
	struct stat sb;

	if (!re->have_data_id)
		return 0;
	if (stat(data, &sb) < 0)
		return dl_errf(err, errlen, "%s", strerror(errno));
	if ((unsigned long long)sb.st_dev != re->data_dev || (unsigned long long)sb.st_ino != re->data_ino)
		return dl_errf(err, errlen, "not the directory that srun --dl-data named and the plugin checked "
			    "(data_allow): another directory is mounted over that path here (a container mount?)");
	return 0;
}

/* Where the output directory path really is, into res: absolute (a
 * relative path is from this process's working directory), with "." and
 * ".." taken and symbolic links followed, as realpath(3) does; but the
 * directory and some of its parents may not exist yet (walk_out creates
 * them).  So the longest prefix of path that exists is resolved by
 * realpath and the rest, the part still to be created, is appended: that
 * rest may not hold "..", since what it would mean depends on what gets
 * created (a/../.. is two levels up only once a exists, and a may become
 * a symbolic link), nor start at a dangling symbolic link (mkdir would not
 * follow it, the later writes would).  *nexist is the length of res's
 * prefix that existed (res[0, *nexist)); res has no symbolic link, empty,
 * "." or ".." component.  Returns 0, or -1 with why in err. */
static int resolve_out(const char *path, char *res, size_t reslen, size_t *nexist, char *err, size_t errlen)
{
	char abs[DL_PATH_MAX + 2], pre[DL_PATH_MAX + 2], real[PATH_MAX], q[256];
	size_t n, cut;

	if (path[0] == '/') {
		if (strlen(path) >= sizeof(abs))
			return dl_errf(err, errlen, "longer than %d bytes", DL_PATH_MAX);
		memcpy(abs, path, strlen(path) + 1);
	} else {
		if (!getcwd(abs, sizeof(abs)))
			return dl_errf(err, errlen, "cannot read the working directory: %s", strerror(errno));
		n = strlen(abs);
		if (n + 1 + strlen(path) >= sizeof(abs))
			return dl_errf(err, errlen, "longer than %d bytes from the working directory", DL_PATH_MAX);
		snprintf(abs + n, sizeof(abs) - n, "%s%s", n > 1 ? "/" : "", path);
	}
	/* pre = abs[0, cut) ("/" when cut is 0, which always exists), one
	 * component shorter each time it does not exist; never ending in '/',
	 * which would follow a symbolic link before lstat sees it. */
	for (cut = strlen(abs); cut > 0 && abs[cut - 1] == '/';)
		cut--;
	for (;;) {
		struct stat lst;

		memcpy(pre, abs, cut);
		snprintf(pre + cut, sizeof(pre) - cut, "%s", cut ? "" : "/");
		if (realpath(pre, real))
			break;
		if (errno != ENOENT)
			return dl_errf(err, errlen, "%s: %s", dl_optval_escape(pre, q, sizeof(q)), strerror(errno));
		if (lstat(pre, &lst) == 0 && S_ISLNK(lst.st_mode))
			return dl_errf(err, errlen, "%s is a symbolic link to a path that does not exist",
				    dl_optval_escape(pre, q, sizeof(q)));
		while (cut > 0 && abs[cut - 1] != '/')
			cut--;
		while (cut > 0 && abs[cut - 1] == '/')
			cut--;
	}
	n = strlen(real);
	if (n >= reslen)
		return dl_errf(err, errlen, "resolves to more than %zu bytes", reslen - 1);
	memcpy(res, real, n + 1);
	*nexist = n;
	/* The rest, component by component ("" and "." add nothing). */
	for (const char *p = abs + cut; *p;) {
		size_t len = strcspn(p, "/");

		if (len == 2 && p[0] == '.' && p[1] == '.') {
			size_t k = (size_t)(p - abs);

			while (k > 1 && abs[k - 1] == '/')
				k--;
			abs[k] = '\0';
			return dl_errf(err, errlen, "'..' after %s, which does not exist yet",
				    dl_optval_escape(abs, q, sizeof(q)));
		}
		if (len && !(len == 1 && p[0] == '.')) {
			int sep = n > 1;

			if (n + (size_t)sep + len >= reslen)
				return dl_errf(err, errlen, "resolves to more than %zu bytes", reslen - 1);
			if (sep)
				res[n++] = '/';
			memcpy(res + n, p, len);
			n += len;
			res[n] = '\0';
		}
		p += len;
		while (*p == '/')
			p++;
	}
	return 0;
}

/* Model mode: DLJOB_OUT_BASE is the step's working directory on the host,
 * which a relative --dl-out (and the default, DIR/dljob-JOBID) is under.
 * The output directory must really be under it, wherever its spelling
 * leads (res, from resolve_out: "..", symbolic links), and here, possibly
 * inside a container, DIR must still be that directory (mounted at the
 * same path): else the output would go to the container's own file system
 * and be lost with it (spank-dljob(8), CONTAINERS).  *nbase is the length
 * of res's prefix that is DIR where it really is (walk_out checks the
 * directory it passes there again, by device and inode); 0 without
 * DLJOB_OUT_BASE. */
static int check_out_base(const char *opt, const char *out, const char *res, const struct dl_run_env *re,
			  size_t *nbase, char *err, size_t errlen)
{
	const char *dir = re->base_dir;
	char qo[256], qd[256], qr[256], rbase[PATH_MAX];
	struct stat sb;
	size_t n;

	*nbase = 0;
	if (!re->have_out_base)
		return 0;
	dl_optval_escape(out, qo, sizeof(qo));
	dl_optval_escape(dir, qd, sizeof(qd));
	dl_optval_escape(res, qr, sizeof(qr));
	/* DIR where it really is too (a symbolic link in its path); as it is
	 * spelled when it is not there (a container that lacks it: below). */
	if (!realpath(dir, rbase))
		snprintf(rbase, sizeof(rbase), "%s", dir);
	n = strlen(rbase);
	if (strncmp(res, rbase, n) != 0 || (res[n] != '/' && res[n] != '\0' && n > 1))
		return dl_errf(err, errlen, "%s %s resolves to %s, which is not under DLJOB_OUT_BASE's %s", opt, qo,
			    qr, qd);
	if (stat(dir, &sb) == 0 && (unsigned long long)sb.st_dev == re->base_dev &&
	    (unsigned long long)sb.st_ino == re->base_ino) {
		*nbase = n;
		return 0;
	}
	return dl_errf(err, errlen, "%s %s is under the step's working directory %s, which is not the "
		    "host's here (a container that does not mount it): the output would be lost with the "
		    "container; mount it at the same path (--container-mounts=%s:%s, or an enroot mounts.d "
		    "entry) or give %s a directory mounted from the host", opt, qo, qd, qd, qd, opt);
}

/* The directory name in the directory dfd, path being both, opened without
 * following a symbolic link (O_PATH: search permission is enough, as for a
 * path).  Returns the descriptor, or -1 with what is wrong in err. */
static int open_dir_at(int dfd, const char *name, const char *path, char *err, size_t errlen)
{
	char q[256];
	struct stat lst;
	int fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), e = errno;

	if (fd >= 0)
		return fd;
	dl_optval_escape(path, q, sizeof(q));
	if (e == ENOTDIR && fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode))
		return dl_errf(err, errlen, "%s was made a symbolic link after the path was checked (not followed)", q);
	if (e == ENOTDIR)
		return dl_errf(err, errlen, "%s is not a directory", q);
	if (e == ENOENT)
		return dl_errf(err, errlen, "%s was removed after the path was checked", q);
	return dl_errf(err, errlen, "cannot open %s: %s", q, strerror(e));
}

/* Makes and checks the output directory res (resolve_out: absolute, no
 * symbolic link, res[0, nexist) existed) without following any symbolic
 * link: from "/", each component is opened with openat(O_NOFOLLOW) in the
 * directory opened before it, and one of the part that did not exist is
 * first made there with mkdirat.  A component replaced by a symbolic link
 * after resolve_out (by someone who can write to its parent) is refused
 * where it is met, so nothing is ever created outside the path that was
 * checked, and the directory reached is res itself: under DLJOB_OUT_BASE
 * when check_out_base said so, whose directory is checked again as it is
 * passed (res[0, nbase), when nbase is not 0).
 *
 * Ownership, the rule (the output directory holds the checkpoints that
 * --resume loads, so whoever can write in it decides what a resumed run
 * trains from):
 * - every directory dljob creates (what did not exist: res[nexist...]) is
 *   made with mode 0755, less the umask (never writable by others, whatever
 *   the umask: umask 002 would give 0775), and must then be owned by the
 *   effective uid: another owner means another user made it first (the
 *   directory above is writable by others: /tmp, a project directory) or a
 *   file system that maps owners (NFS root_squash);
 * - the output directory itself, made now or already there, must be owned
 *   by the effective uid: a DIR/dljob-JOBID (or any --dl-out) that another
 *   user made beforehand in a shared working directory is refused, root's
 *   too; and it may not be writable by others (S_IWOTH), with or without
 *   the sticky bit (which only stops others removing the user's files:
 *   they could still create checkpoint.safetensors before the first
 *   checkpoint).  Group-writable is the owner's choice, accepted: only the
 *   owner (or root) sets the mode, umask 002 with a group of one's own
 *   (Debian's and Red Hat's default) makes every directory 0775, and a
 *   group the owner opened it to is one they trust with their files;
 * - directories above that already existed are not checked: /tmp or a
 *   shared project directory are legitimate places.  Someone who can write
 *   to one could still rename the output directory away while the run
 *   writes into it by name (later writes would go to whatever they put at
 *   that path); in /tmp the sticky bit stops that.
 * *made_top is the length of res's prefix that is the first directory made
 * here (left 0 when none was made), also when walk_out fails. */
static int walk_out(const char *opt, const char *res, size_t nexist, size_t nbase, const struct dl_run_env *re,
		    size_t *made_top, char *err, size_t errlen)
{
	char path[PATH_MAX], name[PATH_MAX], q[256];
	size_t end = 1;
	unsigned me = (unsigned)geteuid();
	struct stat sb;
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return dl_errf(err, errlen, "cannot open /: %s", strerror(errno));
	/* fd is res[0, end) ("/" when end is 1) */
	for (;;) {
		if (nbase && end == nbase && (fstat(fd, &sb) < 0 || (unsigned long long)sb.st_dev != re->base_dev ||
					      (unsigned long long)sb.st_ino != re->base_ino)) {
			close(fd);
			return dl_errf(err, errlen, "the step's working directory %s was replaced after it was checked",
				    dl_optval_escape(re->base_dir, q, sizeof(q)));
		}
		if (res[end] == '\0')
			break;
		size_t start = end > 1 ? end + 1 : 1, len = strcspn(res + start, "/");
		int made = 0, nfd;

		memcpy(name, res + start, len);
		name[len] = '\0';
		memcpy(path, res, start + len);
		path[start + len] = '\0';
		/* A component that did not exist when the path was checked may
		 * be made by another rank of the job at the same moment (a shared
		 * file system: EEXIST here) and removed again by it when that rank
		 * fails and unmakes what it made: it is then made again, a few
		 * times, rather than reported as removed. */
		nfd = -1;
		for (int tries = 0; start + len > nexist && tries < 4; tries++) {
			if (mkdirat(fd, name, 0755) == 0) {
				made = 1;
			} else if (errno != EEXIST) {
				int e = errno;

				close(fd);
				return dl_errf(err, errlen, "cannot create output directory %s: %s",
					    dl_optval_escape(path, q, sizeof(q)), strerror(e));
			}
			nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (nfd >= 0 || errno != ENOENT || made)
				break;
		}
		if (nfd < 0)
			nfd = open_dir_at(fd, name, path, err, errlen);
		close(fd);
		if (nfd < 0)
			return -1;
		fd = nfd;
		end = start + len;
		if (made && !*made_top)
			*made_top = end;
		if (end > nexist && (fstat(fd, &sb) < 0 || (unsigned)sb.st_uid != me)) {
			close(fd);
			dl_optval_escape(path, q, sizeof(q));
			if (made)
				return dl_errf(err, errlen, "dljob created %s, but it is owned by uid %u, not by you "
					    "(uid %u): the file system maps owners (an NFS export with root_squash?) or "
					    "another user replaced it; give %s a directory on a file system that keeps "
					    "owners", q, (unsigned)sb.st_uid, me, opt);
			return dl_errf(err, errlen, "%s, which did not exist when the path was checked, was made "
				    "meanwhile by uid %u, not by you (uid %u): another user can write to the directory "
				    "above it; give %s a directory that only you can create", q, (unsigned)sb.st_uid,
				    me, opt);
		}
	}
	if (fstat(fd, &sb) < 0) {
		int e = errno;

		close(fd);
		return dl_errf(err, errlen, "cannot stat %s: %s", dl_optval_escape(res, q, sizeof(q)), strerror(e));
	}
	close(fd);
	dl_optval_escape(res, q, sizeof(q));
	if ((unsigned)sb.st_uid != me)
		return dl_errf(err, errlen, "the output directory %s is owned by uid %u, not by you (uid %u): its "
			    "owner could put a checkpoint there that --resume would load; give %s a directory of "
			    "your own (a path that does not exist yet is created)", q, (unsigned)sb.st_uid, me, opt);
	if (sb.st_mode & S_IWOTH)
		return dl_errf(err, errlen, "the output directory %s is writable by every user (mode %04o): "
			    "anyone could put a checkpoint there that --resume would load; chmod o-w it, or give "
			    "%s another directory", q, (unsigned)(sb.st_mode & 07777), opt);
	return 0;
}

/* The output directory, made before anything is read or trained: it must
 * be a directory of the user's (walk_out says which) that this process can
 * write, or the run's results would be lost at its first checkpoint.
 * Under DLJOB_OUT_BASE its path is checked before anything is made (a
 * refused path creates nothing), and walk_out makes it without following
 * a symbolic link, so a symbolic link put into the path after that check
 * is refused before anything is made past it, and no second check is
 * needed.  Nothing stops a directory above being renamed later, while the
 * run writes into the output by name (walk_out).  made (PATH_MAX bytes)
 * gets the output directory's resolved path and *made_top the length of
 * its prefix that is the first directory made (0: none), for unmake_out. */
static int make_out(const char *out, const struct dl_run_env *re, char *made, size_t *made_top, char *err,
		    size_t errlen)
{
	const char *opt = re->model && re->have_out ? "--dl-out" : "--out";
	char why[2048], q[256];
	size_t nexist = 0, nbase = 0;

	*made_top = 0;
	dl_optval_escape(out, q, sizeof(q));
	if (resolve_out(out, made, PATH_MAX, &nexist, why, sizeof(why)) < 0)
		return dl_errf(err, errlen, "%s %s: %s", opt, q, why);
	if (check_out_base(opt, out, made, re, &nbase, err, errlen) < 0)
		return -1;
	if (walk_out(opt, made, nexist, nbase, re, made_top, why, sizeof(why)) < 0)
		return dl_errf(err, errlen, "%s %s: %s", opt, q, why);
	if (access(out, W_OK | X_OK) < 0)
		return dl_errf(err, errlen, "%s %s: not writable here: %s (in a container: give %s a directory "
			    "mounted from the host, writable)", opt, q, strerror(errno), opt);
	return 0;
}

/* A run that failed removes what make_out made: made (the output
 * directory, resolved) and its parents down to made[0, top), the first
 * directory made, deepest first, each only while empty (rmdir keeps a
 * non-empty one and so everything above it).  Nothing when top is 0. */
static void unmake_out(char *made, size_t top)
{
	size_t n = top ? strlen(made) : 0;

	while (top && n >= top) {
		if (rmdir(made) < 0 && errno != ENOENT)
			return;
		while (n > 0 && made[n - 1] != '/')
			n--;
		while (n > 1 && made[n - 1] == '/')
			n--;
		made[n] = '\0';
	}
}

/* The lock file of an output directory (lock_out). */
#define DL_OUT_LOCK ".dljob.lock"

/* One run per output directory: rank 0 holds an exclusive open file
 * description lock (fcntl F_OFD_SETLK, a write lock on the whole file) on
 * DIR/.dljob.lock from the rendezvous to its exit, so a second run given
 * the same directory (two steps of one job with the default
 * ./dljob-$SLURM_JOB_ID, a job array's tasks with one --out) stops before
 * it writes anything instead of mixing its metrics and checkpoints into the
 * first's.  Why this primitive: Linux's NFS client has no lock operation
 * for directories, so flock(2) on one (dljob's earlier lock) is the local
 * kernel's alone, and a run on another node takes it too; an fcntl lock on
 * a regular file goes to the server (NFSv4 in the protocol, NFSv3 through
 * lockd/NLM), unless the file system is mounted nolock or
 * local_lock=posix|all, which keeps it on the node, as a FUSE file system
 * that does not implement locks does.  An OFD lock belongs to the open
 * file, like flock: closing another descriptor of the file in this
 * process, which drops a classic POSIX lock, leaves it.  The file stays
 * (removed only with a directory this run made and leaves on failure).
 * *fd: the locked file, -1 when it could not be locked for another reason
 * than a holder (said on stderr: then a second run is not seen).  -1 with
 * one line in err when another run holds it. */
static int lock_out(const char *opt, const char *out, int *fd, char *err, size_t errlen)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	char q[256];
	struct stat sb;
	const char *why = NULL;
	int dir;

	*fd = -1;
	dir = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		why = strerror(errno);
	} else {
		/* O_NONBLOCK: a FIFO put there must not block the open. */
		*fd = openat(dir, DL_OUT_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
		if (*fd < 0)
			why = strerror(errno);
		else if (fstat(*fd, &sb) < 0)
			why = strerror(errno);
		else if (!S_ISREG(sb.st_mode))
			why = "not a regular file";
		else if (fcntl(*fd, F_OFD_SETLK, &fl) == 0)
			why = NULL;
		else if (errno == EAGAIN || errno == EACCES)
			why = "";
		else
			why = strerror(errno);
		close(dir);
	}
	if (!why)
		return 0;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	if (!*why)
		return dl_errf(err, errlen, "%s %s: another dljob run is writing into this directory (another step of "
			       "this job, or another job): give each run its own %s", opt,
			       dl_optval_escape(out, q, sizeof(q)), opt);
	fprintf(stderr, "dljob: rank 0: %s %s: cannot lock its %s (%s): another run given this directory would "
		"not be seen\n", opt, dl_optval_escape(out, q, sizeof(q)), DL_OUT_LOCK, why);
	return 0;
}

int dl_cli_train_main(int argc, char **argv)
{
	struct dl_cli *cli;
	struct dl_run_env re;
	char **args = NULL;
	int nargc = 0, nfixed = 0;
	struct dl_dataset *ds = NULL;
	struct dl_world world;
	int world_open = 0;
	char out_made[PATH_MAX] = "";
	size_t out_top = 0;
	int out_lock = -1;
	char err[4608];
	int rv = DL_EXIT_ERROR;

	cli = calloc(1, sizeof(*cli));
	if (!cli) {
		fprintf(stderr, "dljob: out of memory\n");
		return DL_EXIT_ERROR;
	}
	/* The environment first: what the plugin and Slurm set decides how
	 * the command line reads. */
	if (dl_run_env_parse(&re, environ, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: %s\n", err);
		rv = DL_EXIT_USAGE;
		goto out;
	}
	args = dl_cli_plugin_argv(argc, argv, environ, &re, &nargc, &nfixed);
	if (!args) {
		fprintf(stderr, "dljob: out of memory\n");
		goto out;
	}
	if (dl_cli_parse(cli, nargc, args, nfixed, &re, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: %s\n", err);
		rv = DL_EXIT_USAGE;
		goto out;
	}
	if (cli->help) {
		dl_cli_usage(stdout);
		rv = DL_EXIT_OK;
		goto out;
	}
	if (cli->version) {
		printf("dljob %s (built for Slurm %s)\n", PACKAGE_VERSION, DLJOB_SLURM_VERSION);
		rv = DL_EXIT_OK;
		goto out;
	}
	struct dl_train_config *c = &cli->cfg;
	/* a named backend is loaded (the cuda module) before any data is read,
	 * so a missing module or CUDA library is the first thing said */
	if (strcmp(c->backend, "auto") != 0 && !dl_backend_find(c->backend, err, sizeof(err))) {
		fprintf(stderr, "dljob: --backend %s: %s\n", c->backend, err);
		goto out;
	}
	/* An ImageFolder's scan is cached next to the output: read here if a
	 * previous run (or a requeued one) left it, written below after the
	 * checks in between; a refused run removes the --out it made. */
	/* Inflated datasets are cached once per node, for this user only. */
	char node_cache[4096];
	snprintf(node_cache, sizeof(node_cache), "%s/dljob-cache-%u", re.tmpdir, (unsigned)geteuid());
	struct dl_data_options dopt = {
		.image_size = c->image_size,
		.node_cache_dir = node_cache,
		.cache_dir = c->out_dir,
		.cache_deferred = 1,
		.threads = c->loader_threads,
		.decode_memory = (size_t)c->decode_memory_mib << 20,
		.max_bad_fraction = 0.01,
		.have_norm = cli->norm.have_norm,
	};
	if (make_out(c->out_dir, &re, out_made, &out_top, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: %s\n", err);
		goto out;
	}
	if (re.model && check_data_id(c->data, &re, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: --data %s: %s\n", c->data, err);
		goto out;
	}
	memcpy(dopt.mean, cli->norm.mean, sizeof(dopt.mean));
	memcpy(dopt.std, cli->norm.std, sizeof(dopt.std));
	if (dl_dataset_open(c->data, &dopt, &ds, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: --data %s: %s\n", c->data, err);
		goto out;
	}
	c->dataset = ds;
	if (c->resume && *c->resume && access(c->resume, R_OK) < 0) {
		fprintf(stderr, "dljob: --resume: cannot read %s: %s\n", c->resume, strerror(errno));
		goto out;
	}
	if (c->init && access(c->init, R_OK) < 0) {
		fprintf(stderr, "dljob: --init: cannot read %s: %s\n", c->init, strerror(errno));
		goto out;
	}
	char ckpt[4096];
	if (c->resume && !*c->resume && dl_checkpoint_find(c->out_dir, ckpt, sizeof(ckpt)) < 0) {
		fprintf(stderr, "dljob: --resume: no checkpoint in %s\n", c->out_dir);
		goto out;
	}
	/* A job Slurm requeued (preemption with requeue, or scontrol requeue)
	 * runs the same command line again: continue where it stopped instead of
	 * starting over in the same --out. */
	if (!c->resume && re.restart_count > 0 && dl_checkpoint_find(c->out_dir, ckpt, sizeof(ckpt)) == 0) {
		fprintf(stderr, "dljob: requeued job (SLURM_RESTART_COUNT=%ld): resuming from %s\n", re.restart_count,
			ckpt);
		c->resume = "";
		c->init = NULL; /* the checkpoint already holds what --init gave */
	}
	if (c->batch > 0 && ds->count[DL_SPLIT_TRAIN] < (size_t)c->batch) {
		fprintf(stderr, "dljob: --batch %d is larger than the training split of --data %s (%zu samples)\n",
		        c->batch, c->data, ds->count[DL_SPLIT_TRAIN]);
		goto out;
	}
	if (install_stop_handlers(err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: %s\n", err);
		goto out;
	}
	if (dl_world_open(&world, cli->timeout_s, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: joining the job: %s\n", err);
		goto out;
	}
	world_open = 1;
	if (world.comm.rank == 0 && lock_out(re.model ? "--dl-out" : "--out", c->out_dir, &out_lock, err, sizeof(err)) < 0) {
		fprintf(stderr, "dljob: rank 0: %s\n", err);
		dl_world_abort(&world, err);
		goto out;
	}
	c->stop = &stop_requested;
	if (world.comm.rank == 0 && dl_dataset_save_index(ds, c->out_dir, err, sizeof(err)) < 0)
		fprintf(stderr, "dljob: %s (continuing without an index cache)\n", err);
	if (!c->resume && world.comm.rank == 0 && dl_checkpoint_find(c->out_dir, ckpt, sizeof(ckpt)) == 0)
		fprintf(stderr, "dljob: %s already holds %s; starting over (--resume continues it)\n", c->out_dir, ckpt);

	int r = dl_train(c, &world.comm, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "dljob: rank %d: %s\n", world.comm.rank, err);
		/* Tell the other ranks why, so they stop at once with this
		 * message instead of "rank N left the job". */
		dl_world_abort(&world, err);
		goto out;
	}
	/* The picture of the run beside its metrics (also after a preemption:
	 * it shows how far the run got).  Nothing depends on it: a failure is
	 * only reported. */
	if (world.comm.rank == 0 && dl_plot_run_dir(c->out_dir, err, sizeof(err)) < 0)
		fprintf(stderr, "dljob: plotting the run: %s\n", err);
	rv = DL_EXIT_OK;
out:
	if (world_open)
		dl_world_close(&world);
	/* A run that failed before writing anything (unreadable data, no GPU,
	 * a peer that never came) leaves no empty directory behind, nor the
	 * parents it made for it; its lock file goes only with a directory it
	 * made (out_top: one was), never from one that was there before. */
	if (rv != DL_EXIT_OK && out_made[0]) {
		char lockf[PATH_MAX];

		if (out_lock >= 0 && out_top > 0 && (size_t)snprintf(lockf, sizeof(lockf), "%s/%s", cli->cfg.out_dir, DL_OUT_LOCK) <
		    sizeof(lockf))
			unlink(lockf);
		unmake_out(out_made, out_top);
	}
	if (out_lock >= 0)
		close(out_lock);
	if (ds)
		dl_dataset_close(ds);
	free(cli);
	free(args);
	return rv;
}
