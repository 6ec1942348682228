#!/bin/bash
# Launch latency: seconds from `srun` to "world ready" (every rank joined
# and one collective done) and to the end of the first training step, for
# 1, 2 and 4 tasks on the private 2-node cluster:
#   dljob world, PMIx + Open MPI (srun --mpi=pmix)   world/test/world_check
#   dljob world, TCP (srun --mpi=none)               world/test/world_check
#   dljob world, PMIx + TCP ring (DLJOB_COLLECTIVES=ring)
#   dljob first step (resnet20, batch 8, real Fashion-MNIST from Debian's
#            dataset-fashion-mnist, loading included; TCP and PMIx), with the
#            node's inflated copy cached by an earlier run (the usual case),
#            and cold (TMPDIR, so the node cache, new for the run)
#   PyTorch: import torch+torchvision, gloo init_process_group + allreduce,
#            then one DDP step of the same model   tests/bench/bench_launch_torch.py
# Run by hand from a build directory (needs root for the cluster):
#   DLJOB_BUILDDIR=$PWD bash /path/to/src/tests/bench/bench_launch.sh [REPEATS]
# (DLJOB_BIN: the dljob to time, default $DLJOB_BUILDDIR/dljob; DLJOB_SRCDIR:
# the source tree, default the one this script is in; world/test/world_check
# is built in DLJOB_BUILDDIR first.)
# Prints markdown tables (median of REPEATS runs, default 3), then the
# allreduce time of resnet18's gradient for each collective implementation.
# First, without srun: one dljob process (1 step, warm node cache), wall and
# CPU-seconds (user+sys), 3 x REPEATS runs, and the load average before and
# after: on a shared machine CPU-seconds say more than wall time.
# A run that fails (or prints no line to time) stops the benchmark with
# "bench_launch.sh: RUN failed: WHY; its log: FILE" and the log's last lines
# (FILE is kept: ${BENCH_LOG_DIR:-${TMPDIR:-/tmp}}/bench_launch-failed.PID.log).
set -u
export DLJOB_SRCDIR=${DLJOB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
: "${DLJOB_BUILDDIR:?set DLJOB_BUILDDIR to the build directory}"
DLJOB_BIN=${DLJOB_BIN:-$DLJOB_BUILDDIR/dljob}
[ -x "$DLJOB_BIN" ] || { echo "no $DLJOB_BIN: build dljob first" >&2; exit 1; }
make -C "$DLJOB_BUILDDIR" -s world/test/world_check >/dev/null || { echo "cannot build world/test/world_check in $DLJOB_BUILDDIR" >&2; exit 1; }
REPEATS=${1:-3}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
# shellcheck source=world/test/world_lib.sh
source "$DLJOB_SRCDIR/world/test/world_lib.sh"
cluster_up 4

# shellcheck source=tests/bench/bench_launch_lib.sh
source "$DLJOB_SRCDIR/tests/bench/bench_launch_lib.sh"

srun_n() { # tasks, then srun arguments
	local n=$1 nodes=2
	shift
	[ "$n" -eq 1 ] && nodes=1
	clean_env SLURM_CONF="$SLURM_CONF" \
		srun --jobid="$JOB" -N"$nodes" -n"$n" "$@"
}

# ---- one process, no srun: wall and CPU-seconds ------------------------------------
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) CPUs)"
proc_run() { # writes "wall user sys" of one dljob process to its exit after step 1 into $WTMP/time
	local TIMEFORMAT='%R %U %S'
	rm -rf "$WTMP/proc"
	{ time "$DLJOB_BIN" --model resnet20 --data /usr/share/datasets/fashion-mnist --batch 8 --steps 1 \
		--eval 0 --print-every 1 --threads 1 --out "$WTMP/proc" >/dev/null 2>"$WTMP/proc.err"; } 2>"$WTMP/time" ||
		bench_fail "dljob alone (no srun)" "$WTMP/proc.err" "exit status $?"
}
proc_run # the node cache, warm
PW="" PC=""
for _ in $(seq 1 $((3 * REPEATS))); do
	proc_run
	read -r w u s <"$WTMP/time"
	[ -n "${s:-}" ] || bench_fail "dljob alone (no srun)" "$WTMP/time" "no times from bash's time"
	PW+="$w " PC+="$(echo "$u + $s" | bc -l) "
done
echo "# one process: wall $PW"
echo "# one process: user+sys $PC"
echo "# NEEDED CUDA libraries of $DLJOB_BIN: $(readelf -dW "$DLJOB_BIN" | grep -cE 'NEEDED.*lib(cudart|cublas|cublasLt|cudnn|nccl)\.so')"

declare -A R
for n in 1 2 4; do
	for _ in $(seq 1 "$REPEATS"); do
		t0=$(now)
		srun_n "$n" --mpi=pmix --export=ALL,DLJOB_COLLECTIVES=ring "$WC" --steps 0 --timeout 60 >"$WTMP/w" 2>&1
		record ready.ring.$n "world_check --mpi=pmix ring -n$n" "$WTMP/w" "world_check: ready" "$t0" $?
		for mpi in pmix none; do
			t0=$(now)
			srun_n "$n" --mpi=$mpi "$WC" --steps 0 --timeout 60 >"$WTMP/w" 2>&1
			record ready.$mpi.$n "world_check --mpi=$mpi -n$n" "$WTMP/w" "world_check: ready" "$t0" $?
			t0=$(now)
			srun_n "$n" --mpi=$mpi "$DLJOB_BIN" --model resnet20 --data /usr/share/datasets/fashion-mnist \
				--batch 8 --steps 1 --eval 0 --print-every 1 --threads 1 --timeout 60 \
				--out "$WTMP/out" 2>&1 | stamp_lines >"$WTMP/d"
			record step.$mpi.$n "dljob first step --mpi=$mpi -n$n" "$WTMP/d" "^step 1/" "$t0" "${PIPESTATUS[0]}"
			rm -rf "$WTMP/out"
		done
		# Cold: a new TMPDIR, so each node inflates the data once again.
		cold=$(mktemp -d "$WTMP/cold.XXXXXX")
		t0=$(now)
		srun_n "$n" --mpi=none --export=ALL,TMPDIR="$cold" "$DLJOB_BIN" --model resnet20 \
			--data /usr/share/datasets/fashion-mnist --batch 8 --steps 1 --eval 0 --print-every 1 \
			--threads 1 --timeout 60 --out "$WTMP/out" 2>&1 | stamp_lines >"$WTMP/d"
		record step.cold.$n "dljob first step, node cache cold, -n$n" "$WTMP/d" "^step 1/" "$t0" "${PIPESTATUS[0]}"
		rm -rf "$WTMP/out" "$cold"
		t0=$(now)
		srun_n "$n" --mpi=none --export=ALL,MASTER_PORT="$(free_port)" \
			"$TORCH_PYTHON" "$DLJOB_SRCDIR/tests/bench/bench_launch_torch.py" --step >"$WTMP/t" 2>&1
		rc=$?
		record ready.torch.$n "torch -n$n" "$WTMP/t" "torch: ready" "$t0" "$rc"
		record step.torch.$n "torch -n$n" "$WTMP/t" "torch: step1" "$t0" "$rc"
	done
done

for k in "${!R[@]}"; do echo "# $k: ${R[$k]}"; done | sort
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| one dljob process, no srun (median of $((3 * REPEATS))) | wall s | CPU-s (user+sys) |"
echo "|---|---|---|"
echo "| resnet20 b8, 1 step, Fashion-MNIST from the warm node cache, start to exit | $(echo $PW | tr ' ' '\n' | median) | $(echo $PC | tr ' ' '\n' | median) |"
echo
echo "| seconds from srun (median of $REPEATS) | 1 task | 2 tasks | 4 tasks |"
echo "|---|---|---|---|"
row() {
	local label=$1 key=$2 n out
	out="| $label |"
	for n in 1 2 4; do
		out+=" $(echo "${R[$key.$n]}" | tr ' ' '\n' | grep . | median) |"
	done
	echo "$out"
}
row "dljob world ready, PMIx + Open MPI" ready.pmix
row "dljob world ready, PMIx + TCP ring (DLJOB_COLLECTIVES=ring)" ready.ring
row "dljob world ready, TCP" ready.none
row "torch+torchvision import, gloo init + allreduce" ready.torch
row "dljob first step done (resnet20, b8, Fashion-MNIST loaded), PMIx" step.pmix
row "dljob first step done (resnet20, b8, Fashion-MNIST loaded), TCP" step.none
row "dljob first step done, TCP, node cache cold (inflated in the run)" step.cold
row "torch DDP first step done (resnet20, b8, random 1x28x28)" step.torch

# Allreduce of resnet18's gradient (11689512 floats), median of 5, 2 and 4
# tasks over both nodes.
echo
echo "| allreduce 11.7M f32 (resnet18 grads), ms | 2 tasks | 4 tasks |"
echo "|---|---|---|"
for mode in pmix-mpi pmix-ring tcp; do
	out="| $mode |"
	for n in 2 4; do
		case $mode in
		pmix-mpi) args=(--mpi=pmix) ;;
		pmix-ring) args=(--mpi=pmix "--export=ALL,DLJOB_COLLECTIVES=ring") ;;
		tcp) args=(--mpi=none) ;;
		esac
		srun_n "$n" "${args[@]}" "$WC" --steps 0 --timeout 60 --bench 11689512 >"$WTMP/b" 2>&1 ||
			bench_fail "allreduce $mode -n$n" "$WTMP/b" "exit status $?"
		ms=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' "$WTMP/b")
		[ -n "$ms" ] || bench_fail "allreduce $mode -n$n" "$WTMP/b" "no 'median ... ms' line in its output"
		out+=" $ms |"
	done
	echo "$out"
done
