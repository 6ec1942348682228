# world/: joining the job's process group (single, PMIx, TCP rendezvous) and
# the collectives; env.c parses the environment the runtime reads.  Uses
# common/ (option values, node lists, the master address).
DLJOB_WORLD_SOURCES = world/world.h world/world_int.h world/world_open.c \
	world/world_single.c world/world_env.c world/world_net.c \
	world/world_auth.c world/world_star.c world/world_ring.c world/world_tcp.c world/world_pmix.c \
	world/world_ompi.c world/env.h world/env.c
dljob_SOURCES += $(DLJOB_WORLD_SOURCES)
# libsodium: the rendezvous's challenge-response (world/world_auth.c).
dljob_CFLAGS += $(SODIUM_CFLAGS)
dljob_LDADD += $(SODIUM_LIBS)
