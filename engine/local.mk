# engine/: the training library (device-neutral core + backends). Owned by the engine.
noinst_LTLIBRARIES += engine/libdlengine.la
engine_libdlengine_la_SOURCES = \
	engine/graph.h engine/backend.h engine/comm.h engine/placeholder.c
engine_libdlengine_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
engine_libdlengine_la_LIBADD = $(DNNL_LIBS)
