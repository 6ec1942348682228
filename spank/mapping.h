/* GPU -> NIC -> NUMA/CPU mapping from an hwloc topology, with no Slurm
 * dependency so that tests can drive it with XML files.
 *
 * Rules (also in man/spank-dljob.8):
 * - A GPU is a PCI function from NVIDIA (0x10de, class 0x0300/0x0302) or AMD
 *   (0x1002, class 0x0380/0x1200).  GPUs are numbered in PCI bus-id order:
 *   Slurm's GPU index i is the i-th GPU of the node in that order, which is
 *   also what CUDA_DEVICE_ORDER=PCI_BUS_ID means.  A partitioned GPU (MIG,
 *   MI300 CPX) counts as one.
 * - A NIC is an OS device under a PCI function: OpenFabrics (-> NCCL_IB_HCA)
 *   or Network (-> NCCL_SOCKET_IFNAME).  The nearest NICs of a GPU are those
 *   whose lowest common ancestor with it lies deepest in the tree (same PCIe
 *   switch beats same host bridge beats same package ...); ties are all kept.
 * - When several of the step's GPUs have the same set of nearest NICs, the
 *   set is split between them in bus-id order (m GPUs, k NICs: with m <= k
 *   each GPU gets a contiguous share of k/m NICs, else GPU j gets NIC j*k/m).
 * - The memory of a GPU is the NUMA node(s) of its first non-I/O ancestor,
 *   its CPUs are those NUMA nodes' CPUs.  A task with no GPU gets the NUMA
 *   nodes with CPUs split between the node's tasks, and the NICs nearest to
 *   its NUMA node. */
#ifndef DLJOB_SPANK_MAPPING_H
#define DLJOB_SPANK_MAPPING_H

#include <stddef.h>
#include <hwloc.h>

#define DL_MAP_MAX_GPUS 64
#define DL_MAP_LIST 512
#define DL_MAP_MAX_INDEX 65535   /* the largest GPU index a list may name */

struct dl_map;

/* What one task gets.  Lists are comma separated names, or hwloc list syntax
 * ("0-3,8") of OS indexes for numa/cpus; empty when there is nothing. */
struct dl_map_task {
	int gpu;                 /* index in the step's GPU list (= in CUDA_VISIBLE_DEVICES), -1: none */
	int node_gpu;            /* the node's GPU index (PCI bus-id order), -1: none */
	char busid[16];          /* "0000:5f:00.0" */
	char hca[DL_MAP_LIST];   /* OpenFabrics devices, e.g. "mlx5_0" */
	char ifname[DL_MAP_LIST];/* network interfaces, e.g. "ib0" */
	char numa[DL_MAP_LIST];  /* NUMA node OS indexes */
	char numa_cpus[DL_MAP_LIST]; /* PU OS indexes of the NUMA node(s) */
	char cpus[DL_MAP_LIST];  /* numa_cpus intersected with the allowed set (if
				  * that is empty: the allowed set) */
	hwloc_bitmap_t cpuset;   /* same as cpus, owned by the task (dl_map_task_clear) */
	hwloc_bitmap_t nodeset;  /* same as numa */
};

/* Load a topology: xml is an hwloc XML file, or NULL for this machine
 * (without hwloc's gl, opencl, cuda, nvml, rsmi and levelzero components:
 * nothing that opens a display, a socket or a GPU driver).
 * Returns NULL with one line in err. */
struct dl_map *dl_map_open(const char *xml, char *err, size_t errlen);
void dl_map_close(struct dl_map *m);

int dl_map_ngpus(const struct dl_map *m);
const char *dl_map_gpu_busid(const struct dl_map *m, int i);
hwloc_topology_t dl_map_topology(const struct dl_map *m);

/* Map local task `rank` of `ntasks` on this node.  step_gpus lists the node
 * GPU indexes of the step (Slurm's SLURM_STEP_GPUS), n_step_gpus may be 0;
 * gpu is the task's GPU as an index in step_gpus (-1: rank % n_step_gpus).
 * allowed (may be NULL) restricts the CPUs (what Slurm gave the task).
 * nic: 0 to skip NIC selection.  Returns 0, or -1 with one line in err. */
int dl_map_task(const struct dl_map *m, const int *step_gpus, int n_step_gpus, int gpu,
		int rank, int ntasks, hwloc_const_bitmap_t allowed, int nic,
		struct dl_map_task *t, char *err, size_t errlen);
void dl_map_task_clear(struct dl_map_task *t);

/* Parse "0,1,3" or "0-3" (Slurm's SLURM_STEP_GPUS syntax; untrusted: it
 * comes from the job environment) into idx.  Returns the count, or -1 on a
 * malformed list, an index above DL_MAP_MAX_INDEX or more than max entries. */
int dl_map_parse_index_list(const char *s, int *idx, int max);

#endif
