# spank/: the SPANK plugin dljob.so, a front end of common/ and mapping/.
slurm_plugin_LTLIBRARIES = dljob.la
slurm_plugindir = @slurm_plugindir@
dljob_la_SOURCES = spank/plugin.c spank/plugin.h spank/options.c spank/args.c \
	spank/local.c spank/remote.c spank/model.c spank/nodes.c spank/slurm_api.h \
	$(DLJOB_COMMON_SOURCES) $(DLJOB_MAPPING_SOURCES)
dljob_la_CPPFLAGS = $(AM_CPPFLAGS) $(HARDEN_CPPFLAGS) -DDLJOB_RUNTIME_DEFAULT=\"$(bindir)/dljob\"
dljob_la_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS) $(HWLOC_CFLAGS)
dljob_la_LIBADD = $(HWLOC_LIBS) -lm
dljob_la_LDFLAGS = -module -avoid-version -shared $(HARDEN_LDFLAGS) \
	-Wl,--version-script=$(top_srcdir)/spank/dljob.map
EXTRA_DIST += spank/dljob.map
