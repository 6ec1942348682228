# engine/train.mk: the training loop, metrics log and checkpoints.
engine_libdlengine_la_SOURCES += \
	engine/train.h engine/train.c \
	engine/checkpoint.h engine/checkpoint.c \
	engine/metrics.h engine/metrics.c
