# mapping/: the GPU -> NIC -> NUMA/CPU mapping library (hwloc), used by the
# plugin (spank/), by `dljob topo` (runtime/topo.c) and by its tests.
# mapping.h is its API; internal.h what its parts share: load.c (the
# topology), plan.c (the plan), print.c (the table), parse.c (lists).
DLJOB_MAPPING_SOURCES = mapping/mapping.h mapping/internal.h mapping/load.c mapping/plan.c \
	mapping/print.c mapping/parse.c
