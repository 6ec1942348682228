#!/bin/bash
# --dl-job=env: the user's program gets RANK, LOCAL_RANK, WORLD_SIZE,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT under plain srun (PyTorch
# init_method="env://" works, no torchrun); without --dl-* nothing changes.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"

vars='^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|SLURM_JOB_ID|SLURM_STEP_ID|SLURMD_NODENAME)='
srun -N2 -n4 --dl-job=env bash -c 'env | grep -E "'"$vars"'" | sort | tr "\n" " "; echo' >env.out 2>env.err ||
	fail "srun --dl-job=env failed: $(cat env.err)"
[ "$(wc -l <env.out)" -eq 4 ] || fail "expected 4 tasks: $(cat env.out)"
job=$(grep -o 'SLURM_JOB_ID=[0-9]*' env.out | sort -u | cut -d= -f2)
step=$(grep -o 'SLURM_STEP_ID=[0-9]*' env.out | sort -u | cut -d= -f2)
[ -n "$job" ] && [ -n "$step" ] || fail "no job/step id in $(cat env.out)"
# Default range 29500-29999, port = lo + (job*31 + step) % (hi-lo+1).
port=$((29500 + (job * 31 + step) % 500))
for r in 0 1 2 3; do
	node=n$((r / 2 + 1))
	want="LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 MASTER_ADDR=n1 MASTER_PORT=$port RANK=$r SLURMD_NODENAME=$node SLURM_JOB_ID=$job SLURM_STEP_ID=$step WORLD_SIZE=4 "
	grep -qxF "$want" env.out || fail "rank $r: expected '$want' in:
$(cat env.out)"
done
echo "ok   srun -N2 -n4 --dl-job=env: ranks, sizes, MASTER_ADDR=n1, MASTER_PORT=$port"

# The rendezvous secret: srun makes 32 random bytes (64 hex digits) for
# each step, the same in every task of the step, another for the next step,
# replacing the user's own value; never in a log; a job without --dl-*
# keeps what the user set.
s1=$(DLJOB_JOB_SECRET=mine srun -N2 -n2 --dl-job=env printenv DLJOB_JOB_SECRET | sort -u) || fail "srun (secret)"
s2=$(srun -N1 -n1 --dl-job=env printenv DLJOB_JOB_SECRET) || fail "srun (secret 2)"
grep -qxE '[0-9a-f]{64}' <<<"$s1" || fail "DLJOB_JOB_SECRET of a 2-task step is not one 64-hex value: $s1"
grep -qxE '[0-9a-f]{64}' <<<"$s2" || fail "second step's DLJOB_JOB_SECRET: $s2"
[ "$s1" != "$s2" ] || fail "two steps got the same DLJOB_JOB_SECRET"
s3=$(DLJOB_JOB_SECRET=mine srun -N1 -n1 printenv DLJOB_JOB_SECRET) || fail "srun (secret, no --dl-*)"
[ "$s3" = mine ] || fail "a job without --dl-* had its DLJOB_JOB_SECRET changed to $s3"
! grep -rqF -e "$s1" -e "$s2" "$CLUSTER_DIR/log" || fail "a step's secret is in a Slurm log"
echo "ok   DLJOB_JOB_SECRET: 64 hex digits per step, same in its tasks, fresh per step, not logged"
# srun sends the secret in its launch request (a plugin option value), not
# through the environment: --export=NONE (srun's, or sbatch's that its
# sruns inherit) and any --export list keep it; the same in every task of
# a step, another for the next step.
s4=$(srun -N2 -n4 --export=NONE --dl-job=env /usr/bin/printenv DLJOB_JOB_SECRET) || fail "srun --export=NONE (secret)"
s5=$(srun -N2 -n2 --export=NONE --dl-job=env /usr/bin/printenv DLJOB_JOB_SECRET) || fail "srun --export=NONE (secret 2)"
[ "$(grep -cxE '[0-9a-f]{64}' <<<"$s4")" -eq 4 ] && [ "$(sort -u <<<"$s4" | wc -l)" -eq 1 ] ||
	fail "srun -N2 -n4 --export=NONE --dl-job=env: DLJOB_JOB_SECRET is not one 64-hex value in its 4 tasks: $s4"
[ "$(grep -cxE '[0-9a-f]{64}' <<<"$s5")" -eq 2 ] && [ "$(sort -u <<<"$s5" | wc -l)" -eq 1 ] ||
	fail "second --export=NONE step: $s5"
[ "$(sort -u <<<"$s4")" != "$(sort -u <<<"$s5")" ] || fail "two --export=NONE steps got the same DLJOB_JOB_SECRET"
s6=$(srun -N1 -n1 --export=HOME --dl-job=env /usr/bin/printenv DLJOB_JOB_SECRET HOME)
grep -qxE '[0-9a-f]{64}' <<<"$(head -1 <<<"$s6")" && [ "$(wc -l <<<"$s6")" -eq 2 ] || fail "--export=HOME: $s6"
srun_bin=$(command -v srun) || fail "no srun on PATH"
cat >none.sbatch <<EOS
#!/bin/bash
{ /usr/bin/printenv DLJOB_JOB_SECRET || echo batch-none; $srun_bin -n2 /usr/bin/printenv DLJOB_JOB_SECRET; $srun_bin -n1 /usr/bin/printenv DLJOB_JOB_SECRET; } >$WORK/none.secrets 2>&1
EOS
jid=$(sbatch --parsable --wait -N1 -n2 --export=NONE --dl-job=env -o none.out none.sbatch) || fail "sbatch --export=NONE: $(cat none.out 2>&1)"
# (The second srun's step may wait for the first's CPUs to be freed, and
# srun says so on stderr: no_wait_lines.)
no_wait_lines <none.secrets >none.tmp && mv none.tmp none.secrets || fail "none.secrets"
# The batch script has none (sbatch's own is in its environment, which
# --export=NONE drops); each srun step inside has its own.
[ "$(head -1 none.secrets)" = batch-none ] && [ "$(grep -cxE '[0-9a-f]{64}' none.secrets)" -eq 3 ] &&
	[ "$(sed 1d none.secrets | sort -u | wc -l)" -eq 2 ] && [ "$(sed -n 2p none.secrets)" = "$(sed -n 3p none.secrets)" ] ||
	fail "sbatch --export=NONE --dl-job=env: $(cat none.secrets none.out)"
! grep -rqF -e "$(sort -u <<<"$s4")" -e "$(sed -n 2p none.secrets)" "$CLUSTER_DIR/log" || fail "an --export=NONE step's secret is in a Slurm log"
echo "ok   srun --export=NONE/--export=HOME and sbatch --export=NONE: every step's tasks get its own DLJOB_JOB_SECRET"

# Another user sees it nowhere while the step runs: not in any process's
# argv (ps), not in scontrol show job -d / show step (slurmctld never has it).
# (The tasks stay until the test touches 'release', at most 120 s: a fixed
# sleep raced a slow step start on a loaded machine.)
rm -f release run.0 run.1
srun -N2 -n2 --export=NONE --dl-job=env /bin/bash -c '/usr/bin/printenv DLJOB_JOB_SECRET >"'"$WORK"'/run.$SLURM_PROCID"
	for ((i = 0; i < 1200; i++)); do [ -e "'"$WORK"'/release" ] && break; sleep 0.1; done' &
srun_pid=$!
for ((i = 0; i < 600; i++)); do [ -s run.0 ] && [ -s run.1 ] && break; sleep 0.1; done
sec=$(cat run.0 2>/dev/null)
grep -qxE '[0-9a-f]{64}' <<<"$sec" && [ "$(cat run.1)" = "$sec" ] || fail "running step's secret: $sec / $(cat run.1 2>&1)"
other() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
view=$(other ps -eww -o pid=,args= 2>&1; other scontrol show job -d 2>&1; other scontrol show step 2>&1; other scontrol -dd show job 2>&1)
grep -q "dl-job=env" <<<"$view" && grep -q "StepId=" <<<"$view" || fail "the other user's view misses the step: $view"
! grep -qF "$sec" <<<"$view" || fail "another user sees the step's DLJOB_JOB_SECRET:
$(grep -F "$sec" <<<"$view")"
touch release || fail "touch release"
wait "$srun_pid" || fail "the running --export=NONE step failed"
echo "ok   another user finds the running step's secret in no ps argv, scontrol show job -d or show step"
# Model mode's DLJOB_* hand-over is the plugin's alone: in env mode a value
# from the user's environment does not reach the task.
out=$(DLJOB_MODEL=resnet50 DLJOB_OUT=/x DLJOB_GPU=7 srun -N1 -n1 --dl-job=env bash -c 'echo "${DLJOB_MODEL-unset} ${DLJOB_OUT-unset} ${DLJOB_GPU-unset}"') ||
	fail "srun (stale DLJOB_*)"
[ "$out" = "unset unset unset" ] || fail "stale DLJOB_* reached an env-mode task: $out"
echo "ok   env mode: DLJOB_MODEL/DLJOB_OUT/DLJOB_GPU from the user's environment are removed"

cluster_plugstack "master_port_range=31000-31003"
p=$(srun -N1 -n1 --dl-job=env printenv MASTER_PORT) || fail "srun with master_port_range"
[ "$p" -ge 31000 ] && [ "$p" -le 31003 ] || fail "MASTER_PORT=$p outside master_port_range=31000-31003"
echo "ok   master_port_range=31000-31003 gives MASTER_PORT=$p"
cluster_plugstack ""

# PyTorch gloo allreduce over env:// across the two nodes, on a port found
# free (PyTorch's rank 0 fails where the derived port is taken, as by a
# step of another test's cluster on this machine; test_spank_ports covers
# what a real cluster does about that: Slurm's reserved ports).
gp=$(_cluster_free_ports 1) || fail "no free port"
cluster_plugstack "master_port_range=$gp-$gp"
out=$(timeout 120 srun -N2 -n2 --dl-job=env "${TORCH_PYTHON:-/usr/bin/python3}" -c '
import torch, torch.distributed as dist
torch.set_num_threads(2)
dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1), 10.0])
dist.all_reduce(t)
print("rank %d/%d sum %g %g" % (dist.get_rank(), dist.get_world_size(), t[0].item(), t[1].item()), flush=True)
dist.destroy_process_group()
' 2>&1) || fail "gloo allreduce under srun --dl-job=env failed: $out"
for r in 0 1; do
	grep -qx "rank $r/2 sum 3 20" <<<"$out" || fail "rank $r: wrong allreduce: $out"
done
cluster_plugstack ""
echo "ok   torch gloo allreduce with init_method=env:// under srun -N2 -n2"

# Without any --dl-* option the job is exactly what it is without the
# plugin: the same variable names and the same CPU binding.
probe='env | cut -d= -f1 | grep -vE "^(SLURM_JOB_START_TIME|SLURM_JOB_END_TIME)$" | sort; grep ^Cpus_allowed_list /proc/self/status'
srun -N2 -n2 bash -c "$probe" | sort >with.out || fail "srun with the plugin"
DLJOB_SPANK= cluster_plugstack ""
[ ! -s "$CLUSTER_DIR/plugstack.conf" ] || fail "plugstack.conf not emptied"
srun -N2 -n2 bash -c "$probe" | sort >without.out || fail "srun without the plugin"
cluster_plugstack ""
diff without.out with.out >/dev/null || fail "a job without --dl-* differs with the plugin loaded:
$(diff without.out with.out)"
grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|DLJOB_GPU|DLJOB_CPUS|DLJOB_NUMA|CUDA_DEVICE_ORDER|NCCL_IB_HCA|NCCL_SOCKET_IFNAME)$' with.out && fail "dljob variables without --dl-*"
echo "ok   without --dl-* the environment and binding are unchanged"

# Task layouts: rank 0 must be on the step's first node (MASTER_ADDR).
# --distribution=arbitrary follows SLURM_HOSTFILE: starting on n1 is the
# usual world; starting on n2 puts rank 0 where MASTER_ADDR is not, which
# both nodes refuse, naming it (the first to refuse ends the step).  A heterogeneous step (srun ... : ...) has
# a world per component to slurmstepd: refused in every component.
lay='echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $SLURMD_NODENAME"'
printf 'n1\nn2\nn2\n' >hosts.ok && printf 'n2\nn1\nn1\n' >hosts.bad || fail "host files"
out=$(set -o pipefail; SLURM_HOSTFILE=$WORK/hosts.ok srun -n3 -m arbitrary --dl-job=env bash -c "$lay" 2>&1 | no_wait_lines | sort) ||
	fail "srun -m arbitrary (n1 first): $out"
[ "$out" = "0 0 3 1 n1 n1
1 0 3 2 n1 n2
2 1 3 2 n1 n2" ] || fail "srun -m arbitrary (n1,n2,n2): $out"
out=$(SLURM_HOSTFILE=$WORK/hosts.bad srun -n3 -m arbitrary --dl-job=env bash -c "$lay" 2>&1) &&
	fail "srun -m arbitrary with rank 0 on n2 was not refused: $out"
# (slurmstepd's "slurmstepd-nX: error: dljob: ..." line or the task's own.
# Both nodes refuse, and the first to do so ends the step on every node at
# once: the other node's line is there only when its task reached
# task_init before that, which a loaded machine does not promise, so one
# of the two lines is required, and no task may have run.)
grep -q -e "dljob: rank 0 runs on this node (n2), not on the step's first node n1 (MASTER_ADDR)" \
	-e "dljob: rank 0 does not run on the step's first node n1" <<<"$out" &&
	! grep -qE '^[0-9]+ ' <<<"$out" || fail "srun -m arbitrary with rank 0 on n2: $out"
out=$(srun -N1 -n1 --dl-job=env bash -c "$lay" : -N1 -n2 bash -c "$lay" 2>&1) &&
	fail "a heterogeneous step was not refused: $out"
grep -q "^dljob: a heterogeneous step .* this component has 1 of the step's 3 tasks" <<<"$out" &&
	grep -q "^dljob: a heterogeneous step .* this component has 2 of the step's 3 tasks" <<<"$out" &&
	! grep -qE '^[0-9]+ ' <<<"$out" || fail "heterogeneous step: $out"
echo "ok   -m arbitrary: rank 0 on the first node runs, elsewhere refused (by the node seeing it first); a heterogeneous step refused"

# salloc: --dl-* given to salloc reach the sruns inside (its shell is left
# alone); an srun inside with its own --dl-job and -n1 is a world of one.
out=$(timeout 120 salloc -N2 -n2 --dl-job=env bash -c 'echo "shell ${RANK-unset}"; srun bash -c "$0" | sort;
	srun -n1 --dl-job=env bash -c "$0"' "$lay" 2>/dev/null) || fail "salloc: $out"
[ "$out" = "shell unset
0 0 2 1 n1 n1
1 0 2 1 n1 n2
0 0 1 1 n1 n1" ] || fail "salloc -N2 -n2 --dl-job=env, then srun and srun -n1 --dl-job=env: $out"
echo "ok   salloc --dl-job=env: the shell untouched, srun inside gets the world; srun -n1 --dl-job=env inside it a world of one"

nodes_idle
