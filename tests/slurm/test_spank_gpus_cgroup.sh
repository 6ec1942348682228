#!/bin/bash
# GPU visibility under ConstrainDevices=yes (task/cgroup on cgroup v1): the
# private cluster with CLUSTER_CGROUP=1, fake GPUs nvidia0-3 as character
# devices 120:0-3.  A task can open(2) a fake GPU (ENXIO: no driver) only
# where its device cgroup allows it (else EPERM), so the test sees which
# GPUs each task can really use.  What holds (spank-dljob(8), GPU
# VISIBILITY):
# - Slurm did not bind the tasks (--gres=gpu:N): every task can open all
#   the step's GPUs; CUDA_VISIBLE_DEVICES is Slurm's step-wide list counted
#   from 0 (0,1 also when the step has the node's GPUs 2,3), DLJOB_GPU is a
#   position in it, DLJOB_GPU_BUSID the bus id of that node GPU.
# - Slurm bound the tasks (--gpus-per-task, --gpu-bind): each task can open
#   only its own GPU; dljob keeps Slurm's CUDA_VISIBLE_DEVICES=0 (a wider
#   list would name GPUs the task cannot open), DLJOB_GPU=0, and sets no
#   DLJOB_GPU_BUSID (Slurm 22.05 then writes the step's first GPU into every
#   task's SLURM_STEP_GPUS, so nothing says which node GPU it is).
# Before, dljob widened CUDA_VISIBLE_DEVICES to 0,1 there and gave every
# task the bus id of the step's first GPU.
[ -d /sys/fs/cgroup/devices ] && [ -f /sys/fs/cgroup/devices/devices.allow ] || {
	echo "SKIP: no cgroup v1 devices controller at /sys/fs/cgroup/devices (needed by Slurm's cgroup/v1 ConstrainDevices)"
	exit 77
}
export CLUSTER_CGROUP=1
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
T=$DLJOB_SRCDIR/mapping/test/topologies
cluster_plugstack "topology=$T/2s-8gpu-4hca.xml"
D=$CLUSTER_DIR/dev
# open=: the fake GPUs (node indexes) this task can open.
probe='o=; for i in 0 1 2 3; do e=$( (exec 9<'"$D"'/nvidia$i) 2>&1); case $e in *"No such device"*) o=$o$i;; *"not permitted"*) ;; *) echo "open nvidia$i: $e" >&2;; esac; done
echo "rank=$RANK gpu=${DLJOB_GPU-} cvd=${CUDA_VISIBLE_DEVICES-} bus=${DLJOB_GPU_BUSID-} open=$o"'
bus=(0000:12:00.0 0000:13:00.0 0000:22:00.0 0000:23:00.0)

field() { sed "s/.* $1=\([^ ]*\).*/\1/" <<<"$2"; }

# unbound NAME WANT_CVD STEP_GPUS: every task sees WANT_CVD and can open
# exactly the step's GPUs (STEP_GPUS, node indexes, as one string "23");
# DLJOB_GPU points into the list at a GPU of its own; the bus id is that
# node GPU's.
unbound() {
	local name=$1 want=$2 step=$3 line gpu used=
	[ "$(wc -l <out.txt)" -eq 2 ] || fail "$name: expected 2 tasks: $(cat out.txt) $(cat err.txt)"
	! grep -q "open nvidia" err.txt || fail "$name: $(cat err.txt)"
	while read -r line; do
		[ "$(field cvd "$line")" = "$want" ] || fail "$name: CUDA_VISIBLE_DEVICES is not $want: $line"
		[ "$(field open "$line")" = "$step" ] || fail "$name: the task can open GPUs other than $step: $line"
		gpu=$(field gpu "$line")
		[[ "$gpu" =~ ^[01]$ ]] || fail "$name: DLJOB_GPU=$gpu: $line"
		[ "$(field bus "$line")" = "${bus[${step:$gpu:1}]}" ] || fail "$name: DLJOB_GPU_BUSID is not GPU ${step:$gpu:1}'s: $line"
		used="$used$gpu"
	done <out.txt
	[ "$(fold -w1 <<<"$used" | sort -u | wc -l)" -eq 2 ] || fail "$name: tasks share a GPU: $(cat out.txt)"
	echo "ok   $name: every task sees $want (node GPUs $step), DLJOB_GPU is its own, bus ids match"
}

# bound NAME STEP_GPUS: each task can open one GPU of the step, not the
# same; it sees CUDA_VISIBLE_DEVICES=0, DLJOB_GPU=0 and no bus id.
bound() {
	local name=$1 step=$2 line o used=
	[ "$(wc -l <out.txt)" -eq 2 ] || fail "$name: expected 2 tasks: $(cat out.txt) $(cat err.txt)"
	! grep -q "open nvidia" err.txt || fail "$name: $(cat err.txt)"
	while read -r line; do
		o=$(field open "$line")
		[[ "$o" =~ ^[$step]$ ]] || fail "$name: Slurm's device cgroup does not confine the task to one GPU of $step: $line"
		[ "$(field cvd "$line")" = 0 ] || fail "$name: CUDA_VISIBLE_DEVICES is not Slurm's 0 (the task can open only GPU $o): $line"
		[ "$(field gpu "$line")" = 0 ] || fail "$name: DLJOB_GPU is not 0: $line"
		[ -z "$(field bus "$line")" ] || fail "$name: DLJOB_GPU_BUSID set, but the task's node GPU is unknown: $line"
		used="$used$o"
	done <out.txt
	[ "$(fold -w1 <<<"$used" | sort -u | wc -l)" -eq 2 ] || fail "$name: tasks share a GPU: $(cat out.txt)"
	echo "ok   $name: each task can open only its GPU (node GPUs $used), sees CUDA_VISIBLE_DEVICES=0, DLJOB_GPU=0"
}

# The nodes have 2 CPUs: 2 tasks per node.
run() { srun -N1 -w n1 -n2 "$@" --dl-job=env bash -c "$probe" >out.txt 2>err.txt || fail "srun $*: $(cat err.txt)"; }
run --gres=gpu:2
unbound "--gres=gpu:2 -n2" 0,1 01
run --gpus-per-task=1
bound "--gpus-per-task=1 -n2" 01
run --gres=gpu:2 --gpu-bind=single:1
bound "--gres=gpu:2 --gpu-bind=single:1 -n2" 01

# Another job holds GPUs 0 and 1 of n1: the step gets the node's GPUs 2,3.
hold=$(sbatch --parsable -N1 -w n1 -n1 --gres=gpu:2 --wrap 'sleep 120' -o /dev/null) || fail "sbatch (holder)"
for _ in $(seq 1 600); do [ "$(squeue -h -j "$hold" -o %T)" = RUNNING ] && break; sleep 0.1; done
[ "$(squeue -h -j "$hold" -o %T)" = RUNNING ] || fail "the job holding GPUs 0,1 did not start"
run -O --gres=gpu:2
unbound "--gres=gpu:2 -n2 next to a job on GPUs 0,1" 0,1 23
run -O --gpus-per-task=1
bound "--gpus-per-task=1 -n2 next to a job on GPUs 0,1" 23
scancel "$hold"
nodes_idle
