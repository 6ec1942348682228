# mapping/: the GPU -> NIC -> NUMA/CPU mapping library (hwloc), used by the
# plugin (spank/), by `dljob topo` (runtime/topo.c) and by its tests.
DLJOB_MAPPING_SOURCES = mapping/mapping.c mapping/mapping.h
