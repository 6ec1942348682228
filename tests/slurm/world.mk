# tests/slurm/world.mk: the world bootstrap (PMIx, TCP) and its
# collectives on the private Slurm cluster, with world/test/world_check
# (the local and hostile-peer tests without a cluster: world/test/local.mk).
dist_check_SCRIPTS += tests/slurm/test_world_tcp.sh tests/slurm/test_world_pmix.sh tests/slurm/test_world_fail.sh
TESTS += tests/slurm/test_world_tcp.sh tests/slurm/test_world_pmix.sh tests/slurm/test_world_fail.sh
EXTRA_DIST += tests/bench/bench_launch.sh tests/bench/bench_launch_torch.py
# An LD_PRELOAD shim that hangs one rank inside MPI_Init_thread/MPI_Finalize.
check_LTLIBRARIES += tests/slurm/libmpihang.la
tests_slurm_libmpihang_la_SOURCES = tests/slurm/mpi_hang.c
tests_slurm_libmpihang_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_slurm_libmpihang_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_slurm_libmpihang_la_LIBADD = $(MPI_LIBS)
