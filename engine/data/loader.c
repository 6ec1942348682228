/* The batch loader: worker threads fill a ring of `prefetch` batch slots with
 * samples of this rank's share of the epoch permutation; dl_loader_next hands
 * the slots out in order.
 *
 * Determinism: the sample at position p of the epoch depends only on (seed,
 * epoch, p, rank, world) -- the permutation is seeded by (seed, epoch), the
 * augmentation of dataset index i by (seed, epoch, i) -- and every worker
 * writes to the fixed place of its sample in the slot, so the batches are
 * bit-identical whatever the thread count or scheduling.
 *
 * Sharding: rank r of w takes positions r, r+w, r+2w, ... of the permutation.
 * drop_last (train): every rank takes floor(n/w/batch) full batches, so every
 * rank runs the same number of steps.  Otherwise (eval) every sample is
 * delivered exactly once across ranks; every rank still gets the same number
 * of batches, ceil(ceil(n/w)/batch), so collectives stay matched -- the last
 * batch may be short (*n < batch), and on ranks holding one sample fewer it
 * may even be empty (*n == 0).
 *
 * Layout: float32 (batch,C,H,W) from the dataset's load, or uint8
 * (batch,H,W,C) from its load_u8 for a consumer that normalizes on a GPU;
 * the slot buffers come from the caller's allocator when it gives one
 * (pinned memory, so the batch goes to the device without a staging copy). */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/data/internal.h"

/* A sample that fails is replaced by the next index; give up on a run of
 * this many consecutive failures (the data is gone, not damaged). */
#define MAX_SUBSTITUTES 64

struct slot {
	void *x;    // (batch, C, H, W) float32 or (batch, H, W, C) uint8
	int *y;     // (batch)
	int filled; // samples written so far
};

struct dl_loader {
	struct dl_dataset *ds;
	enum dl_split split;
	struct dl_loader_options o;
	size_t sample_floats; // C*H*W
	size_t sample_bytes;  // one sample in the ring: C*H*W floats or bytes
	size_t n;             // samples in the split
	size_t *perm;         // (n) this epoch's order
	size_t my_count;      // samples this rank takes per epoch
	size_t steps;
	uint64_t epoch_seed;

	struct slot *slots; // (prefetch)
	pthread_t *threads;
	int nthreads, nstarted;

	pthread_mutex_t mu;
	pthread_cond_t work_cv; // workers wait for claimable items
	pthread_cond_t done_cv; // the consumer / start_epoch wait for workers
	size_t next_item;       // next position (of this rank's share) to claim
	size_t cur_batch;       // next batch the consumer takes
	unsigned gen;           // bumped per epoch so stale work is dropped
	int active;             // workers loading right now
	int running, stop, failed;
	int held;      // the consumer holds slot cur_batch (dl_loader_next_ref)
	size_t held_n; // its sample count
	char fail_msg[1024];

	uint8_t *bad_seen; // (n) 1 once index i failed; logged once
	size_t bad_distinct;
	uint64_t bad_samples, samples;
	double stall;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Expected samples of batch b on this rank. */
static size_t batch_fill(const struct dl_loader *l, size_t b)
{
	size_t start = b * (size_t)l->o.batch;
	if (start >= l->my_count)
		return 0;
	size_t left = l->my_count - start;
	return left < (size_t)l->o.batch ? left : (size_t)l->o.batch;
}

static void fail_locked(struct dl_loader *l, const char *msg)
{
	if (!l->failed) {
		l->failed = 1;
		snprintf(l->fail_msg, sizeof l->fail_msg, "%s", msg);
	}
	pthread_cond_broadcast(&l->done_cv);
}

/* Give the held slot (dl_loader_next_ref) back to the workers. Locked. */
static void release_locked(struct dl_loader *l)
{
	if (!l->held)
		return;
	l->held = 0;
	l->slots[l->cur_batch % (size_t)l->o.prefetch].filled = 0;
	l->cur_batch++;
	l->samples += l->held_n;
	pthread_cond_broadcast(&l->work_cv);
}

/* Record that dataset index idx failed with err; returns 0 to carry on with
 * a substitute, -1 when the bad fraction is exceeded. Called unlocked. */
static int note_bad(struct dl_loader *l, size_t idx, const char *raw_err)
{
	int rv = 0;
	char msg[1024], err[768];

	/* the message holds a file name from the data tree, which anyone who
	 * can write there chose: one log line each, control bytes shown as '?' */
	snprintf(err, sizeof err, "%s", raw_err);
	for (char *c = err; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';

	pthread_mutex_lock(&l->mu);
	if (l->failed) { // stopping anyway: no more log lines after the error
		pthread_mutex_unlock(&l->mu);
		return -1;
	}
	l->bad_samples++;
	if (!l->bad_seen[idx]) {
		l->bad_seen[idx] = 1;
		l->bad_distinct++;
		fprintf(stderr, "dljob: data: bad sample replaced by the next one: %s\n", err);
		if ((double)l->bad_distinct > l->ds->max_bad_fraction * (double)l->n) {
			snprintf(msg, sizeof msg,
			         "data: %zu of %zu %s samples are unusable, more than the allowed fraction %g (last: %.700s)",
			         l->bad_distinct, l->n, l->split == DL_SPLIT_TRAIN ? "train" : "eval",
			         l->ds->max_bad_fraction, err);
			fail_locked(l, msg);
			rv = -1;
		}
	}
	pthread_mutex_unlock(&l->mu);
	return rv;
}

/* Load position p of this rank's share into its slot place, substituting
 * following indices for unusable samples. Called unlocked. */
static int fill_one(struct dl_loader *l, size_t p, uint64_t epoch_seed, const size_t *perm)
{
	size_t b = p / (size_t)l->o.batch, within = p % (size_t)l->o.batch;
	struct slot *s = &l->slots[b % (size_t)l->o.prefetch];
	char *dst = (char *)s->x + within * l->sample_bytes;
	int u8 = l->o.layout == DL_BATCH_U8_NHWC;
	size_t idx = perm[p * (size_t)l->o.world + (size_t)l->o.rank];
	char err[1024];

	for (int tries = 0; tries < MAX_SUBSTITUTES; tries++) {
		int y = 0;
		err[0] = 0;
		uint64_t aug = dl_seed_mix(epoch_seed, idx);
		if ((u8 ? l->ds->load_u8(l->ds, l->split, idx, aug, (uint8_t *)dst, &y, err, sizeof err) :
		     l->ds->load(l->ds, l->split, idx, aug, (float *)dst, &y, err, sizeof err)) == 0) {
			if (y < 0 || y >= l->ds->num_classes) {
				snprintf(err, sizeof err, "%s sample %zu: label %d out of range (%d classes)",
				         l->ds->kind, idx, y, l->ds->num_classes);
			} else {
				s->y[within] = y;
				return 0;
			}
		}
		if (!err[0])
			snprintf(err, sizeof err, "%s sample %zu: unusable", l->ds->kind, idx);
		if (note_bad(l, idx, err) != 0)
			return -1;
		idx = (idx + 1) % l->n;
	}
	pthread_mutex_lock(&l->mu);
	snprintf(err, sizeof err, "data: %d samples in a row are unusable, giving up", MAX_SUBSTITUTES);
	fail_locked(l, err);
	pthread_mutex_unlock(&l->mu);
	return -1;
}

static void *worker(void *arg)
{
	struct dl_loader *l = arg;
	size_t prefetch = (size_t)l->o.prefetch, batch = (size_t)l->o.batch;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		if (!l->running || l->failed || l->next_item >= l->my_count ||
		    l->next_item / batch >= l->cur_batch + prefetch) {
			pthread_cond_wait(&l->work_cv, &l->mu);
			continue;
		}
		size_t p = l->next_item++;
		unsigned gen = l->gen;
		uint64_t es = l->epoch_seed;
		const size_t *perm = l->perm;
		l->active++;
		pthread_mutex_unlock(&l->mu);

		int rc = fill_one(l, p, es, perm);

		pthread_mutex_lock(&l->mu);
		l->active--;
		if (rc == 0 && gen == l->gen)
			l->slots[(p / batch) % prefetch].filled++;
		pthread_cond_broadcast(&l->done_cv);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Ring buffers come from the caller's allocator when it gave one. */
static void *ring_alloc(struct dl_loader *l, size_t bytes)
{
	return l->o.host_alloc ? l->o.host_alloc(bytes, l->o.alloc_ctx) : malloc(bytes);
}

static void ring_free(struct dl_loader *l, void *p)
{
	if (!p)
		return;
	if (l->o.host_free)
		l->o.host_free(p, l->o.alloc_ctx);
	else
		free(p);
}

struct dl_loader *dl_loader_create(struct dl_dataset *ds, enum dl_split split,
                                   const struct dl_loader_options *opt, char *err, size_t errlen)
{
	struct dl_loader *l = NULL;
	struct dl_loader_options o = *opt;

	if (o.prefetch == 0)
		o.prefetch = 2;
	if (o.threads == 0)
		o.threads = dl_cpu_count() > 1 ? dl_cpu_count() - 1 : 1;
	if (o.world == 0)
		o.world = 1;
	if (o.batch <= 0 || o.prefetch < 0 || o.threads < 0 || o.world < 0 ||
	    o.rank < 0 || o.rank >= o.world) {
		dl_errf(err, errlen, "loader: bad options (batch %d, prefetch %d, threads %d, rank %d of %d)",
		        o.batch, o.prefetch, o.threads, o.rank, o.world);
		return NULL;
	}
	if (o.layout != DL_BATCH_F32_NCHW && o.layout != DL_BATCH_U8_NHWC) {
		dl_errf(err, errlen, "loader: unknown batch layout %d", (int)o.layout);
		return NULL;
	}
	if (o.layout == DL_BATCH_U8_NHWC && (!ds->load_u8 || !ds->u8_mean || !ds->u8_std)) {
		dl_errf(err, errlen, "loader: the %s dataset has no uint8 path (load_u8), so it cannot fill "
		        "uint8 NHWC batches; use the float32 layout", ds->kind);
		return NULL;
	}
	if (!o.host_alloc != !o.host_free) {
		dl_errf(err, errlen, "loader: host_alloc and host_free must be given together");
		return NULL;
	}
	l = calloc(1, sizeof *l);
	if (!l) {
		dl_errf(err, errlen, "loader: out of memory");
		return NULL;
	}
	l->ds = ds;
	l->split = split;
	l->o = o;
	l->sample_floats = (size_t)ds->channels * ds->height * ds->width;
	l->sample_bytes = l->sample_floats * (o.layout == DL_BATCH_U8_NHWC ? 1 : sizeof(float));
	l->n = ds->count[split == DL_SPLIT_EVAL];
	if (o.drop_last) {
		l->steps = l->n / (size_t)o.world / (size_t)o.batch;
		l->my_count = l->steps * (size_t)o.batch;
	} else {
		size_t most = (l->n + (size_t)o.world - 1) / (size_t)o.world;
		l->my_count = (size_t)o.rank < l->n ? (l->n - (size_t)o.rank + (size_t)o.world - 1) / (size_t)o.world : 0;
		l->steps = (most + (size_t)o.batch - 1) / (size_t)o.batch;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->work_cv, NULL);
	pthread_cond_init(&l->done_cv, NULL);
	l->perm = malloc((l->n ? l->n : 1) * sizeof *l->perm);
	l->bad_seen = calloc(l->n ? l->n : 1, 1);
	l->slots = calloc((size_t)o.prefetch, sizeof *l->slots);
	l->threads = calloc((size_t)o.threads, sizeof *l->threads);
	if (!l->perm || !l->bad_seen || !l->slots || !l->threads)
		goto oom;
	for (int i = 0; i < o.prefetch; i++) {
		l->slots[i].x = ring_alloc(l, (size_t)o.batch * l->sample_bytes);
		l->slots[i].y = ring_alloc(l, (size_t)o.batch * sizeof(int));
		if (!l->slots[i].x || !l->slots[i].y)
			goto oom;
	}
	for (int i = 0; i < o.threads; i++) {
		int rc = pthread_create(&l->threads[i], NULL, worker, l);
		if (rc != 0) {
			dl_errf(err, errlen, "loader: pthread_create: %s", strerror(rc));
			dl_loader_destroy(l);
			return NULL;
		}
		l->nstarted++;
	}
	return l;
oom:
	dl_errf(err, errlen, "loader: out of memory%s for %d batches of %d samples of %zu %s",
	        o.host_alloc ? " (the caller's host_alloc failed)" : "", o.prefetch, o.batch, l->sample_floats,
	        o.layout == DL_BATCH_U8_NHWC ? "bytes" : "floats");
	dl_loader_destroy(l);
	return NULL;
}

size_t dl_loader_steps(const struct dl_loader *l)
{
	return l->steps;
}

int dl_loader_start_epoch(struct dl_loader *l, int epoch, size_t skip, char *err, size_t errlen)
{
	int rv = -1;

	pthread_mutex_lock(&l->mu);
	/* Stop handing out work of the old epoch and let in-flight samples land. */
	release_locked(l);
	l->running = 0;
	l->gen++;
	while (l->active > 0)
		pthread_cond_wait(&l->done_cv, &l->mu);
	if (l->failed) {
		dl_errf(err, errlen, "%s", l->fail_msg);
		goto out;
	}
	if (skip > l->steps) {
		dl_errf(err, errlen, "loader: cannot skip %zu batches, the epoch has %zu", skip, l->steps);
		goto out;
	}
	l->epoch_seed = dl_seed_mix(l->o.seed, (uint64_t)epoch);
	for (size_t i = 0; i < l->n; i++)
		l->perm[i] = i;
	if (l->o.shuffle) {
		/* Fisher-Yates from a stream seeded by (seed, epoch) only. */
		uint64_t st = dl_seed_mix(l->epoch_seed, 0x5045524dull);
		for (size_t i = l->n; i > 1; i--) {
			size_t j = (size_t)dl_rand_below(&st, i);
			size_t t = l->perm[i - 1];
			l->perm[i - 1] = l->perm[j];
			l->perm[j] = t;
		}
	}
	for (int i = 0; i < l->o.prefetch; i++)
		l->slots[i].filled = 0;
	l->cur_batch = skip;
	l->next_item = skip * (size_t)l->o.batch;
	l->running = 1;
	pthread_cond_broadcast(&l->work_cv);
	rv = 0;
out:
	pthread_mutex_unlock(&l->mu);
	return rv;
}

/* Wait for the next batch: 1 with its slot and size, 0 at the end of the
 * epoch, -1 on error.  The slot is the caller's until it is released:
 * workers only claim batches below cur_batch + prefetch. */
static int acquire(struct dl_loader *l, struct slot **sp, size_t *wantp, char *err, size_t errlen)
{
	pthread_mutex_lock(&l->mu);
	release_locked(l);
	if (!l->running) {
		pthread_mutex_unlock(&l->mu);
		dl_errf(err, errlen, "loader: dl_loader_next before dl_loader_start_epoch");
		return -1;
	}
	size_t b = l->cur_batch;
	if (b >= l->steps) {
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	size_t want = batch_fill(l, b);
	struct slot *s = &l->slots[b % (size_t)l->o.prefetch];
	if ((size_t)s->filled < want && !l->failed) {
		double t0 = now_s();
		while ((size_t)s->filled < want && !l->failed)
			pthread_cond_wait(&l->done_cv, &l->mu);
		l->stall += now_s() - t0;
	}
	if (l->failed) {
		dl_errf(err, errlen, "%s", l->fail_msg);
		pthread_mutex_unlock(&l->mu);
		return -1;
	}
	pthread_mutex_unlock(&l->mu);
	*sp = s;
	*wantp = want;
	return 1;
}

/* The layout check of the dl_loader_next* calls. */
static int layout_is(const struct dl_loader *l, enum dl_batch_layout want, const char *call, char *err,
                     size_t errlen)
{
	static const char *const names[] = {"float32 NCHW", "uint8 NHWC"};
	if (l->o.layout == want)
		return 1;
	dl_errf(err, errlen, "loader: %s on a loader made for %s batches (use %s)", call, names[l->o.layout],
	        l->o.layout == DL_BATCH_U8_NHWC ? "dl_loader_next_u8_ref" : "dl_loader_next or dl_loader_next_ref");
	return 0;
}

int dl_loader_next(struct dl_loader *l, float *x, int *y, int *n, char *err, size_t errlen)
{
	struct slot *s;
	size_t want;

	if (!layout_is(l, DL_BATCH_F32_NCHW, "dl_loader_next", err, errlen))
		return -1;
	int rc = acquire(l, &s, &want, err, errlen);
	if (rc != 1)
		return rc;
	memcpy(x, s->x, want * l->sample_floats * sizeof(float));
	memcpy(y, s->y, want * sizeof(int));
	if (want < (size_t)l->o.batch) {
		memset(x + want * l->sample_floats, 0, ((size_t)l->o.batch - want) * l->sample_floats * sizeof(float));
		memset(y + want, 0, ((size_t)l->o.batch - want) * sizeof(int));
	}
	*n = (int)want;
	pthread_mutex_lock(&l->mu);
	l->held = 1;
	l->held_n = want;
	release_locked(l);
	pthread_mutex_unlock(&l->mu);
	return 1;
}

/* Take the next batch in place: its slot stays the caller's until the next
 * call; a short batch's tail is zero-filled. */
static int next_ref(struct dl_loader *l, const void **x, const int **y, int *n, char *err, size_t errlen)
{
	struct slot *s;
	size_t want;
	int rc = acquire(l, &s, &want, err, errlen);

	if (rc != 1)
		return rc;
	if (want < (size_t)l->o.batch) {
		memset((char *)s->x + want * l->sample_bytes, 0, ((size_t)l->o.batch - want) * l->sample_bytes);
		memset(s->y + want, 0, ((size_t)l->o.batch - want) * sizeof(int));
	}
	*x = s->x;
	*y = s->y;
	*n = (int)want;
	pthread_mutex_lock(&l->mu);
	l->held = 1; // released by the next call
	l->held_n = want;
	pthread_mutex_unlock(&l->mu);
	return 1;
}

int dl_loader_next_ref(struct dl_loader *l, const float **x, const int **y, int *n, char *err, size_t errlen)
{
	const void *p;
	if (!layout_is(l, DL_BATCH_F32_NCHW, "dl_loader_next_ref", err, errlen))
		return -1;
	int rc = next_ref(l, &p, y, n, err, errlen);
	if (rc == 1)
		*x = p;
	return rc;
}

int dl_loader_next_u8_ref(struct dl_loader *l, const uint8_t **x, const int **y, int *n, char *err,
                          size_t errlen)
{
	const void *p;
	if (!layout_is(l, DL_BATCH_U8_NHWC, "dl_loader_next_u8_ref", err, errlen))
		return -1;
	int rc = next_ref(l, &p, y, n, err, errlen);
	if (rc == 1)
		*x = p;
	return rc;
}

void dl_loader_get_stats(const struct dl_loader *l, struct dl_loader_stats *st)
{
	struct dl_loader *m = (struct dl_loader *)l; // the lock is not part of the observable state
	pthread_mutex_lock(&m->mu);
	st->stall_seconds = l->stall;
	st->bad_samples = l->bad_samples;
	st->samples = l->samples;
	pthread_mutex_unlock(&m->mu);
}

void dl_loader_destroy(struct dl_loader *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_cond_broadcast(&l->work_cv);
	pthread_mutex_unlock(&l->mu);
	for (int i = 0; i < l->nstarted; i++)
		pthread_join(l->threads[i], NULL);
	if (l->slots) {
		for (int i = 0; i < l->o.prefetch; i++) {
			ring_free(l, l->slots[i].x);
			ring_free(l, l->slots[i].y);
		}
	}
	free(l->slots);
	free(l->threads);
	free(l->perm);
	free(l->bad_seen);
	pthread_cond_destroy(&l->work_cv);
	pthread_cond_destroy(&l->done_cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
}
