# tests/slurm/spank.mk: the SPANK plugin and the GPU/NIC/NUMA mapping.
check_PROGRAMS += tests/slurm/test_map
tests_slurm_test_map_SOURCES = tests/slurm/test_map.c mapping/mapping.c mapping/mapping.h
tests_slurm_test_map_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
tests_slurm_test_map_LDADD = $(HWLOC_LIBS)
TESTS += tests/slurm/test_map tests/slurm/test_topo.sh
dist_check_SCRIPTS += tests/slurm/test_topo.sh
dist_check_DATA += tests/slurm/topologies/2s-8gpu-4hca.xml tests/slurm/topologies/shared-nic.xml \
	tests/slurm/topologies/no-nic.xml tests/slurm/topologies/mgmt-near.xml tests/slurm/topologies/mgmt-near-ib.xml \
	tests/slurm/topologies/bmc-near.xml tests/slurm/topologies/SOURCES.md \
	tests/slurm/topologies/bad/README.md tests/slurm/topologies/bad/cut-attribute.xml \
	tests/slurm/topologies/bad/no-complete-cpuset.xml tests/slurm/topologies/bad/pu-bomb-refused.xml \
	tests/slurm/topologies/bad/pu-bomb-loads.xml tests/slurm/topologies/real/SOURCES.md \
	tests/slurm/topologies/real/coral-lassen-hwloc1.xml tests/slurm/topologies/real/eas-tioga.xml \
	tests/slurm/topologies/real/ipa20.xml tests/slurm/topologies/real/p5en.48xl-topo.xml \
	tests/slurm/topologies/real/topo.jwb0004.xml tests/slurm/topologies/real/tuo.CPX.xml
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
check_PROGRAMS += tests/slurm/test_spank_units
tests_slurm_test_spank_units_SOURCES = tests/slurm/test_spank_units.c spank/args.c spank/nodes.c common/master.c \
	common/master.h common/hostlist.c common/hostlist.h common/optval.c common/optval.h spank/plugin.h
TESTS += tests/slurm/test_spank_units
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
