/* world_check: join the job's world as dljob does and check every collective
 * with exact answers.  Run as many tasks (srun, or RANK/WORLD_SIZE/MASTER_*):
 *   - blob exchange: everybody's (rank, size, local rank/size, node) agree;
 *   - broadcast of a blob from the last rank;
 *   - per step: allreduce f32/f64 of rank-dependent integers (exact in any
 *     summation order) of 1, 1000 and 1000003 elements, and a barrier;
 *   - allreduce of random floats gives the same bits on every rank.
 * --die-at-step K --rank R: rank R kills itself (SIGKILL) at step K, so the
 * others must fail with an error naming it, in bounded time.
 * --hang-at-step K --rank R: rank R stops taking part (sleeps for 10 x the
 * timeout, then exits 3) at step K, so the others must time out and name it.
 * --leave-at-step K --rank R: rank R closes the world and exits 1 at step K
 * (as dljob does after a local error), so the others must stop at once.
 * --stop-handler: catch SIGTERM as dljob does (a flag, SA_RESTART), so a
 * test sees what a SIGTERM during the bootstrap does to dljob.
 * --bench N: then time 5 allreduces of N floats (median, on rank 0).
 * Prints "world_check: ready ..." with the wall clock time at which the world
 * was up (for tests/bench/bench_launch.sh) and "world_check: rank N OK". */
#include "config.h"
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "world/world.h"

#define NODE_LEN 64

struct ident {
	int32_t rank, size, local_rank, local_size;
	char node[NODE_LEN];
};

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
	stop_flag = sig;
}

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: world_check [--timeout S] [--steps N] [--expect-method M]\n"
		   "                   [--expect-size N] [--die-at-step K --rank R]\n"
		   "                   [--hang-at-step K --rank R] [--leave-at-step K --rank R]\n"
		   "                   [--bench N] [--stop-handler]\n");
}

static int check_idents(const struct ident *all, int size, int me, char *msg, size_t msglen)
{
	for (int r = 0; r < size; r++) {
		const struct ident *a = &all[r];
		int ls = 0, lr = 0;
		if (a->rank != r || a->size != size) {
			snprintf(msg, msglen, "exchange: slot %d holds rank %d of %d", r, a->rank, a->size);
			return -1;
		}
		for (int q = 0; q < size; q++)
			if (strncmp(all[q].node, a->node, NODE_LEN) == 0) {
				ls++;
				if (q < r)
					lr++;
			}
		/* Local ranks: the ranks on one node, numbered in rank order (as
		 * srun's block distribution does). */
		if (a->local_size != ls || a->local_rank != lr) {
			snprintf(msg, msglen, "rank %d on %s says local %d/%d, the exchange says %d/%d"
				 " (seen from rank %d)", r, a->node, a->local_rank, a->local_size,
				 lr, ls, me);
			return -1;
		}
	}
	return 0;
}

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "steps", required_argument, NULL, 's' },
		{ "die-at-step", required_argument, NULL, 'd' },
		{ "hang-at-step", required_argument, NULL, 'g' },
		{ "leave-at-step", required_argument, NULL, 'l' },
		{ "rank", required_argument, NULL, 'r' },
		{ "expect-method", required_argument, NULL, 'm' },
		{ "expect-size", required_argument, NULL, 'n' },
		{ "bench", required_argument, NULL, 'b' },
		{ "stop-handler", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const size_t sizes[] = { 1, 1000, 1000003 };
	double timeout = 30, t0 = mono();
	long bench_n = 0;
	int steps = 2, die_step = -1, hang_step = -1, leave_step = -1, die_rank = -1, expect_size = 0, c, rv = 1, opened = 0;
	const char *expect_method = NULL;
	struct dl_world w;
	struct ident me, *all = NULL;
	float *f = NULL;
	double *d = NULL;
	char err[1024], what[160] = "", node[NODE_LEN];

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': timeout = atof(optarg); break;
		case 's': steps = atoi(optarg); break;
		case 'd': die_step = atoi(optarg); break;
		case 'g': hang_step = atoi(optarg); break;
		case 'l': leave_step = atoi(optarg); break;
		case 'b': bench_n = atol(optarg); break;
		case 'r': die_rank = atoi(optarg); break;
		case 'm': expect_method = optarg; break;
		case 'n': expect_size = atoi(optarg); break;
		case 'S': {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = on_stop;
			sigemptyset(&sa.sa_mask);
			sa.sa_flags = SA_RESTART;
			if (sigaction(SIGTERM, &sa, NULL) < 0)
				return 2;
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || timeout <= 0 || steps < 0) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (dl_world_open(&w, timeout, err, sizeof(err)) < 0) {
		fprintf(stderr, "world_check: %s\n", err);
		return 1;
	}
	opened = 1;
	const int rank = w.comm.rank, size = w.comm.size;
	const char *sn = getenv("SLURMD_NODENAME");
	if (!sn || !*sn) {
		if (gethostname(node, sizeof(node)) < 0)
			snprintf(node, sizeof(node), "?");
		node[sizeof(node) - 1] = 0;
	} else {
		snprintf(node, sizeof(node), "%s", sn);
	}
	printf("world_check: ready method=%s rank=%d size=%d local_rank=%d local_size=%d "
	       "node=%s wall=%.6f open_s=%.3f\n", w.method, rank, size, w.comm.local_rank,
	       w.comm.local_size, node, wall(), mono() - t0);
	if (expect_method && strcmp(expect_method, w.method) != 0) {
		snprintf(what, sizeof(what), "method is %s, expected %s", w.method, expect_method);
		snprintf(err, sizeof(err), "wrong method");
		goto out;
	}
	if (expect_size && expect_size != size) {
		snprintf(what, sizeof(what), "size is %d, expected %d", size, expect_size);
		snprintf(err, sizeof(err), "wrong size");
		goto out;
	}

	/* Exchange: who is where. */
	memset(&me, 0, sizeof(me));
	me.rank = rank;
	me.size = size;
	me.local_rank = w.comm.local_rank;
	me.local_size = w.comm.local_size;
	snprintf(me.node, sizeof(me.node), "%s", node);
	all = calloc((size_t)size, sizeof(*all));
	f = malloc(sizeof(float) * 1000003);
	d = malloc(sizeof(double) * 1000003);
	if (!all || !f || !d) {
		snprintf(what, sizeof(what), "setup");
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	snprintf(what, sizeof(what), "exchange");
	if (dl_world_exchange(&w, &me, sizeof(me), all, err, sizeof(err)) < 0)
		goto out;
	if (check_idents(all, size, rank, err, sizeof(err)) < 0)
		goto out;

	/* Broadcast from the last rank, through the engine's dl_comm op (which
	 * is dl_world_broadcast_blob). */
	char blob[48];
	memset(blob, 0, sizeof(blob));
	if (rank == size - 1)
		snprintf(blob, sizeof(blob), "blob from rank %d", rank);
	snprintf(what, sizeof(what), "broadcast");
	if (!w.comm.broadcast) {
		snprintf(err, sizeof(err), "dl_comm.broadcast is not set");
		goto out;
	}
	if (w.comm.broadcast(&w.comm, size - 1, blob, sizeof(blob), err, sizeof(err)) < 0)
		goto out;
	char want[48];
	memset(want, 0, sizeof(want));
	snprintf(want, sizeof(want), "blob from rank %d", size - 1);
	if (memcmp(blob, want, sizeof(blob)) != 0) {
		snprintf(err, sizeof(err), "got '%.47s', want '%s'", blob, want);
		goto out;
	}

	for (int s = 0; s < steps; s++) {
		if (s == die_step && rank == die_rank) {
			printf("world_check: rank %d dies at step %d\n", rank, s);
			raise(SIGKILL);
		}
		if (s == leave_step && rank == die_rank) {
			printf("world_check: rank %d leaves at step %d\n", rank, s);
			dl_world_close(&w);
			opened = 0;
			snprintf(what, sizeof(what), "step %d", s);
			snprintf(err, sizeof(err), "left on purpose (--leave-at-step)");
			goto out;
		}
		if (s == hang_step && rank == die_rank) {
			printf("world_check: rank %d hangs at step %d\n", rank, s);
			/* Long enough for the others to time out, short enough that
			 * a leftover ends by itself. */
			struct timespec left = { (time_t)(10 * timeout) + 30, 0 };
			while (nanosleep(&left, &left) != 0)
				;
			_exit(3);
		}
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k];
			const double P = size, tri = P * (P + 1) / 2, tri0 = P * (P - 1) / 2;
			/* f32: m*(rank+1) - rank, m < 1021: sums stay below 2^24. */
			for (size_t i = 0; i < n; i++)
				f[i] = (float)((double)((i * 7 + (size_t)s) % 1021) * (rank + 1) - rank);
			double ta = mono();
			snprintf(what, sizeof(what), "step %d: allreduce f32 n=%zu", s, n);
			if (w.comm.allreduce_sum_f32(&w.comm, f, n, err, sizeof(err)) < 0)
				goto out;
			ta = mono() - ta;
			for (size_t i = 0; i < n; i++) {
				double m = (double)((i * 7 + (size_t)s) % 1021);
				if (f[i] != (float)(m * tri - tri0)) {
					snprintf(err, sizeof(err), "element %zu is %.9g, expected %.9g", i,
						 (double)f[i], m * tri - tri0);
					goto out;
				}
			}
			if (rank == 0 && n == 1000003 && s == 0)
				printf("world_check: allreduce f32 n=%zu took %.1f ms\n", n, ta * 1e3);
			/* f64: quarters and millions, exact in binary. */
			for (size_t i = 0; i < n; i++)
				d[i] = (double)((i * 13 + (size_t)s) % 4099) * 0.25 * (rank + 1) + 1e6 * rank;
			snprintf(what, sizeof(what), "step %d: allreduce f64 n=%zu", s, n);
			if (w.comm.allreduce_sum_f64(&w.comm, d, n, err, sizeof(err)) < 0)
				goto out;
			for (size_t i = 0; i < n; i++) {
				double m = (double)((i * 13 + (size_t)s) % 4099);
				if (d[i] != m * 0.25 * tri + 1e6 * tri0) {
					snprintf(err, sizeof(err), "element %zu is %.17g, expected %.17g", i,
						 d[i], m * 0.25 * tri + 1e6 * tri0);
					goto out;
				}
			}
		}
		snprintf(what, sizeof(what), "step %d: barrier", s);
		if (w.comm.barrier(&w.comm, err, sizeof(err)) < 0)
			goto out;
	}

	/* Same bits everywhere: replicas of a model must not drift apart. */
	{
		const size_t n = 100003;
		uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1), h, *hs;
		for (size_t i = 0; i < n; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			f[i] = (float)((double)(x >> 40) / (double)(1 << 24) - 0.5) * 3.3f;
		}
		snprintf(what, sizeof(what), "allreduce of random floats");
		if (w.comm.allreduce_sum_f32(&w.comm, f, n, err, sizeof(err)) < 0)
			goto out;
		h = fnv(f, n * sizeof(float));
		hs = calloc((size_t)size, sizeof(*hs));
		if (!hs) {
			snprintf(err, sizeof(err), "out of memory");
			goto out;
		}
		if (dl_world_exchange(&w, &h, sizeof(h), hs, err, sizeof(err)) < 0) {
			free(hs);
			goto out;
		}
		for (int r = 0; r < size; r++)
			if (hs[r] != h) {
				snprintf(err, sizeof(err), "rank %d has other bits than rank %d "
					 "(hash %016llx vs %016llx)", r, rank,
					 (unsigned long long)hs[r], (unsigned long long)h);
				free(hs);
				goto out;
			}
		free(hs);
	}
	if (bench_n > 0) {
		double best[5];
		float *g = calloc((size_t)bench_n, sizeof(float));
		snprintf(what, sizeof(what), "bench allreduce n=%ld", bench_n);
		if (!g) {
			snprintf(err, sizeof(err), "out of memory");
			goto out;
		}
		for (int k = 0; k < 5; k++) {
			double tb = mono();
			if (w.comm.allreduce_sum_f32(&w.comm, g, (size_t)bench_n, err, sizeof(err)) < 0) {
				free(g);
				goto out;
			}
			best[k] = mono() - tb;
		}
		free(g);
		for (int i = 0; i < 5; i++) /* sort: median is best[2] */
			for (int j = i + 1; j < 5; j++)
				if (best[j] < best[i]) {
					double x = best[i];
					best[i] = best[j];
					best[j] = x;
				}
		if (rank == 0)
			printf("world_check: bench allreduce f32 n=%ld size=%d method=%s: median %.1f ms, "
			       "%.2f GB/s algbw\n", bench_n, size, w.method, best[2] * 1e3,
			       (double)bench_n * 4 / best[2] / 1e9);
	}
	snprintf(what, sizeof(what), "final barrier");
	if (w.comm.barrier(&w.comm, err, sizeof(err)) < 0)
		goto out;
	printf("world_check: rank %d OK (%d steps, %.3f s)\n", rank, steps, mono() - t0);
	rv = 0;
out:
	if (rv != 0) {
		fprintf(stderr, "world_check: rank %d: %s: %s\n", opened ? w.comm.rank : die_rank, what, err);
		if (opened) {
			char why[1200];
			snprintf(why, sizeof(why), "%s: %s", what, err);
			dl_world_abort(&w, why);
		}
	}
	free(all);
	free(f);
	free(d);
	if (opened)
		dl_world_close(&w);
	return rv;
}
