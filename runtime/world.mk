# runtime/world*: joining the job's process group (single, PMIx, TCP) and collectives.
dljob_SOURCES += runtime/world.h runtime/world_single.c
