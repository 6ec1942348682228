#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank/mapping.h"

#define DL_MAP_MAX_NICS 256

enum { NIC_HCA, NIC_NET, NIC_KINDS };

struct dl_map {
	hwloc_topology_t topo;
	int ngpus;
	hwloc_obj_t gpu[DL_MAP_MAX_GPUS];   /* PCI functions, bus-id order */
	char busid[DL_MAP_MAX_GPUS][16];
	int nnics[NIC_KINDS];
	hwloc_obj_t nic[NIC_KINDS][DL_MAP_MAX_NICS]; /* OS devices, bus-id then name order */
	int nnuma;                          /* NUMA nodes with CPUs, OS index order */
	hwloc_obj_t numa[DL_MAP_MAX_NICS];
};

static int is_gpu(hwloc_obj_t o)
{
	unsigned v = o->attr->pcidev.vendor_id, c = o->attr->pcidev.class_id;

	if (v == 0x10de)
		return c == 0x0300 || c == 0x0302;
	if (v == 0x1002)
		return c == 0x0380 || c == 0x1200;
	return 0;
}

static hwloc_obj_t pci_ancestor(hwloc_obj_t o)
{
	for (o = o->parent; o; o = o->parent)
		if (o->type == HWLOC_OBJ_PCI_DEVICE)
			return o;
	return NULL;
}

static int pci_cmp(hwloc_obj_t a, hwloc_obj_t b)
{
	const struct hwloc_pcidev_attr_s *x = &a->attr->pcidev, *y = &b->attr->pcidev;

	if (x->domain != y->domain)
		return x->domain < y->domain ? -1 : 1;
	if (x->bus != y->bus)
		return x->bus < y->bus ? -1 : 1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->func != y->func)
		return x->func < y->func ? -1 : 1;
	return 0;
}

static int gpu_qcmp(const void *a, const void *b)
{
	return pci_cmp(*(hwloc_obj_t const *)a, *(hwloc_obj_t const *)b);
}

static int nic_qcmp(const void *a, const void *b)
{
	hwloc_obj_t x = *(hwloc_obj_t const *)a, y = *(hwloc_obj_t const *)b;
	int c = pci_cmp(pci_ancestor(x), pci_ancestor(y));

	return c ? c : strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static int numa_qcmp(const void *a, const void *b)
{
	unsigned x = (*(hwloc_obj_t const *)a)->os_index, y = (*(hwloc_obj_t const *)b)->os_index;

	return x < y ? -1 : x > y;
}

/* hwloc discovery components that open a display, a socket or a GPU
 * driver (hwloc 2.9's list; see dl_map_open). */
static const char *const no_components[] = { "gl", "opencl", "cuda", "nvml", "rsmi", "levelzero" };

struct dl_map *dl_map_open(const char *xml, char *err, size_t errlen)
{
	struct dl_map *m = calloc(1, sizeof(*m));
	hwloc_obj_t o;
	int ok = 0;

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (hwloc_topology_init(&m->topo) < 0) {
		snprintf(err, errlen, "hwloc_topology_init: %s", strerror(errno));
		free(m);
		return NULL;
	}
	/* Inside slurmstepd (root, every job) hwloc may only read /proc, /sys
	 * and PCI config space.  Its gl component connects to X displays
	 * (:0-:9, abstract and file sockets, TCP 6000+: any local user can
	 * answer and never reply, hanging every step), opencl/cuda/nvml/rsmi/
	 * levelzero initialise GPU drivers.  GPUs are found from PCI data
	 * (vendor and class), NICs from sysfs; none of these components adds
	 * anything the mapping uses.  Blacklisted by name (hwloc >= 2.1),
	 * also for an XML topology, where they are not used anyway. */
	for (size_t i = 0; i < sizeof(no_components) / sizeof(no_components[0]); i++)
		/* EINVAL: no such component in this hwloc (its plugin is not
		 * installed), so there is nothing to keep out. */
		if (hwloc_topology_set_components(m->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
						  no_components[i]) < 0 && errno != EINVAL) {
			snprintf(err, errlen, "hwloc_topology_set_components(-%s): %s", no_components[i],
				 strerror(errno));
			goto out;
		}
	/* Without this filter hwloc drops every PCI and OS device. */
	if (hwloc_topology_set_io_types_filter(m->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0) {
		snprintf(err, errlen, "hwloc_topology_set_io_types_filter: %s", strerror(errno));
		goto out;
	}
	if (xml && hwloc_topology_set_xml(m->topo, xml) < 0) {
		snprintf(err, errlen, "cannot read topology %s: %s", xml, strerror(errno));
		goto out;
	}
	if (hwloc_topology_load(m->topo) < 0) {
		snprintf(err, errlen, "cannot load topology %s: %s", xml ? xml : "of this machine",
			 strerror(errno));
		goto out;
	}

	for (o = NULL; (o = hwloc_get_next_pcidev(m->topo, o));) {
		if (!is_gpu(o))
			continue;
		if (m->ngpus == DL_MAP_MAX_GPUS) {
			snprintf(err, errlen, "topology %s has more than %d GPUs", xml ? xml : "", DL_MAP_MAX_GPUS);
			goto out;
		}
		m->gpu[m->ngpus++] = o;
	}
	qsort(m->gpu, m->ngpus, sizeof(m->gpu[0]), gpu_qcmp);
	for (int i = 0; i < m->ngpus; i++) {
		const struct hwloc_pcidev_attr_s *p = &m->gpu[i]->attr->pcidev;
		snprintf(m->busid[i], sizeof(m->busid[i]), "%04x:%02x:%02x.%01x",
			 p->domain, p->bus, p->dev, p->func);
	}

	for (o = NULL; (o = hwloc_get_next_osdev(m->topo, o));) {
		int k;

		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
			k = NIC_HCA;
		else if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
			k = NIC_NET;
		else
			continue;
		/* Only devices on a PCI function have a place in the PCI tree. */
		if (!o->name || !pci_ancestor(o))
			continue;
		if (m->nnics[k] == DL_MAP_MAX_NICS)
			continue;
		m->nic[k][m->nnics[k]++] = o;
	}
	for (int k = 0; k < NIC_KINDS; k++)
		qsort(m->nic[k], m->nnics[k], sizeof(m->nic[k][0]), nic_qcmp);

	for (o = NULL; (o = hwloc_get_next_obj_by_type(m->topo, HWLOC_OBJ_NUMANODE, o));) {
		if (!o->cpuset || hwloc_bitmap_iszero(o->cpuset) || m->nnuma == DL_MAP_MAX_NICS)
			continue;
		m->numa[m->nnuma++] = o;
	}
	qsort(m->numa, m->nnuma, sizeof(m->numa[0]), numa_qcmp);
	ok = 1;
out:
	if (!ok) {
		hwloc_topology_destroy(m->topo);
		free(m);
		return NULL;
	}
	return m;
}

void dl_map_close(struct dl_map *m)
{
	if (!m)
		return;
	hwloc_topology_destroy(m->topo);
	free(m);
}

int dl_map_ngpus(const struct dl_map *m) { return m->ngpus; }
hwloc_topology_t dl_map_topology(const struct dl_map *m) { return m->topo; }

const char *dl_map_gpu_busid(const struct dl_map *m, int i)
{
	return i >= 0 && i < m->ngpus ? m->busid[i] : NULL;
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

/* Set bits in near (NIC indexes of kind k) for the NICs nearest to anchor:
 * deepest common ancestor first (same switch beats same host bridge beats
 * same package), then fewest hops between the two, so that on a tie at the
 * package a NIC on the GPU's own root port wins over one behind a slow
 * management switch. */
static void nearest(const struct dl_map *m, int k, hwloc_obj_t anchor, hwloc_bitmap_t near)
{
	int best = -1, best_hops = 0, da = tree_depth(anchor);

	hwloc_bitmap_zero(near);
	for (int i = 0; i < m->nnics[k]; i++) {
		hwloc_obj_t c = common_ancestor(anchor, m->nic[k][i]);
		int d = c ? tree_depth(c) : -1;
		int hops = da + tree_depth(m->nic[k][i]) - 2 * d;

		if (d > best || (d == best && hops < best_hops)) {
			best = d;
			best_hops = hops;
			hwloc_bitmap_only(near, (unsigned)i);
		} else if (d == best && hops == best_hops) {
			hwloc_bitmap_set(near, (unsigned)i);
		}
	}
}

/* Pick unit u's share of its nearest NICs of kind k and write their names.
 * anchors[0..n) are all units (GPUs, or tasks' NUMA nodes) that split NICs. */
static int pick_nics(const struct dl_map *m, int k, hwloc_obj_t *anchors, int n, int u,
		     char *out, size_t outlen)
{
	hwloc_bitmap_t mine = hwloc_bitmap_alloc(), other = hwloc_bitmap_alloc();
	int rv = -1, grp = 0, pos = 0, cnt, lo, hi, i, j, len = 0;

	out[0] = '\0';
	if (!mine || !other)
		goto out;
	nearest(m, k, anchors[u], mine);
	cnt = hwloc_bitmap_weight(mine);
	if (cnt <= 0) {
		rv = 0;
		goto out;
	}
	for (i = 0; i < n; i++) {
		nearest(m, k, anchors[i], other);
		if (!hwloc_bitmap_isequal(mine, other))
			continue;
		if (i < u)
			pos++;
		grp++;
	}
	lo = pos * cnt / grp;
	hi = grp <= cnt ? (pos + 1) * cnt / grp : lo + 1;
	j = 0;
	hwloc_bitmap_foreach_begin(i, mine)
		if (j >= lo && j < hi) {
			int w = snprintf(out + len, outlen - len, "%s%s", len ? "," : "", m->nic[k][i]->name);
			if (w < 0 || (size_t)w >= outlen - len) {
				out[len] = '\0';
				break;
			}
			len += w;
		}
		j++;
	hwloc_bitmap_foreach_end();
	rv = 0;
out:
	hwloc_bitmap_free(mine);
	hwloc_bitmap_free(other);
	return rv;
}

void dl_map_task_clear(struct dl_map_task *t)
{
	hwloc_bitmap_free(t->cpuset);
	hwloc_bitmap_free(t->nodeset);
	t->cpuset = t->nodeset = NULL;
}

/* NUMA nodes of CPU-only task r of n: the nodes with CPUs split evenly. */
static void cpu_task_numa(const struct dl_map *m, int r, int n, hwloc_bitmap_t ns)
{
	int c = m->nnuma, lo, hi;

	hwloc_bitmap_zero(ns);
	if (c == 0)
		return;
	lo = r * c / n;
	hi = n >= c ? lo + 1 : (r + 1) * c / n;
	for (int i = lo; i < hi; i++)
		hwloc_bitmap_set(ns, m->numa[i]->os_index);
}

int dl_map_task(const struct dl_map *m, const int *step_gpus, int n_step_gpus, int gpu,
		int rank, int ntasks, hwloc_const_bitmap_t allowed, int nic,
		struct dl_map_task *t, char *err, size_t errlen)
{
	hwloc_obj_t anchors[DL_MAP_MAX_NICS];
	hwloc_bitmap_t ns = NULL;
	int rv = -1, n = 0, u = 0;

	memset(t, 0, sizeof(*t));
	t->gpu = t->node_gpu = -1;
	if (rank < 0 || ntasks <= 0 || rank >= ntasks) {
		snprintf(err, errlen, "task %d of %d is out of range", rank, ntasks);
		return -1;
	}
	if (n_step_gpus > DL_MAP_MAX_GPUS) {
		snprintf(err, errlen, "%d step GPUs is more than %d", n_step_gpus, DL_MAP_MAX_GPUS);
		return -1;
	}
	for (int i = 0; i < n_step_gpus; i++)
		if (step_gpus[i] < 0 || step_gpus[i] >= m->ngpus) {
			snprintf(err, errlen, "GPU %d of the step is not in the topology (it has %d GPUs)",
				 step_gpus[i], m->ngpus);
			return -1;
		}
	t->cpuset = hwloc_bitmap_alloc();
	t->nodeset = hwloc_bitmap_alloc();
	ns = hwloc_bitmap_alloc();
	if (!t->cpuset || !t->nodeset || !ns) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}

	if (n_step_gpus > 0) {
		/* Tasks beyond the GPU count share GPUs round-robin. */
		t->gpu = gpu >= 0 && gpu < n_step_gpus ? gpu : rank % n_step_gpus;
		t->node_gpu = step_gpus[t->gpu];
		snprintf(t->busid, sizeof(t->busid), "%s", m->busid[t->node_gpu]);
		hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(m->topo, m->gpu[t->node_gpu]);
		if (a && a->nodeset)
			hwloc_bitmap_copy(t->nodeset, a->nodeset);
		for (int i = 0; i < n_step_gpus; i++)
			anchors[n++] = m->gpu[step_gpus[i]];
		u = t->gpu;
	} else {
		cpu_task_numa(m, rank, ntasks, t->nodeset);
		/* Every task is a unit; its anchor is its first NUMA node. */
		for (int r = 0; r < ntasks && n < DL_MAP_MAX_NICS; r++) {
			cpu_task_numa(m, r, ntasks, ns);
			hwloc_obj_t o = hwloc_get_numanode_obj_by_os_index(m->topo,
				(unsigned)hwloc_bitmap_first(ns));
			anchors[n++] = o ? o : hwloc_get_root_obj(m->topo);
		}
		u = rank < n ? rank : 0;
	}

	if (hwloc_cpuset_from_nodeset(m->topo, t->cpuset, t->nodeset) < 0) {
		snprintf(err, errlen, "hwloc_cpuset_from_nodeset failed");
		goto out;
	}
	hwloc_bitmap_list_snprintf(t->numa_cpus, sizeof(t->numa_cpus), t->cpuset);
	if (allowed) {
		hwloc_bitmap_and(t->cpuset, t->cpuset, allowed);
		if (hwloc_bitmap_iszero(t->cpuset)) {
			/* The NUMA node's CPUs are not ours: keep what Slurm gave. */
			hwloc_bitmap_copy(t->cpuset, allowed);
		}
	}
	if (nic && n > 0)
		for (int k = 0; k < NIC_KINDS; k++)
			if (pick_nics(m, k, anchors, n, u, k == NIC_HCA ? t->hca : t->ifname,
				      DL_MAP_LIST) < 0) {
				snprintf(err, errlen, "out of memory");
				goto out;
			}
	hwloc_bitmap_list_snprintf(t->numa, sizeof(t->numa), t->nodeset);
	hwloc_bitmap_list_snprintf(t->cpus, sizeof(t->cpus), t->cpuset);
	rv = 0;
out:
	hwloc_bitmap_free(ns);
	if (rv < 0)
		dl_map_task_clear(t);
	return rv;
}

int dl_map_parse_index_list(const char *s, int *idx, int max)
{
	int n = 0;

	if (!s)
		return -1;
	while (*s) {
		char *end;
		long lo, hi;

		/* strtol takes blanks and signs: only digits may start a number. */
		if (*s < '0' || *s > '9')
			return -1;
		errno = 0;
		lo = strtol(s, &end, 10);
		if (errno || lo > DL_MAP_MAX_INDEX)
			return -1;
		hi = lo;
		s = end;
		if (*s == '-') {
			s++;
			if (*s < '0' || *s > '9')
				return -1;
			hi = strtol(s, &end, 10);
			if (errno || hi < lo || hi > DL_MAP_MAX_INDEX)
				return -1;
			s = end;
		}
		if (hi - lo >= (long)(max - n))
			return -1;
		for (long i = lo; i <= hi; i++)
			idx[n++] = (int)i;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n;
}
