/* Data-parallel SGD, one process's part.  The backend owns the model state
 * and runs each whole step (engine/backend.h): forward, loss, backward, the
 * gradient reduction across ranks (bucketed, overlapped with backward),
 * averaging, the non-finite check and the update.  Every rank then holds
 * the same weights; BN running statistics stay per rank (as torch DDP
 * without SyncBatchNorm), and rank 0's are the ones saved.
 *
 * The rank's loss and its "stop requested" flag ride in the step's last
 * reduction.  That gives the global loss for the log and makes every rank
 * agree, in the same collective, on the step after which to stop on
 * SIGTERM/SIGUSR1, so nobody is left waiting in a collective for a peer
 * that already left.  Host copies of the state happen only at the
 * boundaries: checkpoints, the exported weights, --resume, --init. */
#include "config.h"
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/data/dataset.h"
#include "engine/metrics.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "engine/safetensors.h"
#include "engine/schedule.h"
#include "engine/train.h"

void dl_train_config_defaults(struct dl_train_config *c)
{
	memset(c, 0, sizeof(*c));
	c->backend = "auto"; /* cuda with a visible GPU, else cpu (dl_backend_find) */
	c->precision = DL_PRECISION_AUTO; /* what the backend trains in best (dl_backend_precision) */
	c->epochs = 90;
	c->batch = 128;
	c->lr = 0.1;
	c->schedule = "cosine";
	c->warmup_epochs = 0;
	c->momentum = 0.9;
	c->weight_decay = 1e-4;
	c->image_size = 224;
	c->eval = 1;
	c->print_every = 50;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_hms(char *buf, size_t len, double s)
{
	if (!isfinite(s) || s < 0)
		s = 0;
	long t = (long)(s + 0.5);
	snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* Everything one run owns, so cleanup is one function whatever failed. */
struct run {
	const struct dl_train_config *cfg;
	struct dl_comm *comm;
	struct dl_dataset *ds;
	int own_ds;
	struct dl_graph g;
	int have_graph;
	const char *backend;  /* resolved name ("auto" -> "cuda" or "cpu") */
	char prec_msg[448];   /* what --precision auto resolved to, and why ("" when named) */
	const struct dl_backend_ops *ops;
	struct dl_backend *be;
	struct dl_optim_state ost; /* host copy of the optimizer state, at boundaries only */
	struct dl_loader *train, *eval;
	struct dl_schedule sched;
	struct dl_metrics metrics;
	/* The batch being trained on: points into the loader's ring (taken in
	 * place; every backend reads it before its step returns), valid until
	 * the next fetch.  x8 instead of x when u8: the backend normalizes
	 * uint8 NHWC batches itself (takes_u8) and the dataset can give them
	 * (load_u8), so the loaders skip normalization and fill the backend's
	 * host memory (host_alloc: pinned for CUDA). */
	const float *x;
	const uint8_t *x8;
	int u8, train_pinned;
	const int *y;
	size_t n_weights, sample;
	long steps_per_epoch, total_steps;
	struct dl_ckpt_state pos;
	struct dl_ckpt_state ck; /* the checkpoint resumed from (--resume) */
	double wall0;     /* wall_s already spent before this process (resume) */
	double t_start;   /* this process's clock origin */
};

/* The next batch of l into r->x (or r->x8) and r->y: 1, 0 at the end of
 * the epoch, -1 on error. */
static int fetch(struct run *r, struct dl_loader *l, int *n, char *err, size_t errlen)
{
	if (r->u8)
		return dl_loader_next_u8_ref(l, &r->x8, &r->y, n, err, errlen);
	return dl_loader_next_ref(l, &r->x, &r->y, n, err, errlen);
}

/* The fetched batch as the backend takes it. */
static struct dl_batch batch_of(const struct run *r)
{
	struct dl_batch in = {.labels = r->y};
	if (r->u8) {
		in.x_u8 = r->x8;
		in.mean = r->ds->u8_mean;
		in.std = r->ds->u8_std;
	} else {
		in.x = r->x;
	}
	return in;
}

/* Held-out accuracy with BN in eval mode; counts summed over ranks.  The
 * same collective carries the stop flags, so it doubles as the epoch-end
 * agreement on preemption.  res: top1 %, top5 %, mean loss, samples. */
static int evaluate(struct run *r, int do_eval, int *stop, double res[4], char *err, size_t errlen)
{
	double acc[5] = {0, 0, 0, 0, 0}; /* top1, top5, loss sum, samples, stop */
	if (do_eval) {
		if (dl_loader_start_epoch(r->eval, 0, 0, err, errlen) < 0)
			return -1;
		for (;;) {
			int n, got;
			got = fetch(r, r->eval, &n, err, errlen);
			if (got < 0)
				return -1;
			if (got == 0)
				break;
			if (n == 0)
				continue; /* this rank's share ran out one batch early */
			/* Only the first n rows are real samples (short last batch). */
			struct dl_batch in = batch_of(r);
			struct dl_eval_result er;
			if (r->ops->eval_step(r->be, &in, n, NULL, &er) < 0) {
				dl_errf(err, errlen, "eval: %s", r->ops->error(r->be));
				return -1;
			}
			acc[0] += er.top1;
			acc[1] += er.top5;
			acc[2] += er.loss_sum;
			acc[3] += n;
		}
	}
	acc[4] = r->cfg->stop && *r->cfg->stop ? 1 : 0;
	if (r->comm->allreduce_sum_f64(r->comm, acc, 5, err, errlen) < 0)
		return -1;
	res[0] = acc[3] > 0 ? 100.0 * acc[0] / acc[3] : NAN;
	res[1] = acc[3] > 0 ? 100.0 * acc[1] / acc[3] : NAN;
	res[2] = acc[3] > 0 ? acc[2] / acc[3] : NAN;
	res[3] = acc[3];
	*stop = acc[4] > 0;
	return 0;
}

/* The backend's state into r->g and r->ost (rank 0 only: the others'
 * weights are the same, their BN statistics are not saved). */
static int state_out(struct run *r, char *err, size_t errlen)
{
	if (r->ops->state_out(r->be, &r->ost) < 0) {
		dl_errf(err, errlen, "copying the training state out of the %s backend: %s", r->backend,
			 r->ops->error(r->be));
		return -1;
	}
	return 0;
}

/* Rank 0 writes, every rank learns whether it worked (so nobody goes on
 * training after its checkpoint was lost). */
static int save_checkpoint(struct run *r, char *err, size_t errlen)
{
	double failed = 0;
	char lerr[512] = "";
	r->pos.wall_s = r->wall0 + (now_s() - r->t_start);
	if (r->comm->rank == 0 && (state_out(r, lerr, sizeof(lerr)) < 0 ||
				   dl_checkpoint_save(r->cfg->out_dir, &r->g, &r->ost, &r->pos, lerr, sizeof(lerr)) < 0))
		failed = 1;
	if (r->comm->allreduce_sum_f64(r->comm, &failed, 1, err, errlen) < 0)
		return -1;
	if (failed) {
		dl_errf(err, errlen, "%s", r->comm->rank == 0 ? lerr : "rank 0 could not write the checkpoint");
		return -1;
	}
	return 0;
}

/* The weights for users: torchvision's state_dict names, no optimizer. */
static int export_weights(struct run *r, char *err, size_t errlen)
{
	char path[4096], meta[256];
	if (r->comm->rank != 0)
		return 0;
	if (state_out(r, err, errlen) < 0)
		return -1;
	int n = snprintf(path, sizeof(path), "%s/model.safetensors", r->cfg->out_dir);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		dl_errf(err, errlen, "output path too long: %s", r->cfg->out_dir);
		return -1;
	}
	/* Nothing time-dependent in here: identical training gives identical files. */
	snprintf(meta, sizeof(meta), "{\"format\":\"pt\",\"model\":\"%s\",\"num_classes\":\"%d\",\"step\":\"%ld\"}",
	         r->g.model, r->g.num_classes, r->pos.step);
	return dl_model_state_write(path, &r->g, NULL, 0, meta, err, errlen);
}

/* What a resumed run does differently from the run that wrote its
 * checkpoint, allowed by dl_checkpoint_check, said on stderr (rank 0). */
static void say_changes(const struct run *r)
{
	const struct dl_ckpt_state *ck = &r->ck, *now = &r->pos;
	char what[256] = "";
	size_t o = 0;

	if (!ck->train_samples)
		fprintf(stderr, "dljob: note: the checkpoint was written by an older dljob, which did not record its "
		        "rank count, data and schedule: only model, global batch and epochs are checked\n");
	else if (!ck->data_classes && !ck->data_samples && (now->data_classes || now->data_samples))
		fprintf(stderr, "dljob: note: the checkpoint was written by an older dljob, which did not record its "
		        "data's fingerprint: only the data's sizes are checked, not that they are the same data\n");
	if (ck->ranks && ck->ranks != now->ranks)
		fprintf(stderr, "dljob: note: the checkpoint's run had %d rank%s x --batch %d, this one has %d x %d: "
		        "the same global batch %d, so each step takes the same samples at the same learning rate; "
		        "every rank's batch-norm running statistics start from rank 0's\n", ck->ranks,
		        ck->ranks == 1 ? "" : "s", ck->batch, now->ranks, now->batch, now->global_batch);
	if (ck->epochs != now->epochs)
		o += (size_t)snprintf(what + o, sizeof(what) - o, ", --epochs %d -> %d", ck->epochs, now->epochs);
	if (ck->lr > 0 && ck->lr != now->lr && o < sizeof(what))
		o += (size_t)snprintf(what + o, sizeof(what) - o, ", --lr %g -> %g", ck->lr, now->lr);
	if (ck->schedule[0] && strcmp(ck->schedule, now->schedule) != 0 && o < sizeof(what))
		o += (size_t)snprintf(what + o, sizeof(what) - o, ", --schedule %s -> %s", ck->schedule, now->schedule);
	if (ck->schedule[0] && ck->warmup_epochs != now->warmup_epochs && o < sizeof(what))
		o += (size_t)snprintf(what + o, sizeof(what) - o, ", --warmup-epochs %g -> %g", ck->warmup_epochs,
		                      now->warmup_epochs);
	if (o) {
		/* the learning rate of the next step, with the old schedule when
		 * the checkpoint says what it was */
		double lr = dl_schedule_lr(&r->sched, now->step);
		int kind = ck->schedule[0] ? dl_schedule_kind_parse(ck->schedule) : -1;
		fprintf(stderr, "dljob: note: %s: the learning-rate schedule is computed anew, step %ld's is %g",
		        what + 2, now->step + 1, lr);
		if (ck->lr > 0 && kind >= 0) {
			struct dl_schedule old = r->sched;
			old.base_lr = ck->lr;
			old.kind = (enum dl_sched_kind)kind;
			old.warmup_epochs = ck->warmup_epochs;
			old.epochs = ck->epochs;
			fprintf(stderr, " (it would have been %g)", dl_schedule_lr(&old, now->step));
		}
		fputc('\n', stderr);
	}
	if ((ck->precision[0] && strcmp(ck->precision, now->precision) != 0) ||
	    (ck->backend[0] && strcmp(ck->backend, now->backend) != 0))
		fprintf(stderr, "dljob: note: the checkpoint's run trained in %s on the %s backend, this one in %s on "
		        "%s: its fp32 weights, momentum and batch-norm statistics carry over, but the steps are no "
		        "longer bit for bit those of the run that wrote it\n", ck->precision[0] ? ck->precision : "?",
		        ck->backend[0] ? ck->backend : "?", now->precision, now->backend);
}

/* --precision, resolved where the backend and its device are known: from
 * then on only the precision "auto" stood for is used, logged (once, rank
 * 0) and recorded in checkpoints (a resume compares that one).  With
 * several ranks every rank resolves auto on its own device and all agree
 * on the one every rank's pick allows (fp32 if any rank picked fp32, else
 * fp16 if any picked fp16, else bf16), so a job over unlike GPUs trains in
 * one precision; a rank that could not resolve it fails them all.
 * Returns an enum dl_precision, with what auto resolved to in
 * r->prec_msg (said with the run's first line), or -1 with err. */
static int resolve_precision(struct run *r, char *err, size_t errlen)
{
	const struct dl_train_config *c = r->cfg;
	char msg[384];
	int prec = dl_backend_precision(r->ops, c->precision, c->gpu, msg, sizeof(msg));

	r->prec_msg[0] = 0;
	if (!dl_precision_is_auto(c->precision) || r->comm->size < 2) {
		if (prec < 0)
			return dl_errf(err, errlen, "%s", msg);
		snprintf(r->prec_msg, sizeof(r->prec_msg), "%s", msg);
		return prec;
	}
	double n[4] = {0}; /* ranks that failed, picked fp32, bf16, fp16 */
	n[prec < 0 ? 0 : 1 + prec] = 1;
	if (r->comm->allreduce_sum_f64(r->comm, n, 4, err, errlen) < 0)
		return -1;
	if (prec < 0)
		return dl_errf(err, errlen, "%s", msg);
	if (n[0] > 0)
		return dl_errf(err, errlen, "--precision auto: %g other rank%s could not resolve it", n[0],
			       n[0] == 1 ? "" : "s");
	int all = n[1 + DL_FP32] > 0 ? DL_FP32 : n[1 + DL_FP16] > 0 ? DL_FP16 : DL_BF16;
	snprintf(r->prec_msg, sizeof(r->prec_msg), "%s%s%s", msg, all != prec ? "; all ranks: " : "",
		 all != prec ? dl_precision_name((enum dl_precision)all) : "");
	return all;
}

static int setup(struct run *r, char *err, size_t errlen)
{
	const struct dl_train_config *c = r->cfg;
	char lerr[384];

	if (c->threads > 0)
		omp_set_num_threads(c->threads);
	if (c->dataset) {
		r->ds = c->dataset;
	} else {
		struct dl_data_options dopt = {.image_size = c->image_size, .max_bad_fraction = 0.01,
		                               .threads = c->loader_threads,
		                               .decode_memory = (size_t)c->decode_memory_mib << 20};
		if (dl_dataset_open(c->data, &dopt, &r->ds, lerr, sizeof(lerr)) < 0) {
			dl_errf(err, errlen, "--data %s: %s", c->data, lerr);
			return -1;
		}
		r->own_ds = 1;
	}
	if (dl_model_build(&r->g, c->model, r->ds->channels, r->ds->height, r->ds->width, r->ds->num_classes,
	                   c->zero_init_residual, c->seed, err, errlen) < 0)
		return -1;
	r->have_graph = 1;
	r->n_weights = dl_model_n_weights(&r->g);
	r->sample = (size_t)r->ds->channels * (size_t)r->ds->height * (size_t)r->ds->width;

	if (dl_optim_state_init(&r->ost, &r->g, c->momentum, err, errlen) < 0)
		return -1;

	struct dl_loader_options lo = {
		.batch = c->batch, .threads = c->loader_threads, .prefetch = 2, /* .seed: below, after resume */
		.rank = r->comm->rank, .world = r->comm->size, .shuffle = 1, .drop_last = 1,
	};
	/* uint8 batches when the backend normalizes them itself (the CUDA
	 * backend, on the GPU: a quarter of the bytes to copy, no
	 * normalization on the CPU) and the dataset can give them; the ring
	 * then lives in the backend's host memory (pinned).  The backend
	 * itself is created below, after resume. */
	/* "auto": the plugin runs the same command line on GPU and CPU nodes,
	 * so use the GPU wherever this dljob was built for one and one is
	 * visible (dl_backend_find, backend.h) */
	r->ops = dl_backend_find(c->backend, lerr, sizeof(lerr));
	if (!r->ops) {
		dl_errf(err, errlen, "--backend %s: %s", c->backend, lerr);
		return -1;
	}
	r->backend = r->ops->name;
	int prec = resolve_precision(r, lerr, sizeof(lerr));
	if (prec < 0) {
		dl_errf(err, errlen, "%s", lerr);
		return -1;
	}

	/* This run, as its checkpoints will describe it. */
	r->pos.seed = c->seed;
	snprintf(r->pos.model, sizeof(r->pos.model), "%s", c->model);
	r->pos.ranks = r->comm->size;
	r->pos.batch = c->batch;
	r->pos.global_batch = c->batch * r->comm->size;
	r->pos.epochs = c->epochs;
	r->pos.num_classes = r->ds->num_classes;
	r->pos.train_samples = (long)r->ds->count[DL_SPLIT_TRAIN];
	r->pos.eval_samples = (long)r->ds->count[DL_SPLIT_EVAL];
	r->pos.data_classes = r->ds->fp_classes;
	r->pos.data_samples = r->ds->fp_samples;
	r->pos.lr = c->lr;
	r->pos.warmup_epochs = c->warmup_epochs;
	snprintf(r->pos.schedule, sizeof(r->pos.schedule), "%s", c->schedule);
	snprintf(r->pos.precision, sizeof(r->pos.precision), "%s", dl_precision_name((enum dl_precision)prec));
	snprintf(r->pos.backend, sizeof(r->pos.backend), "%s", r->backend);

	/* Resume into g and ost before the backend exists (it takes g's state
	 * at create, ost's momentum through state_in), and before the loader:
	 * it shuffles with the checkpoint's seed. */
	if (c->resume) {
		char path[4096];
		if (*c->resume) {
			snprintf(path, sizeof(path), "%s", c->resume);
		} else if (dl_checkpoint_find(c->out_dir, path, sizeof(path)) < 0) {
			dl_errf(err, errlen, "--resume: no checkpoint in %s", c->out_dir);
			return -1;
		}
		if (dl_checkpoint_load(path, &r->g, &r->ost, &r->ck, &r->pos, err, errlen) < 0)
			return -1;
		if (r->ck.seed != c->seed && r->comm->rank == 0)
			fprintf(stderr, "dljob: resuming with the checkpoint's seed %llu (not --seed %llu)\n",
			        (unsigned long long)r->ck.seed, (unsigned long long)c->seed);
		/* its position, this run's configuration */
		r->pos.step = r->ck.step;
		r->pos.epoch = r->ck.epoch;
		r->pos.epoch_step = r->ck.epoch_step;
		r->pos.seed = r->ck.seed;
		r->pos.wall_s = r->ck.wall_s;
		r->wall0 = r->ck.wall_s;
		if (r->comm->rank == 0)
			fprintf(stderr, "dljob: resumed from %s at step %ld (epoch %d, batch %ld)\n", path, r->ck.step,
			        r->ck.epoch + 1, r->ck.epoch_step);
	}
	const struct dl_backend_ops *feed = r->ops;
	if (feed->takes_u8 && r->ds->load_u8 && r->ds->u8_mean && r->ds->u8_std) {
		r->u8 = 1;
		lo.layout = DL_BATCH_U8_NHWC;
		/* Pageable memory works too, only the copy is slower: if pinning
		 * fails (it says why on stderr), go on without it and let the
		 * backend report a missing GPU in its own words. */
		/* ctx: the device the backend will train on (the pinned ring's
		 * allocation must not open a context on another GPU) */
		void *ctx = (void *)(uintptr_t)c->gpu;
		void *probe = feed->host_alloc && feed->host_free ? feed->host_alloc(1, ctx) : NULL;
		if (probe) {
			feed->host_free(probe, ctx);
			lo.host_alloc = feed->host_alloc;
			lo.host_free = feed->host_free;
			lo.alloc_ctx = ctx;
			r->train_pinned = 1;
		}
	}
	lo.seed = r->pos.seed; /* --seed, or the checkpoint's */
	r->train = dl_loader_create(r->ds, DL_SPLIT_TRAIN, &lo, err, errlen);
	if (!r->train)
		return -1;
	r->steps_per_epoch = (long)dl_loader_steps(r->train);
	if (r->steps_per_epoch <= 0) {
		dl_errf(err, errlen, "the training split (%zu samples) is smaller than one global batch (%d x %d ranks)",
		         r->ds->count[DL_SPLIT_TRAIN], c->batch, r->comm->size);
		return -1;
	}
	if (c->eval) {
		if (r->ds->count[DL_SPLIT_EVAL] == 0) {
			dl_errf(err, errlen, "--data %s has no held-out split to evaluate on (use --eval 0)", c->data);
			return -1;
		}
		lo.shuffle = 0;
		lo.drop_last = 0;
		r->eval = dl_loader_create(r->ds, DL_SPLIT_EVAL, &lo, err, errlen);
		if (!r->eval)
			return -1;
	}

	r->sched = (struct dl_schedule){
		.base_lr = c->lr, .global_batch = c->batch * r->comm->size, .warmup_epochs = c->warmup_epochs,
		.kind = (enum dl_sched_kind)dl_schedule_kind_parse(c->schedule), .step_gamma = 0.1,
		.step_every = 30, .poly_power = 2.0, .epochs = c->epochs, .steps_per_epoch = r->steps_per_epoch,
	};
	if (dl_schedule_kind_parse(c->schedule) < 0) {
		dl_errf(err, errlen, "unknown schedule '%s'", c->schedule);
		return -1;
	}
	r->total_steps = r->steps_per_epoch * c->epochs;
	if (c->max_steps > 0 && c->max_steps < r->total_steps)
		r->total_steps = c->max_steps;
	/* Only a checkpoint that did not record its data gets this far with
	 * another training split (dl_checkpoint_check). */
	if (c->resume && r->pos.epoch_step > r->steps_per_epoch) {
		dl_errf(err, errlen, "the checkpoint is %ld batches into epoch %d, but an epoch of --data %s has %ld "
		         "batches of %d: the training data shrank since the checkpoint was written; resume on that "
		         "data, or start a new run from the checkpoint with --init in another --out",
		         r->pos.epoch_step, r->pos.epoch + 1, c->data, r->steps_per_epoch, r->pos.global_batch);
		return -1;
	}
	if (c->resume && r->comm->rank == 0)
		say_changes(r);

	struct dl_backend_opts bo = {
		.precision = (enum dl_precision)prec,
		.conv_algo = c->conv_algo ? dl_conv_algo_parse(c->conv_algo) : DL_CONV_AUTO,
		.device = c->gpu,
		.optim = {.momentum = c->momentum, .weight_decay = c->weight_decay, .nesterov = c->nesterov,
			  .lars = c->lars, .lars_eta = 0.001, .decay_bn_and_bias = 0},
		.label_smoothing = c->label_smoothing,
		.comm = r->comm,
		.bucket_bytes = c->bucket_bytes,
	};
	if (bo.conv_algo < 0) {
		dl_errf(err, errlen, "unknown convolution algorithm '%s'", c->conv_algo);
		return -1;
	}
	/* The backend names what it does not support (precision, device,
	 * algorithm) itself. */
	r->be = r->ops->create(&r->g, c->batch, &bo, err, errlen);
	if (!r->be)
		return -1;
	if (c->resume && r->ops->state_in(r->be, &r->ost) < 0) {
		dl_errf(err, errlen, "loading the checkpoint into the %s backend: %s", r->backend,
			 r->ops->error(r->be));
		return -1;
	}
	/* --init: the weights into g, then into the backend (momentum zero,
	 * no step taken); every rank reads the file, so all start equal. */
	if (c->init && !c->resume) {
		char ierr[4096];
		if (dl_weights_init(c->init, &r->g, c->init_head_new, ierr, sizeof(ierr)) < 0) {
			dl_errf(err, errlen, "--init: %s", ierr);
			return -1;
		}
		if (r->ops->state_in(r->be, NULL) < 0) {
			dl_errf(err, errlen, "loading --init %s into the %s backend: %s", c->init, r->backend,
				 r->ops->error(r->be));
			return -1;
		}
		if (r->comm->rank == 0)
			fprintf(stderr, "dljob: initialised from %s%s\n", c->init,
				c->init_head_new ? " (new classifier)" : "");
	}

	if (r->comm->rank == 0) {
		/* What a killed writer left goes before anything is written. */
		dl_out_remove_stale_tmp(c->out_dir);
		/* A resumed run continues the same log; a fresh one starts it over. */
		if (dl_metrics_open(&r->metrics, c->out_dir, c->resume ? r->pos.step : -1, err, errlen) < 0)
			return -1;
		if (r->prec_msg[0])
			fprintf(stderr, "dljob: %s\n", r->prec_msg);
		fprintf(stderr, "dljob: %s, %zu weights, %s backend%s%s, %d rank%s x batch %d, %ld steps/epoch, "
		        "%d epoch%s, peak lr %g\n", c->model, r->n_weights, r->backend,
		        prec != DL_FP32 ? (prec == DL_BF16 ? " (bf16)" : " (fp16)") : "",
		        !r->u8 ? "" : r->train_pinned ? " (uint8 batches, pinned)" : " (uint8 batches)", r->comm->size,
		        r->comm->size == 1 ? "" : "s", c->batch, r->steps_per_epoch, c->epochs,
		        c->epochs == 1 ? "" : "s", c->lr * r->pos.global_batch / 256.0);
	}
	return 0;
}

static void teardown(struct run *r)
{
	if (r->comm->rank == 0)
		dl_metrics_close(&r->metrics);
	if (r->be)
		r->ops->destroy(r->be);
	if (r->eval)
		dl_loader_destroy(r->eval);
	if (r->train)
		dl_loader_destroy(r->train);
	dl_optim_state_free(&r->ost);
	if (r->have_graph)
		dl_model_free(&r->g);
	if (r->own_ds)
		dl_dataset_close(r->ds);
}

/* One optimizer step on the fetched batch, all in the backend. */
static int train_step(struct run *r, double lr, struct dl_step_result *res, char *err, size_t errlen)
{
	const struct dl_train_config *c = r->cfg;
	struct dl_batch in = batch_of(r);
	if (r->ops->train_step(r->be, &in, lr, c->stop && *c->stop, res) < 0) {
		dl_errf(err, errlen, "step %ld: %s", r->pos.step + 1, r->ops->error(r->be));
		return -1;
	}
	if (res->nonfinite && !res->skipped) {
		dl_errf(err, errlen, "step %ld: loss or gradient is not finite (loss %g, lr %g): training diverged",
		         r->pos.step + 1, res->loss, lr);
		return -1;
	}
	return 0;
}

int dl_train(const struct dl_train_config *cfg, struct dl_comm *comm, char *err, size_t errlen)
{
	struct run r;
	int rv = -1, stop = 0;

	memset(&r, 0, sizeof(r));
	r.cfg = cfg;
	r.comm = comm;
	r.metrics.fd = -1;
	r.metrics.events.fd = -1;
	r.t_start = now_s();
	if (setup(&r, err, errlen) < 0)
		goto out;

	double loss_sum = 0, t_mark = now_s(), t_train = 0;
	/* Phase times since the last record (rank 0's), and the loader's
	 * stall total at that record. */
	double ph_compute = 0, ph_comm = 0, ph_exposed = 0, stall_mark = 0;
	long loss_n = 0, steps_here = 0, mark_step = r.pos.step;
	double lr = 0, last_loss = NAN, last_ips = NAN; /* of the last record, for an eval right after it */
	long saved_step = -1;
	/* --steps ends the run mid-epoch; at an epoch's last batch the epoch is
	 * closed first (eval, checkpoint) so the limit never skips an eval. */
#define LIMIT_REACHED() (cfg->max_steps > 0 && r.pos.step >= cfg->max_steps)
	while (!stop && r.pos.epoch < cfg->epochs && !LIMIT_REACHED()) {
		int epoch_done = 0;
		if (dl_loader_start_epoch(r.train, r.pos.epoch, (size_t)r.pos.epoch_step, err, errlen) < 0)
			goto out;
		while (!stop) {
			if (LIMIT_REACHED() && r.pos.epoch_step < r.steps_per_epoch)
				break;
			int n, got;
			double t0 = now_s();
			struct dl_step_result sr;
			got = fetch(&r, r.train, &n, err, errlen);
			if (got < 0)
				goto out;
			if (got == 0) {
				epoch_done = 1;
				break;
			}
			if (n != cfg->batch) { /* drop_last promises full batches */
				dl_errf(err, errlen, "%s:%d: loader gave a batch of %d, expected %d", __FILE__, __LINE__,
				         n, cfg->batch);
				goto out;
			}
			lr = dl_schedule_lr(&r.sched, r.pos.step);
			if (train_step(&r, lr, &sr, err, errlen) < 0)
				goto out;
			stop = sr.stop;
			r.pos.step++;
			r.pos.epoch_step++;
			steps_here++;
			loss_sum += sr.loss;
			loss_n++;
			ph_compute += sr.compute_s;
			ph_comm += sr.comm_s;
			ph_exposed += sr.exposed_comm_s;
			t_train += now_s() - t0;
			if (comm->rank == 0 && (r.pos.step % cfg->print_every == 0 || r.pos.step == r.total_steps)) {
				double now = now_s(), eta_s;
				struct dl_loader_stats ls;
				char eta[32];
				dl_loader_get_stats(r.train, &ls);
				struct dl_metrics_record rec = {
					.step = r.pos.step, .epoch = r.pos.epoch + 1, .loss = loss_sum / (double)loss_n,
					.lr = lr, .img_per_s = (double)(r.pos.step - mark_step) * r.pos.global_batch / (now - t_mark),
					.loader_stall_s = ls.stall_seconds - stall_mark, .compute_s = ph_compute,
					.comm_s = ph_comm, .exposed_comm_s = ph_exposed, .bad_samples = ls.bad_samples,
					.wall_s = r.wall0 + (now - r.t_start), .ranks = comm->size,
				};
				eta_s = t_train / (double)steps_here * (double)(r.total_steps - r.pos.step);
				fmt_hms(eta, sizeof(eta), eta_s);
				fprintf(stderr, "step %ld/%ld  epoch %d/%d  loss %.4f  lr %.4g  %.1f img/s  eta %s\n",
				        r.pos.step, r.total_steps, rec.epoch, cfg->epochs, rec.loss, lr, rec.img_per_s, eta);
				if (dl_metrics_write(&r.metrics, &rec, err, errlen) < 0)
					goto out;
				loss_sum = 0;
				loss_n = 0;
				ph_compute = ph_comm = ph_exposed = 0;
				stall_mark = ls.stall_seconds;
				last_loss = rec.loss;
				last_ips = rec.img_per_s;
				mark_step = r.pos.step;
				t_mark = now;
			}
		}
		if (!epoch_done)
			break;
		/* End of an epoch: evaluate (also agrees on stopping), checkpoint. */
		double res[4], t_eval = now_s();
		int eval_stop;
		if (evaluate(&r, cfg->eval, &eval_stop, res, err, errlen) < 0)
			goto out;
		stop = stop || eval_stop;
		r.pos.epoch++;
		r.pos.epoch_step = 0;
		if (comm->rank == 0 && cfg->eval) {
			struct dl_loader_stats ls;
			double now = now_s();
			dl_loader_get_stats(r.train, &ls);
			struct dl_metrics_record rec = {
				.step = r.pos.step, .epoch = r.pos.epoch, .loss = loss_n ? loss_sum / (double)loss_n : last_loss,
				.lr = lr, .img_per_s = loss_n ? (double)(r.pos.step - mark_step) * r.pos.global_batch / (t_eval - t_mark)
				                              : last_ips,
				.loader_stall_s = ls.stall_seconds - stall_mark, .compute_s = ph_compute,
				.comm_s = ph_comm, .exposed_comm_s = ph_exposed, .bad_samples = ls.bad_samples,
				.wall_s = r.wall0 + (now - r.t_start), .ranks = comm->size, .has_eval = 1, .top1 = res[0],
				.top5 = res[1], .eval_loss = res[2], .eval_samples = (uint64_t)res[3],
			};
			fprintf(stderr, "epoch %d/%d  eval top1 %.2f%%  top5 %.2f%%  loss %.4f  (%.0f samples, %.1f s)\n",
			        r.pos.epoch, cfg->epochs, res[0], res[1], res[2], res[3], now - t_eval);
			if (dl_metrics_write(&r.metrics, &rec, err, errlen) < 0)
				goto out;
			loss_sum = 0;
			loss_n = 0;
			ph_compute = ph_comm = ph_exposed = 0;
			stall_mark = ls.stall_seconds;
			mark_step = r.pos.step;
			t_mark = now_s();
		}
		if (save_checkpoint(&r, err, errlen) < 0)
			goto out;
		saved_step = r.pos.step;
	}

	if (stop && !LIMIT_REACHED() && r.pos.epoch < cfg->epochs) {
		if (saved_step != r.pos.step && save_checkpoint(&r, err, errlen) < 0)
			goto out;
		if (comm->rank == 0) {
			int sig = cfg->stop ? (int)*cfg->stop : 0;
			fprintf(stderr, "dljob: %s: stopped after step %ld (epoch %d, batch %ld), checkpoint written to "
			        "%s/%s; continue with --resume\n", sig ? strsignal(sig) : "stop requested by a peer",
			        r.pos.step, r.pos.epoch + 1, r.pos.epoch_step, cfg->out_dir, DL_CHECKPOINT_NAME);
		}
		rv = DL_TRAIN_PREEMPTED;
		goto out;
	}
	/* Finished (epochs or --steps): the last position, then the weights. */
	if (saved_step != r.pos.step && steps_here > 0 && save_checkpoint(&r, err, errlen) < 0)
		goto out;
#undef LIMIT_REACHED
	if (export_weights(&r, err, errlen) < 0)
		goto out;
	if (comm->rank == 0)
		fprintf(stderr, "dljob: done after %ld steps, weights in %s/model.safetensors\n", r.pos.step, cfg->out_dir);
	rv = DL_TRAIN_DONE;
out:
	teardown(&r);
	return rv;
}
