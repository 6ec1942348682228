# common/: what both front ends (the plugin dljob.so, the dljob executable)
# compile: option values and their limits (optval), Slurm node lists
# (hostlist), the rendezvous address and ports (master), and the one
# error helper (err.h, which the engine uses too).
DLJOB_COMMON_SOURCES = common/err.h common/optval.c common/optval.h common/hostlist.c common/hostlist.h \
	common/master.c common/master.h common/handoff.h \
	common/models.h
