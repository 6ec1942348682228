# engine/test/: the engine's unit tests, no cluster and no dljob command:
# oneDNN ops and whole networks against the float64 reference, bf16,
# models, loss, optimizer, schedules, safetensors, the gradient check, the
# torchvision-equivalence test, the memory planner, the checkpoint reader.
# (The dljob command end to end: tests/train/.)
# tests/train/ops.mk: oneDNN ops and whole-network backends vs the float64 reference.
check_PROGRAMS += engine/test/test_ops engine/test/test_net
TESTS += engine/test/test_ops engine/test/test_net
EXTRA_DIST += engine/test/test_ops_util.h
engine_test_test_ops_SOURCES = engine/test/test_ops.c engine/test/test_ops_util.h
engine_test_test_ops_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
engine_test_test_ops_LDADD = engine/libdlengine.la -lm
engine_test_test_net_SOURCES = engine/test/test_net.c engine/test/test_ops_util.h
engine_test_test_net_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
engine_test_test_net_LDADD = engine/libdlengine.la -lm
# The same network with 32-channel blocks: the own nChw16c batch norm and its
# fusions with the residual add.
check_PROGRAMS += engine/test/test_net_blk
TESTS += engine/test/test_net_blk
engine_test_test_net_blk_SOURCES = engine/test/test_net_blk.c
engine_test_test_net_blk_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
engine_test_test_net_blk_LDADD = engine/libdlengine.la -lm
# bf16 mixed precision (--precision bf16) of the same network.
check_PROGRAMS += engine/test/test_bf16_ops engine/test/test_bf16_net
TESTS += engine/test/test_bf16_ops engine/test/test_bf16_net
engine_test_test_bf16_ops_SOURCES = engine/test/test_bf16_ops.c engine/test/test_ops_util.h
engine_test_test_bf16_ops_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
engine_test_test_bf16_ops_LDADD = engine/libdlengine.la -lm
engine_test_test_bf16_net_SOURCES = engine/test/test_bf16_net.c
engine_test_test_bf16_net_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
engine_test_test_bf16_net_LDADD = engine/libdlengine.la -lm
# Bucketed gradient reduction overlapped with backward, two ranks over a socketpair.
check_PROGRAMS += engine/test/test_overlap
TESTS += engine/test/test_overlap
engine_test_test_overlap_SOURCES = engine/test/test_overlap.c
engine_test_test_overlap_LDADD = engine/libdlengine.la -lm
# tests/train/model.mk: models, loss, optimizer, schedules, safetensors,
# gradient check and the torchvision-equivalence test.
check_PROGRAMS += engine/test/engine_step engine/test/test_model engine/test/test_gradcheck
engine_test_engine_step_SOURCES = engine/test/engine_step.c
engine_test_engine_step_LDADD = engine/libdlengine.la -lm
engine_test_test_model_SOURCES = engine/test/test_model.c
engine_test_test_model_LDADD = engine/libdlengine.la -lm
engine_test_test_gradcheck_SOURCES = engine/test/test_gradcheck.c
engine_test_test_gradcheck_LDADD = engine/libdlengine.la -lm
dist_check_SCRIPTS += engine/test/test_torchvision.py
TESTS += engine/test/test_model engine/test/test_gradcheck engine/test/test_torchvision.py
# memory by lifetime (engine/memplan.h): hand-computed plans, the checker on
# every model's cuda arena, the poisoned ref step (~1 min)
check_PROGRAMS += engine/test/test_memplan
engine_test_test_memplan_SOURCES = engine/test/test_memplan.c
engine_test_test_memplan_LDADD = engine/libdlengine.la -lm
TESTS += engine/test/test_memplan
# The checkpoint reader on hostile files; from its sources (not libdlengine)
# so that make check-asan runs it too.
check_PROGRAMS += engine/test/test_checkpoint_parse
TESTS += engine/test/test_checkpoint_parse
engine_test_test_checkpoint_parse_SOURCES = engine/test/test_checkpoint_parse.c tests/check.h \
	engine/checkpoint.c engine/safetensors.c engine/optim.c
engine_test_test_checkpoint_parse_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(JANSSON_CFLAGS)
engine_test_test_checkpoint_parse_LDFLAGS = $(OPENMP_CFLAGS)
engine_test_test_checkpoint_parse_LDADD = $(JANSSON_LIBS) -lm
