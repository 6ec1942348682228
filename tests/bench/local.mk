# tests/bench/: the benchmarks are run by hand (their headers say how; their
# programs are built here and in tests/gpu/local.mk).  make check
# only starts each once at its smallest setting (test_bench_smoke.sh, seconds).
TESTS += tests/bench/test_bench_smoke.sh
dist_check_SCRIPTS += tests/bench/test_bench_smoke.sh
# bench_launch.sh's helpers are checked by test_bench_smoke.sh
EXTRA_DIST += tests/bench/bench_launch.sh tests/bench/bench_launch_lib.sh tests/bench/bench_launch_torch.py
# Conv GFLOP/s on resnet50 shapes, built by make check but run by hand.
check_PROGRAMS += tests/bench/bench_ops
tests_bench_bench_ops_SOURCES = tests/bench/bench_ops.c
tests_bench_bench_ops_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_bench_bench_ops_LDADD = engine/libdlengine.la -lm
# Batch norm, own nChw16c kernels against oneDNN's; built by make check, run by hand.
check_PROGRAMS += tests/bench/bench_bn
tests_bench_bench_bn_SOURCES = tests/bench/bench_bn.c
tests_bench_bench_bn_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_bench_bench_bn_LDADD = engine/libdlengine.la -lm
# Throughput benchmark, built by make check but run by hand: tests/bench/bench_engine.sh
check_PROGRAMS += tests/bench/bench_engine
tests_bench_bench_engine_SOURCES = tests/bench/bench_engine.c
tests_bench_bench_engine_LDADD = engine/libdlengine.la -lm
EXTRA_DIST += tests/bench/bench_engine.sh tests/bench/bench_engine_torch.py \
	tests/bench/bench_dp.sh tests/bench/bench_dp_torch.py
# the data benchmark, run by hand (tests/bench/bench_data.sh)
EXTRA_DIST += tests/bench/bench_data.sh tests/bench/bench_data_fixture.py tests/bench/bench_data_torch.py
