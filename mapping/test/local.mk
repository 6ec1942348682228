# mapping/test/: the mapping on real and hand-made hwloc topologies
# (test_map) and `dljob topo` over them (test_topo.sh); no cluster.
check_PROGRAMS += mapping/test/test_map
mapping_test_test_map_SOURCES = mapping/test/test_map.c $(DLJOB_MAPPING_SOURCES)
mapping_test_test_map_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
mapping_test_test_map_LDADD = $(HWLOC_LIBS)
TESTS += mapping/test/test_map mapping/test/test_topo.sh
dist_check_SCRIPTS += mapping/test/test_topo.sh
dist_check_DATA += mapping/test/topologies/2s-8gpu-4hca.xml mapping/test/topologies/shared-nic.xml \
	mapping/test/topologies/no-nic.xml mapping/test/topologies/mgmt-near.xml mapping/test/topologies/mgmt-near-ib.xml \
	mapping/test/topologies/bmc-near.xml mapping/test/topologies/SOURCES.md \
	mapping/test/topologies/bad/README.md mapping/test/topologies/bad/cut-attribute.xml \
	mapping/test/topologies/bad/no-complete-cpuset.xml mapping/test/topologies/bad/pu-bomb-refused.xml \
	mapping/test/topologies/bad/pu-bomb-loads.xml mapping/test/topologies/real/SOURCES.md \
	mapping/test/topologies/real/coral-lassen-hwloc1.xml mapping/test/topologies/real/eas-tioga.xml \
	mapping/test/topologies/real/ipa20.xml mapping/test/topologies/real/p5en.48xl-topo.xml \
	mapping/test/topologies/real/topo.jwb0004.xml mapping/test/topologies/real/tuo.CPX.xml
