#include "config.h"

/* ResNet training throughput of the CUDA backend's training step
 * (dl_backend_cuda.train_step) on synthetic data resident in GPU memory
 * (the batch is copied once; dl_cuda_set_resident_input), plus the GPU's
 * measured bf16 matmul rate on random data so the result can be put
 * against the physical limit, and how many convolution directions run
 * with each cuDNN math type (conv_math: the mathType of the cudnnFind
 * entry each algorithm was chosen from).  Prints one JSON line.
 *
 *   bench_gpu [--model resnet50] [--batch 256] [--size 224] [--steps 30]
 *             [--warmup 10] [--precision bf16|fp16|fp32] [--graphs 0|1]
 *
 * Each step's time is measured with CUDA events around the step on the
 * backend's stream; the median over the timed steps is reported.
 * --graphs 0 launches every step eagerly, 1 (the trainer's way) replays
 * the step's CUDA graph. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include "common/err.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_test.h"
#include "engine/model.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* TFLOP/s of a bf16 x bf16 -> fp32-accumulate GEMM of side m (what the
 * convolutions' tensor cores can do at best). */
static double matmul_tflops(int m, char *err, size_t errlen)
{
	void *a = NULL, *bm = NULL, *c = NULL;
	cublasHandle_t h = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	double rv = -1.0;
	size_t bytes = (size_t)m * m * 2;
	const float one = 1.0f, zero = 0.0f;
	if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&bm, bytes) != cudaSuccess ||
	    cudaMalloc(&c, bytes) != cudaSuccess) {
		dl_errf(err, errlen, "matmul: cudaMalloc of 3 x %zu bytes failed", bytes);
		goto out;
	}
	/* random bf16 in [-1, 1): never time on zeros (they run faster) */
	uint16_t *hv = malloc(bytes);
	if (!hv) {
		dl_errf(err, errlen, "matmul: out of host memory");
		goto out;
	}
	uint64_t rs = 0x2545f4914f6cdd1dull;
	for (size_t i = 0; i < (size_t)m * m; i++) {
		rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
		float f = (float)(rs >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
		uint32_t u;
		memcpy(&u, &f, sizeof u);
		hv[i] = (uint16_t)(u >> 16);
	}
	int copied = cudaMemcpy(a, hv, bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
		     cudaMemcpy(bm, hv, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
	free(hv);
	if (!copied || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cudaEventCreate(&e0) != cudaSuccess ||
	    cudaEventCreate(&e1) != cudaSuccess) {
		dl_errf(err, errlen, "matmul: setup failed");
		goto out;
	}
	const int reps = 20;
	float best = 1e30f;
	for (int r = 0; r < reps + 3; r++) {
		float ms = 0.0f;
		if (cudaEventRecord(e0, 0) != cudaSuccess ||
		    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, CUDA_R_16BF, m, bm, CUDA_R_16BF, m, &zero,
				 c, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS ||
		    cudaEventRecord(e1, 0) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
		    cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
			dl_errf(err, errlen, "matmul: cublasGemmEx bf16 failed");
			goto out;
		}
		if (r >= 3 && ms < best)
			best = ms;
	}
	rv = 2.0 * m * (double)m * m / (best * 1e-3) / 1e12;
out:
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	if (h)
		cublasDestroy(h);
	cudaFree(a);
	cudaFree(bm);
	cudaFree(c);
	return rv;
}

int main(int argc, char **argv)
{
	const char *model = "resnet50", *prec = "bf16";
	int batch = 256, size = 224, steps = 30, warmup = 10, graphs = 0, profile = 0;
	static const char usage[] = "usage: bench_gpu [--model resnet50] [--batch 256] [--size 224] [--steps 30]\n"
				    "                 [--warmup 10] [--precision bf16|fp16|fp32] [--graphs 0|1]\n"
				    "                 [--profile 0|1: time every node (eager), table on stderr]\n";
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 == argc) {
			fprintf(stderr, "bench_gpu: %s: no value after it\n%s", argv[i], usage);
			return 2;
		} else if (!strcmp(argv[i], "--model"))
			model = argv[i + 1];
		else if (!strcmp(argv[i], "--batch"))
			batch = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--steps"))
			steps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--warmup"))
			warmup = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--precision"))
			prec = argv[i + 1];
		else if (!strcmp(argv[i], "--graphs"))
			graphs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--profile"))
			profile = atoi(argv[i + 1]);
		else {
			fprintf(stderr, "bench_gpu: unknown option %s\n%s", argv[i], usage);
			return 2;
		}
	}
	if (batch < 1 || size < 32 || steps < 1 || warmup < 1 || (profile && graphs)) {
		fprintf(stderr, "bench_gpu: bad --batch/--size/--steps/--warmup (or --profile with --graphs 1)\n");
		return 2;
	}
	if (dl_cuda_device_count() < 1) {
		fprintf(stderr, "bench_gpu: no CUDA device\n");
		return 77;
	}
	char err[512];
	struct dl_graph g;
	struct dl_backend *b = NULL;
	float *x = NULL;
	int *labels = NULL;
	double *ms = calloc((size_t)steps, sizeof *ms);
	int rc = 1;
	if (!ms) {
		fprintf(stderr, "bench_gpu: out of memory\n");
		return 1;
	}
	if (dl_model_build(&g, model, 3, size, size, 1000, 0, 1, err, sizeof err)) {
		fprintf(stderr, "bench_gpu: %s\n", err);
		free(ms);
		return 1;
	}
	struct dl_backend_opts o;
	memset(&o, 0, sizeof o);
	int pr = dl_precision_parse(prec);
	if (pr < 0) {
		fprintf(stderr, "bench_gpu: --precision %s: expected fp32, bf16 or fp16\n", prec);
		goto out;
	}
	o.precision = (enum dl_precision)pr;
	o.optim.momentum = 0.9;
	o.optim.weight_decay = 5e-5;
	struct dl_cuda_test_opts t = { .no_graphs = !graphs, .profile = profile };
	size_t xc = (size_t)batch * 3 * size * size;
	x = dl_cuda_host_alloc(xc * sizeof(float), NULL);
	labels = calloc((size_t)batch, sizeof *labels);
	if (!x || !labels) {
		fprintf(stderr, "bench_gpu: out of memory for the batch\n");
		goto out;
	}
	b = dl_cuda_create_test(&g, batch, &o, &t, err, sizeof err);
	if (!b) {
		fprintf(stderr, "bench_gpu: %s\n", err);
		goto out;
	}
	uint64_t r = 88172645463325252ull;
	for (size_t i = 0; i < xc; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		x[i] = (float)(r >> 40) / (float)(1 << 24) * 4.0f - 2.0f;
	}
	for (int i = 0; i < batch; i++)
		labels[i] = i % 1000;
	/* the first step copies the batch; later ones reuse it in GPU memory */
	dl_cuda_set_resident_input(b, 1);
	struct dl_batch in = { .x = x, .labels = labels };
	double loss = 0.0;
	int graphed = 0;
	for (int s = 0; s < warmup + steps; s++) {
		struct dl_step_result res;
		if (dl_backend_cuda.train_step(b, &in, 0.01, 0, &res))
			goto fail;
		loss = res.loss;
		if (s >= warmup) {
			ms[s - warmup] = dl_cuda_last_step_ms(b);
			graphed += dl_cuda_last_step_graphed(b);
		}
	}
	qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
	double med = ms[steps / 2];
	size_t arena = 0, dev = 0, free_b = 0, total_b = 0;
	dl_cuda_memory(b, &arena, &dev);
	cudaMemGetInfo(&free_b, &total_b);
	/* the math types the convolutions run with (cudnnFind's choice per direction) */
	static const int math_of[4] = { CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
					CUDNN_FMA_MATH };
	int math_n[4] = { 0, 0, 0, 0 };
	for (int i = 0; i < g.n_nodes; i++)
		for (int dir = 0; dir < 3; dir++) {
			int set, chosen;
			if (dl_cuda_conv_math(b, i, dir, &set, &chosen) == 0)
				for (int m = 0; m < 4; m++)
					math_n[m] += set == math_of[m];
		}
	double tf = matmul_tflops(8192, err, sizeof err);
	double ips = batch / (med * 1e-3);
	/* ResNet-50 training: ~3 x 4.1 GMAC x 2 = 24.5 GFLOP per 224x224 image */
	double gflop_img = 24.5 * ((double)size * size) / (224.0 * 224.0);
	printf("{\"engine\": \"dljob\", \"model\": \"%s\", \"batch\": %d, \"size\": %d, \"precision\": \"%s\", "
	       "\"cuda_graphs\": %d, \"graphed_steps\": %d, \"step_ms_median\": %.3f, \"step_ms_min\": %.3f, \"step_ms_max\": %.3f, "
	       "\"img_per_s\": %.1f, \"final_loss\": %.4f, \"arena_gib\": %.3f, \"arena_bytes\": %zu, \"cudnn_ws_bytes\": %zu, "
	       "\"device_used_gib\": %.3f, "
	       "\"matmul_bf16_tflops\": %.1f, \"gflop_per_img\": %.2f, \"fraction_of_limit\": %.3f, "
	       "\"conv_math\": {\"default\": %d, \"tensor_op\": %d, \"tensor_op_conversion\": %d, \"fma\": %d}}\n",
	       model, batch, size, prec, graphs, graphed, med, ms[0], ms[steps - 1], ips, loss, (double)arena / (1 << 30),
	       arena, dl_cuda_workspace_bytes(b), (double)dev / (1 << 30), tf, gflop_img, tf > 0 ? ips * gflop_img * 1e9 / (tf * 1e12) : -1.0, math_n[0],
	       math_n[1], math_n[2], math_n[3]);
	if (profile)
		dl_cuda_profile_print(b, stderr);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "bench_gpu: %s\n", dl_backend_cuda.error(b));
out:
	if (b)
		dl_backend_cuda.destroy(b);
	dl_cuda_host_free(x, NULL);
	free(labels);
	dl_model_free(&g);
	free(ms);
	return rc;
}
