/* A process group of one: what dljob is when started outside Slurm. */
#include "config.h"
#include <string.h>
#include "world/world_int.h"

static int single_allreduce_f32(struct dl_comm *c, float *buf, size_t n, char *err, size_t errlen)
{
	(void)c; (void)buf; (void)n; (void)err; (void)errlen;
	return 0; /* the sum over one rank is the buffer itself */
}

static int single_allreduce_f64(struct dl_comm *c, double *buf, size_t n, char *err, size_t errlen)
{
	(void)c; (void)buf; (void)n; (void)err; (void)errlen;
	return 0;
}

static int single_barrier(struct dl_comm *c, char *err, size_t errlen)
{
	(void)c; (void)err; (void)errlen;
	return 0;
}

static int single_exchange(struct dl_world *w, const void *mine, size_t len, void *all,
			   char *err, size_t errlen)
{
	(void)w; (void)err; (void)errlen;
	memmove(all, mine, len);
	return 0;
}

static void single_close(struct dl_world *w)
{
	(void)w;
}

static void single_abort(struct dl_world *w, const char *why)
{
	(void)w; (void)why;
}

static const struct dl_world_ops single_ops = { single_exchange, single_close, single_abort };

void dl_world_single(struct dl_world *w)
{
	memset(w, 0, sizeof(*w));
	w->method = "single";
	w->ops = &single_ops;
	w->comm.rank = 0;
	w->comm.size = 1;
	w->comm.local_rank = 0;
	w->comm.local_size = 1;
	w->comm.allreduce_sum_f32 = single_allreduce_f32;
	w->comm.allreduce_sum_f64 = single_allreduce_f64;
	w->comm.barrier = single_barrier;
}
