#!/bin/bash
# Engine training throughput against PyTorch, run by hand (not part of make check):
#   tests/bench/bench_engine.sh [BUILDDIR] [BACKEND]
# Builds tests/bench/bench_engine in BUILDDIR (default: the current directory)
# and times resnet50 (3x224x224, batch 16) and resnet20 (1x28x28, batch 128)
# on BACKEND (default cpu) and in PyTorch, both on 2 threads; prints the
# median img/s of each, images per CPU-second (less sensitive to other
# jobs on a shared machine), the engine/torch ratios and the peak RSS.
# BENCH_STEPS timed steps (default 7), BENCH_ROUNDS repetitions (default 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-.}
backend=${2:-cpu}
py=${TORCH_PYTHON:-/usr/bin/python3}
steps=${BENCH_STEPS:-7}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} BENCH_THREADS=${OMP_NUM_THREADS:-2}
make -C "$build" -s tests/bench/bench_engine >/dev/null
bench="$build/tests/bench/bench_engine"

run() { # model c h w k n
	local e t er tr
	e=$("$bench" "$backend" "$@" "$steps" 2)
	t=$("$py" "$here/bench_engine_torch.py" "$@" "$steps" 2)
	echo "$e"
	echo "$t"
	er=$(sed -n 's/.*median \([0-9.]*\) img.*/\1/p' <<<"$e")
	tr=$(sed -n 's/.*median \([0-9.]*\) img.*/\1/p' <<<"$t")
	ec=$(sed -n 's/.* \([0-9.]*\) img\/cpu-s.*/\1/p' <<<"$e")
	tc=$(sed -n 's/.* \([0-9.]*\) img\/cpu-s.*/\1/p' <<<"$t")
	awk -v a="$er" -v b="$tr" -v c="$ec" -v d="$tc" -v m="$1" \
		'BEGIN { printf "ratio %s engine/torch: %.2fx wall, %.2fx per cpu-s\n", m, a / b, c / d }'
}

echo "# $(date -u +%FT%TZ) $(uname -n) nproc=$(nproc) OMP_NUM_THREADS=$OMP_NUM_THREADS backend=$backend"
for ((r = 0; r < ${BENCH_ROUNDS:-1}; r++)); do
	run resnet50 3 224 224 1000 16
	run resnet20 1 28 28 10 128
done
