# runtime/world*: joining the job's process group (single, PMIx, TCP) and collectives.
DLJOB_WORLD_SOURCES = runtime/world.h runtime/world_int.h runtime/world_open.c \
	runtime/world_single.c runtime/world_env.c common/master.c common/master.h common/hostlist.c common/hostlist.h runtime/world_net.c \
	runtime/world_auth.c runtime/world_star.c runtime/world_ring.c runtime/world_tcp.c runtime/world_pmix.c \
	runtime/world_ompi.c runtime/env.h runtime/env.c
# (they quote bad values with common/optval.c, which runtime/local.mk lists)
dljob_SOURCES += $(DLJOB_WORLD_SOURCES)
# libsodium: the rendezvous's challenge-response (runtime/world_auth.c).
dljob_CFLAGS += $(SODIUM_CFLAGS)
dljob_LDADD += $(SODIUM_LIBS)
