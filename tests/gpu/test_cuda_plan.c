#include "config.h"

/* What of the CUDA backend can be checked without a GPU (runs in make check
 * on any machine where the CUDA backend is built):
 *  - the device string (dl_backend_opts.device): index, PCI bus id, junk;
 *  - the flat parameter layout (slots first, 256-byte aligned, no overlap)
 *    and the reduction buckets of resnet50 and resnet18 at several sizes:
 *    they tile [0, end) exactly, in backward order (offsets decreasing,
 *    done_by never increasing), the last one carries the slots, each
 *    bucket is launched after every node writing one of its gradients,
 *    the first closes at 1 MiB (so resnet20 too has two by default),
 *    SIZE_MAX gives one bucket;
 *  - the update arithmetic the GPU kernels run (dlc_sgd_elem,
 *    dlc_lars_trust from cuda_kernels.h) against dl_sgd_step (optim.h) on
 *    random tensors for plain/Nesterov/no-momentum/LARS/first steps, and
 *    the fp16 loss-scale rule (dlc_scale_update) against its definition;
 *  - create() refuses what the cuda backend cannot honour, naming it
 *    (--conv-algo, a precision, a bad optimizer setting, a device string
 *    that is neither index nor bus id) before touching a GPU, and without
 *    a GPU says that no CUDA device is visible;
 *  - --precision auto: bf16 from compute capability 8.0, fp16 on 7.x, fp32
 *    below (dlc_auto_precision); named precisions pass through
 *    dl_backend_precision unqueried; without a GPU auto says that no CUDA
 *    device is visible, with one (tests/gpu/run.sh) it is what the GPU's
 *    compute capability calls for: bf16 on an A100, H100 or H200. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_plan.h"
#include "engine/model.h"
#include "engine/optim.h"

static int fails;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);       \
			printf(__VA_ARGS__);                              \
			printf("\n");                                     \
			fails++;                                          \
		}                                                         \
	} while (0)

static uint64_t rng = 12345;

static double urand(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static void device_strings(void)
{
	static const struct {
		const char *s;
		int kind, index;
	} cases[] = {
		{ NULL, 0, 0 }, { "", 0, 0 }, { "0", 0, 0 }, { "3", 0, 3 }, { "12", 0, 12 },
		{ "0000:3b:00.0", 1, 0 }, { "3B:00.0", 1, 0 }, { "00000000:17:00.0", 1, 0 },
		{ "-1", -1, 0 }, { "1a", -1, 0 }, { "gpu0", -1, 0 }, { ":3b:00.0", -1, 0 }, { "3b.00", -1, 0 },
		{ "99999", -1, 0 }, { "0000:3b:00.0; rm -rf /", -1, 0 },
		{ "0000:3b:00.0:00:00:00:00:00:00:00:00:00:00", -1, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int idx = -7;
		int k = dlc_parse_device(cases[i].s, &idx);
		CHECK(k == cases[i].kind && (k != 0 || idx == cases[i].index), "device '%s': kind %d index %d, want %d %d",
		      cases[i].s ? cases[i].s : "(null)", k, idx, cases[i].kind, cases[i].index);
	}
	printf("device strings: %zu cases\n", sizeof cases / sizeof cases[0]);
}

static void buckets(const char *model, int h)
{
	struct dl_graph g;
	char err[256];
	if (dl_model_build(&g, model, 3, h, h, 10, 0, 1, err, sizeof err)) {
		CHECK(0, "%s: %s", model, err);
		return;
	}
	size_t *off = calloc((size_t)g.n_params, sizeof *off), n_flat = 0;
	int *writer = calloc((size_t)g.n_params, sizeof *writer);
	if (!off || !writer) {
		CHECK(0, "out of memory");
		goto out;
	}
	dlc_plan_flat(&g, off, &n_flat);
	CHECK(off[0] == DLC_SLOTS, "%s: first param at %zu", model, off[0]);
	for (int i = 0; i < g.n_params; i++) {
		CHECK(off[i] % 64 == 0, "%s: param %d at %zu is not 256-byte aligned", model, i, off[i]);
		size_t end = i + 1 < g.n_params ? off[i + 1] : n_flat;
		CHECK(off[i] + g.params[i].count <= end, "%s: param %d overlaps the next", model, i);
		CHECK(end - off[i] - g.params[i].count < 64, "%s: param %d: gap of %zu floats", model, i,
		      end - off[i] - g.params[i].count);
	}
	CHECK(dlc_param_writers(&g, writer, err, sizeof err) == 0, "%s: writers: %s", model, err);
	static const size_t sizes[] = { 0, (size_t)1 << 20, (size_t)4 << 20, (size_t)64 << 10, SIZE_MAX };
	for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		struct dlc_bucket *bk = NULL;
		int nb = 0;
		if (dlc_plan_buckets(&g, writer, off, sizes[si], &bk, &nb, err, sizeof err)) {
			CHECK(0, "%s: buckets: %s", model, err);
			continue;
		}
		size_t cap = sizes[si] ? sizes[si] : DL_BUCKET_BYTES_DEFAULT;
		size_t last_end = n_flat; /* buckets go down from the top */
		size_t top = off[g.n_params - 1] + g.params[g.n_params - 1].count;
		CHECK(nb >= 1 && bk[0].off + bk[0].count == top, "%s: first bucket does not end at the last param", model);
		for (int k = 0; k < nb; k++)
			CHECK(bk[k].off % 64 == 0, "%s: bucket %d starts at %zu, not 256-byte aligned", model, k, bk[k].off);
		for (int k = 0; k < nb; k++) {
			size_t end = bk[k].off + bk[k].count;
			if (k > 0)
				CHECK(end == bk[k - 1].off, "%s: bucket %d ends at %zu, bucket %d starts at %zu", model, k, end,
				      k - 1, bk[k - 1].off);
			CHECK(end <= last_end, "%s: bucket %d out of order", model, k);
			last_end = bk[k].off;
			if (k > 0)
				CHECK(bk[k].done_by <= bk[k - 1].done_by, "%s: bucket %d ready before bucket %d", model, k, k - 1);
			/* every param inside is written by a node at or after done_by (backward reaches done_by last) */
			for (int p = 0; p < g.n_params; p++)
				if (off[p] >= bk[k].off && off[p] < end)
					CHECK(writer[p] < 0 || writer[p] >= bk[k].done_by,
					      "%s: bucket %d launched after node %d but param %d is written by node %d", model, k,
					      bk[k].done_by, p, writer[p]);
			/* size: each but the last reaches its cap (the first's is 1 MiB at most) and
			 * closes with the param that reached it */
			size_t want = k == 0 && cap >= DL_FIRST_BUCKET_BYTES ? DL_FIRST_BUCKET_BYTES : cap;
			if (k + 1 < nb)
				CHECK(bk[k].count * sizeof(float) >= want, "%s: bucket %d of %zu bytes < %zu", model, k,
				      bk[k].count * sizeof(float), want);
			size_t lowest = 0; /* floats of the bucket without its lowest param */
			for (int p = 0; p < g.n_params; p++)
				if (off[p] >= bk[k].off && off[p] < end && (lowest == 0 || off[p] < lowest))
					lowest = off[p];
			if (k + 1 < nb && lowest > bk[k].off)
				CHECK((end - lowest) * sizeof(float) < want + 256,
				      "%s: bucket %d would have closed one param earlier", model, k);
		}
		CHECK(bk[nb - 1].off == 0, "%s: the last bucket starts at %zu, not at the slots", model, bk[nb - 1].off);
		if (sizes[si] == SIZE_MAX)
			CHECK(nb == 1 && bk[0].done_by == 0, "%s: SIZE_MAX gives %d buckets", model, nb);
		/* the small first bucket: even resnet20's 1.1 MB of gradients overlap by default */
		if (sizes[si] == 0)
			CHECK(nb >= 2 && bk[0].done_by > 0, "%s: the default gives %d bucket(s), the first after node %d",
			      model, nb, bk[0].done_by);
		printf("%s: %zu-byte buckets: %d buckets over %zu floats\n", model, cap, nb, top);
		free(bk);
	}
out:
	free(off);
	free(writer);
	dl_model_free(&g);
}

/* The GPU's per-element update against dl_sgd_step on the same tensor. */
static void sgd_math(void)
{
	static const struct dl_optim_config cfgs[] = {
		{ .momentum = 0.9, .weight_decay = 1e-4 },
		{ .momentum = 0.9, .weight_decay = 5e-4, .nesterov = 1 },
		{ .momentum = 0.0, .weight_decay = 1e-4 },
		{ .momentum = 0.9, .weight_decay = 5e-5, .lars = 1, .lars_eta = 0.001 },
		{ .momentum = 0.9, .weight_decay = 0.0, .lars = 1, .lars_eta = 0.02, .decay_bn_and_bias = 1 },
		{ .momentum = 0.8, .weight_decay = 1e-3, .nesterov = 1, .lars = 1, .lars_eta = 0.001 },
	};
	enum { N = 1000 };
	static float w[N], g[N], m[N], w2[N], m2[N];
	double worst = 0;
	int cases = 0;
	for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
		for (int no_decay = 0; no_decay < 2; no_decay++)
			for (int first = 0; first < 2; first++) {
				const struct dl_optim_config *c = &cfgs[ci];
				for (int j = 0; j < N; j++) {
					w[j] = w2[j] = (float)(urand() - 0.5);
					g[j] = (float)(urand() - 0.5) * 0.01f;
					m[j] = m2[j] = first ? 0.0f : (float)(urand() - 0.5) * 0.01f;
				}
				struct dl_sgd_param p = { .w = w, .g = g, .buf = m, .count = N, .no_decay = no_decay };
				double trust = 0;
				const double lr = 0.37;
				dl_sgd_step(c, &p, 1, lr, first, &trust);
				/* what the kernels do: norms summed in double, trust, per element */
				int decay = !no_decay || c->decay_bn_and_bias;
				float wd = decay ? (float)c->weight_decay : 0.0f;
				double sw = 0, sg = 0;
				for (int j = 0; j < N; j++) {
					sw += (double)w2[j] * w2[j];
					sg += (double)g[j] * g[j];
				}
				double tr = c->lars && decay ? dlc_lars_trust(sw, sg, c->lars_eta, decay ? c->weight_decay : 0.0)
							     : 1.0;
				CHECK(fabs(tr - trust) <= 1e-12 * fabs(trust), "cfg %zu: trust %.17g vs dl_sgd_step %.17g", ci, tr,
				      trust);
				for (int j = 0; j < N; j++) {
					float mv = m2[j];
					float nw = dlc_sgd_elem(w2[j], g[j], &mv, wd, (float)tr, (float)c->momentum, (float)lr,
								c->nesterov, c->momentum > 0, first);
					double e = fabs((double)nw - w[j]) / (fabs(w[j]) + 1e-30);
					double em = c->momentum > 0 ? fabs((double)mv - m[j]) / (fabs(m[j]) + 1e-30) : 0;
					if (!(e <= worst))
						worst = e;
					if (!(em <= worst))
						worst = em;
				}
				cases++;
			}
	CHECK(worst <= 1e-6, "update differs from dl_sgd_step by %.2e (relative)", worst);
	printf("update arithmetic vs dl_sgd_step: %d cases, worst rel diff %.1e\n", cases, worst);
	/* zero norms keep the plain step */
	CHECK(dlc_lars_trust(0.0, 1.0, 0.001, 0.0) == 1.0 && dlc_lars_trust(1.0, 0.0, 0.001, 0.0) == 1.0,
	      "a zero norm must give trust 1");
}

static void loss_scale(void)
{
	float scale = 65536.0f;
	int good = 0;
	dlc_scale_update(&scale, &good, 1, 2000);
	CHECK(scale == 32768.0f && good == 0, "a bad step must halve: %g %d", (double)scale, good);
	for (int i = 0; i < 1999; i++)
		dlc_scale_update(&scale, &good, 0, 2000);
	CHECK(scale == 32768.0f && good == 1999, "1999 clean steps must not grow: %g %d", (double)scale, good);
	dlc_scale_update(&scale, &good, 0, 2000);
	CHECK(scale == 65536.0f && good == 0, "the 2000th clean step must double: %g %d", (double)scale, good);
	for (int i = 0; i < 10; i++)
		dlc_scale_update(&scale, &good, 0, 2000);
	dlc_scale_update(&scale, &good, 1, 2000);
	CHECK(scale == 32768.0f && good == 0, "a bad step resets the clean count: %g %d", (double)scale, good);
	/* torch's _amp_update_scale never grows the scale past the largest
	 * float: an inf scale would make every later step non-finite (inf*0)
	 * and halving inf stays inf, so no step would ever be applied again */
	scale = 0x1p127f;
	good = 1999;
	dlc_scale_update(&scale, &good, 0, 2000);
	CHECK(scale == 0x1p127f && good == 0, "growth past FLT_MAX must keep the scale: %g %d", (double)scale, good);
	printf("fp16 loss scale rule: ok\n");
}

static void refusals(void)
{
	static const struct {
		const char *what, *must;
		struct dl_backend_opts o;
	} cases[] = {
		{ "--conv-algo direct", "--conv-algo direct is not supported by the cuda backend", { .conv_algo = DL_CONV_DIRECT } },
		{ "precision 7", "precision 7 is not supported by the cuda backend", { .precision = (enum dl_precision)7 } },
		{ "momentum 1.5", "momentum 1.5", { .optim = { .momentum = 1.5 } } },
		{ "label smoothing 1", "label smoothing", { .label_smoothing = 1.0 } },
		{ "GPU gpu0", "GPU 'gpu0' is neither a device index nor a PCI bus id", { .device = "gpu0" } },
	};
	struct dl_graph g;
	char err[256];
	if (dl_model_build(&g, "resnet20", 3, 32, 32, 10, 0, 1, err, sizeof err)) {
		CHECK(0, "resnet20: %s", err);
		return;
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		err[0] = 0;
		struct dl_backend *b = dl_backend_cuda.create(&g, 2, &cases[i].o, err, sizeof err);
		CHECK(!b && strstr(err, cases[i].must), "%s: %s (\"%s\")", cases[i].what, b ? "accepted" : "unclear", err);
		if (b)
			dl_backend_cuda.destroy(b);
	}
	if (dl_cuda_device_count() == 0) {
		struct dl_backend_opts o = { .precision = DL_BF16 };
		err[0] = 0;
		struct dl_backend *b = dl_backend_cuda.create(&g, 2, &o, err, sizeof err);
		CHECK(!b && strstr(err, "no CUDA device is visible"), "no GPU: %s (\"%s\")", b ? "created" : "unclear", err);
		CHECK(dl_backend_cuda.host_alloc(16, NULL) == NULL, "no GPU: host_alloc gave memory");
		printf("refusals: %zu options refused by name; without a GPU: \"%s\"\n", sizeof cases / sizeof cases[0], err);
	} else {
		printf("refusals: %zu options refused by name\n", sizeof cases / sizeof cases[0]);
	}
	dl_model_free(&g);
}

static void auto_precision(void)
{
	static const struct {
		int major, want;
	} cc[] = { { 3, DL_FP32 }, { 5, DL_FP32 }, { 6, DL_FP32 }, { 7, DL_FP16 }, { 8, DL_BF16 },
		   { 9, DL_BF16 }, { 10, DL_BF16 }, { 12, DL_BF16 } };
	char msg[384];
	for (size_t i = 0; i < sizeof cc / sizeof cc[0]; i++)
		CHECK(dlc_auto_precision(cc[i].major) == cc[i].want, "compute capability %d.x: auto is %d, want %d",
		      cc[i].major, dlc_auto_precision(cc[i].major), cc[i].want);
	CHECK(dl_backend_precision(&dl_backend_cuda, "fp16", NULL, msg, sizeof msg) == DL_FP16 && !msg[0],
	      "named fp16: \"%s\"", msg);
	CHECK(dl_backend_precision(&dl_backend_cuda, NULL, NULL, msg, sizeof msg) == DL_FP32, "no name: not fp32");
	CHECK(dl_backend_precision(&dl_backend_cuda, "fp8", NULL, msg, sizeof msg) < 0 &&
	      strstr(msg, "unknown precision 'fp8' (auto, fp32, bf16, fp16)"), "fp8: \"%s\"", msg);
	CHECK(dl_backend_precision(&dl_backend_cuda, "auto", "gpu0", msg, sizeof msg) < 0 &&
	      strstr(msg, "GPU 'gpu0' is neither a device index nor a PCI bus id"), "auto on gpu0: \"%s\"", msg);
	int p = dl_backend_precision(&dl_backend_cuda, "auto", NULL, msg, sizeof msg);
	if (dl_cuda_device_count() == 0) {
		CHECK(p < 0 && strstr(msg, "no CUDA device is visible"), "auto without a GPU: %d \"%s\"", p, msg);
		printf("auto precision: the rule for 8 compute capabilities; without a GPU: \"%s\"\n", msg);
		return;
	}
	int major = 0, minor = 0;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
	    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
		CHECK(0, "cudaDeviceGetAttribute failed on device 0");
		return;
	}
	CHECK(p == dlc_auto_precision(major), "GPU 0 (%d.%d): auto is %d, want %d: \"%s\"", major, minor, p,
	      dlc_auto_precision(major), msg);
	if (major >= 8)
		CHECK(p == DL_BF16 && strstr(msg, "--precision auto: bf16 (GPU 0, compute capability"),
		      "sm_%d%d has bf16 tensor cores, auto gave \"%s\"", major, minor, msg);
	CHECK(dl_backend_precision(&dl_backend_cuda, "auto", "0", msg, sizeof msg) == p, "auto on device \"0\" differs");
	printf("auto precision: GPU 0 is sm_%d%d: %s\n", major, minor, msg);
}

/* Which BNs the residual adds apply (dlc_plan_bn_add): every BN that
 * feeds an add alone (bottleneck bn3 / basic-block bn2, and the
 * downsample BNs), nothing else; a BN whose output has a second consumer
 * keeps its own output. */
static void bn_add_fusion(const char *model, int h, int want)
{
	struct dl_graph g;
	char err[256];
	if (dl_model_build(&g, model, 3, h, h, 10, 0, 1, err, sizeof err)) {
		CHECK(0, "%s: %s", model, err);
		return;
	}
	int *by = malloc((size_t)g.n_nodes * sizeof *by);
	if (!by) {
		CHECK(0, "out of memory");
		dl_model_free(&g);
		return;
	}
	int n = dlc_plan_bn_add(&g, by), bad = 0;
	for (int i = 0; i < g.n_nodes; i++) {
		if (by[i] < 0)
			continue;
		const struct dl_node *a = &g.nodes[by[i]];
		bad += g.nodes[i].kind != DL_NODE_BN || g.nodes[i].relu || a->kind != DL_NODE_ADD ||
		       (a->in[0] != g.nodes[i].out && a->in[1] != g.nodes[i].out) || by[i] <= i;
	}
	CHECK(n == want && !bad, "%s: %d BNs fused into adds (%d wrong), want %d", model, n, bad, want);
	printf("bn+add fusion %s: %d BNs applied by their residual add\n", model, n);
	/* a second consumer of a fused BN's output undoes that one: the add of
	 * an identity block takes the BN's output as both inputs */
	for (int i = 0; i < g.n_nodes && n == want; i++)
		if (by[i] >= 0) {
			struct dl_node *a = &g.nodes[by[i]];
			int other = a->in[0] == g.nodes[i].out ? 1 : 0, keep = a->in[other], from_bn = 0;
			for (int j = 0; j < g.n_nodes; j++)
				from_bn |= g.nodes[j].out == keep && by[j] >= 0;
			if (from_bn)
				continue; /* a downsample block: its shortcut is a fused BN too */
			a->in[other] = g.nodes[i].out;
			int m = dlc_plan_bn_add(&g, by);
			CHECK(m == want - 1 && by[i] < 0, "%s: an add of a BN's output to itself: %d fused, want %d", model,
			      m, want - 1);
			a->in[other] = keep;
			break;
		}
	free(by);
	dl_model_free(&g);
}

int main(void)
{
	device_strings();
	buckets("resnet50", 64);
	buckets("resnet18", 32);
	buckets("resnet20", 32);
	sgd_math();
	loss_scale();
	refusals();
	auto_precision();
	bn_add_fusion("resnet50", 64, 20);
	bn_add_fusion("resnet18", 32, 11);
	bn_add_fusion("resnet20", 32, 11);
	printf("test_cuda_plan: %s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
