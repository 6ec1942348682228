# spank/: the SPANK plugin dljob.so and its hwloc mapping library.
slurm_plugin_LTLIBRARIES = dljob.la
slurm_plugindir = @slurm_plugindir@
dljob_la_SOURCES = spank/plugin.c spank/plugin.h spank/options.c spank/args.c \
	spank/local.c spank/remote.c spank/nodes.c common/master.c common/master.h common/hostlist.c common/hostlist.h common/optval.c common/optval.h \
	mapping/mapping.c mapping/mapping.h spank/slurm_api.h
dljob_la_CPPFLAGS = $(AM_CPPFLAGS) $(HARDEN_CPPFLAGS) -DDLJOB_RUNTIME_DEFAULT=\"$(bindir)/dljob\"
dljob_la_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS) $(HWLOC_CFLAGS)
dljob_la_LIBADD = $(HWLOC_LIBS) -lm
dljob_la_LDFLAGS = -module -avoid-version -shared $(HARDEN_LDFLAGS) \
	-Wl,--version-script=$(top_srcdir)/spank/dljob.map
EXTRA_DIST += spank/dljob.map
