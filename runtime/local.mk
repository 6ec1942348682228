# runtime/: the dljob executable (options, engine driver).  World/bootstrap
# sources are in runtime/world.mk.
dljob_SOURCES += runtime/main.c runtime/cli.h runtime/cli.c runtime/optval.h runtime/optval.c \
	runtime/eval.h runtime/eval.c
dljob_CPPFLAGS = $(AM_CPPFLAGS) $(HARDEN_CPPFLAGS)
dljob_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS) $(OPENMP_CFLAGS) $(PMIX_CFLAGS) $(MPI_CFLAGS) $(JANSSON_CFLAGS)
dljob_LDADD += $(PMIX_LIBS) $(MPI_LIBS) $(JANSSON_LIBS)
dljob_LDFLAGS = $(OPENMP_CFLAGS) $(HARDEN_LDFLAGS)
