#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "common/err.h"
#include "engine/cpu/cpu_common.h"

/* Huge pages for the large buffers (activations, their gradients, the
 * weights of the deep layers, the scratchpad): a 51 MB activation spans
 * 12,500 4 KiB pages, more than the TLB holds, and a convolution on
 * nChw16c reads its channel blocks a plane apart, so with 4 KiB pages
 * most blocks of a tile cost a page walk.  Transparent huge pages are
 * "madvise" on most distributions, hence the advice.  The buffer starts
 * on a 2 MiB boundary; its size is not rounded up, so only the whole
 * 2 MiB ranges inside it become huge pages and the tail stays in small
 * ones (no memory is added: the peak RSS does not grow).  Where the
 * kernel has no THP (EINVAL) the buffer works the same with small pages.
 * Measured in tests/bench/RESULTS.md ("Huge pages"). */
#define HUGE_BYTES ((size_t)2 << 20)
#define PAGE_BYTES ((size_t)4 << 10)

void *cpu_aligned_alloc(size_t bytes)
{
	size_t align = bytes >= HUGE_BYTES ? HUGE_BYTES : 64;
	size_t rounded = (bytes + 63) / 64 * 64;
	void *p = NULL;
	/* posix_memalign, not aligned_alloc: C11's aligned_alloc wants the
	 * size a multiple of the alignment (2 MiB here), which it is not. */
	if (posix_memalign(&p, align, rounded ? rounded : 64) != 0)
		return NULL;

	if (p && align == HUGE_BYTES &&
	    madvise(p, (bytes + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES, MADV_HUGEPAGE) < 0 && errno != EINVAL) {
		free(p);
		return NULL;
	}
	return p;
}

void cpu_fail(struct cpu_ctx *c, const char *file, int line, const char *call, dnnl_status_t st)
{
	dl_errf(c->err, sizeof(c->err), "%s:%d: %s: %s", file, line, call, dnnl_status2str(st));
}

/* Append p to a growable array of pointers. */
static int push(struct cpu_ctx *c, void ***arr, int *n, int *cap, void *p)
{
	if (*n == *cap) {
		int nc = *cap ? *cap * 2 : 64;
		void **na = realloc(*arr, sizeof(void *) * nc);
		if (!na) {
			dl_errf(c->err, sizeof(c->err), "cpu backend: out of memory");
			return -1;
		}
		*arr = na;
		*cap = nc;
	}
	(*arr)[(*n)++] = p;
	return 0;
}

#define PUSH(field, p) push(c, (void ***)&c->field, &c->n_##field, &c->cap_##field, (void *)(p))

/* m into the shared scratchpad's memories, its handle at byte off. */
static int scratch_push(struct cpu_ctx *c, dnnl_memory_t m, size_t off, size_t bytes)
{
	int cap = c->cap_scratch_mems;
	if (PUSH(scratch_mems, m) < 0)
		return -1;
	if (c->cap_scratch_mems != cap || !c->scratch_offs) {
		size_t *no = realloc(c->scratch_offs, sizeof(size_t) * c->cap_scratch_mems);
		if (!no) {
			c->n_scratch_mems--;
			dl_errf(c->err, sizeof(c->err), "cpu backend: out of memory");
			return -1;
		}
		c->scratch_offs = no;
	}
	c->scratch_offs[c->n_scratch_mems - 1] = off;
	c->scratch_size = off + bytes > c->scratch_size ? off + bytes : c->scratch_size;
	return 0;
}

int cpu_ctx_init(struct cpu_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->act_dt = dnnl_f32;
	DN(dnnl_engine_create(&c->eng, dnnl_cpu, 0));
	DN(dnnl_stream_create(&c->strm, c->eng, dnnl_stream_default_flags));
	DN(dnnl_primitive_attr_create(&c->attr));
	DN(dnnl_primitive_attr_set_scratchpad_mode(c->attr, dnnl_scratchpad_mode_user));
	return 0;
fail:
	return -1;
}

int cpu_ctx_finalize(struct cpu_ctx *c)
{
	free(c->scratch);
	/* 64-byte alignment for the AVX-512 kernels; never a zero-sized request. */
	c->scratch = cpu_aligned_alloc(c->scratch_size);
	CHECK(c->scratch, "cpu backend: out of memory for %zu bytes of scratchpad", c->scratch_size);
	for (int i = 0; i < c->n_scratch_mems; i++)
		DN(dnnl_memory_set_data_handle(c->scratch_mems[i], (char *)c->scratch + c->scratch_offs[i]));
	for (int t = 0; t < CPU_N_TMP; t++) {
		struct cpu_shared *s = &c->tmp[t];
		free(s->buf);
		s->buf = NULL;
		if (!s->n_mems)
			continue;
		s->buf = cpu_aligned_alloc(s->size);
		CHECK(s->buf, "cpu backend: out of memory for a %zu-byte temporary", s->size);
		for (int i = 0; i < s->n_mems; i++)
			DN(dnnl_memory_set_data_handle(s->mems[i], s->buf));
	}
	return 0;
fail:
	return -1;
}

void cpu_ctx_destroy(struct cpu_ctx *c)
{
	for (int i = 0; i < c->n_prims; i++)
		dnnl_primitive_destroy(c->prims[i]);
	for (int i = 0; i < c->n_pds; i++)
		dnnl_primitive_desc_destroy(c->pds[i]);
	for (int i = 0; i < c->n_mems; i++)
		dnnl_memory_destroy(c->mems[i]);
	for (int i = 0; i < c->n_bufs; i++)
		free(c->bufs[i]);
	free(c->bufs);
	free(c->owned);
	free(c->prims);
	free(c->pds);
	free(c->mems);
	free(c->scratch_mems);
	free(c->scratch_offs);
	free(c->scratch);
	for (int t = 0; t < CPU_N_TMP; t++) {
		free(c->tmp[t].mems);
		free(c->tmp[t].buf);
	}
	if (c->attr)
		dnnl_primitive_attr_destroy(c->attr);
	if (c->strm)
		dnnl_stream_destroy(c->strm);
	if (c->eng)
		dnnl_engine_destroy(c->eng);
	memset(c, 0, sizeof(*c));
}

int cpu_md(struct cpu_ctx *c, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
	   dnnl_format_tag_t tag)
{
	return cpu_md_dt(c, md, ndims, dims, dnnl_f32, tag);
}

int cpu_md_dt(struct cpu_ctx *c, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
	      dnnl_data_type_t dt, dnnl_format_tag_t tag)
{
	DN(dnnl_memory_desc_init_by_tag(md, ndims, dims, dt, tag));
	return 0;
fail:
	return -1;
}

int cpu_md4_dt(struct cpu_ctx *c, dnnl_memory_desc_t *md, int n, int ch, int h, int w,
	       dnnl_data_type_t dt, dnnl_format_tag_t tag)
{
	dnnl_dims_t d = { n, ch, h, w };
	return cpu_md_dt(c, md, 4, d, dt, tag);
}

int cpu_md4(struct cpu_ctx *c, dnnl_memory_desc_t *md, int n, int ch, int h, int w,
	    dnnl_format_tag_t tag)
{
	dnnl_dims_t d = { n, ch, h, w };
	return cpu_md(c, md, 4, d, tag);
}

dnnl_memory_t cpu_mem(struct cpu_ctx *c, const dnnl_memory_desc_t *md, void *handle)
{
	dnnl_memory_t m = NULL;
	int own = !handle;
	/* The ctx's own buffers (cpu_alloc: zeroed, huge pages when large),
	 * not oneDNN's allocator. */
	if (own && !(handle = cpu_alloc(c, dnnl_memory_desc_get_size(md))))
		return NULL;
	DN(dnnl_memory_create(&m, md, c->eng, handle));
	if (PUSH(mems, m) < 0) {
		dnnl_memory_destroy(m);
		return NULL;
	}
	if (own) {
		if (PUSH(owned, m) < 0)
			return NULL;
		c->owned_sorted = 0;
	}
	return m;
fail:
	return NULL;
}

void *cpu_alloc(struct cpu_ctx *c, size_t bytes)
{
	void *p = cpu_aligned_alloc(bytes);
	if (!p) {
		dl_errf(c->err, sizeof(c->err), "cpu backend: out of memory for a %zu-byte buffer", bytes);
		return NULL;
	}
	if (PUSH(bufs, p) < 0) {
		free(p);
		return NULL;
	}
	memset(p, 0, bytes);
	return p;
}

dnnl_memory_t cpu_view(struct cpu_ctx *c, const dnnl_memory_desc_t *md)
{
	dnnl_memory_t m = NULL;
	DN(dnnl_memory_create(&m, md, c->eng, DNNL_MEMORY_NONE));
	if (PUSH(mems, m) < 0) {
		dnnl_memory_destroy(m);
		return NULL;
	}
	return m;
fail:
	return NULL;
}

dnnl_memory_t cpu_scratch_mem(struct cpu_ctx *c, size_t bytes)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { (dnnl_dim_t)bytes };
	dnnl_memory_t m;
	CHECK(bytes > 0 && bytes <= (size_t)INT64_MAX, "%s:%d: scratch of %zu bytes", __FILE__,
	      __LINE__, bytes);
	DN(dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_u8, dnnl_a));
	if (!(m = cpu_view(c, &md)) || scratch_push(c, m, 0, bytes) < 0)
		return NULL;
	return m;
fail:
	return NULL;
}

dnnl_memory_t cpu_scratch_at(struct cpu_ctx *c, const dnnl_memory_desc_t *md, size_t offset)
{
	dnnl_memory_t m;
	/* 64-byte alignment, as the scratchpad's own. */
	CHECK(offset % 64 == 0, "%s:%d: scratch offset %zu not 64-byte aligned", __FILE__, __LINE__,
	      offset);
	if (!(m = cpu_view(c, md)) || scratch_push(c, m, offset, dnnl_memory_desc_get_size(md)) < 0)
		return NULL;
	return m;
fail:
	return NULL;
}

dnnl_memory_t cpu_tmp_mem(struct cpu_ctx *c, const dnnl_memory_desc_t *md, enum cpu_tmp which)
{
	struct cpu_shared *s = &c->tmp[which];
	size_t sz = dnnl_memory_desc_get_size(md);
	dnnl_memory_t m = cpu_view(c, md);
	if (!m || push(c, (void ***)&s->mems, &s->n_mems, &s->cap_mems, m) < 0)
		return NULL;
	s->size = sz > s->size ? sz : s->size;
	return m;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const dnnl_memory_t *)a, y = (uintptr_t) * (const dnnl_memory_t *)b;
	return (x > y) - (x < y);
}

int cpu_set_handle(struct cpu_ctx *c, dnnl_memory_t m, const void *handle)
{
	if (!c->owned_sorted) {
		if (c->n_owned)
			qsort(c->owned, c->n_owned, sizeof(*c->owned), cmp_ptr);
		c->owned_sorted = 1;
	}
	CHECK(!c->n_owned || !bsearch(&m, c->owned, c->n_owned, sizeof(*c->owned), cmp_ptr),
	      "%s:%d: internal error: a memory with a buffer of its own is re-pointed (make it a cpu_view)",
	      __FILE__, __LINE__);
	/* oneDNN takes void *; inputs we pass this way are only read. */
	DN(dnnl_memory_set_data_handle(m, (void *)(uintptr_t)handle));
	return 0;
fail:
	return -1;
}

void *cpu_handle(dnnl_memory_t m)
{
	void *h = NULL;
	if (dnnl_memory_get_data_handle(m, &h) != dnnl_success)
		return NULL;
	return h;
}

const dnnl_memory_desc_t *cpu_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
	return dnnl_primitive_desc_query_md(pd, what, 0);
}

int cpu_md_eq(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b)
{
	return dnnl_memory_desc_equal(a, b);
}

dnnl_primitive_desc_t cpu_pd(struct cpu_ctx *c, const void *op_desc,
			     const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint)
{
	dnnl_primitive_desc_t pd = NULL;
	DN(dnnl_primitive_desc_create(&pd, (const_dnnl_op_desc_t)op_desc, attr ? attr : c->attr,
				      c->eng, hint));
	if (PUSH(pds, pd) < 0) {
		dnnl_primitive_desc_destroy(pd);
		return NULL;
	}
	return pd;
fail:
	return NULL;
}

int cpu_prim_make(struct cpu_ctx *c, struct cpu_prim *p, dnnl_primitive_desc_t pd)
{
	p->p = NULL;
	p->scratch = NULL;
	CHECK(pd, "%s", c->err);
	DN(dnnl_primitive_create(&p->p, pd));
	if (PUSH(prims, p->p) < 0) {
		dnnl_primitive_destroy(p->p);
		p->p = NULL;
		return -1;
	}
	const dnnl_memory_desc_t *smd = cpu_query(pd, dnnl_query_scratchpad_md);
	size_t sz = smd ? dnnl_memory_desc_get_size(smd) : 0;
	if (sz > 0) {
		DN(dnnl_memory_create(&p->scratch, smd, c->eng, DNNL_MEMORY_NONE));
		if (PUSH(mems, p->scratch) < 0) {
			dnnl_memory_destroy(p->scratch);
			return -1;
		}
		if (scratch_push(c, p->scratch, 0, sz) < 0)
			return -1;
	}
	return 0;
fail:
	return -1;
}

int cpu_reorder_make(struct cpu_ctx *c, struct cpu_prim *p, const dnnl_memory_desc_t *src,
		     const dnnl_memory_desc_t *dst)
{
	dnnl_primitive_desc_t pd = NULL;
	DN(dnnl_reorder_primitive_desc_create(&pd, src, c->eng, dst, c->eng, c->attr));
	if (PUSH(pds, pd) < 0) {
		dnnl_primitive_desc_destroy(pd);
		return -1;
	}
	return cpu_prim_make(c, p, pd);
fail:
	return -1;
}

int cpu_exec(struct cpu_ctx *c, struct cpu_prim *p, int nargs, const dnnl_exec_arg_t *args)
{
	dnnl_exec_arg_t a[16];
	CHECK(nargs < 16, "%s:%d: too many primitive arguments", __FILE__, __LINE__);
	memcpy(a, args, sizeof(*a) * nargs);
	if (p->scratch)
		a[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, p->scratch };
	DN(dnnl_primitive_execute(p->p, c->strm, nargs, a));
	DN(dnnl_stream_wait(c->strm));
	return 0;
fail:
	return -1;
}

int cpu_reorder(struct cpu_ctx *c, struct cpu_prim *p, dnnl_memory_t src, dnnl_memory_t dst)
{
	dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, src }, { DNNL_ARG_TO, dst } };
	return cpu_exec(c, p, 2, a);
}
