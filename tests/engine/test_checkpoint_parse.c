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
#include "engine/safetensors.h"
#include "tests/data/check.h"

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

/* A checkpoint of the model "tiny" (w (2,3), bn.running_mean (3)) whose
 * metadata is the default with key=value replaced. */
static void write_ckpt(const char *key, const char *value)
{
	const char *keys[] = {"format", "model", "step", "epoch", "epoch_step", "seed", "wall_s", "global_batch",
	                      "epochs"};
	const char *vals[] = {"dljob-checkpoint-1", "tiny", "12", "2", "3", "42", "1.5", "32", "4"};
	char meta[1024] = "{", h[2048];
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		snprintf(meta + strlen(meta), sizeof meta - strlen(meta), "%s\"%s\":\"%s\"", i ? "," : "", keys[i],
		         key && strcmp(key, keys[i]) == 0 ? value : vals[i]);
	strcat(meta, "}");
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
	return dl_checkpoint_load(path, &g, NULL, s, err, errlen);
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
		{"epoch", "-1", "bad \"epoch\""},
		{"wall_s", "nan", "bad \"wall_s\""},
		{"step", "1\n2", "bad \"step\" in its metadata: unprintable or too long"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_ckpt(bad[i].key, bad[i].value);
		err[0] = 0;
		CHECK(load(err, sizeof err, &s) != 0, "%s=%s accepted (epoch %d epochs %d batch %d)", bad[i].key,
		      bad[i].value, s.epoch, s.epochs, s.global_batch);
		CHECK_CONTAINS(err, bad[i].msg);
	}
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
	expect_open_fails("shape beyond int64", "integer out of range");
	/* the header ends in digits at the end of the file: nothing may be read
	 * past it (check-asan sees the over-read; here it must just fail) */
	h = "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1";
	write_raw(h, strlen(h), 0);
	expect_open_fails("digits at the end of the file", "bad safetensors header");
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
	test_safetensors_header();
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
