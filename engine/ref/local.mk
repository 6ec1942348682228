# engine/ref/: the float64 plain C reference backend ("ref").
engine_libdlengine_la_SOURCES += \
	engine/ref/ref_ops.h engine/ref/ref_backend.h engine/ref/ref_backend.c \
	engine/ref/ref_conv.c engine/ref/ref_bn.c engine/ref/ref_relu.c engine/ref/ref_add.c \
	engine/ref/ref_pool.c engine/ref/ref_fc.c
