# tests/engine/model.mk: models, loss, optimizer, schedules, safetensors,
# gradient check and the torchvision-equivalence test.
check_PROGRAMS += tests/engine/engine_step tests/engine/test_model tests/engine/test_gradcheck
tests_engine_engine_step_SOURCES = tests/engine/engine_step.c
tests_engine_engine_step_LDADD = engine/libdlengine.la -lm
tests_engine_test_model_SOURCES = tests/engine/test_model.c
tests_engine_test_model_LDADD = engine/libdlengine.la -lm
tests_engine_test_gradcheck_SOURCES = tests/engine/test_gradcheck.c
tests_engine_test_gradcheck_LDADD = engine/libdlengine.la -lm
dist_check_SCRIPTS += tests/engine/test_torchvision.py
TESTS += tests/engine/test_model tests/engine/test_gradcheck tests/engine/test_torchvision.py
# memory by lifetime (engine/memplan.h): hand-computed plans, the checker on
# every model's cuda arena, the poisoned ref step (~1 min)
check_PROGRAMS += tests/engine/test_memplan
tests_engine_test_memplan_SOURCES = tests/engine/test_memplan.c
tests_engine_test_memplan_LDADD = engine/libdlengine.la -lm
TESTS += tests/engine/test_memplan
# Interop (issue 16): dljob eval against torchvision's evaluation of a
# torchvision-trained resnet18, --init and fine-tuning with --init-head new,
# on the photos in tests/data/photos (where they come from: SOURCES.md there)
dist_check_SCRIPTS += tests/engine/test_interop.py
TESTS += tests/engine/test_interop.py
EXTRA_DIST += tests/data/photos
# Throughput benchmark, built by make check but run by hand: tests/bench/bench_engine.sh
check_PROGRAMS += tests/bench/bench_engine
tests_bench_bench_engine_SOURCES = tests/bench/bench_engine.c
tests_bench_bench_engine_LDADD = engine/libdlengine.la -lm
EXTRA_DIST += tests/bench/bench_engine.sh tests/bench/bench_engine_torch.py \
	tests/bench/bench_dp.sh tests/bench/bench_dp_torch.py
# The checkpoint reader on hostile files; from its sources (not libdlengine)
# so that make check-asan runs it too.
check_PROGRAMS += tests/engine/test_checkpoint_parse
TESTS += tests/engine/test_checkpoint_parse
tests_engine_test_checkpoint_parse_SOURCES = tests/engine/test_checkpoint_parse.c tests/data/check.h \
	engine/checkpoint.c engine/safetensors.c engine/optim.c
tests_engine_test_checkpoint_parse_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(JANSSON_CFLAGS)
tests_engine_test_checkpoint_parse_LDFLAGS = $(OPENMP_CFLAGS)
tests_engine_test_checkpoint_parse_LDADD = $(JANSSON_LIBS) -lm
