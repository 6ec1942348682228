# world/test/: the bootstrap layer's unit tests, no cluster: the
# environment it reads (test_world_env, test_run_env), Open MPI's TCP
# interface choice (test_world_ompi, test_mca_ompi.sh), and the
# rendezvous's wire parsers, proofs and limits without sockets
# (test_world_star).  Process-level world tests without a cluster
# (test_world_local, test_world_hostile) run world_check, which the cluster
# tests of tests/slurm/world.mk run too.
check_PROGRAMS += world/test/test_world_env
world_test_test_world_env_SOURCES = world/test/test_world_env.c world/world_env.c world/env.c \
	world/env.h world/world_int.h $(DLJOB_COMMON_SOURCES)
TESTS += world/test/test_world_env
# Who chooses Open MPI's TCP interface (world/world_ompi.c): the user's
# variables and parameter files win; the file scanner.
check_PROGRAMS += world/test/test_world_ompi
world_test_test_world_ompi_SOURCES = world/test/test_world_ompi.c tests/check.h world/world_ompi.c \
	world/world_net.c world/env.c world/env.h common/optval.c world/world_int.h
TESTS += world/test/test_world_ompi
# ... and that scanner against Open MPI's own reading (ompi_info), file by file.
dist_check_SCRIPTS += world/test/test_mca_ompi.sh
TESTS += world/test/test_mca_ompi.sh
# The training command's environment (world/env.c), every bad value by name.
check_PROGRAMS += world/test/test_run_env
world_test_test_run_env_SOURCES = world/test/test_run_env.c tests/check.h world/env.c world/env.h common/optval.c
TESTS += world/test/test_run_env
# The rendezvous's wire parsers, proofs and limits, without sockets.
check_PROGRAMS += world/test/test_world_star
world_test_test_world_star_SOURCES = world/test/test_world_star.c world/world_star.c \
	world/world_net.c world/world_auth.c world/world_int.h
world_test_test_world_star_CFLAGS = $(AM_CFLAGS) $(SODIUM_CFLAGS)
world_test_test_world_star_LDADD = $(SODIUM_LIBS)
TESTS += world/test/test_world_star
# The whole bootstrap and its collectives in one program, run as local
# processes here and as srun tasks by the cluster tests.
check_PROGRAMS += world/test/world_check
world_test_world_check_SOURCES = world/test/world_check.c $(DLJOB_WORLD_SOURCES) $(DLJOB_COMMON_SOURCES)
world_test_world_check_CFLAGS = $(AM_CFLAGS) $(PMIX_CFLAGS) $(MPI_CFLAGS) $(SODIUM_CFLAGS)
world_test_world_check_LDADD = $(PMIX_LIBS) $(MPI_LIBS) $(SODIUM_LIBS)
dist_check_SCRIPTS += world/test/world_lib.sh
# Ranks on loopback without Slurm: single process, TCP joins, a rank
# killed, hung or never started.
dist_check_SCRIPTS += world/test/test_world_local.sh
TESTS += world/test/test_world_local.sh
# Hostile peers of the TCP rendezvous on loopback (issue 19).
dist_check_SCRIPTS += world/test/test_world_hostile.sh world/test/world_stranger.py
TESTS += world/test/test_world_hostile.sh
