#!/bin/bash
# GPU visibility with the cluster's fake GPUs (4 per node, Slurm indexes
# 0-3, no ConstrainDevices).  What dljob gives, in every case: each task
# sees all the step's GPUs of its node, in Slurm's own step-wide
# CUDA_VISIBLE_DEVICES (NCCL needs them for NVLink/P2P), and DLJOB_GPU is
# this task's GPU as an index in that list: the GPU Slurm bound the task to
# with --gpus-per-task or --gpu-bind, else LOCAL_RANK modulo the count;
# DLJOB_GPU_BUSID is its PCI bus id in the topology.  (Before, with
# --gpus-per-task or --gpu-bind=single:1 each task saw only its own GPU.)
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
T=$DLJOB_SRCDIR/mapping/test/topologies
cluster_plugstack "topology=$T/2s-8gpu-4hca.xml"
probe='echo "rank=$RANK gpu=${DLJOB_GPU-} cvd=${CUDA_VISIBLE_DEVICES-} own=${SLURM_STEP_GPUS-} bus=${DLJOB_GPU_BUSID-}"'
# The XML's GPUs in bus-id order (= Slurm index order here).
bus=(0000:12:00.0 0000:13:00.0 0000:22:00.0 0000:23:00.0)

# check NAME WANT_CVD NTASKS: every task sees WANT_CVD; DLJOB_GPU points
# into it at the task's own GPU (Slurm's narrowed SLURM_STEP_GPUS when it
# bound the task); the tasks use different GPUs; the bus id matches.
check() {
	local name=$1 want=$2 n=$3 line gpu cvd own used=
	[ "$(wc -l <out.txt)" -eq "$n" ] || fail "$name: expected $n tasks: $(cat out.txt) $(cat err.txt)"
	while read -r line; do
		gpu=$(sed 's/.* gpu=\([^ ]*\) .*/\1/' <<<"$line")
		cvd=$(sed 's/.* cvd=\([^ ]*\) .*/\1/' <<<"$line")
		own=$(sed 's/.* own=\([^ ]*\) .*/\1/' <<<"$line")
		[ "$cvd" = "$want" ] || fail "$name: a task sees CUDA_VISIBLE_DEVICES=$cvd, not the step's $want: $line"
		IFS=, read -ra list <<<"$cvd"
		[[ "$gpu" =~ ^[0-9]+$ ]] && [ "$gpu" -lt ${#list[@]} ] || fail "$name: DLJOB_GPU=$gpu: $line"
		# Slurm bound the task to one GPU: DLJOB_GPU must be that one.
		[[ "$own" == *,* ]] || [ "${list[$gpu]}" = "$own" ] || fail "$name: DLJOB_GPU=$gpu is GPU ${list[$gpu]}, Slurm bound the task to $own: $line"
		grep -q " bus=${bus[${list[$gpu]}]}$" <<<"$line" || fail "$name: DLJOB_GPU_BUSID: $line"
		used="$used ${list[$gpu]}"
	done <out.txt
	[ "$(tr ' ' '\n' <<<"$used" | sed '/^$/d' | sort -u | wc -l)" -eq "$n" ] || fail "$name: tasks share GPUs:$used"
	echo "ok   $name: every task sees $want, DLJOB_GPU is its own GPU (GPUs$used)"
}

# The nodes have 2 CPUs: 2 tasks per node.
srun_bounded -N1 -w n1 -n2 --gres=gpu:2 --dl-job=env bash -c "$probe" >out.txt 2>err.txt || fail "srun --gres=gpu:2: $(cat err.txt)"
check "--gres=gpu:2 -n2" 0,1 2
srun_bounded -N1 -w n1 -n2 --gpus-per-task=1 --dl-job=env bash -c "$probe" >out.txt 2>err.txt || fail "srun --gpus-per-task=1: $(cat err.txt)"
check "--gpus-per-task=1 -n2" 0,1 2
srun_bounded -N1 -w n1 -n2 --gres=gpu:2 --gpu-bind=single:1 --dl-job=env bash -c "$probe" >out.txt 2>err.txt ||
	fail "srun --gpu-bind=single:1: $(cat err.txt)"
check "--gres=gpu:2 --gpu-bind=single:1 -n2" 0,1 2
srun_bounded -N2 -n4 --gres=gpu:4 --dl-job=env bash -c "$probe" >out.txt 2>err.txt || fail "srun -N2 --gres=gpu:4: $(cat err.txt)"
[ "$(grep -c "cvd=0,1,2,3 " out.txt)" -eq 4 ] || fail "-N2 -n4 --gres=gpu:4: $(cat out.txt)"
echo "ok   -N2 -n4 --gres=gpu:4: every task sees its node's 4 GPUs"

# The step does not start at GPU 0: another job holds GPUs 0 and 1 of n1.
hold=$(sbatch --parsable -N1 -w n1 -n1 --gres=gpu:2 --wrap 'sleep 120' -o /dev/null) || fail "sbatch (holder)"
for _ in $(seq 1 600); do [ "$(squeue -h -j "$hold" -o %T)" = RUNNING ] && break; sleep 0.1; done
[ "$(squeue -h -j "$hold" -o %T)" = RUNNING ] || fail "the job holding GPUs 0,1 did not start: $(squeue -h -o '%i %j %T reason=%r')"
srun_bounded -N1 -w n1 -n2 -O --gres=gpu:2 --dl-job=env bash -c "$probe" >out.txt 2>err.txt || fail "srun (GPUs 2,3): $(cat err.txt)"
check "--gres=gpu:2 -n2 next to a job on GPUs 0,1" 2,3 2
scancel "$hold"

# The same with --gpus-per-task, next to another step of one allocation of
# all of n1 that holds GPUs 0 and 1 (--exact: one CPU).  Not next to
# another job: n1 has 2 CPUs, and Slurm 24.11 refuses a job whose -O
# --gpus-per-task puts 2 tasks on the one CPU left ("Requested node
# configuration is not available": with a per-task TRES, cons_tres ignores
# -O; 22.05 overcommits); a step of the allocation may, on both.
n1job=$(cluster_alloc -w n1 -N1 --exclusive --gres=gpu:4 --time=2 --immediate=60 && echo "$SLURM_JOB_ID") ||
	fail "no allocation of n1: $(squeue -h -o '%i %j %T reason=%r')"
rm -f held.txt
srun --jobid="$n1job" --exact -n1 --gres=gpu:2 bash -c 'echo "$SLURM_STEP_GPUS" >held.txt; exec sleep 100' >/dev/null 2>&1 &
for _ in $(seq 600); do [ -s held.txt ] && break; sleep 0.1; done
[ "$(cat held.txt 2>/dev/null)" = 0,1 ] || fail "the step holding GPUs 0,1 did not start ($(cat held.txt 2>/dev/null)): $(squeue -s -h -o '%i %j %T')"
srun_bounded --jobid="$n1job" --exact -n2 -O --gpus-per-task=1 --dl-job=env bash -c "$probe" >out.txt 2>err.txt ||
	fail "srun --gpus-per-task=1 (GPUs 2,3): $(cat err.txt)"
check "--gpus-per-task=1 -n2 next to a step on GPUs 0,1" 2,3 2
srun_bounded --jobid="$n1job" --exact -n2 -O --gres=gpu:2 --dl-job=env bash -c "$probe" >out.txt 2>err.txt ||
	fail "srun --gres=gpu:2 (GPUs 2,3): $(cat err.txt)"
check "--gres=gpu:2 -n2 next to a step on GPUs 0,1" 2,3 2
scancel "$n1job"
wait
nodes_idle
