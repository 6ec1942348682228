/* The checkpoint reader on hostile files (issue 19, findings 10 and 11):
 * safetensors integers bounded by the header (a header ending in digits at
 * the end of the file is caught by make check-asan), shape products that
 * overflow, checkpoint epoch/epochs/global_batch beyond int, a FIFO in place
 * of the checkpoint.  Each must fail with a message naming the problem.
 * Built from engine/checkpoint.c, safetensors.c and optim.c only, so it also
 * runs under make check-asan.
 *   test_checkpoint_parse  (uses $TMPDIR) */
#include "config.h"
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/checkpoint.h"
#include "engine/optim.h"
#include "engine/safetensors.h"
#include "tests/check.h"

static char dir[4096], path[4200];

/* Write an 8-byte header length, `header`, then `nbytes` zero bytes. */
static void write_raw(const char *header, size_t hlen, size_t nbytes)
{
	FILE *f = fopen(path, "wb");
	uint64_t n = hlen;
	if (!f || fwrite(&n, 8, 1, f) != 1 || fwrite(header, 1, hlen, f) != hlen) {
		perror(path);
		exit(1);
	}
	for (size_t i = 0; i < nbytes; i++)
		fputc(0, f);
	if (fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* More metadata for write_ckpt, as ',"k":"v",...' ("" for none). */
static const char *extra_meta = "";

/* A checkpoint of the model "tiny" (w (2,3), bn.running_mean (3)) whose
 * metadata is the default with key=value replaced, then extra_meta. */
static void write_ckpt(const char *key, const char *value)
{
	const char *keys[] = {"format", "model", "step", "epoch", "epoch_step", "seed", "wall_s", "global_batch",
	                      "epochs"};
	const char *vals[] = {"dljob-checkpoint-1", "tiny", "12", "2", "3", "42", "1.5", "32", "4"};
	char meta[1024] = "{", h[2048];
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		snprintf(meta + strlen(meta), sizeof meta - strlen(meta), "%s\"%s\":\"%s\"", i ? "," : "", keys[i],
		         key && strcmp(key, keys[i]) == 0 ? value : vals[i]);
	if (key && !strstr(meta, key)) /* an optional key */
		snprintf(meta + strlen(meta), sizeof meta - strlen(meta), ",\"%s\":\"%s\"", key, value);
	snprintf(meta + strlen(meta), sizeof meta - strlen(meta), "%s}", extra_meta);
	snprintf(h, sizeof h,
	         "{\"__metadata__\":%s,\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
	         "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]}}", meta);
	while (strlen(h) % 8)
		strcat(h, " ");
	write_raw(h, strlen(h), 36);
}

static int load(char *err, size_t errlen, struct dl_ckpt_state *s)
{
	float w[6], mean[3];
	struct dl_tensor_f32 params[1] = {{.name = "w", .ndim = 2, .dims = {2, 3}, .count = 6, .data = w}};
	struct dl_tensor_f32 buffers[1] = {{.name = "bn.running_mean", .ndim = 1, .dims = {3}, .count = 3, .data = mean}};
	struct dl_graph g = {.model = "tiny", .n_params = 1, .params = params, .n_buffers = 1, .buffers = buffers};
	return dl_checkpoint_load(path, &g, NULL, s, NULL, err, errlen);
}

static void test_metadata_ranges(void)
{
	char err[512];
	struct dl_ckpt_state s;

	write_ckpt(NULL, NULL);
	CHECK(load(err, sizeof err, &s) == 0, "valid checkpoint: %s", err);
	CHECK(s.epoch == 2 && s.epochs == 4 && s.global_batch == 32 && s.step == 12, "state %d %d %d %ld", s.epoch,
	      s.epochs, s.global_batch, s.step);
	static const struct {
		const char *key, *value, *msg;
	} bad[] = {
		{"epoch", "2147483648", "bad \"epoch\" in its metadata: '2147483648' (an integer in [0, 2147483647])"},
		{"epochs", "4294967300", "bad \"epochs\" in its metadata: '4294967300' (an integer in [0, 2147483647])"},
		{"global_batch", "2147483648", "bad \"global_batch\" in its metadata: '2147483648'"},
		{"epoch", "5", "epoch 5 is past its epochs 4"},
		{"global_batch", "0", "bad metadata: global batch 0"},
		{"epoch", "-1", "bad \"epoch\""},
		{"wall_s", "nan", "bad \"wall_s\""},
		{"step", "1\\n2", "bad \"step\" in its metadata: unprintable or too long"},
		/* a raw control byte inside a JSON string is not JSON */
		{"step", "1\n2", "bad safetensors header"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_ckpt(bad[i].key, bad[i].value);
		err[0] = 0;
		CHECK(load(err, sizeof err, &s) != 0, "%s=%s accepted (epoch %d epochs %d batch %d)", bad[i].key,
		      bad[i].value, s.epoch, s.epochs, s.global_batch);
		CHECK_CONTAINS(err, bad[i].msg);
	}
}

/* The format version: another one is named, newer or older, with what to
 * do; the keys added to format 1 later are optional but checked. */
static void test_format_version(void)
{
	char err[512];
	struct dl_ckpt_state s;
	static const struct {
		const char *key, *value, *msg;
	} bad[] = {
		{"format", "dljob-checkpoint-2", "is a checkpoint of a newer dljob (format version 2; this dljob reads "
		 "version 1): resume it with the dljob that wrote it, or start a new run from its weights with --init"},
		{"format", "dljob-checkpoint-0", "is a checkpoint of an older dljob (format version 0"},
		{"format", "dljob-checkpoint-99999999999999999999", "not a dljob checkpoint (unknown format version)"},
		{"format", "dljob-checkpoint-1x", "not a dljob checkpoint (unknown format version)"},
		{"format", "pt", "not a dljob checkpoint (its metadata has no \"format\": \"dljob-checkpoint-1\")"},
		{"ranks", "3", "3 ranks x batch 0 is not its global batch 32"},
		{"schedule", "Cosine", "bad \"schedule\" in its metadata (a name of [a-z0-9], at most 15)"},
		{"backend", "cpu-x", "bad \"backend\""},
		{"lr", "nan", "bad \"lr\" in its metadata"},
		{"train_samples", "-5", "bad \"train_samples\""},
		{"data_classes", "0123456789ABCDEF", "bad \"data_classes\" in its metadata (16 hex digits)"},
		{"data_samples", "123", "bad \"data_samples\" in its metadata (16 hex digits)"},
		{"data_samples", "-123456789abcdef", "bad \"data_samples\""},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_ckpt(bad[i].key, bad[i].value);
		err[0] = 0;
		CHECK(load(err, sizeof err, &s) != 0, "%s=%s accepted", bad[i].key, bad[i].value);
		CHECK_CONTAINS(err, bad[i].msg);
	}
	write_ckpt("ranks", "4");
	CHECK(load(err, sizeof err, &s) != 0, "ranks 4 without batch accepted");
	write_ckpt("data_classes", "fedcba9876543210");
	CHECK(load(err, sizeof err, &s) == 0 && s.data_classes == 0xfedcba9876543210ull && s.data_samples == 0,
	      "data_classes alone: %s", err);
	write_ckpt("schedule", "step");
	CHECK(load(err, sizeof err, &s) == 0 && strcmp(s.schedule, "step") == 0 && s.ranks == 0 && s.lr == 0,
	      "an optional key alone: %s", err);
}

/* fp16's dynamic loss scale and its clean steps: optional keys that the
 * checkpoint keeps when the backend had a scale (loss_scale > 0), leaves
 * out otherwise, and that an older checkpoint lacks (0: the backend starts
 * from its initial scale); bad values are refused by name. */
static void test_loss_scale(void)
{
	char err[512];
	float w[6] = {1, 2, 3, 4, 5, 6}, mean[3] = {0};
	struct dl_tensor_f32 params[1] = {{.name = "w", .ndim = 2, .dims = {2, 3}, .count = 6, .data = w}};
	struct dl_tensor_f32 buffers[1] = {{.name = "bn.running_mean", .ndim = 1, .dims = {3}, .count = 3, .data = mean}};
	struct dl_graph g = {.model = "tiny", .n_params = 1, .params = params, .n_buffers = 1, .buffers = buffers};
	struct dl_ckpt_state s = {.step = 12, .epoch = 2, .epoch_step = 3, .seed = 42, .global_batch = 32,
	                          .epochs = 4, .model = "tiny", .schedule = "cosine", .precision = "fp16",
	                          .backend = "cuda"}, back;
	struct dl_optim_state o, o2, o3; /* o3: no momentum (write_ckpt's files have no buffers) */

	CHECK(dl_optim_state_init(&o, &g, 0.9, err, sizeof err) == 0, "%s", err);
	CHECK(dl_optim_state_init(&o2, &g, 0.9, err, sizeof err) == 0, "%s", err);
	CHECK(dl_optim_state_init(&o3, &g, 0, err, sizeof err) == 0, "%s", err);
	for (int k = 0; k < 2; k++) {
		/* k 0: cuda fp16, a scale grown and halved; k 1: none (cpu, ref, fp32) */
		o.steps = 12;
		o.loss_scale = k == 0 ? 3.0517578125e-05 * 1024 : 0;
		o.loss_scale_good = k == 0 ? 1999 : 0;
		o2.loss_scale = 7, o2.loss_scale_good = 7;
		CHECK(dl_checkpoint_save(dir, &g, &o, &s, err, sizeof err) == 0, "save: %s", err);
		CHECK(dl_checkpoint_load(path, &g, &o2, &back, NULL, err, sizeof err) == 0, "load: %s", err);
		CHECK(o2.loss_scale == o.loss_scale && o2.loss_scale_good == o.loss_scale_good && o2.steps == 12,
		      "case %d: loss scale %.17g good %ld back as %.17g %ld", k, o.loss_scale, o.loss_scale_good,
		      o2.loss_scale, o2.loss_scale_good);
		struct dl_safetensors *st = dl_safetensors_open(path, err, sizeof err);
		CHECK(st != NULL, "%s", err);
		if (st) {
			CHECK(!dl_safetensors_meta(st, "loss_scale") == (k == 1) &&
			              !dl_safetensors_meta(st, "loss_scale_good") == (k == 1),
			      "case %d: the keys are %s", k, k ? "written without a scale" : "missing");
			dl_safetensors_close(st);
		}
	}
	/* a checkpoint without the keys (written before they were kept) */
	write_ckpt(NULL, NULL);
	o3.loss_scale = 7, o3.loss_scale_good = 7;
	CHECK(dl_checkpoint_load(path, &g, &o3, &back, NULL, err, sizeof err) == 0, "older checkpoint: %s", err);
	CHECK(o3.loss_scale == 0 && o3.loss_scale_good == 0, "older checkpoint: loss scale %g good %ld, not 0",
	      o3.loss_scale, o3.loss_scale_good);
	static const struct {
		const char *extra, *msg;
	} bad[] = {
		{",\"loss_scale\":\"inf\",\"loss_scale_good\":\"0\"", "bad \"loss_scale\" in its metadata"},
		{",\"loss_scale\":\"0\",\"loss_scale_good\":\"0\"", "bad \"loss_scale\" in its metadata"},
		{",\"loss_scale\":\"-2\",\"loss_scale_good\":\"0\"", "bad \"loss_scale\" in its metadata"},
		{",\"loss_scale\":\"1e39\",\"loss_scale_good\":\"0\"", "bad \"loss_scale\" in its metadata"},
		/* positive as a double, 0 as the backend's float: a run stuck at a 0 scale */
		{",\"loss_scale\":\"1e-300\",\"loss_scale_good\":\"0\"", "bad \"loss_scale\" in its metadata"},
		{",\"loss_scale\":\"8x\",\"loss_scale_good\":\"0\"", "bad \"loss_scale\" in its metadata"},
		{",\"loss_scale\":\"8\",\"loss_scale_good\":\"2000\"",
		 "bad \"loss_scale_good\" in its metadata: '2000' (an integer in [0, 1999])"},
		{",\"loss_scale\":\"8\",\"loss_scale_good\":\"-1\"", "bad \"loss_scale_good\""},
		{",\"loss_scale\":\"8\"", "\"loss_scale\" and \"loss_scale_good\" come together"},
		{",\"loss_scale_good\":\"3\"", "\"loss_scale\" and \"loss_scale_good\" come together"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		extra_meta = bad[i].extra;
		write_ckpt(NULL, NULL);
		err[0] = 0;
		CHECK(dl_checkpoint_load(path, &g, &o3, &back, NULL, err, sizeof err) != 0, "%s accepted", bad[i].extra);
		CHECK_CONTAINS(err, bad[i].msg);
	}
	extra_meta = "";
	dl_optim_state_free(&o);
	dl_optim_state_free(&o2);
	dl_optim_state_free(&o3);
	char prev[4300];
	snprintf(prev, sizeof prev, "%s/" DL_CHECKPOINT_PREV_NAME, dir);
	unlink(prev);
}

/* dl_checkpoint_check: what is refused and what the message says. */
static void test_check(void)
{
	char err[1024];
	const struct dl_ckpt_state ck = {.model = "resnet20", .step = 6, .epoch = 1, .epoch_step = 2, .epochs = 2,
	                                 .ranks = 2, .batch = 8, .global_batch = 16, .num_classes = 4,
	                                 .train_samples = 64, .eval_samples = 2};
	struct dl_ckpt_state run = ck, old = ck;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) == 0, "the same run: %s", err);
	run.ranks = 4, run.batch = 4, run.epochs = 9;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) == 0, "4 x 4, 9 epochs: %s", err);
	run.batch = 8, run.global_batch = 32;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) < 0, "4 x 8 accepted");
	CHECK_CONTAINS(err, "c was written by 2 ranks x --batch 8 = global batch 16, this run is 4 ranks x --batch 8 = "
	               "32: a resumed run keeps the global batch");
	CHECK_CONTAINS(err, "resume on 4 ranks with --batch 4");
	run.ranks = 5, run.batch = 3, run.global_batch = 15;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) < 0, "5 x 3 accepted");
	CHECK_CONTAINS(err, "5 ranks cannot share 16 samples evenly; resume on a rank count N that divides 16, with "
	               "--batch 16/N");
	/* a checkpoint from before ranks/batch/data were recorded */
	old.ranks = old.batch = old.num_classes = 0, old.train_samples = old.eval_samples = 0;
	run = ck, run.train_samples = 99, run.global_batch = 24, run.ranks = 3;
	CHECK(dl_checkpoint_check("c", &old, &run, err, sizeof err) < 0, "old: 3 x 8 accepted");
	CHECK_CONTAINS(err, "c was written with global batch 16, this run has 24 (3 ranks x --batch 8)");
	run = ck, run.eval_samples = 3;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) < 0, "another eval split accepted");
	CHECK_CONTAINS(err, "c was written on data of 64 training and 2 held-out samples in 4 classes, --data now has "
	               "64, 3 and 4: the data changed since");
	run = ck, run.num_classes = 5;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) < 0, "another class count accepted");
	/* the same sizes, other data: the fingerprints say which part differs */
	struct dl_ckpt_state fp = ck;
	fp.data_classes = 11, fp.data_samples = 22;
	run = fp;
	CHECK(dl_checkpoint_check("c", &fp, &run, err, sizeof err) == 0, "the same fingerprints: %s", err);
	run.data_classes = 12;
	CHECK(dl_checkpoint_check("c", &fp, &run, err, sizeof err) < 0, "other class names accepted");
	CHECK_CONTAINS(err, "c was written on other data than --data holds now, though of the same size (64 training "
	               "and 2 held-out samples in 4 classes): the class names differ");
	CHECK_CONTAINS(err, "start a new run from its weights with --init c in another --out");
	run.data_samples = 23;
	CHECK(dl_checkpoint_check("c", &fp, &run, err, sizeof err) < 0, "other data accepted");
	CHECK_CONTAINS(err, "the class names and the list of samples differ");
	run.data_classes = 11;
	CHECK(dl_checkpoint_check("c", &fp, &run, err, sizeof err) < 0, "another sample list accepted");
	CHECK_CONTAINS(err, "): the list of samples differs");
	/* a checkpoint without them (older, or synthetic data) checks sizes only */
	run = ck, run.data_classes = 5, run.data_samples = 6;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) == 0, "no fingerprint in the checkpoint: %s", err);
	run = ck, run.epochs = 1;
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) < 0, "epochs 1 accepted at epoch 1 batch 2");
	CHECK_CONTAINS(err, "c is at step 6, in epoch 2, past --epochs 1: give --epochs 2 or more (its run had 2)");
	/* at an epoch's end: exactly that many epochs is a finished run */
	old = ck, old.epoch_step = 0, old.step = 4;
	CHECK(dl_checkpoint_check("c", &old, &run, err, sizeof err) == 0, "1 epoch after epoch 1 refused: %s", err);
	run = ck;
	snprintf(run.model, sizeof run.model, "resnet32");
	CHECK(dl_checkpoint_check("c", &ck, &run, err, sizeof err) < 0, "another model accepted");
	CHECK_CONTAINS(err, "c holds a resnet20, not a resnet32: resume it with --model resnet20");
}

static void expect_open_fails(const char *what, const char *msg)
{
	char err[512] = "";
	struct dl_safetensors *st = dl_safetensors_open(path, err, sizeof err);
	CHECK(st == NULL, "%s: accepted", what);
	dl_safetensors_close(st);
	CHECK_CONTAINS(err, msg);
}

static void test_safetensors_header(void)
{
	/* [2^62, 4] of F32 is 2^66 bytes: the product wraps to 0 = the offsets */
	const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,0]}}";
	write_raw(h, strlen(h), 0);
	expect_open_fails("shape [2^62,4]", "tensor w: shape too large (its size overflows)");
	h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,1],\"data_offsets\":[0,0]}}";
	write_raw(h, strlen(h), 0);
	expect_open_fails("shape [2^62,1]", "tensor w: shape too large");
	h = "{\"w\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999],\"data_offsets\":[0,1]}}";
	write_raw(h, strlen(h), 1);
	expect_open_fails("shape beyond int64", "too big integer");
	/* what the hand-written parser let through (issue 16): duplicate
	 * names, overlapping tensors, reals as offsets, metadata that is not
	 * strings, trailing bytes after the object, a NUL escaped into a name */
	static const struct {
		const char *what, *header, *msg;
		size_t nbytes;
	} bad[] = {
		{"duplicate name", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
		 "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", "duplicate object key", 2},
		{"overlap", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
		 "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", "two tensors share bytes 1..2", 3},
		{"real offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0.0,1]}}",
		 "tensor a: data_offsets do not fit", 1},
		{"negative dim", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}",
		 "tensor a: a dimension is not a non-negative integer", 1},
		{"metadata number", "{\"__metadata__\":{\"epoch\":3}}", "__metadata__ is not an object of strings", 0},
		{"metadata array", "{\"__metadata__\":[\"x\"]}", "__metadata__ is not an object of strings", 0},
		{"trailing bytes", "{}x", "end of file expected", 0},
		{"NUL in a name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
		 "NUL", 1},
		{"unknown dtype", "{\"a\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
		 "tensor a: unknown dtype", 1},
		{"not an object", "[1,2]", "not a JSON object", 0},
		{"past the file", "{\"a\":{\"dtype\":\"U8\",\"shape\":[9],\"data_offsets\":[0,9]}}",
		 "do not fit its shape (9 bytes) or the file (8 bytes of data)", 8},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_raw(bad[i].header, strlen(bad[i].header), bad[i].nbytes);
		expect_open_fails(bad[i].what, bad[i].msg);
	}
	/* the header ends in digits at the end of the file: nothing may be read
	 * past it (check-asan sees the over-read; here it must just fail) */
	h = "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1";
	write_raw(h, strlen(h), 0);
	expect_open_fails("digits at the end of the file", "bad safetensors header");
}

/* --init (dl_weights_init) on a model "tiny": w (2,3), a classifier
 * fc.weight (4,3) + fc.bias (4) (its one FC node), bn.running_mean (3). */
struct tiny {
	float w[6], fw[12], fb[4], mean[3];
	struct dl_tensor_f32 params[3], buffers[1];
	struct dl_node node;
	struct dl_graph g;
};

static void tiny_make(struct tiny *t)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 12; i++)
		t->fw[i] = -1; /* the "fresh" classifier */
	t->params[0] = (struct dl_tensor_f32){.name = "w", .ndim = 2, .dims = {2, 3}, .count = 6, .data = t->w};
	t->params[1] = (struct dl_tensor_f32){.name = "fc.weight", .ndim = 2, .dims = {4, 3}, .count = 12, .data = t->fw};
	t->params[2] = (struct dl_tensor_f32){.name = "fc.bias", .ndim = 1, .dims = {4}, .count = 4, .data = t->fb};
	t->buffers[0] = (struct dl_tensor_f32){.name = "bn.running_mean", .ndim = 1, .dims = {3}, .count = 3,
					       .data = t->mean};
	t->node = (struct dl_node){.kind = DL_NODE_FC, .param = {1, 2}, .in = {0, -1}};
	t->g = (struct dl_graph){.model = "tiny", .n_nodes = 1, .nodes = &t->node, .n_params = 3, .params = t->params,
				 .n_buffers = 1, .buffers = t->buffers, .num_classes = 4};
}

/* A file of F32 tensors named and shaped as given (values i/8 + 1), plus
 * optional int64 scalars, and metadata. */
static void write_f32(const char *const *names, const int (*dims)[3], size_t n, const char *const *scalars,
		      size_t ns, const char *meta)
{
	struct dl_tensor_f32 t[8], *tp[8];
	float data[8][64];
	struct dl_st_scalar sc[4];
	char err[512];
	for (size_t i = 0; i < n; i++) {
		t[i] = (struct dl_tensor_f32){.ndim = dims[i][0], .dims = {dims[i][1], dims[i][2]}, .data = data[i]};
		snprintf(t[i].name, sizeof t[i].name, "%s", names[i]);
		t[i].count = (size_t)dims[i][1] * (size_t)(dims[i][0] > 1 ? dims[i][2] : 1);
		for (size_t j = 0; j < t[i].count; j++)
			data[i][j] = (float)j / 8 + 1;
		tp[i] = &t[i];
	}
	for (size_t i = 0; i < ns; i++)
		sc[i] = (struct dl_st_scalar){.name = scalars[i], .value = 7};
	if (dl_safetensors_write_ex(path, tp, n, sc, ns, meta, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
}

static void test_weights_init(void)
{
	struct tiny t;
	char err[4096];
	static const char *const all[] = {"w", "fc.weight", "fc.bias", "bn.running_mean", "w.momentum_buffer"};
	static const int dims_ok[][3] = {{2, 2, 3}, {2, 4, 3}, {1, 4, 0}, {1, 3, 0}, {2, 2, 3}};
	static const int dims_head5[][3] = {{2, 2, 3}, {2, 5, 3}, {1, 5, 0}, {1, 3, 0}};
	static const char *const counter[] = {"bn.num_batches_tracked"};

	/* torchvision's layout: params, buffers, num_batches_tracked */
	write_f32(all, dims_ok, 4, counter, 1, NULL);
	tiny_make(&t);
	CHECK(dl_weights_init(path, &t.g, 0, err, sizeof err) == 0, "valid file refused: %s", err);
	CHECK(t.w[5] == 5.0f / 8 + 1 && t.fw[11] == 11.0f / 8 + 1 && t.mean[2] == 1.25f && t.g.bn_batches_tracked == 7,
	      "values not loaded: w[5] %g fw[11] %g mean[2] %g tracked %lld", t.w[5], t.fw[11], t.mean[2],
	      (long long)t.g.bn_batches_tracked);

	/* strict: w missing, x unexpected, the classifier for 5 classes */
	static const char *const wrong[] = {"x", "fc.weight", "fc.bias", "bn.running_mean"};
	write_f32(wrong, dims_head5, 4, NULL, 0, NULL);
	tiny_make(&t);
	CHECK(dl_weights_init(path, &t.g, 0, err, sizeof err) != 0, "missing/unexpected/mis-shaped accepted");
	CHECK_CONTAINS(err, "does not fit tiny with 4 classes: 1 missing: w; 1 unexpected: x; 2 mis-shaped: "
			    "fc.weight [5,3] (model [4,3]), fc.bias [5] (model [4]); --init-head new");
	CHECK(t.w[0] == 0 && t.fw[0] == -1, "a refused file changed the model");
	/* --init-head new: the file's classifier is not used, the rest must fit */
	CHECK(dl_weights_init(path, &t.g, 1, err, sizeof err) != 0, "new head: missing w accepted");
	CHECK_CONTAINS(err, "1 missing: w; 1 unexpected: x");
	CHECK(!strstr(err, "fc.weight"), "new head: the classifier still named: %s", err);
	write_f32(all, dims_head5, 4, NULL, 0, NULL);
	tiny_make(&t);
	CHECK(dl_weights_init(path, &t.g, 1, err, sizeof err) == 0, "new head refused: %s", err);
	CHECK(t.w[5] == 5.0f / 8 + 1 && t.fw[0] == -1 && t.fw[11] == -1, "new head: w[5] %g fw %g", t.w[5], t.fw[0]);

	/* a dljob checkpoint: its momentum buffers are ignored; elsewhere they
	 * are unexpected */
	write_f32(all, dims_ok, 5, counter, 1, "{\"format\":\"dljob-checkpoint-1\",\"model\":\"tiny\"}");
	tiny_make(&t);
	CHECK(dl_weights_init(path, &t.g, 0, err, sizeof err) == 0, "checkpoint refused: %s", err);
	/* one of another format version too (what its refused --resume says to do) */
	write_f32(all, dims_ok, 5, counter, 1, "{\"format\":\"dljob-checkpoint-2\",\"model\":\"tiny\"}");
	tiny_make(&t);
	CHECK(dl_weights_init(path, &t.g, 0, err, sizeof err) == 0, "format 2 checkpoint refused: %s", err);
	write_f32(all, dims_ok, 5, NULL, 0, "{\"format\":\"pt\"}");
	CHECK(dl_weights_init(path, &t.g, 0, err, sizeof err) != 0, "stray momentum buffer accepted");
	CHECK_CONTAINS(err, "1 unexpected: w.momentum_buffer");
	write_f32(all, dims_ok, 4, NULL, 0, "{\"format\":\"pt\",\"model\":\"resnet50\"}");
	CHECK(dl_weights_init(path, &t.g, 0, err, sizeof err) != 0, "another model's file accepted");
	CHECK_CONTAINS(err, "holds a resnet50, not a tiny");

	/* F64, F16 and BF16 data become float32; an I32 tensor is refused */
	const char *h = "{\"w\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
			"\"fc.weight\":{\"dtype\":\"BF16\",\"shape\":[4,3],\"data_offsets\":[12,36]},"
			"\"fc.bias\":{\"dtype\":\"F64\",\"shape\":[4],\"data_offsets\":[40,72]},"
			"\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[72,84]}}";
	unsigned char data[88] = {0};
	/* F16 1.0 = 0x3c00, -2.5 = 0xc100, 2^-24 = 0x0001 (subnormal); BF16 3.0 = 0x4040 */
	data[1] = 0x3c, data[3] = 0xc1, data[4] = 0x01;
	data[12] = 0x40, data[13] = 0x40;
	double b0 = -0.75;
	float m2 = 9.5f;
	memcpy(data + 40, &b0, 8);
	memcpy(data + 80, &m2, 4);
	FILE *f = fopen(path, "wb");
	uint64_t hl = strlen(h);
	CHECK(f && fwrite(&hl, 8, 1, f) == 1 && fwrite(h, 1, hl, f) == hl && fwrite(data, 1, 84, f) == 84 &&
	      fclose(f) == 0, "writing %s", path);
	tiny_make(&t);
	CHECK(dl_weights_init(path, &t.g, 0, err, sizeof err) == 0, "F16/BF16/F64 refused: %s", err);
	CHECK(t.w[0] == 1.0f && t.w[1] == -2.5f && t.w[2] == 0x1p-24f && t.fw[0] == 3.0f && t.fb[0] == -0.75f &&
	      t.mean[2] == 9.5f, "conversions: %g %g %g %g %g %g", t.w[0], t.w[1], t.w[2], t.fw[0], t.fb[0], t.mean[2]);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "test_checkpoint_parse: FAIL: opening a FIFO as a checkpoint blocked\n";
	if (write(2, msg, sizeof msg - 1) < 0)
		_exit(1);
	_exit(1);
}

static void test_fifo(void)
{
	unlink(path);
	CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
	signal(SIGALRM, on_alarm);
	alarm(10);
	expect_open_fails("a FIFO", "not a regular file");
	alarm(0);
	unlink(path);
}

int main(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/dljob-ckpt-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
	test_metadata_ranges();
	test_format_version();
	test_loss_scale();
	test_check();
	test_safetensors_header();
	test_weights_init();
	test_fifo();
	unlink(path);
	rmdir(dir);
	if (check_failures) {
		fprintf(stderr, "test_checkpoint_parse: %d checks failed\n", check_failures);
		return 1;
	}
	printf("test_checkpoint_parse: all checks passed\n");
	return 0;
}
