/* fuzz_topology: an hwloc XML topology (the plugstack's topology=, admin
 * input read inside every step's slurmstepd) through the mapping code:
 * mapping/load.c's dl_map_open_buffer, then the plan and its table.
 * Input: byte 0 = the number of local tasks (1 + byte % 16) and, in its
 * high 4 bits, the step's CPUs (CPU i when bit i % 4 is set; 0: all),
 * byte 1 = the step's GPUs (bit i: node GPU i, of the first 8; 0: none),
 * the rest the XML.  Checks: a topology that does not load leaves one line
 * in err; a plan's rows are in range, its CPU sets within the step's, and
 * those not marked shared disjoint. */
#include "config.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mapping/mapping.h"

/* hwloc loads its libxml2 importer (a plugin, and libxml2 with it) for each
 * topology and unloads it with the topology.  After some malformed files
 * libxml2 still holds allocations from its own globals; once the library is
 * unmapped nothing points at them, and LeakSanitizer reported them as a
 * leak of the input (tests/fuzz/corpus/fuzz_topology/libxml2-unloaded).
 * With libxml2 kept loaded the same input reports nothing, so it is kept
 * loaded; a leak of the mapping code's own is still reported. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	(void)dlopen("libxml2.so.2", RTLD_NOW | RTLD_NODELETE);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1024] = "";
	int step[8], ng = 0, ntasks;
	struct dl_map *m;
	struct dl_map_plan *p;
	hwloc_bitmap_t within = NULL;
	FILE *null;

	if (size < 2)
		return 0;
	ntasks = 1 + data[0] % 16;
	m = dl_map_open_buffer((const char *)data + 2, size - 2, "fuzz.xml", err, sizeof(err));
	if (!m) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	for (int i = 0; i < 8 && i < dl_map_ngpus(m); i++)
		if (data[1] & (1u << i))
			step[ng++] = i;
	if (data[0] >> 4) {
		if (!(within = hwloc_bitmap_alloc()))
			abort();
		for (unsigned i = 0; i < 1024; i++)
			if ((data[0] >> 4) & (1u << (i % 4)))
				hwloc_bitmap_set(within, i);
	}
	p = dl_map_plan(m, step, ng, NULL, ntasks, within, 1, err, sizeof(err));
	if (p) {
		for (int r = 0; r < ntasks; r++) {
			const struct dl_map_task *t = dl_map_plan_task(p, r), *u;

			if (!t || t->gpu < -1 || t->gpu >= ng || (t->gpu >= 0 && t->node_gpu != step[t->gpu]))
				abort();
			if (within && !hwloc_bitmap_isincluded(t->cpuset, within))
				abort();
			for (int s = 0; s < ntasks && !t->shared; s++)
				if (s != r && (u = dl_map_plan_task(p, s)) && hwloc_bitmap_intersects(t->cpuset, u->cpuset))
					abort();
		}
		if ((null = fopen("/dev/null", "w"))) {
			dl_map_plan_print(null, p, "fuzz");
			fclose(null);
		}
		dl_map_plan_free(p);
	} else if (!err[0]) {
		abort();
	}
	hwloc_bitmap_free(within);
	dl_map_close(m);
	return 0;
}
