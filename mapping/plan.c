/* The mapping library's planner: each local task's GPU, NICs, NUMA nodes
 * and CPUs, and the rule that decided each (rules in mapping/mapping.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "mapping/internal.h"

static void cat(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Append to a 0-terminated buffer, cutting what does not fit. */
static void cat(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* "L3Cache P#6", "Group", "Package P#0". */
static void obj_name(hwloc_obj_t o, char *buf, size_t len)
{
	if (o->os_index != HWLOC_UNKNOWN_INDEX && o->type != HWLOC_OBJ_GROUP)
		snprintf(buf, len, "%s P#%u", hwloc_obj_type_string(o->type), o->os_index);
	else
		snprintf(buf, len, "%s", hwloc_obj_type_string(o->type));
}

/* Where two objects meet, in words. */
static void meet_name(hwloc_obj_t c, char *buf, size_t len)
{
	char n[64];

	if (c->type == HWLOC_OBJ_BRIDGE)
		snprintf(buf, len, "%s", c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ?
			 "same host bridge" : "same PCIe switch");
	else if (c->type == HWLOC_OBJ_PCI_DEVICE)
		snprintf(buf, len, "same PCI device");
	else {
		obj_name(c, n, sizeof(n));
		snprintf(buf, len, "same %s", n);
	}
}

/* Distance from the root, counting every parent (I/O objects have negative
 * hwloc depths, so obj->depth cannot be compared across kinds). */
static int tree_depth(hwloc_obj_t o)
{
	int d = 0;

	while ((o = o->parent))
		d++;
	return d;
}

static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
	for (hwloc_obj_t x = a; x; x = x->parent)
		for (hwloc_obj_t y = b; y; y = y->parent)
			if (x == y)
				return x;
	return NULL;
}

/* A set of NICs of one kind: flags by index in dl_map.nic[k] (no
 * allocation, so nothing here can fail). */
struct nicset {
	char on[DL_MAP_MAX_NICS];
	int n;
};

/* The NICs nearest to anchor, among the network interfaces of the best
 * class on the node: deepest common ancestor first (same switch beats same
 * host bridge beats same package), then fewest hops between the two, so
 * that on a tie at the package a NIC on the GPU's own root port wins over
 * one behind another switch.  Returns where the nearest meet the anchor
 * (NULL: no NIC). */
static hwloc_obj_t nearest(const struct dl_map *m, int k, hwloc_obj_t anchor, struct nicset *near)
{
	int best = -1, best_hops = 0, da = tree_depth(anchor);
	hwloc_obj_t via = NULL;

	memset(near, 0, sizeof(*near));
	for (int i = 0; i < m->nnics[k]; i++) {
		hwloc_obj_t c;
		int d, hops;

		if (k == NIC_NET && m->tier[i] != m->top_tier)
			continue;
		c = common_ancestor(anchor, m->nic[k][i]);
		d = c ? tree_depth(c) : -1;
		hops = da + tree_depth(m->nic[k][i]) - 2 * d;
		if (d > best || (d == best && hops < best_hops)) {
			best = d;
			best_hops = hops;
			via = c;
			memset(near, 0, sizeof(*near));
		} else if (d != best || hops != best_hops) {
			continue;
		}
		near->on[i] = 1;
		near->n++;
	}
	return via;
}

static const char *const tier_words[] = {
	[TIER_MGMT] = " (only management interfaces on the node)",
	[TIER_OTHER] = " (no high-speed interface on the node)",
	[TIER_FAST] = " high-speed",
};

/* Choose unit u's share of its nearest NICs and say why.  near[0..n) are
 * the nearest NICs of kind k of every unit (GPUs, or tasks' NUMA nodes)
 * that split them, via[u] where unit u meets its own; unit names them in
 * the explanation. */
static void pick_nics(const struct dl_map *m, int k, const struct nicset *near, hwloc_obj_t via, int n, int u,
		      const char *unit, struct nicset *chosen, char *why, size_t whylen)
{
	const struct nicset *mine = &near[u];
	int grp = 0, pos = 0, lo, hi, j = 0;
	char w[96];

	memset(chosen, 0, sizeof(*chosen));
	if (mine->n == 0 || !via) {
		snprintf(why, whylen, "%s", k == NIC_HCA ? "no OpenFabrics device on the node" :
			 "no network interface on a PCI function");
		return;
	}
	for (int i = 0; i < n; i++) {
		if (memcmp(mine->on, near[i].on, sizeof(mine->on)) != 0)
			continue;
		if (i < u)
			pos++;
		grp++;
	}
	lo = pos * mine->n / grp;
	hi = grp <= mine->n ? (pos + 1) * mine->n / grp : lo + 1;
	for (int i = 0; i < m->nnics[k]; i++) {
		if (!mine->on[i])
			continue;
		if (j >= lo && j < hi) {
			chosen->on[i] = 1;
			chosen->n++;
		}
		j++;
	}
	meet_name(via, w, sizeof(w));
	snprintf(why, whylen, "nearest%s: %s", k == NIC_NET ? tier_words[m->top_tier] : "", w);
	if (grp > 1)
		cat(why, whylen, ", split: %d %s over %d", grp, unit, mine->n);
}

/* Names of the NICs of kind k in set, comma separated. */
static void nic_names(const struct dl_map *m, int k, const struct nicset *set, char *out, size_t len)
{
	out[0] = '\0';
	for (int i = 0; i < m->nnics[k]; i++)
		if (set->on[i])
			cat(out, len, "%s%s", out[0] ? "," : "", m->nic[k][i]->name);
}

/* NUMA nodes of CPU-only task r of n: the nodes numa[0..c) (those with
 * CPUs the plan may use) split evenly.  Returns 0 or -1 (out of memory). */
static int cpu_task_numa(hwloc_obj_t const *numa, int c, int r, int n, hwloc_bitmap_t ns)
{
	int lo, hi;

	hwloc_bitmap_zero(ns);
	if (c == 0)
		return 0;
	lo = r * c / n;
	hi = n >= c ? lo + 1 : (r + 1) * c / n;
	for (int i = lo; i < hi; i++)
		if (hwloc_bitmap_set(ns, numa[i]->os_index) < 0)
			return -1;
	return 0;
}

/* The CPU units of set in topology order: its cores (each core that has
 * CPUs in set, with only those: a step may own one hardware thread of a
 * core) or, in a topology without Core objects (a trimmed file), its CPUs,
 * the i-th CPU of each run
 * of consecutive indexes together when the runs are of one length (Linux
 * numbers the second hardware thread of core i as i + cores).  Returns
 * the count and *out (freed with free_units), or -1 (out of memory). */
static void free_units(hwloc_bitmap_t *u, int n)
{
	if (!u)
		return;
	for (int i = 0; i < n; i++)
		hwloc_bitmap_free(u[i]);
	free(u);
}

static int units(const struct dl_map *m, hwloc_const_bitmap_t set, hwloc_bitmap_t **out)
{
	int n = 0, i = 0, w = hwloc_bitmap_weight(set);
	hwloc_bitmap_t *u;

	*out = NULL;
	if (w <= 0)
		return 0;
	if (m->has_cores) {
		hwloc_obj_t o = NULL;

		while ((o = hwloc_get_next_obj_by_type(m->topo, HWLOC_OBJ_CORE, o)))
			n += o->cpuset && hwloc_bitmap_intersects(o->cpuset, set);
		if (n == 0)
			return 0;
		if (!(u = calloc((size_t)n, sizeof(*u))))
			return -1;
		for (o = NULL; i < n && (o = hwloc_get_next_obj_by_type(m->topo, HWLOC_OBJ_CORE, o));) {
			if (!o->cpuset || !hwloc_bitmap_intersects(o->cpuset, set))
				continue;
			if (!(u[i] = hwloc_bitmap_alloc()) || hwloc_bitmap_and(u[i], o->cpuset, set) < 0) {
				free_units(u, u[i] ? i + 1 : i);
				return -1;
			}
			i++;
		}
		*out = u;
		return n;
	}
	{
		int runs = 0, len = -1, same = 1, prev = -2, run_len = 0, b;

		hwloc_bitmap_foreach_begin(b, set)
			if (b != prev + 1) {
				if (runs && len >= 0 && run_len != len)
					same = 0;
				if (runs && len < 0)
					len = run_len;
				runs++;
				run_len = 0;
			}
			run_len++;
			prev = b;
		hwloc_bitmap_foreach_end();
		if (len < 0)
			len = run_len;
		else if (run_len != len)
			same = 0;
		n = runs > 1 && same ? len : w;
		if (!(u = calloc((size_t)n, sizeof(*u))))
			return -1;
		for (i = 0; i < n; i++)
			if (!(u[i] = hwloc_bitmap_alloc())) {
				free_units(u, i);
				return -1;
			}
		i = 0;
		hwloc_bitmap_foreach_begin(b, set)
			if (hwloc_bitmap_set(u[i % n], (unsigned)b) < 0) {
				free_units(u, n);
				return -1;
			}
			i++;
		hwloc_bitmap_foreach_end();
		*out = u;
		return n;
	}
}

/* Give tasks idx[0..k) their share of the units u[0..nu): contiguous
 * chunks in topology order, or, with more tasks than units, unit j*nu/k to
 * task j (shared).  got[j]: the units task idx[j] got. */
static int split(hwloc_bitmap_t *u, int nu, const int *idx, int k, struct dl_map_task *t, int *got)
{
	for (int j = 0; j < k; j++) {
		int lo = j * nu / k, hi = nu >= k ? (j + 1) * nu / k : lo + 1;

		got[j] = 0;
		for (int x = lo; x < hi && x < nu; x++) {
			if (hwloc_bitmap_or(t[idx[j]].cpuset, t[idx[j]].cpuset, u[x]) < 0)
				return -1;
			got[j]++;
		}
	}
	return 0;
}

static void split_why(char *why, size_t len, const char *what, int k, int nu, int got, const char *word)
{
	const char *s = got == 1 ? "" : "s";

	if (why[0])
		cat(why, len, " + ");
	if (k == 1)
		cat(why, len, "%s: %d %s%s", what, got, word, s);
	else if (k <= nu)
		cat(why, len, "%s split %d ways: %d %s%s", what, k, got, word, s);
	else
		cat(why, len, "%s: %d tasks on %d %s%s, shared", what, k, nu, word, nu == 1 ? "" : "s");
}

/* The next group of tasks with equal sets: the smallest set not yet done,
 * with every task that has it, in task order.  Returns its size. */
static int next_group(hwloc_bitmap_t *set, char *done, int n, int *idx)
{
	int best = -1, bw = 0, k = 0;

	for (int r = 0; r < n; r++)
		if (!done[r] && set[r]) {
			int w = hwloc_bitmap_weight(set[r]);

			if (best < 0 || w < bw) {
				best = r;
				bw = w;
			}
		}
	if (best < 0)
		return 0;
	for (int r = 0; r < n; r++)
		if (!done[r] && set[r] && hwloc_bitmap_isequal(set[r], set[best])) {
			idx[k++] = r;
			done[r] = 1;
		}
	return k;
}

void dl_map_plan_free(struct dl_map_plan *p)
{
	if (!p)
		return;
	for (int r = 0; r < p->ntasks; r++) {
		hwloc_bitmap_free(p->task[r].cpuset);
		hwloc_bitmap_free(p->task[r].nodeset);
	}
	free(p);
}

int dl_map_plan_ntasks(const struct dl_map_plan *p) { return p->ntasks; }

const struct dl_map_task *dl_map_plan_task(const struct dl_map_plan *p, int r)
{
	return r >= 0 && r < p->ntasks ? &p->task[r] : NULL;
}

static void free_sets(hwloc_bitmap_t *s, int n)
{
	if (!s)
		return;
	for (int i = 0; i < n; i++)
		hwloc_bitmap_free(s[i]);
	free(s);
}

/* One dl_map_plan call's working state: the arguments, what the stages
 * below fill in, and the scratch arrays they share (one slot per task). */
struct planner {
	const struct dl_map *m;
	const int *step_gpus;
	int ng, ntasks, nic;
	struct dl_map_plan *p;
	const char *word;           /* "core" or "CPU": what a unit is */
	hwloc_bitmap_t mine;        /* the CPUs the plan may use */
	hwloc_bitmap_t taken, avail;
	hwloc_bitmap_t *dom, *loc;  /* per task: its NUMA domain, its GPU's locality */
	hwloc_obj_t *lobj;          /* the object of loc[r] */
	hwloc_obj_t *cpu_anchor;    /* per task without GPU: where its NICs are measured from */
	hwloc_obj_t gpu_anchor[DL_MAP_MAX_GPUS];
	hwloc_obj_t numa[DL_MAP_MAX_NICS];
	int nnuma, ncpu;
	int *cpu_idx, *idx, *got;
	char *done;
	hwloc_bitmap_t *u;          /* units of the current split */
	int nu;
};

/* The arguments' bounds; 0 or -1 with err set. */
static int plan_check_args(const struct planner *pl, const int *task_gpu, char *err, size_t errlen)
{
	if (pl->ntasks <= 0 || pl->ntasks > DL_MAP_MAX_TASKS) {
		dl_errf(err, errlen, "%d tasks on the node: expected 1 to %d", pl->ntasks, DL_MAP_MAX_TASKS);
		return -1;
	}
	if (pl->ng < 0 || pl->ng > DL_MAP_MAX_GPUS) {
		dl_errf(err, errlen, "%d step GPUs is more than %d", pl->ng, DL_MAP_MAX_GPUS);
		return -1;
	}
	for (int i = 0; i < pl->ng; i++)
		if (pl->step_gpus[i] < 0 || pl->step_gpus[i] >= pl->m->ngpus) {
			dl_errf(err, errlen, "GPU %d of the step is not in the topology (it has %d GPUs)",
				 pl->step_gpus[i], pl->m->ngpus);
			return -1;
		}
	for (int r = 0; task_gpu && r < pl->ntasks; r++)
		if (task_gpu[r] < -1 || task_gpu[r] >= pl->ng) {
			dl_errf(err, errlen, "task %d's GPU %d is not one of the step's %d", r, task_gpu[r], pl->ng);
			return -1;
		}
	return 0;
}

/* mine: the CPUs the plan may use, the topology's within what the caller
 * allows (the step's CPUs on the node); the NUMA nodes that have some.
 * 0, or -1 with err set. */
static int plan_mine(struct planner *pl, hwloc_const_bitmap_t within, char *err, size_t errlen)
{
	const struct dl_map *m = pl->m;

	if (!(pl->mine = hwloc_bitmap_dup(hwloc_get_root_obj(m->topo)->cpuset)) ||
	    (within && hwloc_bitmap_and(pl->mine, pl->mine, within) < 0)) {
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	if (hwloc_bitmap_iszero(pl->mine)) {
		char w[DL_MAP_LIST], all[DL_MAP_LIST];

		hwloc_bitmap_list_snprintf(w, sizeof(w), within);
		hwloc_bitmap_list_snprintf(all, sizeof(all), hwloc_get_root_obj(m->topo)->cpuset);
		dl_errf(err, errlen, "none of the CPUs %s is in the topology (its CPUs: %s)", w, all);
		return -1;
	}
	for (int i = 0; i < m->nnuma; i++)
		if (hwloc_bitmap_intersects(m->numa[i]->cpuset, pl->mine))
			pl->numa[pl->nnuma++] = m->numa[i];
	return 0;
}

/* The plan and the scratch arrays; each task's GPU (Slurm's binding, or
 * task r mod the step's GPUs).  -1: out of memory. */
static int plan_alloc(struct planner *pl, const int *task_gpu)
{
	int ntasks = pl->ntasks;
	struct dl_map_plan *p;

	pl->p = p = calloc(1, sizeof(*p) + (size_t)ntasks * sizeof(p->task[0]));
	pl->dom = calloc((size_t)ntasks, sizeof(*pl->dom));
	pl->loc = calloc((size_t)ntasks, sizeof(*pl->loc));
	pl->lobj = calloc((size_t)ntasks, sizeof(*pl->lobj));
	pl->cpu_anchor = calloc((size_t)ntasks, sizeof(*pl->cpu_anchor));
	pl->cpu_idx = calloc((size_t)ntasks, sizeof(*pl->cpu_idx));
	pl->idx = calloc((size_t)ntasks, sizeof(*pl->idx));
	pl->got = calloc((size_t)ntasks, sizeof(*pl->got));
	pl->done = calloc((size_t)ntasks, 1);
	pl->taken = hwloc_bitmap_alloc();
	pl->avail = hwloc_bitmap_alloc();
	if (!p || !pl->dom || !pl->loc || !pl->lobj || !pl->cpu_anchor || !pl->cpu_idx || !pl->idx || !pl->got ||
	    !pl->done || !pl->taken || !pl->avail)
		return -1;
	p->ntasks = ntasks;
	for (int r = 0; r < ntasks; r++) {
		struct dl_map_task *t = &p->task[r];

		t->gpu = task_gpu ? task_gpu[r] : pl->ng > 0 ? r % pl->ng : -1;
		t->node_gpu = -1;
		if (!(t->cpuset = hwloc_bitmap_alloc()) || !(t->nodeset = hwloc_bitmap_alloc()) ||
		    !(pl->dom[r] = hwloc_bitmap_alloc()))
			return -1;
		if (t->gpu < 0)
			pl->cpu_idx[r] = pl->ncpu++;
	}
	for (int i = 0; i < pl->ng; i++)
		pl->gpu_anchor[i] = pl->m->gpu[pl->step_gpus[i]];
	return 0;
}

/* Task r with a GPU: the GPU's NUMA node(s), their CPUs within mine (the
 * domain), and the GPU's own smaller locality (an L3 or a Group inside
 * the NUMA node) where it is smaller than the domain.  -1: out of memory. */
static int plan_gpu_domain(struct planner *pl, int r)
{
	const struct dl_map *m = pl->m;
	struct dl_map_task *t = &pl->p->task[r];
	hwloc_bitmap_t *dom = pl->dom, *loc = pl->loc;
	int ng = pl->ng;
	hwloc_obj_t a;

	t->node_gpu = pl->step_gpus[t->gpu];
	snprintf(t->busid, sizeof(t->busid), "%s", m->busid[t->node_gpu]);
	if (t->gpu == r % ng)
		snprintf(t->why_gpu, sizeof(t->why_gpu), "task %d mod %d step GPU%s", r, ng, ng > 1 ? "s" : "");
	else
		snprintf(t->why_gpu, sizeof(t->why_gpu), "Slurm's binding of the task");
	a = hwloc_get_non_io_ancestor_obj(m->topo, m->gpu[t->node_gpu]);
	if (a && a->nodeset && hwloc_bitmap_copy(t->nodeset, a->nodeset) < 0)
		return -1;
	if (!hwloc_bitmap_iszero(t->nodeset) && hwloc_cpuset_from_nodeset(m->topo, dom[r], t->nodeset) < 0)
		return -1;
	if (hwloc_bitmap_iszero(dom[r]) && a && a->cpuset && hwloc_bitmap_copy(dom[r], a->cpuset) < 0)
		return -1;
	if (hwloc_bitmap_and(dom[r], dom[r], pl->mine) < 0)
		return -1;
	if (a) {
		char oname[64];

		obj_name(a, oname, sizeof(oname));
		snprintf(t->why_numa, sizeof(t->why_numa), "of the GPU's %s", oname);
	}
	/* The GPU's own smaller locality, within mine: a set of its own only
	 * when it is still smaller than the domain (and not empty). */
	if (a && a->cpuset && !hwloc_bitmap_iszero(dom[r])) {
		if (!(loc[r] = hwloc_bitmap_dup(a->cpuset)) || hwloc_bitmap_and(loc[r], loc[r], pl->mine) < 0)
			return -1;
		if (!hwloc_bitmap_iszero(loc[r]) && hwloc_bitmap_isincluded(loc[r], dom[r]) &&
		    !hwloc_bitmap_isequal(loc[r], dom[r])) {
			pl->lobj[r] = a;
		} else {
			hwloc_bitmap_free(loc[r]);
			loc[r] = NULL;
		}
	}
	return 0;
}

/* Task r without a GPU: its share of the NUMA nodes that have CPUs of
 * mine, their CPUs (the domain), and the anchor its NICs are measured
 * from.  -1: out of memory. */
static int plan_cpu_domain(struct planner *pl, int r)
{
	const struct dl_map *m = pl->m;
	struct dl_map_task *t = &pl->p->task[r];
	hwloc_bitmap_t d = pl->dom[r];
	int c = pl->cpu_idx[r], ncpu = pl->ncpu;

	if (cpu_task_numa(pl->numa, pl->nnuma, c, ncpu, t->nodeset) < 0)
		return -1;
	if (hwloc_bitmap_iszero(t->nodeset)) {
		if (hwloc_bitmap_copy(d, pl->mine) < 0)
			return -1;
	} else if (hwloc_cpuset_from_nodeset(m->topo, d, t->nodeset) < 0 || hwloc_bitmap_and(d, d, pl->mine) < 0)
		return -1;
	snprintf(t->why_gpu, sizeof(t->why_gpu), "%s", pl->ng == 0 ? "the step has no GPU here" :
		 "not known (Slurm confines the task's devices)");
	snprintf(t->why_numa, sizeof(t->why_numa), "NUMA nodes split between %d task%s without GPU",
		 ncpu, ncpu > 1 ? "s" : "");
	pl->cpu_anchor[c] = hwloc_bitmap_iszero(t->nodeset) ? hwloc_get_root_obj(m->topo) :
		hwloc_get_numanode_obj_by_os_index(m->topo, (unsigned)hwloc_bitmap_first(t->nodeset));
	if (!pl->cpu_anchor[c])
		pl->cpu_anchor[c] = hwloc_get_root_obj(m->topo);
	return 0;
}

/* units of set into pl->u (the previous split's freed first).  -1: out of
 * memory. */
static int plan_units(struct planner *pl, hwloc_const_bitmap_t set)
{
	free_units(pl->u, pl->nu > 0 ? pl->nu : 0);
	pl->u = NULL;
	pl->nu = units(pl->m, set, &pl->u);
	return pl->nu < 0 ? -1 : 0;
}

/* Split pl->u between the k tasks pl->idx[0..k), each told why with what. */
static int plan_split(struct planner *pl, int k, const char *what)
{
	if (split(pl->u, pl->nu, pl->idx, k, pl->p->task, pl->got) < 0)
		return -1;
	for (int j = 0; j < k; j++)
		split_why(pl->p->task[pl->idx[j]].why_cpus, DL_MAP_WHY, what, k, pl->nu, pl->got[j], pl->word);
	return 0;
}

/* CPUs, first pass: the GPU's own locality, split between the tasks that
 * share it when each can have a whole core.  -1: out of memory. */
static int plan_cpus_local(struct planner *pl)
{
	char name[DL_MAP_LIST + 32];
	int k;

	while ((k = next_group(pl->loc, pl->done, pl->ntasks, pl->idx)) > 0) {
		if (hwloc_bitmap_andnot(pl->avail, pl->loc[pl->idx[0]], pl->taken) < 0 || plan_units(pl, pl->avail) < 0)
			return -1;
		if (pl->nu >= k) {
			obj_name(pl->lobj[pl->idx[0]], name, sizeof(name));
			if (plan_split(pl, k, name) < 0 || hwloc_bitmap_or(pl->taken, pl->taken, pl->avail) < 0)
				return -1;
		}
	}
	return 0;
}

/* Second pass: the rest of each NUMA domain, split between all its tasks;
 * with fewer cores than tasks, only the tasks still without CPUs take
 * part, and share.  -1: out of memory. */
static int plan_cpus_domain(struct planner *pl)
{
	char name[DL_MAP_LIST + 32];
	int k;

	memset(pl->done, 0, (size_t)pl->ntasks);
	while ((k = next_group(pl->dom, pl->done, pl->ntasks, pl->idx)) > 0) {
		hwloc_const_bitmap_t d = pl->dom[pl->idx[0]];
		int rest, kk = k;

		if (hwloc_bitmap_andnot(pl->avail, d, pl->taken) < 0)
			return -1;
		rest = !hwloc_bitmap_isequal(pl->avail, d);
		if (plan_units(pl, pl->avail) < 0)
			return -1;
		if (pl->nu < k) {
			kk = 0;
			for (int j = 0; j < k; j++)
				if (hwloc_bitmap_iszero(pl->p->task[pl->idx[j]].cpuset))
					pl->idx[kk++] = pl->idx[j];
		}
		if (kk > 0 && pl->nu == 0) {
			/* Nothing is left: the tasks without CPUs share the domain. */
			if (plan_units(pl, d) < 0)
				return -1;
			rest = 0;
		}
		if (kk > 0 && pl->nu > 0) {
			snprintf(name, sizeof(name), "%sNUMA %s", rest ? "rest of " : "", pl->p->task[pl->idx[0]].numa);
			if (plan_split(pl, kk, name) < 0 || hwloc_bitmap_or(pl->taken, pl->taken, pl->avail) < 0)
				return -1;
		}
	}
	return 0;
}

/* Third pass: the tasks whose NUMA domain has none of mine (the step owns
 * no CPU near their GPU) split what is left of mine, or share all of it
 * when nothing is left.  Then who shares CPUs, and the lists.  -1: out of
 * memory. */
static int plan_cpus_rest(struct planner *pl)
{
	struct dl_map_plan *p = pl->p;
	int k = 0;

	for (int r = 0; r < pl->ntasks; r++)
		if (hwloc_bitmap_iszero(p->task[r].cpuset) && hwloc_bitmap_iszero(pl->dom[r]))
			pl->idx[k++] = r;
	if (k > 0) {
		const char *what = "CPUs left outside its NUMA node";

		if (hwloc_bitmap_andnot(pl->avail, pl->mine, pl->taken) < 0 || plan_units(pl, pl->avail) < 0)
			return -1;
		if (pl->nu == 0) {
			what = "all the allowed CPUs";
			if (plan_units(pl, pl->mine) < 0)
				return -1;
		}
		if (plan_split(pl, k, what) < 0)
			return -1;
	}
	for (int r = 0; r < pl->ntasks; r++) {
		struct dl_map_task *t = &p->task[r];
		int n = 0;

		for (int s = 0; s < pl->ntasks; s++)
			n += hwloc_bitmap_intersects(t->cpuset, p->task[s].cpuset);
		t->shared = n > 1 ? n : 0;
		hwloc_bitmap_list_snprintf(t->cpus, sizeof(t->cpus), t->cpuset);
		if (!t->why_cpus[0])
			snprintf(t->why_cpus, sizeof(t->why_cpus), "no CPU in the topology's NUMA node");
	}
	return 0;
}

/* NICs: a GPU's among the step's GPUs, a task without GPU's among the
 * tasks without GPU.  Each unit's nearest NICs, once; then each task's
 * HCAs and the netdevs of their own ports (IPoIB, RoCE), or its nearest
 * netdevs.  -1: out of memory. */
static int plan_nics(struct planner *pl)
{
	const struct dl_map *m = pl->m;
	struct nicset chosen, port, *near[2][NIC_KINDS] = { { NULL } }; /* [GPU or CPU units][kind] */
	hwloc_obj_t *via[2][NIC_KINDS] = { { NULL } };
	int ret = -1;

	for (int g = 0; pl->nic && g < 2; g++) {
		int n = g ? pl->ng : pl->ncpu;

		for (int kind = 0; kind < NIC_KINDS; kind++) {
			near[g][kind] = calloc((size_t)(n ? n : 1), sizeof(*near[g][kind]));
			via[g][kind] = calloc((size_t)(n ? n : 1), sizeof(*via[g][kind]));
			if (!near[g][kind] || !via[g][kind])
				goto out;
			for (int i = 0; i < n; i++)
				via[g][kind][i] = nearest(m, kind, g ? pl->gpu_anchor[i] : pl->cpu_anchor[i],
							  &near[g][kind][i]);
		}
	}
	for (int r = 0; r < pl->ntasks; r++) {
		struct dl_map_task *t = &pl->p->task[r];
		int g = t->gpu >= 0, n = g ? pl->ng : pl->ncpu, x = g ? t->gpu : pl->cpu_idx[r];

		if (!pl->nic) {
			snprintf(t->why_hca, sizeof(t->why_hca), "not chosen (nic=none)");
			snprintf(t->why_ifname, sizeof(t->why_ifname), "not chosen (nic=none)");
			continue;
		}
		pick_nics(m, NIC_HCA, near[g][NIC_HCA], via[g][NIC_HCA][x], n, x, g ? "GPUs" : "tasks", &chosen,
			  t->why_hca, sizeof(t->why_hca));
		nic_names(m, NIC_HCA, &chosen, t->hca, sizeof(t->hca));
		memset(&port, 0, sizeof(port));
		for (int i = 0; i < m->nnics[NIC_NET]; i++)
			for (int h = 0; h < m->nnics[NIC_HCA] && !port.on[i]; h++)
				if (chosen.on[h] && pci_ancestor(m->nic[NIC_HCA][h]) == pci_ancestor(m->nic[NIC_NET][i])) {
					port.on[i] = 1;
					port.n++;
				}
		if (port.n > 0) {
			nic_names(m, NIC_NET, &port, t->ifname, sizeof(t->ifname));
			snprintf(t->why_ifname, sizeof(t->why_ifname), "the netdev%s of its HCA port%s",
				 port.n > 1 ? "s" : "", chosen.n > 1 ? "s" : "");
			continue;
		}
		pick_nics(m, NIC_NET, near[g][NIC_NET], via[g][NIC_NET][x], n, x, g ? "GPUs" : "tasks", &chosen,
			  t->why_ifname, sizeof(t->why_ifname));
		nic_names(m, NIC_NET, &chosen, t->ifname, sizeof(t->ifname));
	}
	ret = 0;
out:
	for (int g = 0; g < 2; g++)
		for (int kind = 0; kind < NIC_KINDS; kind++) {
			free(near[g][kind]);
			free(via[g][kind]);
		}
	return ret;
}

static void planner_free(struct planner *pl)
{
	free_units(pl->u, pl->nu > 0 ? pl->nu : 0);
	free_sets(pl->dom, pl->ntasks);
	free_sets(pl->loc, pl->ntasks);
	free(pl->lobj);
	free(pl->cpu_anchor);
	free(pl->cpu_idx);
	free(pl->idx);
	free(pl->got);
	free(pl->done);
	hwloc_bitmap_free(pl->taken);
	hwloc_bitmap_free(pl->avail);
	hwloc_bitmap_free(pl->mine);
}

struct dl_map_plan *dl_map_plan(const struct dl_map *m, const int *step_gpus, int ng, const int *task_gpu,
				int ntasks, hwloc_const_bitmap_t within, int nic, char *err, size_t errlen)
{
	struct planner pl = { .m = m, .step_gpus = step_gpus, .ng = ng, .ntasks = ntasks, .nic = nic,
			      .word = m->has_cores ? "core" : "CPU" };
	struct dl_map_plan *p = NULL;
	int ok = 0;

	if (plan_check_args(&pl, task_gpu, err, errlen) < 0)
		return NULL;
	if (plan_mine(&pl, within, err, errlen) < 0) {
		hwloc_bitmap_free(pl.mine);
		return NULL;
	}
	if (plan_alloc(&pl, task_gpu) < 0)
		goto out;
	for (int r = 0; r < ntasks; r++) {
		struct dl_map_task *t = &pl.p->task[r];

		if ((t->gpu >= 0 ? plan_gpu_domain(&pl, r) : plan_cpu_domain(&pl, r)) < 0)
			goto out;
		hwloc_bitmap_list_snprintf(t->numa, sizeof(t->numa), t->nodeset);
	}
	if (plan_cpus_local(&pl) < 0 || plan_cpus_domain(&pl) < 0 || plan_cpus_rest(&pl) < 0 ||
	    plan_nics(&pl) < 0)
		goto out;
	ok = 1;
out:
	p = pl.p;
	planner_free(&pl);
	if (!ok) {
		dl_errf(err, errlen, "out of memory");
		dl_map_plan_free(p);
		return NULL;
	}
	return p;
}

int dl_map_bound(const struct dl_map_task *t, hwloc_const_bitmap_t allowed, hwloc_bitmap_t out)
{
	if (hwloc_bitmap_copy(out, t->cpuset) < 0)
		return -1;
	if (!allowed)
		return 0;
	if (hwloc_bitmap_and(out, out, allowed) < 0)
		return -1;
	/* The topology's CPUs are not this task's: keep what Slurm gave. */
	if (hwloc_bitmap_iszero(out) && hwloc_bitmap_copy(out, allowed) < 0)
		return -1;
	return 0;
}
