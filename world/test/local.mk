# world/test/: the bootstrap layer's unit tests, no cluster: the
# environment it reads (test_world_env, test_run_env), Open MPI's TCP
# interface choice (test_world_ompi, test_mca_ompi.sh), and the
# rendezvous's wire parsers, proofs and limits without sockets
# (test_world_star).  Process-level world tests: tests/slurm/world.mk.
check_PROGRAMS += world/test/test_world_env
world_test_test_world_env_SOURCES = world/test/test_world_env.c world/world_env.c world/env.c \
	world/env.h world/world_int.h $(DLJOB_COMMON_SOURCES)
TESTS += world/test/test_world_env
# Who chooses Open MPI's TCP interface (world/world_ompi.c): the user's
# variables and parameter files win; the file scanner.
check_PROGRAMS += world/test/test_world_ompi
world_test_test_world_ompi_SOURCES = world/test/test_world_ompi.c tests/data/check.h world/world_ompi.c \
	world/world_net.c world/env.c world/env.h common/optval.c world/world_int.h
TESTS += world/test/test_world_ompi
# ... and that scanner against Open MPI's own reading (ompi_info), file by file.
dist_check_SCRIPTS += world/test/test_mca_ompi.sh
TESTS += world/test/test_mca_ompi.sh
# The training command's environment (world/env.c), every bad value by name.
check_PROGRAMS += world/test/test_run_env
world_test_test_run_env_SOURCES = world/test/test_run_env.c tests/data/check.h world/env.c world/env.h common/optval.c
TESTS += world/test/test_run_env
# The rendezvous's wire parsers, proofs and limits, without sockets.
check_PROGRAMS += world/test/test_world_star
world_test_test_world_star_SOURCES = world/test/test_world_star.c world/world_star.c \
	world/world_net.c world/world_auth.c world/world_int.h
world_test_test_world_star_CFLAGS = $(AM_CFLAGS) $(SODIUM_CFLAGS)
world_test_test_world_star_LDADD = $(SODIUM_LIBS)
TESTS += world/test/test_world_star
