/* Memory by lifetime (engine/memplan.h, engine/cuda/cuda_arena.h):
 *  1. the planner and the checker on a hand-made set of buffers;
 *  2. lifetimes and plan sizes of the small "convnet" computed by hand, for
 *     the ref backend and for the cuda arena;
 *  3. the checker on the cuda arena plan of every model at several batch
 *     sizes and precisions, plain and fused, and deliberately corrupted
 *     plans rejected;
 *  4. a ref training step on planned shared arrays, each turned NaN after
 *     its last planned step, equals (bit for bit) a step on private arrays;
 *     and a plan with one lifetime cut short gives a different result (the
 *     comparison can fail); the same for the fused layout (relu_prologue:
 *     BN+ReLU outputs computed by the reading convs, never stored across
 *     steps) against private arrays and the plain schedule, and an eval
 *     forward after the step too. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_arena.h"
#include "engine/memplan.h"
#include "engine/model.h"
#include "engine/ref/ref_backend.h"

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
			failures++;                                        \
		}                                                          \
	} while (0)

static void test_hand(void)
{
	char err[512];
	struct dl_mp p;
	CHECK(dl_mp_init(&p, 4, 64, err, sizeof err) == 0, "init: %s", err);
	/* A 100 B (128) steps 0-1, B 64 B steps 1-2, C 200 B (256) steps 2-3, D 64 B step 3.
	 * By size: C at 0; A at 0 (not live with C); B above A and C: 256; D
	 * above C, beside B in time: 256.  Total 320 = the most live at once
	 * (steps 2 and 3). */
	int a = dl_mp_add(&p, 100, 0, 1, DL_MP_ACT, 0, 0, err, sizeof err);
	int b = dl_mp_add(&p, 64, 1, 2, DL_MP_ACT, 0, 1, err, sizeof err);
	int c = dl_mp_add(&p, 200, 2, 3, DL_MP_ACT, 0, 2, err, sizeof err);
	int d = dl_mp_add(&p, 64, 3, 3, DL_MP_ACT, 0, 3, err, sizeof err);
	CHECK(a == 0 && b == 1 && c == 2 && d == 3, "add");
	CHECK(dl_mp_add(&p, 1, 2, 1, DL_MP_ACT, 0, 9, err, sizeof err) < 0, "last < first accepted");
	CHECK(dl_mp_add(&p, 1, 0, 4, DL_MP_ACT, 0, 9, err, sizeof err) < 0, "step beyond the schedule accepted");
	CHECK(dl_mp_assign(&p, err, sizeof err) == 0, "assign: %s", err);
	CHECK(p.b[c].off == 0 && p.b[a].off == 0 && p.b[b].off == 256 && p.b[d].off == 256 && p.total == 320,
	      "offsets %zu %zu %zu %zu total %zu, want 0 256 0 256 total 320", p.b[a].off, p.b[b].off, p.b[c].off,
	      p.b[d].off, p.total);
	int step = -1;
	CHECK(dl_mp_live_peak(&p, &step) == 320 && step == 2, "live peak %zu at %d", dl_mp_live_peak(&p, NULL), step);
	CHECK(dl_mp_check(&p, err, sizeof err) == 0, "check: %s", err);
	/* corruptions: overlap with a buffer live at the same time, misalignment, outside the arena */
	p.b[b].off = 192;
	CHECK(dl_mp_check(&p, err, sizeof err) < 0 && strstr(err, "overlap"), "B over C accepted");
	p.b[b].off = 256;
	p.b[d].off = 260;
	CHECK(dl_mp_check(&p, err, sizeof err) < 0, "misaligned D accepted");
	p.b[d].off = 256;
	p.total = 300;
	CHECK(dl_mp_check(&p, err, sizeof err) < 0, "buffer outside the arena accepted");
	p.total = 320;
	p.b[a].last = 2; /* A now lives with C at step 2, at the same offset */
	CHECK(dl_mp_check(&p, err, sizeof err) < 0, "lifetime overlap accepted");
	p.b[a].last = 1;
	CHECK(dl_mp_check(&p, err, sizeof err) == 0, "restored plan rejected: %s", err);
	dl_mp_free(&p);
}

/* convnet: conv1 relu conv2 relu conv3 relu gap fc (nodes 0-7), values
 * x c1 r1 c2 r2 c3 r3 gap fc (0-8); forward node i at step 1 + i,
 * backward at 16 - i, the end at 17. */
static void test_convnet(void)
{
	char err[512];
	struct dl_graph g;
	CHECK(dl_model_build(&g, "convnet", 1, 8, 8, 10, 0, 1, err, sizeof err) == 0, "build: %s", err);
	CHECK(g.n_nodes == 8 && g.n_values == 9, "convnet has %d nodes, %d values", g.n_nodes, g.n_values);
	struct dl_mp_life life[9];
	struct dl_mp_rules cuda;
	int apply_by[8];
	for (int i = 0; i < 8; i++)
		apply_by[i] = -1;
	dlc_arena_rules(&g, &cuda, apply_by);
	CHECK(dl_mp_value_lives(&g, &cuda, life, err, sizeof err) == 0, "lives: %s", err);
	static const int want_cuda[9][4] = {
		{ 0, 17, -1, -1 },  /* x: throughout, no gradient */
		{ 1, 2, 15, 16 },   /* c1: read by the ReLU only (its mask is its output) */
		{ 2, 15, 14, 15 },  /* r1: conv2's backward 14, the ReLU mask 15 */
		{ 3, 4, 13, 14 },   /* c2 */
		{ 4, 13, 12, 13 },  /* r2 */
		{ 5, 6, 11, 12 },   /* c3 */
		{ 6, 11, 10, 11 },  /* r3: the GAP at 7, the ReLU's backward at 11 */
		{ 7, 9, 9, 10 },    /* gap: the FC's backward at 9 */
		{ -1, -1, -1, -1 }, /* the logits: written straight to d_logits */
	};
	for (int v = 0; v < 9; v++)
		CHECK(life[v].act_first == want_cuda[v][0] && life[v].act_last == want_cuda[v][1] &&
		      life[v].grad_first == want_cuda[v][2] && life[v].grad_last == want_cuda[v][3],
		      "cuda value %d: act [%d, %d] grad [%d, %d]", v, life[v].act_first, life[v].act_last,
		      life[v].grad_first, life[v].grad_last);

	/* ref, batch 2, doubles: x 1024 B, c1/r1 16384, c2/r2 8192, c3/r3 4096,
	 * gap 1024, logits 160 (192 aligned to 64); the logits live throughout,
	 * their gradient at step 9, the image's (never read) at 16.  Live at
	 * step 15: x, r1, logits, the gradients of c1 and r1:
	 * 1024 + 16384 + 192 + 16384 + 16384 = 50368, the most of any step. */
	struct dl_backend *rb = dl_ref_create(&g, 2, err, sizeof err);
	CHECK(rb != NULL, "ref create: %s", err);
	struct dl_mp p;
	if (rb && dl_ref_plan(rb, &p, 0, err, sizeof err) == 0) {
		CHECK(dl_mp_assign(&p, err, sizeof err) == 0, "assign: %s", err);
		int step = -1;
		CHECK(dl_mp_live_peak(&p, &step) == 50368 && step == 15, "ref live peak %zu at step %d, want 50368 at 15",
		      dl_mp_live_peak(&p, NULL), step);
		CHECK(p.total == 50368, "ref convnet plan %zu bytes, want 50368", p.total);
		CHECK(dl_mp_check(&p, err, sizeof err) == 0, "check: %s", err);
		dl_mp_free(&p);
	} else
		CHECK(0, "ref plan: %s", err);
	if (rb)
		dl_backend_ref.destroy(rb);

	/* cuda, bf16, batch 2, no cuDNN workspace.  Living part of the step:
	 * the image padded to 8 channels, 2*8*8*8*2 = 2048 B throughout; at
	 * step 12 (conv3's backward) r1 4096 + r2 2048 + the gradients of c3
	 * 1024 and r2 2048 + conv3's weight gradient 64*3*3*32*2 = 36864:
	 * 46080, the most of any step.  So the arena is everything persistent
	 * + 46080, and its activations part 46080 + 2048 = 48128. */
	struct dlc_arena_in in = { .n = 2, .esize = 2, .ws_bytes = 0, .bn_part_floats = 0 };
	if (dlc_arena_plan(&g, &in, &p, err, sizeof err) == 0) {
		size_t other = 0;
		for (int k = 0; k < DL_MP_NKIND; k++)
			if (k != DL_MP_ACT)
				other += dl_mp_persistent_bytes(&p, k);
		CHECK(p.total - other == 48128, "cuda convnet activations %zu, want 48128", p.total - other);
		CHECK(p.total == dl_mp_live_peak(&p, NULL), "cuda convnet plan %zu above the live peak %zu", p.total,
		      dl_mp_live_peak(&p, NULL));
		/* weights: masters 4 B per param in the flat array (slots, each
		 * param on 64 floats) + bf16 working copies (conv1's with the
		 * input padded to 8 channels) + the (empty) BN buffers, 4 B */
		size_t flat = 64 + 192 + 4608 + 18432 + 640 + 64; /* conv1 144->192, conv2 4608, conv3 18432, fc 640, bias 10->64 */
		size_t want_w = flat * 4 + 2304 + 9216 + 36864 + 1280 + 256;
		CHECK(dl_mp_persistent_bytes(&p, DL_MP_WEIGHTS) == want_w, "cuda convnet weights %zu, want %zu",
		      dl_mp_persistent_bytes(&p, DL_MP_WEIGHTS), want_w);
		CHECK(dl_mp_persistent_bytes(&p, DL_MP_GRADS) == flat * 4, "cuda convnet gradients %zu, want %zu",
		      dl_mp_persistent_bytes(&p, DL_MP_GRADS), flat * 4);
		dl_mp_free(&p);
	} else
		CHECK(0, "cuda plan: %s", err);
	dl_model_free(&g);
}

/* The fused layout's lifetimes on hand-made graphs (nodes and values only):
 *   A: conv0 x->1, bn1+relu 1->2, conv2 2->3, gap3 3->4, fc4 4->5;
 *      forward node i at 1 + i, backward at 10 - i, the end at 11;
 *   B: conv0 x->1, bn1+relu 1->2, conv2 2->3, conv3 2->4, add4 3+4->5,
 *      gap5 5->6, fc6 6->7; forward at 1 + i, backward at 14 - i;
 *   C: B with the ADD reading value 2 instead of 4 (a reader that is no
 *      conv: the BN's output stays stored). */
static void test_fused_lives(void)
{
	char err[512];
	struct dl_node na[5] = {
		{ .kind = DL_NODE_CONV, .in = { 0, -1 }, .out = 1 }, { .kind = DL_NODE_BN, .in = { 1, -1 }, .out = 2, .relu = 1 },
		{ .kind = DL_NODE_CONV, .in = { 2, -1 }, .out = 3 }, { .kind = DL_NODE_GAP, .in = { 3, -1 }, .out = 4 },
		{ .kind = DL_NODE_FC, .in = { 4, -1 }, .out = 5 },
	};
	struct dl_node nb[7] = {
		{ .kind = DL_NODE_CONV, .in = { 0, -1 }, .out = 1 }, { .kind = DL_NODE_BN, .in = { 1, -1 }, .out = 2, .relu = 1 },
		{ .kind = DL_NODE_CONV, .in = { 2, -1 }, .out = 3 }, { .kind = DL_NODE_CONV, .in = { 2, -1 }, .out = 4 },
		{ .kind = DL_NODE_ADD, .in = { 3, 4 }, .out = 5 },   { .kind = DL_NODE_GAP, .in = { 5, -1 }, .out = 6 },
		{ .kind = DL_NODE_FC, .in = { 6, -1 }, .out = 7 },
	};
	struct dl_shape sh[8] = { { 1, 1, 1 } };
	struct dl_graph g = { .n_nodes = 5, .nodes = na, .n_values = 6, .values = sh, .input = 0, .output = 5 };
	struct dl_mp_life life[8];
	struct dl_mp_rules r = { .bn_relu_reads_out = 0, .output_stored = 0 };
	for (int plain = 0; plain < 2; plain++) {
		r.relu_prologue = !plain;
		CHECK(dl_mp_value_lives(&g, &r, life, err, sizeof err) == 0, "A lives: %s", err);
		/* plain: the BN's output from the BN (2) to conv2's backward (8);
		 * fused: none; its input to the BN's backward (9) either way */
		CHECK(plain ? life[2].act_first == 2 && life[2].act_last == 8 && !life[2].prologue
			    : life[2].act_first == -1 && life[2].act_last == -1 && life[2].prologue,
		      "A %s: value 2 act [%d, %d] prologue %d", plain ? "plain" : "fused", life[2].act_first,
		      life[2].act_last, life[2].prologue);
		CHECK(life[1].act_first == 1 && life[1].act_last == 9 && life[2].grad_first == 8 && life[2].grad_last == 9,
		      "A: value 1 act [%d, %d], value 2 grad [%d, %d]", life[1].act_first, life[1].act_last,
		      life[2].grad_first, life[2].grad_last);
	}
	/* the ref backend's rules read the BN+ReLU output in its backward (the mask) unless fused */
	r.bn_relu_reads_out = 1;
	r.relu_prologue = 0;
	CHECK(dl_mp_value_lives(&g, &r, life, err, sizeof err) == 0 && life[2].act_last == 9, "A ref plain: value 2 to %d",
	      life[2].act_last);
	r.relu_prologue = 1;
	CHECK(dl_mp_value_lives(&g, &r, life, err, sizeof err) == 0 && life[2].act_last == -1 && life[2].prologue,
	      "A ref fused: value 2 to %d", life[2].act_last);
	CHECK(dl_mp_bn_prologue(&g, 1) && !dl_mp_bn_prologue(&g, 0) && !dl_mp_bn_prologue(&g, 2), "A: prologue nodes");
	na[1].relu = 0;
	CHECK(!dl_mp_bn_prologue(&g, 1), "A: a BN without ReLU taken as a prologue");
	na[1].relu = 1;

	g = (struct dl_graph){ .n_nodes = 7, .nodes = nb, .n_values = 8, .values = sh, .input = 0, .output = 7 };
	CHECK(dl_mp_bn_prologue(&g, 1), "B: a BN+ReLU read by two convs not taken");
	CHECK(dl_mp_value_lives(&g, &r, life, err, sizeof err) == 0 && life[2].prologue && life[2].act_first == -1 &&
		      life[2].grad_first == 11 && life[2].grad_last == 13 && life[1].act_last == 13,
	      "B fused: value 2 act [%d, %d] grad [%d, %d] prologue %d; value 1 to %d", life[2].act_first,
	      life[2].act_last, life[2].grad_first, life[2].grad_last, life[2].prologue, life[1].act_last);
	nb[4].in[1] = 2;
	CHECK(!dl_mp_bn_prologue(&g, 1), "C: a BN+ReLU read by an ADD taken as a prologue");
	CHECK(dl_mp_value_lives(&g, &r, life, err, sizeof err) == 0 && !life[2].prologue && life[2].act_first == 2 &&
		      life[2].act_last == 13,
	      "C fused: value 2 act [%d, %d] prologue %d", life[2].act_first, life[2].act_last, life[2].prologue);
}

/* A corrupted copy of an assigned plan must be rejected: the largest
 * buffer that is not live throughout moved onto another buffer live at
 * one of its steps. */
static void corrupt_rejected(const struct dl_mp *p, const char *what)
{
	char err[512];
	int big = -1;
	for (int k = 0; k < p->n; k++)
		if (!(p->b[k].first == 0 && p->b[k].last == p->n_steps - 1) && (big < 0 || p->b[k].bytes > p->b[big].bytes))
			big = k;
	if (big < 0)
		return;
	for (int k = 0; k < p->n; k++)
		if (k != big && p->b[k].first <= p->b[big].last && p->b[big].first <= p->b[k].last) {
			struct dl_mp q = *p;
			q.b = malloc((size_t)p->n * sizeof *q.b);
			if (!q.b) {
				CHECK(0, "out of memory");
				return;
			}
			memcpy(q.b, p->b, (size_t)p->n * sizeof *q.b);
			q.b[big].off = q.b[k].off;
			CHECK(dl_mp_check(&q, err, sizeof err) < 0, "%s: buffer %d moved onto %d accepted", what, big, k);
			free(q.b);
			return;
		}
}

static void test_models(void)
{
	static const char *models[] = { "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
					"resnet20", "resnet32", "resnet56", "convnet" };
	static const int batches[] = { 1, 7, 64 };
	char err[512];
	for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
		int cifar = strstr("resnet20 resnet32 resnet56", models[m]) != NULL;
		int hw = cifar ? 32 : 224;
		struct dl_graph g;
		if (dl_model_build(&g, models[m], 3, hw, hw, cifar ? 10 : 1000, 0, 1, err, sizeof err)) {
			CHECK(0, "build %s: %s", models[m], err);
			continue;
		}
		size_t plain_total = 0;
		for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++)
			for (int fused = 0; fused < 2; fused++)
			for (size_t es = 2; es <= 4; es += 2) {
				struct dl_mp p;
				struct dlc_arena_in in = { .n = batches[bi], .esize = es, .ws_bytes = (size_t)3 << 20,
							   .bn_part_floats = dlc_arena_bn_part(&g, batches[bi], 132),
							   .fused = fused };
				if (dlc_arena_plan(&g, &in, &p, err, sizeof err)) {
					CHECK(0, "%s b%d: %s", models[m], batches[bi], err);
					continue;
				}
				size_t all = 0;
				for (int k = 0; k < p.n; k++)
					all += dl_mp_size(&p, &p.b[k]);
				CHECK(dl_mp_check(&p, err, sizeof err) == 0, "%s b%d: %s", models[m], batches[bi], err);
				CHECK(p.total >= dl_mp_live_peak(&p, NULL) && p.total <= all,
				      "%s b%d: total %zu outside [live peak %zu, unshared %zu]", models[m], batches[bi], p.total,
				      dl_mp_live_peak(&p, NULL), all);
				if (batches[bi] == 64 && es == 2) {
					printf("%s b64 bf16 %s: planned %.3f GiB, live peak %.3f, unshared %.3f\n", models[m],
					       fused ? "fused" : "plain", p.total / 1073741824.0,
					       dl_mp_live_peak(&p, NULL) / 1073741824.0, all / 1073741824.0);
					corrupt_rejected(&p, models[m]);
					/* every model but convnet (no BN) has BN+ReLU -> conv
					 * in its blocks: the fused plan is smaller */
					if (!fused)
						plain_total = p.total;
					else
						CHECK(strcmp(models[m], "convnet") ? p.total < plain_total : p.total == plain_total,
						      "%s b64 bf16: fused plan %zu, plain %zu", models[m], p.total, plain_total);
				}
				dl_mp_free(&p);
			}
		dl_model_free(&g);
	}
}

/* One train forward + backward on the ref backend: logits and every param
 * gradient (bits). */
struct step_out {
	float *logits, *eval; /* eval: an eval forward's logits after the step */
	double *grads;
	size_t n_logits, n_grads;
};

static int ref_step(const char *model, int c, int hw, int n, int k, int plan, int fused, int cut,
		    struct step_out *o, size_t *arena, size_t *unshared)
{
	char err[512];
	struct dl_graph g;
	struct dl_backend *b = NULL;
	struct dl_mp p = { 0 };
	int rc = -1;
	if (dl_model_build(&g, model, c, hw, hw, k, 0, 7, err, sizeof err)) {
		CHECK(0, "build %s: %s", model, err);
		return -1;
	}
	size_t nx = (size_t)n * c * hw * hw;
	float *x = malloc(nx * sizeof *x), *dl = malloc((size_t)n * k * sizeof *dl);
	if (!x || !dl || !(b = dl_ref_create(&g, n, err, sizeof err))) {
		CHECK(0, "%s: %s", model, x && dl ? err : "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)sin(0.37 * (double)i + 0.1);
	for (int i = 0; i < n * k; i++)
		dl[i] = (float)cos(0.53 * i) / (float)n;
	if (plan) {
		if (dl_ref_plan(b, &p, fused, err, sizeof err)) {
			CHECK(0, "%s plan: %s", model, err);
			goto out;
		}
		if (cut) {
			/* the activation read last in backward (conv1's input aside) lives only in its forward step */
			int v = -1;
			for (int i = 0; i < p.n; i++)
				if (p.b[i].what == 0 && p.b[i].idx != g.input && p.b[i].last < dl_mp_end(&g) &&
				    (v < 0 || p.b[i].last > p.b[v].last))
					v = i;
			p.b[v].last = p.b[v].first;
		}
		if (dl_mp_assign(&p, err, sizeof err) || dl_mp_check(&p, err, sizeof err) ||
		    dl_ref_use_plan(b, &p, 1, err, sizeof err)) {
			CHECK(0, "%s planned: %s", model, err);
			goto out;
		}
		*arena = p.total;
		*unshared = 0;
		for (int i = 0; i < p.n; i++)
			*unshared += dl_mp_size(&p, &p.b[i]);
	}
	if (dl_ref_forward(b, x, 1) || dl_ref_backward(b, dl)) {
		CHECK(0, "%s step failed", model);
		goto out;
	}
	o->n_logits = (size_t)n * k;
	o->n_grads = dl_model_n_weights(&g);
	o->logits = malloc(o->n_logits * sizeof *o->logits);
	o->eval = malloc(o->n_logits * sizeof *o->eval);
	o->grads = malloc(o->n_grads * sizeof *o->grads);
	if (!o->logits || !o->eval || !o->grads) {
		CHECK(0, "out of memory");
		goto out;
	}
	memcpy(o->logits, dl_ref_logits(b), o->n_logits * sizeof *o->logits);
	size_t at = 0;
	for (int i = 0; i < g.n_params; i++) {
		memcpy(o->grads + at, dl_ref_grad_f64(b, i), g.params[i].count * sizeof(double));
		at += g.params[i].count;
	}
	/* eval (running statistics; in the fused layout the prologues use them) */
	if (dl_ref_forward(b, x, 0)) {
		CHECK(0, "%s eval forward failed", model);
		goto out;
	}
	memcpy(o->eval, dl_ref_logits(b), o->n_logits * sizeof *o->eval);
	rc = 0;
out:
	dl_mp_free(&p);
	if (b)
		dl_backend_ref.destroy(b);
	free(x);
	free(dl);
	dl_model_free(&g);
	return rc;
}

/* fused: the plan in the fused layout (the private step runs the plain
 * schedule); its arena is no larger than the plain one's, *plain_arena. */
static void test_poisoned(const char *model, int c, int hw, int n, int k, int fused, size_t *plain_arena)
{
	struct step_out a = { 0 }, b = { 0 }, z = { 0 };
	size_t arena = 0, unshared = 0, dummy;
	const char *layout = fused ? "fused" : "plain";
	if (ref_step(model, c, hw, n, k, 0, 0, 0, &a, &dummy, &dummy) == 0 &&
	    ref_step(model, c, hw, n, k, 1, fused, 0, &b, &arena, &unshared) == 0) {
		int same = a.n_grads == b.n_grads && memcmp(a.logits, b.logits, a.n_logits * sizeof *a.logits) == 0 &&
			   memcmp(a.eval, b.eval, a.n_logits * sizeof *a.eval) == 0 &&
			   memcmp(a.grads, b.grads, a.n_grads * sizeof *a.grads) == 0;
		CHECK(same, "%s %s: the step on planned, poisoned arrays differs from the step on private ones", model,
		      layout);
		CHECK(arena < unshared, "%s %s: the plan shares nothing (%zu of %zu bytes)", model, layout, arena,
		      unshared);
		if (!fused)
			*plain_arena = arena;
		else
			CHECK(arena <= *plain_arena, "%s: the fused arena %zu is larger than the plain one %zu", model,
			      arena, *plain_arena);
		if (same)
			printf("%s %dx%dx%d b%d ref %s: planned step equals the private one bit for bit; arena %zu of %zu bytes\n",
			       model, c, hw, hw, n, layout, arena, unshared);
	}
	/* the same with one lifetime cut short must differ */
	if (ref_step(model, c, hw, n, k, 1, fused, 1, &z, &dummy, &dummy) == 0 && a.grads) {
		int same = memcmp(a.grads, z.grads, a.n_grads * sizeof *a.grads) == 0;
		CHECK(!same, "%s %s: a plan with a lifetime cut short still gave the same gradients", model, layout);
	}
	free(a.logits), free(a.grads), free(b.logits), free(b.grads), free(z.logits), free(z.grads);
	free(a.eval), free(b.eval), free(z.eval);
}

/* dl_ref_use_plan refuses a fused plan that lacks one conv's backward
 * prologue buffer (the backend would have nowhere to recompute into). */
static void test_fused_plan_checked(void)
{
	char err[512];
	struct dl_graph g;
	struct dl_backend *b = NULL;
	struct dl_mp p = { 0 };
	if (dl_model_build(&g, "resnet20", 3, 8, 8, 10, 0, 7, err, sizeof err)) {
		CHECK(0, "build resnet20: %s", err);
		return;
	}
	if (!(b = dl_ref_create(&g, 2, err, sizeof err)) || dl_ref_plan(b, &p, 1, err, sizeof err)) {
		CHECK(0, "resnet20 fused plan: %s", err);
		goto out;
	}
	int k = p.n - 1;
	while (k >= 0 && p.b[k].what != 3)
		k--;
	CHECK(k >= 0, "resnet20 fused plan has no backward prologue buffer");
	if (k >= 0) {
		p.b[k] = p.b[--p.n];
		CHECK(dl_mp_assign(&p, err, sizeof err) == 0, "assign: %s", err);
		CHECK(dl_ref_use_plan(b, &p, 1, err, sizeof err) < 0 && strstr(err, "no backward prologue buffer"),
		      "a fused plan without a backward prologue buffer accepted (%s)", err);
	}
out:
	dl_mp_free(&p);
	if (b)
		dl_backend_ref.destroy(b);
	dl_model_free(&g);
}

int main(void)
{
	test_hand();
	test_convnet();
	test_fused_lives();
	test_fused_plan_checked();
	test_models();
	size_t plain[4] = { 0 };
	for (int fused = 0; fused < 2; fused++) {
		test_poisoned("convnet", 1, 8, 2, 10, fused, &plain[0]);
		test_poisoned("resnet20", 3, 8, 2, 10, fused, &plain[1]);
		test_poisoned("resnet18", 3, 32, 2, 5, fused, &plain[2]);
		test_poisoned("resnet50", 3, 32, 2, 5, fused, &plain[3]);
	}
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("all memory plan checks passed\n");
	return 0;
}
