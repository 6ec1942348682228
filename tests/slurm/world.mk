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
check_PROGRAMS += tests/slurm/test_world_env
tests_slurm_test_world_env_SOURCES = tests/slurm/test_world_env.c world/world_env.c world/env.c \
	world/env.h common/optval.c common/master.c common/master.h common/hostlist.c \
	common/hostlist.h world/world_int.h
TESTS += tests/slurm/test_world_env
# The one parser of Slurm node lists (common/hostlist.c), for the plugin and the runtime.
check_PROGRAMS += tests/slurm/test_hostlist
tests_slurm_test_hostlist_SOURCES = tests/slurm/test_hostlist.c tests/data/check.h common/hostlist.c \
	common/hostlist.h common/optval.c
TESTS += tests/slurm/test_hostlist
# Who chooses Open MPI's TCP interface (world/world_ompi.c): the user's
# variables and parameter files win; the file scanner.
check_PROGRAMS += tests/slurm/test_world_ompi
tests_slurm_test_world_ompi_SOURCES = tests/slurm/test_world_ompi.c tests/data/check.h world/world_ompi.c \
	world/world_net.c world/env.c world/env.h common/optval.c world/world_int.h
TESTS += tests/slurm/test_world_ompi
# ... and that scanner against Open MPI's own reading (ompi_info), file by file.
dist_check_SCRIPTS += tests/slurm/test_mca_ompi.sh
TESTS += tests/slurm/test_mca_ompi.sh
# The training command's environment (world/env.c), every bad value by name.
check_PROGRAMS += tests/slurm/test_run_env
tests_slurm_test_run_env_SOURCES = tests/slurm/test_run_env.c tests/data/check.h world/env.c world/env.h common/optval.c
TESTS += tests/slurm/test_run_env
# An LD_PRELOAD shim that hangs one rank inside MPI_Init_thread/MPI_Finalize.
check_LTLIBRARIES += tests/slurm/libmpihang.la
tests_slurm_libmpihang_la_SOURCES = tests/slurm/mpi_hang.c
tests_slurm_libmpihang_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_slurm_libmpihang_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_slurm_libmpihang_la_LIBADD = $(MPI_LIBS)
# The rendezvous's wire parsers, proofs and limits, without sockets.
check_PROGRAMS += tests/slurm/test_world_star
tests_slurm_test_world_star_SOURCES = tests/slurm/test_world_star.c world/world_star.c \
	world/world_net.c world/world_auth.c world/world_int.h
tests_slurm_test_world_star_CFLAGS = $(AM_CFLAGS) $(SODIUM_CFLAGS)
tests_slurm_test_world_star_LDADD = $(SODIUM_LIBS)
TESTS += tests/slurm/test_world_star
