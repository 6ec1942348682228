/* GPU -> NIC -> NUMA/CPU mapping from an hwloc topology, with no Slurm
 * dependency so that tests and `dljob topo` can drive it with XML files.
 * As in LLNL/mpibind, the mapping of all the tasks of a node (the plan) is
 * computed once, and each task applies its own row.
 *
 * Rules (also in man/spank-dljob.8, MAPPING):
 * - A GPU is a PCI function from NVIDIA (0x10de, class 0x0300/0x0302) or AMD
 *   (0x1002, class 0x0380/0x1200).  GPUs are numbered in PCI bus-id order:
 *   Slurm's GPU index i is the i-th GPU of the node in that order, which is
 *   also what CUDA_DEVICE_ORDER=PCI_BUS_ID means.  A partitioned GPU (MIG,
 *   MI300 CPX) counts as one.
 * - A NIC is an OS device under a PCI function: OpenFabrics (-> NCCL_IB_HCA)
 *   or Network (-> NCCL_SOCKET_IFNAME).  The nearest NICs of a GPU are those
 *   whose lowest common ancestor with it lies deepest in the tree (same PCIe
 *   switch beats same host bridge beats same package ...), then the fewest
 *   hops; ties are all kept.  When several of the step's GPUs have the same
 *   set of nearest NICs, the set is split between them in bus-id order (m
 *   GPUs, k NICs: with m <= k each GPU gets a contiguous share of k/m NICs,
 *   else GPU j gets NIC j*k/m).
 * - Network interfaces come in three classes, and only the best class
 *   present on the node is considered: high-speed (on a PCI function that
 *   also has an OpenFabrics device, i.e. IPoIB or RoCE; PCI class
 *   InfiniBand or Fabric; Mellanox/NVIDIA, HPE Slingshot, Amazon EFA/ENA or
 *   Cornelis; or a PCIe link of at least 3.9 GB/s), management (an ASPEED
 *   BMC, or a PCIe link below 1 GB/s: 1 GbE parts), and the others.
 * - A task whose HCAs have network interfaces on their own PCI functions
 *   (the IPoIB/RoCE netdev of the HCA port) gets exactly those as its
 *   interfaces, so a split HCA gives each GPU its own port's netdev.
 * - The memory of a GPU is the NUMA node(s) of its first non-I/O ancestor.
 *   Its CPUs: first the cores of that ancestor when it is smaller than the
 *   NUMA node (an L3 or a Group), split between the tasks that share it,
 *   then the rest of the NUMA node split between all the tasks on it.  The
 *   tasks' CPU sets are disjoint unless there are more tasks than cores.
 * - A task with no GPU gets the NUMA nodes with CPUs split between the
 *   node's tasks (their cores split between the tasks that share one), and
 *   the NICs nearest to its NUMA node.
 * - The plan may be confined to a set of CPUs (the step's on the node):
 *   every rule above then counts only those CPUs (a core is the part of it
 *   in the set), a task without GPU splits only the NUMA nodes that have
 *   some, and the tasks whose GPU's NUMA node has none split what is left
 *   of the set (or share all of it when nothing is left). */
#ifndef DLJOB_MAPPING_H
#define DLJOB_MAPPING_H

#include <stddef.h>
#include <stdio.h>
#include <hwloc.h>

#define DL_MAP_MAX_GPUS 64
#define DL_MAP_MAX_TASKS 1024    /* local tasks of one node */
#define DL_MAP_LIST 512
#define DL_MAP_WHY 256
#define DL_MAP_MAX_INDEX 65535   /* the largest GPU index a list may name */
#define DL_MAP_MAX_XML (64 << 20)/* a topology file larger than this is refused */
#define DL_MAP_MAX_OS_INDEX (1u << 20) /* a PU or NUMA node numbered from here is refused */

struct dl_map;
struct dl_map_plan;

/* One task's row of the plan.  Lists are comma separated names, or hwloc
 * list syntax ("0-3,8") of OS indexes for numa/cpus; empty when there is
 * nothing.  The why_* strings say which rule decided each column. */
struct dl_map_task {
	int gpu;                 /* index in the step's GPU list (= in CUDA_VISIBLE_DEVICES), -1: none */
	int node_gpu;            /* the node's GPU index (PCI bus-id order), -1: none */
	char busid[16];          /* "0000:5f:00.0" */
	char hca[DL_MAP_LIST];   /* OpenFabrics devices, e.g. "mlx5_0" */
	char ifname[DL_MAP_LIST];/* network interfaces, e.g. "ib0" */
	char numa[DL_MAP_LIST];  /* NUMA node OS indexes */
	char cpus[DL_MAP_LIST];  /* the task's CPUs in the topology */
	int shared;              /* 0: cpus are the task's own; N: N tasks share some of them */
	char why_gpu[DL_MAP_WHY], why_hca[DL_MAP_WHY], why_ifname[DL_MAP_WHY];
	char why_numa[DL_MAP_WHY], why_cpus[DL_MAP_WHY];
	hwloc_bitmap_t cpuset;   /* same as cpus */
	hwloc_bitmap_t nodeset;  /* same as numa */
};

/* Load a topology: xml is an hwloc XML file (read here: a regular file of
 * at most DL_MAP_MAX_XML bytes, that hwloc must first load in a child
 * process, as it dies on some malformed files), or NULL for this machine (without hwloc's
 * gl, opencl, cuda, nvml, rsmi and levelzero components: nothing that
 * opens a display, a socket or a GPU driver).  Returns NULL with one line
 * in err naming the file.  This machine's topology includes the CPUs and
 * NUMA nodes that the caller's cgroup disallows (dl_map_plan's within says
 * which the tasks may have). */
struct dl_map *dl_map_open(const char *xml, char *err, size_t errlen);
/* The same from XML bytes in memory (buf[len] need not be 0). */
struct dl_map *dl_map_open_buffer(const char *buf, size_t len, const char *name, char *err, size_t errlen);
void dl_map_close(struct dl_map *m);

int dl_map_ngpus(const struct dl_map *m);
const char *dl_map_gpu_busid(const struct dl_map *m, int i);
hwloc_topology_t dl_map_topology(const struct dl_map *m);

/* The plan for the ntasks local tasks of a step.  step_gpus lists the node
 * GPU indexes of the step (Slurm's SLURM_STEP_GPUS), n_step_gpus may be 0.
 * task_gpu[r] is task r's GPU as an index in step_gpus (-1: none); NULL:
 * task r gets r % n_step_gpus.  within: the CPUs (OS indexes) the tasks
 * may have, NULL: all of the topology's; the tasks' sets are disjoint
 * parts of it unless there are more tasks than its cores.  nic: 0 to skip
 * NIC selection.  Returns NULL with one line in err (also when no CPU of
 * within is in the topology). */
struct dl_map_plan *dl_map_plan(const struct dl_map *m, const int *step_gpus, int n_step_gpus,
				const int *task_gpu, int ntasks, hwloc_const_bitmap_t within, int nic,
				char *err, size_t errlen);
void dl_map_plan_free(struct dl_map_plan *p);
int dl_map_plan_ntasks(const struct dl_map_plan *p);
/* Row r (NULL when r is out of range). */
const struct dl_map_task *dl_map_plan_task(const struct dl_map_plan *p, int r);

/* What a task is bound to: its CPUs within allowed (what Slurm gave it);
 * when they have nothing in common, allowed itself (an XML topology of
 * another machine, or a Slurm allocation elsewhere).  allowed NULL: all.
 * Returns 0 or -1 (out of memory). */
int dl_map_bound(const struct dl_map_task *t, hwloc_const_bitmap_t allowed, hwloc_bitmap_t out);

/* The plan as a table: a title line, a header, and per task a row and the
 * line of rules that decided it.  Every line starts with "dljob: ".  This
 * is what `dljob topo` and `--dl-bind=...,verbose` print. */
void dl_map_plan_print(FILE *f, const struct dl_map_plan *p, const char *title);

/* Parse "0,1,3" or "0-3" (Slurm's SLURM_STEP_GPUS syntax; untrusted: it
 * comes from the job environment) into idx.  Returns the count, or -1 on a
 * malformed list, an index above DL_MAP_MAX_INDEX or more than max entries. */
int dl_map_parse_index_list(const char *s, int *idx, int max);
/* The same syntax into a CPU set (hwloc's list syntax without its
 * extensions).  Returns the count, or -1 (malformed or empty). */
int dl_map_parse_cpu_list(const char *s, hwloc_bitmap_t out);

/* Slurm's abstract core numbers (spank's S_STEP_ALLOC_CORES, e.g. "0-3,8")
 * as CPUs of the topology, the way slurmd's xcpuinfo_abs_to_mac turns them
 * into the step's cpuset: core i is the i-th core of the whole machine in
 * topology order (sockets in order, cores in order within each), with all
 * its hardware threads.  That holds when the node's Sockets, CoresPerSocket
 * and ThreadsPerCore in slurm.conf are its hardware's (slurmd -C), which
 * cannot be checked here.  Returns 0, or -1 with one line in err when the
 * list is malformed, names a core the topology lacks, or the topology has
 * no cores or misses some of the machine's CPUs (hwloc dropped the CPUs a
 * cgroup disallows: the numbering would shift). */
int dl_map_slurm_cores(const struct dl_map *m, const char *cores, hwloc_bitmap_t out, char *err, size_t errlen);

#endif
