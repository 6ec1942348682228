# tests/: the make check suite. Each sub-area adds its tests here.
EXTRA_DIST += tests/cluster/cluster.sh tests/lib.sh
include tests/slurm/local.mk
include tests/engine/local.mk
include tests/data/local.mk
