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
# With more than one round it ends with each ratio's median, min and max
# over the rounds: single rounds move by several percent with the machine,
# mostly on torch's side, so the median over rounds is the number to quote,
# with a 95 % bootstrap interval of that median (how far it could move with
# other rounds on the same machine in the same hour).
# BACKEND cuda loads the build's module (DLJOB_MODULE_DIR, default
# BUILDDIR/engine/cuda/.libs; PyTorch stays on the CPU); without a GPU it
# stops at its first run with bench_engine's one line naming that.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-.}
backend=${2:-cpu}
py=${TORCH_PYTHON:-/usr/bin/python3}
steps=${BENCH_STEPS:-7}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export BENCH_THREADS=$OMP_NUM_THREADS
[ -f "$build/Makefile" ] || { echo "bench_engine.sh: no Makefile in '$build': name the build directory, e.g. tests/bench/bench_engine.sh _build" >&2; exit 2; }
make -C "$build" -s tests/bench/bench_engine >/dev/null
export DLJOB_MODULE_DIR=${DLJOB_MODULE_DIR:-$(cd "$build" && pwd)/engine/cuda/.libs}
bench="$build/tests/bench/bench_engine"

med() { sed -n 's/.*median \([0-9.]*\) img.*/\1/p' <<<"$1"; }
cpus() { sed -n 's/.* \([0-9.]*\) img\/cpu-s.*/\1/p' <<<"$1"; }
# Every ratio line, to summarize over the rounds at the end.
ratios=()
ratio() { # label engine-line torch-line
	local line
	line=$(awk -v a="$(med "$2")" -v b="$(med "$3")" -v c="$(cpus "$2")" -v d="$(cpus "$3")" -v m="$1" \
		'BEGIN { printf "ratio %s: %.2fx wall, %.2fx per cpu-s\n", m, a / b, c / d }')
	echo "$line"
	ratios+=("$line")
}

# "over R rounds LABEL: wall median M (min A, max B, 95% bootstrap
# interval of the median L-U)" for each label.
summary() {
	printf '%s\n' "${ratios[@]}" | awk '
		{ sub(/^ratio /, ""); i = index($0, ": "); label = substr($0, 1, i - 1)
		  split(substr($0, i + 2), f, "x"); v = f[1] + 0
		  if (!(label in n)) order[++labels] = label
		  x[label, ++n[label]] = v }
		END {
			for (l = 1; l <= labels; l++) {
				label = order[l]; k = n[label]
				for (i = 1; i <= k; i++) s[i] = x[label, i]
				med = median(s, k)  # sorts s
				printf "over %d rounds %s: wall median %.2fx (min %.2fx, max %.2fx", k, label, med, s[1], s[k]
				# How far the median could move with other rounds of the same
				# machine: the 2.5 and 97.5 percentiles of the medians of 2,000
				# resamples (with replacement) of these rounds.
				if (k >= 5) {
					srand(1)
					for (b = 1; b <= 2000; b++) {
						for (i = 1; i <= k; i++) r[i] = s[1 + int(rand() * k)]
						bm[b] = median(r, k)
					}
					sortv(bm, 2000)
					printf ", 95%% bootstrap interval of the median %.2fx-%.2fx", bm[50], bm[1951]
				}
				printf ")\n"
			}
		}
		function sortv(a, k,    i, j, t) {  # insertion sort: at most 2,000 values, well under a second
			for (i = 2; i <= k; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		}
		function median(a, k) {
			sortv(a, k)
			return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
		}'
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

# nproc alone answers OMP_NUM_THREADS, exported above
echo "# $(date -u +%FT%TZ) $(uname -n) nproc=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) OMP_NUM_THREADS=$OMP_NUM_THREADS backend=$backend"
for ((r = 0; r < ${BENCH_ROUNDS:-1}; r++)); do
	run resnet50 3 224 224 1000 16
	run resnet20 1 28 28 10 128
done
[ "${BENCH_ROUNDS:-1}" -gt 1 ] && summary
exit 0
