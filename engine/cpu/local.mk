# engine/cpu/: the oneDNN CPU backend ("cpu").
engine_libdlengine_la_SOURCES += \
	engine/cpu/cpu_common.h engine/cpu/cpu_common.c engine/cpu/cpu_layers.h \
	engine/cpu/cpu_weights.c engine/cpu/cpu_conv.c engine/cpu/cpu_wino.h engine/cpu/cpu_wino_int.h engine/cpu/cpu_wino_kern.h \
	engine/cpu/cpu_wino.c engine/cpu/cpu_wino_group.c engine/cpu/cpu_wino_panel.c \
	engine/cpu/cpu_wino_wgrad.c engine/cpu/cpu_wino_s2.c \
	engine/cpu/cpu_bn.c engine/cpu/cpu_bn_blk.c engine/cpu/cpu_eltwise.c engine/cpu/cpu_pool.c \
	engine/cpu/cpu_fc.c engine/cpu/cpu_net.c engine/cpu/cpu_backend.h \
	engine/cpu/cpu_ops.h engine/cpu/cpu_ops.c
