# tests/gpu/: the CUDA backend against the "ref" backend.  Built only when
# configure finds CUDA; skips (77) on a machine without a GPU.  On a GPU
# machine without autotools or oneDNN, tests/gpu/run.sh builds and runs the
# same program directly with nvcc/gcc.
EXTRA_DIST += tests/gpu/test_cuda_ops.c tests/gpu/run.sh tests/bench/bench_gpu.sh tests/bench/bench_gpu.py \
	tests/bench/bench_gpu.c
# Not built on branch engine-step: they use the old forward/backward ops and
# are rebuilt on the training-step interface on branch engine-cuda (issue 14).
#if HAVE_CUDA
#check_PROGRAMS += tests/gpu/test_cuda_ops
#TESTS += tests/gpu/test_cuda_ops
#tests_gpu_test_cuda_ops_SOURCES = tests/gpu/test_cuda_ops.c
#tests_gpu_test_cuda_ops_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
#tests_gpu_test_cuda_ops_LDADD = engine/libdlengine.la -lm
## resnet50 img/s on the GPU (tests/bench/bench_gpu.sh runs it), built by make check
#check_PROGRAMS += tests/bench/bench_gpu
#tests_bench_bench_gpu_SOURCES = tests/bench/bench_gpu.c
#tests_bench_bench_gpu_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
#tests_bench_bench_gpu_LDADD = engine/libdlengine.la -lm
#endif
