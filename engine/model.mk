# engine/model.mk: model zoo, loss, optimizer, LR schedules, safetensors I/O.
engine_libdlengine_la_SOURCES += \
	engine/model.h engine/resnet.c \
	engine/loss.h engine/loss.c \
	engine/optim.h engine/optim.c \
	engine/schedule.h engine/schedule.c \
	engine/safetensors.h engine/safetensors.c
