# tests/: the make check suite.  Each area has its own fragment.
EXTRA_DIST += tests/cluster/cluster.sh tests/lib.sh tests/tiny_imagefolder.py
# Build hardening of dljob.so and dljob (configure.ac HARDEN_*).
TESTS += tests/test_hardening.sh
dist_check_SCRIPTS += tests/test_hardening.sh
include tests/cluster/local.mk
include tests/engine/ops.mk
include tests/engine/model.mk
include tests/engine/train.mk
include tests/data/local.mk
include tests/slurm/spank.mk
include tests/slurm/world.mk
include tests/slurm/dataparallel.mk
include tests/gpu/local.mk
