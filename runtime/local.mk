# runtime/: the dljob executable (options, bootstrap, collectives, engine driver).
bin_PROGRAMS += dljob
dljob_SOURCES = runtime/main.c runtime/world.h runtime/world_single.c
dljob_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(PMIX_CFLAGS) $(MPI_CFLAGS)
dljob_LDADD = engine/libdlengine.la engine/data/libdldata.la $(PMIX_LIBS) $(MPI_LIBS)
dljob_LDFLAGS = $(OPENMP_CFLAGS)
