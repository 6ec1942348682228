# tests/slurm/spank.mk: the SPANK plugin on a private cluster (unit tests: spank/test/).
# Cluster tests: each starts its own private cluster (tests/cluster/cluster.sh).
TESTS += tests/slurm/test_spank_options.sh tests/slurm/test_spank_env.sh tests/slurm/test_spank_model.sh \
	tests/slurm/test_spank_bind.sh tests/slurm/test_spank_sbatch.sh tests/slurm/test_spank_train.sh \
	tests/slurm/test_spank_setup.sh tests/slurm/test_spank_xhang.sh tests/slurm/test_spank_gpus.sh tests/slurm/test_spank_gpus_cgroup.sh \
	tests/slurm/test_spank_logs.sh tests/slurm/test_spank_misconf.sh tests/slurm/test_spank_ports.sh \
	tests/slurm/test_spank_cpuset.sh tests/slurm/test_spank_layout.sh
dist_check_SCRIPTS += tests/slurm/test_spank_options.sh tests/slurm/test_spank_env.sh \
	tests/slurm/test_spank_model.sh tests/slurm/test_spank_bind.sh tests/slurm/test_spank_sbatch.sh \
	tests/slurm/test_spank_train.sh tests/slurm/test_spank_setup.sh tests/slurm/test_spank_xhang.sh \
	tests/slurm/test_spank_gpus.sh tests/slurm/test_spank_gpus_cgroup.sh tests/slurm/test_spank_logs.sh \
	tests/slurm/test_spank_fake_runtime.sh tests/slurm/test_spank_misconf.sh tests/slurm/test_spank_ports.sh \
	tests/slurm/test_spank_cpuset.sh tests/slurm/test_spank_layout.sh
# The sbatch templates are shipped (and run by test_spank_sbatch.sh as they are).
EXTRA_DIST += contrib/sbatch/dljob-1node.sbatch contrib/sbatch/dljob-multinode.sbatch \
	contrib/sbatch/dljob-preemptible.sbatch
dist_check_DATA += tests/slurm/test_spank_lib.bash
# A second SPANK plugin listed after dljob.so (test_spank_setup.sh).
check_LTLIBRARIES += tests/slurm/marker_spank.la
tests_slurm_marker_spank_la_SOURCES = tests/slurm/marker_spank.c
tests_slurm_marker_spank_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/tests/slurm
# A stand-in for pyxis (--container-image: image environment, own mount
# namespace), listed before or after dljob.so (test_spank_container.sh).
check_LTLIBRARIES += tests/slurm/container_spank.la
tests_slurm_container_spank_la_SOURCES = tests/slurm/container_spank.c
tests_slurm_container_spank_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/tests/slurm
TESTS += tests/slurm/test_spank_container.sh tests/slurm/test_spank_paths.sh
dist_check_SCRIPTS += tests/slurm/test_spank_container.sh tests/slurm/test_spank_paths.sh
# A program that needs a shared library of the build tree (RUNPATH), whose
# library test_spank_container.sh hides from the "container".
check_LTLIBRARIES += tests/slurm/libdljob_testdep.la
tests_slurm_libdljob_testdep_la_SOURCES = tests/slurm/testdep.c
tests_slurm_libdljob_testdep_la_LDFLAGS = -avoid-version -shared -rpath /nowhere
check_PROGRAMS += tests/slurm/needs_lib
tests_slurm_needs_lib_SOURCES = tests/slurm/needs_lib.c
tests_slurm_needs_lib_LDADD = tests/slurm/libdljob_testdep.la
tests_slurm_needs_lib_LDFLAGS = -no-install
