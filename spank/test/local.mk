# spank/test/: the plugin's pure parts without a cluster (plugstack
# arguments, node-local ranks, the rendezvous address).
check_PROGRAMS += spank/test/test_spank_units
spank_test_test_spank_units_SOURCES = spank/test/test_spank_units.c spank/args.c spank/nodes.c spank/plugin.h \
	$(DLJOB_COMMON_SOURCES)
TESTS += spank/test/test_spank_units
# The plugin's option table and models, listed for tests/test_man_tables.sh.
check_PROGRAMS += spank/test/list_spank_options
spank_test_list_spank_options_SOURCES = spank/test/list_spank_options.c spank/options.c common/optval.c
spank_test_list_spank_options_LDADD = -lm
