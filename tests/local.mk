# tests/: the make check suite.  Each area has its own fragment.
EXTRA_DIST += tests/cluster/cluster.sh tests/cluster/slurm-conf.sh tests/lib.sh tests/tiny_imagefolder.py tests/fmnist_subset.py
# Build hardening of dljob.so and dljob (configure.ac HARDEN_*).
TESTS += tests/test_hardening.sh
dist_check_SCRIPTS += tests/test_hardening.sh
# make install-relocatable: the runtime in a root with glibc only.
TESTS += tests/test_relocatable.sh
dist_check_SCRIPTS += tests/test_relocatable.sh
# The plugin's fuzz targets: built and run by make check-asan once
# tests/fuzz/local.mk includes tests/fuzz/spank.mk.
EXTRA_DIST += tests/fuzz/spank.mk tests/fuzz/fuzz_plugstack.c tests/fuzz/fuzz_options.c tests/fuzz/fuzz_master.c \
	tests/fuzz/fuzz_hostlist.c \
	tests/fuzz/corpus/fuzz_plugstack tests/fuzz/corpus/fuzz_options tests/fuzz/corpus/fuzz_master \
	tests/fuzz/corpus/fuzz_hostlist
include tests/cluster/local.mk
include tests/current/local.mk
include tests/train/local.mk
include tests/slurm/spank.mk
include tests/slurm/world.mk
include tests/slurm/dataparallel.mk
include tests/gpu/local.mk
include tests/bench/local.mk
include tests/packages/local.mk
# The man pages name every row of the option, model and DLJOB_* tables.
TESTS += tests/test_man_tables.sh
dist_check_SCRIPTS += tests/test_man_tables.sh
include tests/cgroup2/local.mk
