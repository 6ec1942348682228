/* The batch loader against a fake dataset whose samples encode their index:
 * sharding is disjoint and complete for 1..4 ranks (train and eval), batches
 * are the same with 1 and 3 worker threads, skip resumes mid-epoch, epochs
 * differ, unusable samples are replaced by the next index, logged, counted,
 * and too many of them stop the loader with a clear error; dl_loader_next_ref
 * gives what dl_loader_next gives, without the copy.  Also checks the
 * synthetic dataset is deterministic and its spec is parsed. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "common/err.h"
#include "engine/data/dataset.h"
#include "tests/check.h"

#define C 2
#define H 3
#define W 3
#define SF (C * H * W)

/* Fake dataset: sample i is filled with i (channel 0) and a value from the
 * augmentation seed (channel 1); label i % 7; indices in bad[] fail. */
struct fake {
	const size_t *bad;
	size_t nbad;
};

static int fake_load(struct dl_dataset *ds, enum dl_split split, size_t index, uint64_t aug_seed,
                     float *chw, int *label, char *err, size_t errlen)
{
	struct fake *f = ds->impl;
	for (size_t i = 0; i < f->nbad; i++) {
		if (f->bad[i] == index) {
			dl_errf(err, errlen, "fake/%zu.jpg: made to fail", index);
			return -1;
		}
	}
	for (int i = 0; i < SF; i++)
		chw[i] = i < H * W ? (float)index : (float)(aug_seed % 1000003);
	*label = (int)(index % 7);
	return 0;
}

static void fake_init(struct dl_dataset *ds, struct fake *f, size_t ntrain, size_t neval)
{
	memset(ds, 0, sizeof *ds);
	snprintf(ds->kind, sizeof ds->kind, "fake");
	ds->channels = C;
	ds->height = H;
	ds->width = W;
	ds->num_classes = 7;
	ds->count[0] = ntrain;
	ds->count[1] = neval;
	ds->load = fake_load;
	ds->impl = f;
	ds->max_bad_fraction = 0.01;
}

/* Run one epoch; append the indices (channel 0 values) and the aug values
 * to idx[]/aug[]; return samples, or -1. */
static long run_epoch(struct dl_dataset *ds, enum dl_split split, struct dl_loader_options *o,
                      int epoch, size_t skip, long *idx, double *aug, size_t *steps_out, char *err)
{
	struct dl_loader *l = dl_loader_create(ds, split, o, err, 512);
	float *x = malloc(sizeof(float) * SF * (size_t)o->batch);
	int *y = malloc(sizeof(int) * (size_t)o->batch);
	long got = 0;
	int n, rc;

	if (!l || !x || !y) {
		got = -1;
		goto out;
	}
	if (steps_out)
		*steps_out = dl_loader_steps(l);
	if (dl_loader_start_epoch(l, epoch, skip, err, 512) != 0) {
		got = -1;
		goto out;
	}
	size_t batches = 0;
	while ((rc = dl_loader_next(l, x, y, &n, err, 512)) == 1) {
		batches++;
		for (int i = 0; i < n; i++) {
			idx[got] = (long)x[(size_t)i * SF];
			if (aug)
				aug[got] = x[(size_t)i * SF + H * W];
			if (y[i] != idx[got] % 7)
				fprintf(stderr, "label %d of sample %ld wrong\n", y[i], idx[got]);
			got++;
		}
		for (int i = n; i < o->batch; i++)
			CHECK(x[(size_t)i * SF] == 0 && y[i] == 0, "padding of a short batch is not zero");
	}
	if (rc < 0)
		got = -1;
	else
		CHECK(batches + skip == dl_loader_steps(l), "got %zu batches + skip %zu, steps says %zu",
		      batches, skip, dl_loader_steps(l));
out:
	dl_loader_destroy(l);
	free(x);
	free(y);
	return got;
}

static void test_sharding(void)
{
	struct dl_dataset ds;
	struct fake f = {0};
	const size_t N = 103, NE = 41;
	char err[512];
	long idx[256];

	fake_init(&ds, &f, N, NE);
	for (int w = 1; w <= 4; w++) {
		/* train: disjoint, equal steps, drops only the remainder */
		int seen[103] = {0};
		size_t steps0 = 0;
		long total = 0;
		for (int r = 0; r < w; r++) {
			struct dl_loader_options o = {.batch = 5, .threads = 2, .seed = 42, .rank = r,
			                              .world = w, .shuffle = 1, .drop_last = 1};
			size_t steps;
			long got = run_epoch(&ds, DL_SPLIT_TRAIN, &o, 3, 0, idx, NULL, &steps, err);
			CHECK(got >= 0, "train w=%d r=%d: %s", w, r, err);
			if (r == 0)
				steps0 = steps;
			CHECK(steps == steps0, "w=%d: rank %d has %zu steps, rank 0 %zu", w, r, steps, steps0);
			CHECK(steps == N / (size_t)w / 5, "w=%d: %zu steps", w, steps);
			for (long i = 0; i < got; i++) {
				CHECK(idx[i] >= 0 && idx[i] < (long)N, "index %ld", idx[i]);
				if (idx[i] >= 0 && idx[i] < (long)N)
					seen[idx[i]]++;
			}
			total += got;
		}
		for (size_t i = 0; i < N; i++)
			CHECK(seen[i] <= 1, "train w=%d: sample %zu delivered %d times", w, i, seen[i]);
		CHECK(total == (long)(N / (size_t)w / 5 * 5 * (size_t)w), "train w=%d: %ld samples", w, total);

		/* eval: every sample exactly once, same step count on every rank */
		int eseen[41] = {0};
		for (int r = 0; r < w; r++) {
			struct dl_loader_options o = {.batch = 4, .threads = 3, .seed = 42, .rank = r,
			                              .world = w, .shuffle = 0, .drop_last = 0};
			size_t steps;
			long got = run_epoch(&ds, DL_SPLIT_EVAL, &o, 0, 0, idx, NULL, &steps, err);
			CHECK(got >= 0, "eval w=%d r=%d: %s", w, r, err);
			CHECK(steps == ((NE + (size_t)w - 1) / (size_t)w + 3) / 4, "eval w=%d: %zu steps", w, steps);
			for (long i = 0; i < got; i++)
				if (idx[i] >= 0 && idx[i] < (long)NE)
					eseen[idx[i]]++;
		}
		for (size_t i = 0; i < NE; i++)
			CHECK(eseen[i] == 1, "eval w=%d: sample %zu delivered %d times", w, i, eseen[i]);
	}
}

static void test_determinism(void)
{
	struct dl_dataset ds;
	struct fake f = {0};
	char err[512];
	long a[128], b[128], c[128];
	double aa[128], ab[128], ac[128];

	fake_init(&ds, &f, 100, 10);
	struct dl_loader_options o = {.batch = 8, .threads = 1, .prefetch = 1, .seed = 7, .world = 1,
	                              .shuffle = 1, .drop_last = 1};
	long na = run_epoch(&ds, DL_SPLIT_TRAIN, &o, 1, 0, a, aa, NULL, err);
	o.threads = 3;
	o.prefetch = 3;
	long nb = run_epoch(&ds, DL_SPLIT_TRAIN, &o, 1, 0, b, ab, NULL, err);
	CHECK(na == 96 && nb == 96, "%ld / %ld samples", na, nb);
	CHECK(memcmp(a, b, sizeof(long) * 96) == 0, "order differs between 1 and 3 threads");
	CHECK(memcmp(aa, ab, sizeof(double) * 96) == 0, "augmentation seeds differ between 1 and 3 threads");
	int shuffled = 0;
	for (int i = 0; i < 96; i++)
		shuffled |= a[i] != i;
	CHECK(shuffled, "shuffle=1 gave the identity order");
	/* another epoch: another order */
	long nc = run_epoch(&ds, DL_SPLIT_TRAIN, &o, 2, 0, c, ac, NULL, err);
	CHECK(nc == 96 && memcmp(a, c, sizeof(long) * 96) != 0, "epoch 2 has the order of epoch 1");
	/* resume: skip 5 batches gives the tail of the same epoch */
	nc = run_epoch(&ds, DL_SPLIT_TRAIN, &o, 1, 5, c, ac, NULL, err);
	CHECK(nc == 96 - 40 && memcmp(a + 40, c, sizeof(long) * (size_t)nc) == 0 &&
	      memcmp(aa + 40, ac, sizeof(double) * (size_t)nc) == 0, "skip=5 is not the tail of the epoch");
	/* another seed: another order */
	o.seed = 8;
	nc = run_epoch(&ds, DL_SPLIT_TRAIN, &o, 1, 0, c, ac, NULL, err);
	CHECK(nc == 96 && memcmp(a, c, sizeof(long) * 96) != 0, "seed 8 has the order of seed 7");
}

static void test_bad_samples(void)
{
	struct dl_dataset ds;
	size_t bad[] = {10, 11, 50};
	struct fake f = {bad, 3};
	char err[512];
	long idx[128];

	fake_init(&ds, &f, 100, 10);
	ds.max_bad_fraction = 0.05;
	struct dl_loader_options o = {.batch = 10, .threads = 2, .seed = 1, .world = 1, .shuffle = 0, .drop_last = 1};
	struct dl_loader *l = dl_loader_create(&ds, DL_SPLIT_TRAIN, &o, err, sizeof err);
	float x[10 * SF];
	int y[10], n, rc;
	long got = 0;
	CHECK(l != NULL, "%s", err);
	if (!l)
		return;
	for (int epoch = 0; epoch < 2; epoch++) {
		CHECK(dl_loader_start_epoch(l, epoch, 0, err, sizeof err) == 0, "%s", err);
		while ((rc = dl_loader_next(l, x, y, &n, err, sizeof err)) == 1)
			for (int i = 0; i < n; i++)
				idx[got++ % 128] = (long)x[i * SF];
		CHECK(rc == 0, "bad samples under the limit stopped the loader: %s", err);
		if (epoch == 0) {
			/* 10 and 11 fail: both become 12; 50 becomes 51 */
			CHECK(idx[10] == 12 && idx[11] == 12 && idx[50] == 51 && idx[12] == 12,
			      "substitutes are %ld %ld %ld", idx[10], idx[11], idx[50]);
		}
	}
	struct dl_loader_stats st;
	dl_loader_get_stats(l, &st);
	/* per epoch: 10 fails, 11 fails (as itself and as 10's substitute), 50 fails */
	CHECK(st.bad_samples == 2 * 4 && st.samples == 200, "stats: %llu bad, %llu samples",
	      (unsigned long long)st.bad_samples, (unsigned long long)st.samples);
	CHECK(st.stall_seconds >= 0, "stall %g", st.stall_seconds);
	dl_loader_destroy(l);

	/* 3 of 100 bad > 2%: a clear error */
	ds.max_bad_fraction = 0.02;
	l = dl_loader_create(&ds, DL_SPLIT_TRAIN, &o, err, sizeof err);
	CHECK(l && dl_loader_start_epoch(l, 0, 0, err, sizeof err) == 0, "%s", err);
	while ((rc = dl_loader_next(l, x, y, &n, err, sizeof err)) == 1)
		;
	CHECK(rc == -1, "the loader did not stop at 3%% bad samples");
	if (rc == -1) {
		CHECK_CONTAINS(err, "3 of 100 train samples are unusable");
		CHECK_CONTAINS(err, "fake/50.jpg");
	}
	dl_loader_destroy(l);
}

/* dl_loader_next_ref hands out the ring's batches in place: the same data
 * as dl_loader_next, zeroed tail in a short batch, and a restart while a
 * batch is held works. */
static void test_next_ref(void)
{
	struct dl_dataset ds;
	struct fake f = {0};
	char err[512];
	float x[5 * SF];
	int y[5], n, rc;
	const float *rx;
	const int *ry;

	fake_init(&ds, &f, 50, 23);
	for (int split = 0; split < 2; split++) {
		struct dl_loader_options o = {.batch = 5, .threads = 2, .seed = 3, .world = 1,
		                              .shuffle = !split, .drop_last = !split};
		struct dl_loader *a = dl_loader_create(&ds, (enum dl_split)split, &o, err, sizeof err);
		struct dl_loader *b = dl_loader_create(&ds, (enum dl_split)split, &o, err, sizeof err);
		CHECK(a && b, "%s", err);
		if (!a || !b)
			return;
		CHECK(dl_loader_start_epoch(a, 1, 0, err, sizeof err) == 0, "%s", err);
		CHECK(dl_loader_start_epoch(b, 1, 0, err, sizeof err) == 0, "%s", err);
		/* restart b while it holds a batch */
		CHECK(dl_loader_next_ref(b, &rx, &ry, &n, err, sizeof err) == 1, "%s", err);
		CHECK(dl_loader_next_ref(b, &rx, &ry, &n, err, sizeof err) == 1, "%s", err);
		CHECK(dl_loader_start_epoch(b, 1, 0, err, sizeof err) == 0, "restart while held: %s", err);
		int batches = 0;
		while ((rc = dl_loader_next(a, x, y, &n, err, sizeof err)) == 1) {
			int m;
			CHECK(dl_loader_next_ref(b, &rx, &ry, &m, err, sizeof err) == 1, "ref ended early: %s", err);
			CHECK(m == n && memcmp(rx, x, sizeof x) == 0 && memcmp(ry, y, sizeof y) == 0,
			      "split %d batch %d: next_ref differs from next", split, batches);
			batches++;
		}
		CHECK(rc == 0 && dl_loader_next_ref(b, &rx, &ry, &n, err, sizeof err) == 0, "ref did not end with next");
		CHECK(batches == (split ? 5 : 10), "split %d: %d batches", split, batches);
		struct dl_loader_stats sa, sb;
		dl_loader_get_stats(a, &sa);
		dl_loader_get_stats(b, &sb);
		CHECK(sa.samples == (split ? 23u : 50u) && sb.samples == sa.samples + 10,
		      "samples %llu / %llu", (unsigned long long)sa.samples, (unsigned long long)sb.samples);
		dl_loader_destroy(a);
		dl_loader_destroy(b);
	}
}

static void test_synthetic(void)
{
	struct dl_dataset *ds;
	char err[512];
	struct dl_data_options opt = {0};

	CHECK(dl_dataset_open("synthetic", &opt, &ds, err, sizeof err) == 0, "%s", err);
	if (ds) {
		CHECK(ds->channels == 3 && ds->height == 224 && ds->width == 224 && ds->num_classes == 1000 &&
		      ds->count[0] == 1281 && ds->count[1] == 51, "defaults %d,%d,%d,%d,%zu,%zu", ds->channels,
		      ds->height, ds->width, ds->num_classes, ds->count[0], ds->count[1]);
		dl_dataset_close(ds);
	}
	CHECK(dl_dataset_open("synthetic:1,8,6,5,30", &opt, &ds, err, sizeof err) == 0, "%s", err);
	if (ds) {
		float a[48], b[48], c[48];
		int ya, yb, yc;
		CHECK(ds->channels == 1 && ds->height == 8 && ds->width == 6 && ds->count[0] == 30 &&
		      ds->count[1] == 1, "spec fields");
		ds->load(ds, DL_SPLIT_TRAIN, 3, 99, a, &ya, err, sizeof err);
		ds->load(ds, DL_SPLIT_TRAIN, 3, 99, b, &yb, err, sizeof err);
		ds->load(ds, DL_SPLIT_TRAIN, 3, 100, c, &yc, err, sizeof err);
		CHECK(memcmp(a, b, sizeof a) == 0 && ya == yb, "same index+seed differ");
		CHECK(memcmp(a, c, sizeof a) != 0 && ya == yc, "another aug seed: same pixels or other label");
		CHECK(ya >= 0 && ya < 5, "label %d", ya);
		dl_dataset_close(ds);
	}
	ds = NULL;
	CHECK(dl_dataset_open("synthetic:3,x,2,2", &opt, &ds, err, sizeof err) == -1, "bad spec accepted");
	CHECK_CONTAINS(err, "field 2");
	CHECK(dl_dataset_open("/nonexistent/dir", &opt, &ds, err, sizeof err) == -1, "missing dir accepted");
	CHECK_CONTAINS(err, "/nonexistent/dir");
}

int main(void)
{
	test_sharding();
	test_determinism();
	test_bad_samples();
	test_next_ref();
	test_synthetic();
	if (check_failures)
		fprintf(stderr, "test_loader: %d checks failed\n", check_failures);
	else
		printf("test_loader: all checks passed\n");
	return check_failures ? 1 : 0;
}
