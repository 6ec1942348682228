# tests/gpu/: the CUDA backend.  Built only when configure finds CUDA.
# Both link the backend's code (engine/cuda/libdlcuda.la) directly, to reach
# its internals; dljob itself loads it as the module dljob-cuda.so.
#  test_cuda_plan  what needs no GPU (device strings, flat layout, reduction
#                  buckets, the update arithmetic of the kernels): runs everywhere
#  test_cuda_ops   the backend's training step against the "ref" backend; skips
#                  (77) on a machine without a GPU
#  fuse_probe      run by hand on a GPU: which fused BN convolution graphs
#                  cuDNN's backend API runs, checked and timed against the
#                  legacy calls (issue 37; tests/gpu/README); cuDNN and cudart
#                  only.  Its --selftest needs no GPU: test_fuse_probe.sh.
# On a GPU machine without autotools or oneDNN, tests/gpu/run.sh builds and
# runs them directly with nvcc/gcc.
EXTRA_DIST += tests/gpu/test_cuda_ops.c tests/gpu/test_cuda_plan.c tests/gpu/run.sh \
	tests/bench/bench_gpu.sh tests/bench/bench_gpu.py tests/bench/bench_gpu.c tests/bench/profile_torch.py \
	tests/gpu/device-call.sh tests/gpu/test_fuse_probe.sh
if HAVE_CUDA
check_PROGRAMS += tests/gpu/test_cuda_plan tests/gpu/test_cuda_ops
TESTS += tests/gpu/test_cuda_plan tests/gpu/test_cuda_ops
tests_gpu_test_cuda_plan_SOURCES = tests/gpu/test_cuda_plan.c
tests_gpu_test_cuda_plan_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_test_cuda_plan_LDADD = engine/cuda/libdlcuda.la engine/libdlengine.la -lm
tests_gpu_test_cuda_ops_SOURCES = tests/gpu/test_cuda_ops.c
tests_gpu_test_cuda_ops_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_test_cuda_ops_LDADD = engine/cuda/libdlcuda.la engine/libdlengine.la -lm
check_PROGRAMS += tests/gpu/fuse_probe
tests_gpu_fuse_probe_SOURCES = tests/gpu/fuse_probe.c
tests_gpu_fuse_probe_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_fuse_probe_LDFLAGS = -L$(CUDA_DIR)/lib64 -Wl,-rpath,$(CUDA_DIR)/lib64
tests_gpu_fuse_probe_LDADD = -lcudnn -lcudart -lm
# its --selftest, which needs cuDNN but no GPU
TESTS += tests/gpu/test_fuse_probe.sh
# resnet50 img/s on the GPU (tests/bench/bench_gpu.sh runs it), built by make check
check_PROGRAMS += tests/bench/bench_gpu
tests_bench_bench_gpu_SOURCES = tests/bench/bench_gpu.c
tests_bench_bench_gpu_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_bench_bench_gpu_LDADD = engine/cuda/libdlcuda.la engine/libdlengine.la -lm
endif

# The offline build bundle for a GPU machine without a package manager
# (tests/gpu/README): `make gpu-bundle` writes gpu-bundle/ at the top of the
# source tree; test_bundle.sh checks its logic here in seconds.
EXTRA_DIST += tests/gpu/README tests/gpu/bundle.sh tests/gpu/bundle-build.sh tests/gpu/bundle-selftest.sh \
	tests/gpu/slurm-node.sh
TESTS += tests/gpu/test_bundle.sh
dist_check_SCRIPTS += tests/gpu/test_bundle.sh
# run.sh's pass/fail/skip counting on stand-in programs, no GPU (seconds)
TESTS += tests/gpu/test_run_sh.sh
dist_check_SCRIPTS += tests/gpu/test_run_sh.sh
# trainer.sh (the real dljob on a GPU machine) on the cpu backend (~20 s)
EXTRA_DIST += tests/gpu/trainer.sh
TESTS += tests/gpu/test_trainer_sh.sh
dist_check_SCRIPTS += tests/gpu/test_trainer_sh.sh
gpu-bundle:
	$(BASH) $(top_srcdir)/tests/gpu/bundle.sh --builddir $(abs_top_builddir)
.PHONY: gpu-bundle
