# runtime/: the dljob executable (options, engine driver).  World/bootstrap
# sources are in runtime/world.mk.
dljob_SOURCES += runtime/main.c runtime/cli.h runtime/cli.c runtime/optval.h runtime/optval.c
# `dljob topo`: the plugin's own mapping code (one copy, spank/mapping.c).
dljob_SOURCES += runtime/topo.h runtime/topo.c spank/mapping.h spank/mapping.c
# dljob report and the run plot
dljob_SOURCES += runtime/report.h runtime/report.c runtime/plot.h runtime/plot.c
dljob_CPPFLAGS = $(AM_CPPFLAGS) $(HARDEN_CPPFLAGS)
dljob_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS) $(OPENMP_CFLAGS) $(PMIX_CFLAGS) $(MPI_CFLAGS) $(HWLOC_CFLAGS) \
	$(CAIRO_CFLAGS) $(JANSSON_CFLAGS)
dljob_LDADD += $(PMIX_LIBS) $(MPI_LIBS) $(HWLOC_LIBS) $(CAIRO_LIBS) $(JANSSON_LIBS)
dljob_LDFLAGS = $(OPENMP_CFLAGS) $(HARDEN_LDFLAGS)
