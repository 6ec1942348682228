# common/test/: the one parser of Slurm node lists (common/hostlist.c), for
# the plugin and the runtime.
check_PROGRAMS += common/test/test_hostlist
common_test_test_hostlist_SOURCES = common/test/test_hostlist.c tests/check.h common/hostlist.c \
	common/hostlist.h common/optval.c
TESTS += common/test/test_hostlist
