# tests/slurm/world.mk: the world bootstrap (PMIx, TCP, single) and its
# collectives, on the private Slurm cluster and as local processes.
check_PROGRAMS += tests/slurm/world_check
tests_slurm_world_check_SOURCES = tests/slurm/world_check.c $(DLJOB_WORLD_SOURCES) $(DLJOB_COMMON_SOURCES)
tests_slurm_world_check_CFLAGS = $(AM_CFLAGS) $(PMIX_CFLAGS) $(MPI_CFLAGS) $(SODIUM_CFLAGS)
tests_slurm_world_check_LDADD = $(PMIX_LIBS) $(MPI_LIBS) $(SODIUM_LIBS)
dist_check_SCRIPTS += tests/slurm/test_world_local.sh tests/slurm/test_world_tcp.sh \
	tests/slurm/test_world_pmix.sh tests/slurm/test_world_fail.sh tests/slurm/world_lib.sh
TESTS += tests/slurm/test_world_local.sh tests/slurm/test_world_tcp.sh \
	tests/slurm/test_world_pmix.sh tests/slurm/test_world_fail.sh tests/slurm/test_world_hostile.sh
# Hostile peers of the TCP rendezvous on loopback (issue 19).
dist_check_SCRIPTS += tests/slurm/test_world_hostile.sh tests/slurm/world_stranger.py
EXTRA_DIST += tests/bench/bench_launch.sh tests/bench/bench_launch_torch.py
# An LD_PRELOAD shim that hangs one rank inside MPI_Init_thread/MPI_Finalize.
check_LTLIBRARIES += tests/slurm/libmpihang.la
tests_slurm_libmpihang_la_SOURCES = tests/slurm/mpi_hang.c
tests_slurm_libmpihang_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_slurm_libmpihang_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_slurm_libmpihang_la_LIBADD = $(MPI_LIBS)
