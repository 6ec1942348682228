# engine/: the training library.  Sources are added by engine/ref, engine/cpu,
# engine/model.mk, engine/train.mk and engine/cuda fragments.
engine_libdlengine_la_SOURCES += engine/backend.c engine/precision.h engine/precision.c engine/comm_async.h engine/comm_async.c
engine_libdlengine_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(JANSSON_CFLAGS)
# where dl_backend_find looks for the CUDA module last (engine/backend.h)
engine_libdlengine_la_CPPFLAGS = $(AM_CPPFLAGS) -DDLJOB_PKGLIBDIR='"$(pkglibdir)"'
engine_libdlengine_la_LIBADD += $(DNNL_LIBS) $(JANSSON_LIBS) $(OPENMP_CFLAGS) -lm
