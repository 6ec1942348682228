# common/: what both front ends (the plugin dljob.so, the dljob executable)
# compile: option values and their limits (optval), Slurm node lists
# (hostlist), the rendezvous address and ports (master).
DLJOB_COMMON_SOURCES = common/optval.c common/optval.h common/hostlist.c common/hostlist.h \
	common/master.c common/master.h common/handoff.h \
	common/models.h
