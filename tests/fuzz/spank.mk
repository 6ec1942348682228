# tests/fuzz/spank.mk: libFuzzer targets for the SPANK plugin's parsers of
# untrusted bytes (conventions: tests/fuzz/local.mk, which includes this
# fragment after it sets FUZZ_TARGETS and FUZZ_LINKFLAGS).
FUZZ_TARGETS += tests/fuzz/fuzz_plugstack
tests_fuzz_fuzz_plugstack_SOURCES = tests/fuzz/fuzz_plugstack.c spank/args.c common/master.c common/optval.c
tests_fuzz_fuzz_plugstack_LDFLAGS = $(FUZZ_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_options
tests_fuzz_fuzz_options_SOURCES = tests/fuzz/fuzz_options.c spank/options.c common/optval.c $(DLJOB_MAPPING_SOURCES)
tests_fuzz_fuzz_options_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
tests_fuzz_fuzz_options_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_options_LDADD = $(HWLOC_LIBS) -lm

FUZZ_TARGETS += tests/fuzz/fuzz_topology
tests_fuzz_fuzz_topology_SOURCES = tests/fuzz/fuzz_topology.c $(DLJOB_MAPPING_SOURCES)
tests_fuzz_fuzz_topology_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
tests_fuzz_fuzz_topology_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_topology_LDADD = $(HWLOC_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_master
tests_fuzz_fuzz_master_SOURCES = tests/fuzz/fuzz_master.c common/master.c
tests_fuzz_fuzz_master_LDFLAGS = $(FUZZ_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_hostlist
tests_fuzz_fuzz_hostlist_SOURCES = tests/fuzz/fuzz_hostlist.c common/hostlist.c common/optval.c
tests_fuzz_fuzz_hostlist_LDFLAGS = $(FUZZ_LINKFLAGS)
