/* Shared plumbing of the oneDNN backend: one engine and stream, a registry
 * of every oneDNN object created (so teardown is one call whatever failed
 * half-way), primitives that share one user-managed scratchpad, and the
 * DN() check for every dnnl_status_t. */
#ifndef DLJOB_ENGINE_CPU_CPU_COMMON_H
#define DLJOB_ENGINE_CPU_CPU_COMMON_H

#include <stddef.h>
#include <oneapi/dnnl/dnnl.h>

#include "common/err.h"

/* The shared temporaries (cpu_tmp_mem).  Each holds a value only from the
 * call that writes it to the next primitive that reads it, inside one
 * layer's pass: a diff on its way into an accumulating sink (DIFF), a
 * layer's weights or weight gradient in the layout one pass wants (W0, W1:
 * two, for a pass that needs two at once). */
enum cpu_tmp { CPU_TMP_DIFF, CPU_TMP_W0, CPU_TMP_W1, CPU_N_TMP };

/* Weight reorders by pass: into the forward's layout, into backward-data's
 * (the conv's acc path included), of the weight gradient into the caller's. */
enum cpu_wreorder { CPU_WREORDER_FWD, CPU_WREORDER_BWD, CPU_WREORDER_DW, CPU_N_WREORDER };

struct cpu_shared {
	dnnl_memory_t *mems;
	int n_mems, cap_mems;
	size_t size;
	void *buf;
};

struct cpu_ctx {
	dnnl_engine_t eng;
	dnnl_stream_t strm;
	dnnl_primitive_attr_t attr; /* user scratchpad, nothing else */
	/* Data type of activations, their diffs and the conv weights as the
	 * kernels read them: f32 (default), or bf16 for mixed precision (params,
	 * weight grads, BN statistics, FC and logits stay f32). */
	dnnl_data_type_t act_dt;
	int conv_algo; /* enum dl_conv_algo (engine/backend.h) */
	/* Batch norm always on oneDNN's primitive, never the own nChw16c
	 * kernels (cpu_bn_blk.c): for benchmarks comparing the two. */
	int bn_onednn;
	/* 3x3 convolutions of 64 channels and more run wholly on oneDNN's
	 * Winograd, none on cpu_wino's panel or wgrad paths: for benchmarks
	 * comparing the two. */
	int wino_wide_off;
	/* Every primitive, primitive desc and memory made through this ctx. */
	dnnl_primitive_t *prims;
	int n_prims, cap_prims;
	dnnl_primitive_desc_t *pds;
	int n_pds, cap_pds;
	dnnl_memory_t *mems;
	int n_mems, cap_mems;
	/* Plain buffers of the own kernels (cpu_alloc). */
	void **bufs;
	int n_bufs, cap_bufs;
	/* Memories with a buffer of their own (cpu_mem with no handle), sorted
	 * by address when owned_sorted: cpu_set_handle refuses to re-point
	 * them (oneDNN would free the buffer at that call, after it had counted
	 * in the peak RSS since set-up, or keep it for good if the call never
	 * comes: what cpu_view is for). */
	dnnl_memory_t *owned;
	int n_owned, cap_owned, owned_sorted;
	/* Memories that live in the shared scratchpad, each at its offset
	 * (scratch_offs, as long as scratch_mems' capacity): their handle is
	 * set once the largest size is known. */
	dnnl_memory_t *scratch_mems;
	size_t *scratch_offs;
	int n_scratch_mems, cap_scratch_mems;
	size_t scratch_size;
	void *scratch;
	struct cpu_shared tmp[CPU_N_TMP];
	/* Weight reorders run so far (enum cpu_wreorder), for tests. */
	long wreorders[CPU_N_WREORDER];
	char err[256];
};

/* A primitive with its scratchpad memory. */
struct cpu_prim {
	dnnl_primitive_t p;
	dnnl_memory_t scratch;
};

/* Check a dnnl_status_t: on failure record "file:line: call: status" in
 * ctx->err and jump to fail.  Needs `struct cpu_ctx *c` and a `fail:` label. */
#define DN(call)                                                             \
	do {                                                                 \
		dnnl_status_t dn_st_ = (call);                               \
		if (dn_st_ != dnnl_success) {                                \
			cpu_fail(c, __FILE__, __LINE__, #call, dn_st_);      \
			goto fail;                                           \
		}                                                            \
	} while (0)

/* The same for our own conditions. */
#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			dl_errf(c->err, sizeof(c->err), __VA_ARGS__);                            \
			goto fail;                                           \
		}                                                            \
	} while (0)

void cpu_fail(struct cpu_ctx *c, const char *file, int line, const char *call, dnnl_status_t st);

int cpu_ctx_init(struct cpu_ctx *c);
/* Allocates the shared scratchpad and temporary buffers; call after every
 * primitive is created and before the first execute. */
int cpu_ctx_finalize(struct cpu_ctx *c);
void cpu_ctx_destroy(struct cpu_ctx *c);

/* Plain 4D (N,C,H,W) or 1D/2D descs with a format tag (any allowed). */
int cpu_md(struct cpu_ctx *c, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
	   dnnl_format_tag_t tag);
int cpu_md4(struct cpu_ctx *c, dnnl_memory_desc_t *md, int n, int ch, int h, int w,
	    dnnl_format_tag_t tag);
/* The same with an explicit data type. */
int cpu_md_dt(struct cpu_ctx *c, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
	      dnnl_data_type_t dt, dnnl_format_tag_t tag);
int cpu_md4_dt(struct cpu_ctx *c, dnnl_memory_desc_t *md, int n, int ch, int h, int w,
	       dnnl_data_type_t dt, dnnl_format_tag_t tag);
/* Memory over a buffer of the ctx (handle NULL: cpu_alloc, zeroed) or over a caller's buffer. */
dnnl_memory_t cpu_mem(struct cpu_ctx *c, const dnnl_memory_desc_t *md, void *handle);
/* Memory with no buffer: a view whose handle the caller sets (cpu_set_handle)
 * before every use, e.g. onto the caller's weight arrays.  Nothing is
 * allocated for it. */
dnnl_memory_t cpu_view(struct cpu_ctx *c, const dnnl_memory_desc_t *md);
/* A zeroed, 64-byte aligned buffer the ctx frees at destroy; NULL (with
 * ctx->err set) when out of memory. */
void *cpu_alloc(struct cpu_ctx *c, size_t bytes);
/* aligned_alloc for the backend's buffers: 64-byte aligned, and from 2 MiB
 * up 2 MiB-aligned with transparent huge pages advised; free() frees it.
 * NULL when out of memory. */
void *cpu_aligned_alloc(size_t bytes);
/* Memory over the shared temporary `which` (enum cpu_tmp; contents live
 * until the next use). */
dnnl_memory_t cpu_tmp_mem(struct cpu_ctx *c, const dnnl_memory_desc_t *md, enum cpu_tmp which);
/* Memory of `bytes` over the shared scratchpad, for an own kernel's
 * buffers that hold nothing between calls (the primitives' scratchpads
 * share it: valid from cpu_ctx_finalize, contents gone at the next
 * primitive or scratch user). */
dnnl_memory_t cpu_scratch_mem(struct cpu_ctx *c, size_t bytes);
/* Memory of layout md over the shared scratchpad from byte `offset` on:
 * past a primitive's own scratchpad (offset at least its size), a buffer
 * that lives only while that primitive runs beside it. */
dnnl_memory_t cpu_scratch_at(struct cpu_ctx *c, const dnnl_memory_desc_t *md, size_t offset);
/* Point a view (cpu_view, cpu_mem over a caller's buffer) at handle; -1
 * (an internal error) for a memory with a buffer of its own. */
int cpu_set_handle(struct cpu_ctx *c, dnnl_memory_t m, const void *handle);
void *cpu_handle(dnnl_memory_t m);

/* Register a primitive desc (ctx owns it) and make its primitive. */
int cpu_prim_make(struct cpu_ctx *c, struct cpu_prim *p, dnnl_primitive_desc_t pd);
/* Create a pd from an op desc with the ctx's attr (or attr if non-NULL). */
dnnl_primitive_desc_t cpu_pd(struct cpu_ctx *c, const void *op_desc,
			     const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint);
int cpu_reorder_make(struct cpu_ctx *c, struct cpu_prim *p, const dnnl_memory_desc_t *src,
		     const dnnl_memory_desc_t *dst);
/* Execute with args (+ the scratchpad); waits for completion. */
int cpu_exec(struct cpu_ctx *c, struct cpu_prim *p, int nargs, const dnnl_exec_arg_t *args);
int cpu_reorder(struct cpu_ctx *c, struct cpu_prim *p, dnnl_memory_t src, dnnl_memory_t dst);
const dnnl_memory_desc_t *cpu_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what);
int cpu_md_eq(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b);

#endif
