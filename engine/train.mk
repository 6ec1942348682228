# engine/train.mk: the training loop, metrics log and checkpoints.
engine_libdlengine_la_SOURCES += \
	engine/train.h engine/train.c \
	engine/checkpoint.h engine/checkpoint.c \
	engine/metrics.h engine/metrics.c
# TensorBoard event files: tfevent.proto compiled by protoc-c.  The C it
# generates is distributed (like a parser generator's output), so a build
# from `make dist` (the GPU bundle) needs no protoc-c.
engine_libdlengine_la_SOURCES += engine/tfevents.h engine/tfevents.c engine/metrics_read.c \
	engine/tfevent.pb-c.c engine/tfevent.pb-c.h
engine_libdlengine_la_CPPFLAGS += $(PROTOBUFC_CFLAGS) $(JANSSON_CFLAGS)
engine_libdlengine_la_LIBADD += $(PROTOBUFC_LIBS) $(JANSSON_LIBS)
BUILT_SOURCES += engine/tfevent.pb-c.c engine/tfevent.pb-c.h
MAINTAINERCLEANFILES = engine/tfevent.pb-c.c engine/tfevent.pb-c.h
EXTRA_DIST += engine/tfevent.proto
engine/tfevent.pb-c.h: engine/tfevent.pb-c.c
engine/tfevent.pb-c.c: $(srcdir)/engine/tfevent.proto
	$(AM_V_GEN)if test -z "$(PROTOC_C)"; then \
	  echo "$@: protoc-c not found: install the Debian package protobuf-c-compiler" >&2; exit 1; fi; \
	$(MKDIR_P) engine && $(PROTOC_C) --proto_path=$(srcdir) --c_out=. $(srcdir)/engine/tfevent.proto
