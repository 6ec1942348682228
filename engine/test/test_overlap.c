#include "config.h"

/* Gradient reduction overlapped with backward (issue 14), two ranks in two
 * processes joined by a socketpair (a dl_comm of their own, so no runtime
 * is needed):
 *  - with small buckets the first bucket's reduction starts before backward
 *    ends, by the step's own timestamps, and there are many buckets;
 *  - with one bucket (bucket_bytes SIZE_MAX) the reduction runs after
 *    backward, and the weights, momentum and losses after three steps are
 *    bit for bit those of the small-bucket run, on both ranks, and the
 *    same on the two ranks;
 *  - cpu and ref backends both;
 *  - a peer that dies mid-run makes the next step fail with a message
 *    instead of hanging. */

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/optim.h"

#define K 10
/* Batch and image side per backend: the cpu step long enough that a woken
 * communication thread gets a core while backward still runs, even on a
 * busy machine; the float64 reference small enough to be quick. */
#define N_MAX 16
static int batch_of(const char *be)
{
	return strcmp(be, "cpu") == 0 ? 16 : 8;
}
static int side_of(const char *be)
{
	return strcmp(be, "cpu") == 0 ? 32 : 16;
}

struct pair {
	int fd, rank;
};

static int full_io(int fd, void *buf, size_t len, int wr, char *err, size_t errlen)
{
	char *p = buf;
	while (len > 0) {
		ssize_t k = wr ? write(fd, p, len) : read(fd, p, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			dl_errf(err, errlen, "peer %s: %s", wr ? "write" : "read", k < 0 ? strerror(errno) : "closed");
			return -1;
		}
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Rank 0 sends first, rank 1 receives first (no deadlock on a full socket
 * buffer); both add in rank order, so both get the same bits. */
static int exchange(struct dl_comm *c, void *buf, void *peer, size_t bytes, char *err, size_t errlen)
{
	struct pair *p = c->impl;
	if (p->rank == 0)
		return full_io(p->fd, buf, bytes, 1, err, errlen) || full_io(p->fd, peer, bytes, 0, err, errlen) ? -1 : 0;
	return full_io(p->fd, peer, bytes, 0, err, errlen) || full_io(p->fd, buf, bytes, 1, err, errlen) ? -1 : 0;
}

static int sum_f32(struct dl_comm *c, float *buf, size_t n, char *err, size_t errlen)
{
	float *peer = malloc(n * sizeof(float) + 1);
	int rv = peer ? exchange(c, buf, peer, n * sizeof(float), err, errlen) : -1;
	struct pair *p = c->impl;
	for (size_t i = 0; rv == 0 && i < n; i++)
		buf[i] = p->rank == 0 ? buf[i] + peer[i] : peer[i] + buf[i];
	free(peer);
	return rv;
}

static int sum_f64(struct dl_comm *c, double *buf, size_t n, char *err, size_t errlen)
{
	double *peer = malloc(n * sizeof(double) + 1);
	int rv = peer ? exchange(c, buf, peer, n * sizeof(double), err, errlen) : -1;
	struct pair *p = c->impl;
	for (size_t i = 0; rv == 0 && i < n; i++)
		buf[i] = p->rank == 0 ? buf[i] + peer[i] : peer[i] + buf[i];
	free(peer);
	return rv;
}

static int failures;
#define CHECK(cond, ...)                                      \
	do {                                                  \
		if (!(cond)) {                                \
			printf("FAIL rank %d: ", rank);       \
			printf(__VA_ARGS__);                  \
			printf("\n");                         \
			failures++;                           \
		}                                             \
	} while (0)

/* Three steps of `backend` from the seed-1 resnet20 with bucket_bytes;
 * weights and momentum end in w (n_weights floats each, param order). */
static int run(int rank, struct dl_comm *comm, const char *backend, size_t bucket_bytes, float *w, float *mom,
	       double *loss, struct dl_step_result *first)
{
	char err[512];
	struct dl_graph g;
	struct dl_optim_state st;
	const struct dl_backend_ops *ops = dl_backend_find(backend, NULL, 0);
	const int N = batch_of(backend), S = side_of(backend);
	if (dl_model_build(&g, "resnet20", 3, S, S, K, 0, 1, err, sizeof(err)) < 0) {
		printf("FAIL rank %d: %s\n", rank, err);
		return -1;
	}
	struct dl_backend_opts o = {
		.optim = {.momentum = 0.9, .weight_decay = 1e-4, .nesterov = 1},
		.label_smoothing = 0.1,
		.comm = comm,
		.bucket_bytes = bucket_bytes,
	};
	struct dl_backend *b = ops->create(&g, N, &o, err, sizeof(err));
	int rv = -1;
	if (!b || dl_optim_state_init(&st, &g, 0.9, err, sizeof(err)) < 0) {
		printf("FAIL rank %d: %s create: %s\n", rank, backend, err);
		if (b)
			ops->destroy(b);
		dl_model_free(&g);
		return -1;
	}
	float *x = malloc(sizeof(float) * N * 3 * S * S);
	int y[N_MAX];
	uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(rank + 1);
	for (int step = 0; x && step < 3; step++) {
		for (int i = 0; i < N * 3 * S * S; i++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
		}
		for (int i = 0; i < N; i++)
			y[i] = (int)((s >> (i * 4)) % K);
		struct dl_batch in = {.x = x, .labels = y};
		struct dl_step_result res;
		if (ops->train_step(b, &in, 0.1, step == 2 && rank == 1, &res) < 0) {
			printf("FAIL rank %d: %s step %d: %s\n", rank, backend, step, ops->error(b));
			goto out;
		}
		CHECK(!res.nonfinite, "%s step %d not finite", backend, step);
		CHECK(res.stop == (step == 2), "%s step %d: stop %d (rank 1 asks at step 2)", backend, step, res.stop);
		loss[step] = res.loss;
		if (step == 1)
			*first = res;
	}
	if (ops->state_out(b, &st) < 0)
		goto out;
	size_t off = 0;
	for (int i = 0; i < g.n_params; i++) {
		memcpy(w + off, g.params[i].data, g.params[i].count * sizeof(float));
		memcpy(mom + off, st.mom[i].data, g.params[i].count * sizeof(float));
		off += g.params[i].count;
	}
	rv = 0;
out:
	free(x);
	dl_optim_state_free(&st);
	ops->destroy(b);
	dl_model_free(&g);
	return rv;
}

static int rank_main(int rank, int fd)
{
	struct pair p = {.fd = fd, .rank = rank};
	struct dl_comm comm = {.rank = rank, .size = 2, .local_rank = rank, .local_size = 2,
			       .allreduce_sum_f32 = sum_f32, .allreduce_sum_f64 = sum_f64, .impl = &p};
	char err[256];
	struct dl_graph g;
	if (dl_model_build(&g, "resnet20", 3, 16, 16, K, 0, 1, err, sizeof(err)) < 0)
		return 1;
	size_t nw = dl_model_n_weights(&g);
	dl_model_free(&g);
	static const char *const backends[] = {"cpu", "ref"};
	for (int bi = 0; bi < 2; bi++) {
		const char *be = backends[bi];
		float *w_small = calloc(nw, 4), *m_small = calloc(nw, 4), *w_one = calloc(nw, 4),
		      *m_one = calloc(nw, 4), *w_peer = calloc(nw, 4);
		double l_small[3], l_one[3];
		struct dl_step_result r_small, r_one;
		if (!w_small || !m_small || !w_one || !m_one || !w_peer)
			return 1;
		if (run(rank, &comm, be, 64 << 10, w_small, m_small, l_small, &r_small) < 0 ||
		    run(rank, &comm, be, SIZE_MAX, w_one, m_one, l_one, &r_one) < 0)
			return 1;
		if (rank == 0)
			printf("%s: small buckets: %d buckets, first bucket started %.3f ms before backward ended, "
			       "comm %.3f ms, exposed %.3f ms, compute %.3f ms; one bucket: %d, started %.3f ms after "
			       "backward's last gradient, exposed %.3f ms\n",
			       be, r_small.n_buckets, (r_small.t_backward_end - r_small.t_first_bucket_start) * 1e3,
			       r_small.comm_s * 1e3, r_small.exposed_comm_s * 1e3, r_small.compute_s * 1e3,
			       r_one.n_buckets, (r_one.t_first_bucket_start - r_one.t_backward_end) * 1e3,
			       r_one.exposed_comm_s * 1e3);
		/* resnet20 is ~1.1 MB of gradients: 64 KiB buckets are many. */
		CHECK(r_small.n_buckets >= 8, "%s: %d buckets of 64 KiB", be, r_small.n_buckets);
		CHECK(r_one.n_buckets == 1, "%s: bucket_bytes SIZE_MAX gave %d buckets", be, r_one.n_buckets);
		if (!strcmp(be, "cpu"))
			CHECK(r_small.t_first_bucket_start > 0 && r_small.t_first_bucket_start < r_small.t_backward_end,
			      "cpu: the first bucket's reduction did not start before backward ended (start %.6f, end "
			      "%.6f)", r_small.t_first_bucket_start, r_small.t_backward_end);
		CHECK(r_small.comm_s > 0 && r_small.exposed_comm_s >= 0 && r_small.compute_s > 0,
		      "%s: phase times comm %g exposed %g compute %g", be, r_small.comm_s, r_small.exposed_comm_s,
		      r_small.compute_s);
		CHECK(r_one.t_first_bucket_start > 0 && r_one.exposed_comm_s >= 0,
		      "%s: one bucket: start %g exposed %g", be, r_one.t_first_bucket_start, r_one.exposed_comm_s);
		CHECK(!memcmp(w_small, w_one, nw * 4) && !memcmp(m_small, m_one, nw * 4),
		      "%s: weights or momentum differ between small buckets and one bucket", be);
		CHECK(!memcmp(l_small, l_one, sizeof(l_small)), "%s: losses differ: %.9g %.9g", be, l_small[2],
		      l_one[2]);
		if (!strcmp(be, "cpu")) {
			/* The default: resnet20's 1.1 MB of gradients in a first
			 * bucket of 1 MiB (as torch DDP) and one more. */
			struct dl_step_result r_def;
			double l_def[3];
			if (run(rank, &comm, be, 0, w_one, m_one, l_def, &r_def) < 0)
				return 1;
			CHECK(r_def.n_buckets == 2, "default buckets: %d, want 2", r_def.n_buckets);
			CHECK(!memcmp(w_small, w_one, nw * 4) && !memcmp(l_small, l_def, sizeof(l_def)),
			      "default buckets: weights or losses differ");
		}
		/* Both ranks hold the same weights. */
		if (exchange(&comm, w_small, w_peer, nw * 4, err, sizeof(err)) < 0)
			return 1;
		CHECK(!memcmp(w_small, w_peer, nw * 4), "%s: the two ranks' weights differ", be);
		free(w_small), free(m_small), free(w_one), free(m_one), free(w_peer);
	}
	/* A dead peer: both ranks create a backend (create agrees on the
	 * weight layouts, a collective), then rank 1 leaves; rank 0's next
	 * step fails with a message instead of hanging. */
	{
		char e2[512];
		struct dl_graph g2;
		if (dl_model_build(&g2, "resnet20", 3, 16, 16, K, 0, 1, e2, sizeof(e2)) < 0)
			return 1;
		const struct dl_backend_ops *ops = dl_backend_find("cpu", NULL, 0);
		struct dl_backend_opts o = {.optim = {.momentum = 0.9}, .comm = &comm, .bucket_bytes = 64 << 10};
		struct dl_backend *b = ops->create(&g2, 8, &o, e2, sizeof(e2));
		CHECK(b != NULL, "create for the dead-peer case: %s", e2);
		if (b && rank == 0) {
			static float x[8 * 3 * 16 * 16];
			int y[8] = {0};
			struct dl_batch in = {.x = x, .labels = y};
			struct dl_step_result res;
			int rc = ops->train_step(b, &in, 0.1, 0, &res);
			CHECK(rc == -1 && strstr(ops->error(b), "gradient allreduce"), "a dead peer: rc %d, error '%s'",
			      rc, ops->error(b));
			printf("dead peer: %s\n", ops->error(b));
		}
		if (b)
			ops->destroy(b);
		dl_model_free(&g2);
	}
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	int sv[2];
	/* One compute thread per rank, and OpenMP threads that sleep instead
	 * of spinning between parallel regions (libgomp reads this when it is
	 * loaded, hence the exec): the two ranks and their communication
	 * threads share whatever cores the machine has, and a spinning team
	 * would keep a woken communication thread off the CPU. */
	if (argc > 0 && !getenv("DLJOB_TEST_OVERLAP_EXEC")) {
		setenv("DLJOB_TEST_OVERLAP_EXEC", "1", 1);
		setenv("OMP_WAIT_POLICY", "passive", 1);
		setenv("OMP_NUM_THREADS", "1", 1);
		execv("/proc/self/exe", argv);
		perror("exec /proc/self/exe");
		return 1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		int rc = rank_main(1, sv[1]);
		fflush(stdout);
		_exit(rc);
	}
	close(sv[1]);
	int rc0 = rank_main(0, sv[0]), st = 0;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL rank 1 exited with status %d\n", st);
		rc0 = 1;
	}
	printf("%s\n", rc0 ? "FAIL" : "ok: overlapped reduction equals the reduction after backward");
	return rc0;
}
