/* What the parts of the mapping library share (not an API: callers use
 * mapping/mapping.h).  load.c fills a struct dl_map from a topology,
 * plan.c computes a struct dl_map_plan from it, print.c prints a plan as
 * a table, parse.c reads GPU and CPU lists and Slurm's core numbers. */
#ifndef DLJOB_MAPPING_INTERNAL_H
#define DLJOB_MAPPING_INTERNAL_H

#include <hwloc.h>

#include "mapping/mapping.h"

#define DL_MAP_MAX_NICS 256

enum { NIC_HCA, NIC_NET, NIC_KINDS };
/* Classes of network interfaces, best last (see mapping.h). */
enum { TIER_MGMT, TIER_OTHER, TIER_FAST };

/* A loaded topology (load.c) with its GPUs, NICs and NUMA nodes sorted. */
struct dl_map {
	hwloc_topology_t topo;
	int ngpus;
	hwloc_obj_t gpu[DL_MAP_MAX_GPUS];   /* PCI functions, bus-id order */
	char busid[DL_MAP_MAX_GPUS][16];
	int nnics[NIC_KINDS];
	hwloc_obj_t nic[NIC_KINDS][DL_MAP_MAX_NICS]; /* OS devices, bus-id then name order */
	int tier[DL_MAP_MAX_NICS];          /* class of each NIC_NET device */
	int top_tier;                       /* the best class on the node */
	int nnuma;                          /* NUMA nodes with CPUs, OS index order */
	hwloc_obj_t numa[DL_MAP_MAX_NICS];
	int has_cores;                      /* the topology has Core objects */
};

/* A plan (plan.c): one row per local task. */
struct dl_map_plan {
	int ntasks;
	struct dl_map_task task[];
};

/* The PCI function that o (an OS device) is on, NULL: none. */
static inline hwloc_obj_t pci_ancestor(hwloc_obj_t o)
{
	for (o = o->parent; o; o = o->parent)
		if (o->type == HWLOC_OBJ_PCI_DEVICE)
			return o;
	return NULL;
}

#endif
