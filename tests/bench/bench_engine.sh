#!/bin/bash
# Engine training throughput against PyTorch, run by hand (not part of make check):
#   tests/bench/bench_engine.sh [BUILDDIR] [BACKEND]
# Builds tests/bench/bench_engine in BUILDDIR (default: the current directory)
# and times resnet50 (3x224x224, batch 16) and resnet20 (1x28x28, batch 128)
# on BACKEND (default cpu) and in PyTorch, both on 2 threads; prints the
# median img/s of each, images per CPU-second (less sensitive to other
# jobs on a shared machine), the engine/torch ratios and the peak RSS.
# Each model runs four ways: engine fp32 and bf16 (--precision bf16), torch
# fp32 and torch bf16 (torch.autocast("cpu", bfloat16), channels_last);
# ratios compare each engine run with torch fp32 and with torch in the same
# precision.  BENCH_PRECISIONS="fp32" (default "fp32 bf16") skips bf16.
# On the cpu backend fp32 also runs with --conv-algo direct (no Winograd,
# torch's own algorithm), so the Winograd gain shows in the same run.
# BENCH_STEPS timed steps (default 7), BENCH_ROUNDS repetitions (default 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-.}
backend=${2:-cpu}
py=${TORCH_PYTHON:-/usr/bin/python3}
steps=${BENCH_STEPS:-7}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export BENCH_THREADS=$OMP_NUM_THREADS
make -C "$build" -s tests/bench/bench_engine >/dev/null
bench="$build/tests/bench/bench_engine"

med() { sed -n 's/.*median \([0-9.]*\) img.*/\1/p' <<<"$1"; }
cpus() { sed -n 's/.* \([0-9.]*\) img\/cpu-s.*/\1/p' <<<"$1"; }
ratio() { # label engine-line torch-line
	awk -v a="$(med "$2")" -v b="$(med "$3")" -v c="$(cpus "$2")" -v d="$(cpus "$3")" -v m="$1" \
		'BEGIN { printf "ratio %s: %.2fx wall, %.2fx per cpu-s\n", m, a / b, c / d }'
}

run() { # model c h w k n
	local p e t
	declare -A E T
	for p in ${BENCH_PRECISIONS:-fp32 bf16}; do
		e=$(BENCH_PRECISION=$p "$bench" "$backend" "$@" "$steps" 2)
		t=$(BENCH_PRECISION=$p "$py" "$here/bench_engine_torch.py" "$@" "$steps" 2)
		echo "$e"
		echo "$t"
		E[$p]=$e
		T[$p]=$t
		if [ "$p" = fp32 ] && [ "$backend" = cpu ]; then
			e=$(BENCH_CONV_ALGO=direct "$bench" "$backend" "$@" "$steps" 2)
			echo "$e (direct convolutions)"
			E[fp32-direct]=$e
		fi
	done
	for p in ${BENCH_PRECISIONS:-fp32 bf16}; do
		ratio "$1 engine $p / torch fp32" "${E[$p]}" "${T[fp32]}"
		[ "$p" = fp32 ] || ratio "$1 engine $p / torch $p" "${E[$p]}" "${T[$p]}"
		if [ "$p" = fp32 ] && [ -n "${E[fp32-direct]:-}" ]; then
			ratio "$1 engine fp32 direct-only / torch fp32" "${E[fp32-direct]}" "${T[fp32]}"
		fi
	done
}

echo "# $(date -u +%FT%TZ) $(uname -n) nproc=$(nproc) OMP_NUM_THREADS=$OMP_NUM_THREADS backend=$backend"
for ((r = 0; r < ${BENCH_ROUNDS:-1}; r++)); do
	run resnet50 3 224 224 1000 16
	run resnet20 1 28 28 10 128
done
