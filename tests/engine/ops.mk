# tests/engine/ops.mk: oneDNN ops and whole-network backends vs the float64 reference.
check_PROGRAMS += tests/engine/test_ops tests/engine/test_net
TESTS += tests/engine/test_ops tests/engine/test_net
EXTRA_DIST += tests/engine/test_ops_util.h
tests_engine_test_ops_SOURCES = tests/engine/test_ops.c tests/engine/test_ops_util.h
tests_engine_test_ops_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_engine_test_ops_LDADD = engine/libdlengine.la -lm
tests_engine_test_net_SOURCES = tests/engine/test_net.c tests/engine/test_ops_util.h
tests_engine_test_net_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_engine_test_net_LDADD = engine/libdlengine.la -lm
# The same network with 32-channel blocks: the own nChw16c batch norm and its
# fusions with the residual add.
check_PROGRAMS += tests/engine/test_net_blk
TESTS += tests/engine/test_net_blk
tests_engine_test_net_blk_SOURCES = tests/engine/test_net_blk.c
tests_engine_test_net_blk_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_engine_test_net_blk_LDADD = engine/libdlengine.la -lm
# bf16 mixed precision (--precision bf16) of the same network.
check_PROGRAMS += tests/engine/test_bf16_ops tests/engine/test_bf16_net
TESTS += tests/engine/test_bf16_ops tests/engine/test_bf16_net
tests_engine_test_bf16_ops_SOURCES = tests/engine/test_bf16_ops.c tests/engine/test_ops_util.h
tests_engine_test_bf16_ops_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_engine_test_bf16_ops_LDADD = engine/libdlengine.la -lm
tests_engine_test_bf16_net_SOURCES = tests/engine/test_bf16_net.c
tests_engine_test_bf16_net_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_engine_test_bf16_net_LDADD = engine/libdlengine.la -lm
# --precision bf16 trains resnet20 on Fashion-MNIST like fp32 does.
TESTS += tests/engine/test_bf16_fmnist.sh
dist_check_SCRIPTS += tests/engine/test_bf16_fmnist.sh
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
# Bucketed gradient reduction overlapped with backward, two ranks over a socketpair.
check_PROGRAMS += tests/engine/test_overlap
TESTS += tests/engine/test_overlap
tests_engine_test_overlap_SOURCES = tests/engine/test_overlap.c
tests_engine_test_overlap_LDADD = engine/libdlengine.la -lm
