# tests/bench/: the benchmarks are run by hand (their headers say how; their
# programs are built in tests/engine/*.mk and tests/gpu/local.mk).  make check
# only starts each once at its smallest setting (test_bench_smoke.sh, seconds).
TESTS += tests/bench/test_bench_smoke.sh
dist_check_SCRIPTS += tests/bench/test_bench_smoke.sh
# bench_launch.sh's helpers are checked by test_bench_smoke.sh
EXTRA_DIST += tests/bench/bench_launch.sh tests/bench/bench_launch_lib.sh tests/bench/bench_launch_torch.py
