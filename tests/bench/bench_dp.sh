#!/bin/bash
# Data-parallel efficiency on the private 2-node Slurm cluster, by hand (not
# part of make check; needs root for the cluster, and an idle machine: on a
# shared one the numbers mean nothing):
#   DLJOB_BUILDDIR=/path/to/_build bash tests/bench/bench_dp.sh [MODELS]
# MODELS (default "resnet20 resnet50"), synthetic data, cpu backend, fp32,
# one compute thread per rank (--threads 1, srun -c1):
#   1 rank  x 1 core               (the baseline)
#   2 ranks x 1 core, one node
#   4 ranks x 1 core over 2 nodes  (2 per node)
# For each: dljob under srun --mpi=pmix (Open MPI allreduce on the engine's
# communication thread), then PyTorch DDP over gloo (tests/bench/bench_dp_torch.py)
# under the same srun shape.  Printed per run: img/s over all ranks, per rank,
# efficiency = per-rank img/s / the 1-rank img/s, and for dljob the share of
# gradient communication hidden behind backward, 1 - exposed_comm_s / comm_s
# from metrics.jsonl (records after the first, which holds the warm-up), and
# the loader's stall; the peak RSS of each rank (/usr/bin/time) is printed
# for dljob and torch.
# BENCH_STEPS (default: 30 for resnet20, 6 for resnet50) steps after 2 warm-up
# steps; DLJOB_COLLECTIVES=ring in the environment runs dljob's TCP ring
# instead of MPI.  Run both: the MPI wait (world/world_pmix.c) polls
# MPI_Test, so on one core per rank the communication thread takes CPU from
# backward while a bucket waits for the other ranks; the ring sleeps in poll.  The test cluster's two "nodes" are this one host: the
# 4-rank run needs 4 free cores to mean anything, and the script says so when
# the host has fewer.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export DLJOB_SRCDIR=${DLJOB_SRCDIR:-$(cd "$here/../.." && pwd)}
: "${DLJOB_BUILDDIR:?set DLJOB_BUILDDIR to the build directory}"
DLJOB_BIN=$DLJOB_BUILDDIR/dljob
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
MODELS=${1:-resnet20 resnet50}
[ -x "$DLJOB_BIN" ] || { echo "no $DLJOB_BIN: build first" >&2; exit 1; }
set +e +u
# shellcheck source=world/test/world_lib.sh
source "$DLJOB_SRCDIR/world/test/world_lib.sh"
set -e -u
cluster_up 4
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) # nproc alone answers OMP_NUM_THREADS
[ "$cpus" -ge 4 ] ||
	echo "# note: $cpus CPUs here; the 4-rank run shares them (2 'nodes' on one host): its efficiency is not meaningful"

# model -> "C H W K BATCH STEPS"
shape() {
	case $1 in
	resnet20) echo "1 28 28 10 128 ${BENCH_STEPS:-30}" ;;
	resnet50) echo "3 224 224 1000 16 ${BENCH_STEPS:-6}" ;;
	*) echo "unknown model $1" >&2; return 1 ;;
	esac
}

srun_shape() { # ranks, then srun arguments
	local n=$1 nodes=1
	shift
	[ "$n" -eq 4 ] && nodes=2
	clean_env SLURM_CONF="$SLURM_CONF" ${DLJOB_COLLECTIVES:+DLJOB_COLLECTIVES=$DLJOB_COLLECTIVES} \
		OMP_NUM_THREADS=1 srun --jobid="$JOB" -N"$nodes" -n"$n" -c1 --ntasks-per-node=$(((n + nodes - 1) / nodes)) "$@"
}

declare -A BASE
for model in $MODELS; do
	read -r c h w k b steps < <(shape "$model")
	total=$((steps + 2))
	echo "## $model ${c}x${h}x${w}, batch $b per rank, $steps timed steps, dljob collectives ${DLJOB_COLLECTIVES:-mpi}"
	for n in 1 2 4; do
		out=$WTMP/$model.$n
		rm -rf "$out"
		mkdir -p "$out"
		# Enough samples that no rank runs out within the steps.
		srun_shape "$n" --mpi=pmix /usr/bin/time -f "rss_kib %M" "$DLJOB_BIN" --model "$model" \
			--data "synthetic:$c,$h,$w,$k,$((b * n * (total + 1)))" --batch "$b" --steps "$total" \
			--eval 0 --print-every 2 --threads 1 --loader-threads 1 --backend cpu --timeout 300 \
			--out "$out" >"$out.log" 2>&1 || { cat "$out.log"; fail "dljob $model x$n"; }
		rss=$(sed -n 's/^rss_kib //p' "$out.log" | sort -n | tail -1)
		line=$("$TORCH_PYTHON" - "$out/metrics.jsonl" "$n" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]  # the first holds the warm-up
n = int(sys.argv[2])
ips = sum(r["img_per_s"] for r in recs) / len(recs)
comm = sum(r["comm_s"] for r in recs)
exp = sum(r["exposed_comm_s"] for r in recs)
stall = sum(r["loader_stall_s"] for r in recs)
hidden = f"{100 * (1 - exp / comm):.0f}%" if comm > 0 else "-"
print(f"{ips:.2f} {ips / n:.2f} {hidden} {comm:.3f} {exp:.3f} {stall:.3f}")
PY
)
		read -r ips per hidden comm exp stall <<<"$line"
		[ "$n" -eq 1 ] && BASE[dljob.$model]=$per
		eff=$(awk -v a="$per" -v b="${BASE[dljob.$model]}" 'BEGIN { printf "%.0f%%", 100 * a / b }')
		echo "dljob    $model ranks=$n: img/s $ips, per rank $per, efficiency $eff, comm hidden $hidden" \
			"(comm ${comm} s, exposed ${exp} s, loader stall ${stall} s), peak rss ${rss} KiB"

		srun_shape "$n" --mpi=none --export=ALL,MASTER_ADDR=127.0.0.1,MASTER_PORT="$(free_port)" \
			/usr/bin/time -f "rss_kib %M" "$TORCH_PYTHON" "$here/bench_dp_torch.py" "$model" "$c" "$h" "$w" "$k" \
			"$b" "$steps" 2 >"$out.torch" 2>&1 || { cat "$out.torch"; fail "torch $model x$n"; }
		# rank 0's own peak_rss_kib left out: the peak over ranks follows
		tline=$(grep '^torch-ddp' "$out.torch" | sed 's/ peak_rss_kib [0-9]*//')
		tper=$(sed -n 's/.* per rank \([0-9.]*\).*/\1/p' <<<"$tline")
		trss=$(sed -n 's/^rss_kib //p' "$out.torch" | sort -n | tail -1)
		[ "$n" -eq 1 ] && BASE[torch.$model]=$tper
		teff=$(awk -v a="$tper" -v b="${BASE[torch.$model]}" 'BEGIN { printf "%.0f%%", 100 * a / b }')
		echo "torchddp $model ranks=$n: ${tline#*: }, efficiency $teff, peak rss ${trss} KiB"
	done
done
