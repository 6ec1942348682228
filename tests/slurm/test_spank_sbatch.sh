#!/bin/bash
# sbatch: --dl-* options given to sbatch reach every srun in the job (Slurm
# exports them as SLURM_SPANK__SLURM_SPANK_OPTION_dljob_* and srun reads
# them back), the batch script itself is left alone, and the
# contrib/sbatch templates run as they are, including a preemption warning
# that checkpoints (USR1) and requeues.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
fake=$DLJOB_SRCDIR/tests/slurm/test_spank_fake_runtime.sh
mkdir -p data log || fail mkdir
export FAKE_RUNTIME_LOG=$WORK/log

# Wait until job $1 has left the queue (at most $2 s).
job_done() {
	local t=0
	while [ -n "$(squeue -h -j "$1" 2>/dev/null)" ]; do
		sleep 0.2
		t=$((t + 1))
		[ $t -lt $(($2 * 5)) ] || fail "job $1 still queued after $2 s: $(squeue -j "$1")"
	done
}

cat >env.sbatch <<'EOS'
#!/bin/bash
echo "batch RANK=${RANK-unset} MASTER_ADDR=${MASTER_ADDR-unset}"
env | grep -c '^SLURM_SPANK__SLURM_SPANK_OPTION_dljob_dl_job=env$'
srun -n2 bash -c 'echo "step RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR"' | sort
# The batch script's secret (from sbatch) and each srun step's own.
{ echo "$DLJOB_JOB_SECRET"; srun -n2 printenv DLJOB_JOB_SECRET; srun -n1 printenv DLJOB_JOB_SECRET; } >secrets.out 2>/dev/null
EOS
jid=$(sbatch --parsable -N1 -n2 --dl-job=env -o env.out env.sbatch) || fail "sbatch --dl-job=env"
job_done "$jid" 60
want="batch RANK=unset MASTER_ADDR=unset
1
step RANK=0 WORLD_SIZE=2 MASTER_ADDR=n1
step RANK=1 WORLD_SIZE=2 MASTER_ADDR=n1"
[ "$(no_wait_lines <env.out)" = "$want" ] || fail "sbatch --dl-job=env:
$(diff <(echo "$want") env.out)"
# secrets.out: batch, step 0 (2 tasks), step 1: three different 64-hex values.
[ "$(grep -cxE '[0-9a-f]{64}' secrets.out)" -eq 4 ] && [ "$(sort -u secrets.out | wc -l)" -eq 3 ] &&
	[ "$(sed -n 2p secrets.out)" = "$(sed -n 3p secrets.out)" ] || fail "DLJOB_JOB_SECRET in sbatch: $(cat secrets.out)"
echo "ok   sbatch --dl-job=env: the batch script is untouched, its srun steps get the ranks and each its own DLJOB_JOB_SECRET"

# The templates, unchanged, with a stand-in runtime.
cluster_plugstack "runtime=$fake"
runtime_on_path "$fake"
export DL_MODEL=resnet20 DL_DATA=$WORK/data DL_EPOCHS=2 DL_BATCH=8
for t in dljob-1node dljob-multinode; do
	rm -f log/*
	jid=$(sbatch --parsable -o "$t.out" "$DLJOB_SRCDIR/contrib/sbatch/$t.sbatch") || fail "sbatch $t.sbatch"
	job_done "$jid" 60
	n=$(ls log | wc -l)
	want=2
	[ $t = dljob-multinode ] && want=4
	[ "$n" -eq $want ] || fail "$t.sbatch ran $n tasks, expected $want: $(cat "$t.out")"
	grep -qx "arg2=resnet20" log/rank0.0 && grep -qx "arg4=$WORK/data" log/rank0.0 && grep -qx "arg6=2" log/rank0.0 &&
		grep -qx "arg8=8" log/rank0.0 && grep -qx "arg10=$WORK/dljob-$jid" log/rank0.0 ||
		fail "$t.sbatch runtime argv: $(cat log/rank0.0)"
	grep -qx "WORLD_SIZE=$want" log/rank0.0 || fail "$t.sbatch WORLD_SIZE: $(cat log/rank0.0)"
	echo "ok   contrib/sbatch/$t.sbatch runs as it is ($want tasks)"
done

# A relative --dl-data (and the default --dl-out) names a directory under
# the step's working directory (here sbatch --chdir), not under the submit
# directory: sbatch leaves it to the node, which makes it absolute.
mkdir -p sub/data/rel || fail mkdir
rm -f log/*
jid=$(sbatch --parsable -N1 -n1 --chdir="$WORK/sub" --dl-job=resnet20 --dl-data=data/rel -o "$WORK/rel.out" \
	--wrap 'srun dljob') || fail "sbatch --chdir with a relative --dl-data"
job_done "$jid" 60
grep -qx "arg4=$WORK/sub/data/rel" log/rank0.0 || fail "relative --dl-data under --chdir: $(cat rel.out log/rank0.0 2>&1)"
grep -qx "arg6=$WORK/sub/dljob-$jid" log/rank0.0 || fail "the default --dl-out under --chdir: $(cat rel.out log/rank0.0 2>&1)"
out=$(srun -N1 -n1 --chdir="$WORK/sub" --dl-job=resnet20 --dl-data=data/none dljob 2>&1) && fail "a missing relative --dl-data was accepted"
grep -qF "dljob: --dl-data=data/none ($WORK/sub/data/none): No such file or directory" <<<"$out" || fail "missing relative --dl-data: $out"
echo "ok   a relative --dl-data and the default --dl-out are made absolute from the step's working directory (sbatch/srun --chdir)"

# Preemptible: USR1 to the batch script -> the step's tasks get USR1 and
# exit 0 -> requeue -> the second run (SLURM_RESTART_COUNT=1) finishes.
rm -f log/*
export FAKE_RUNTIME_WAIT=0
jid=$(sbatch --parsable -o pre.out "$DLJOB_SRCDIR/contrib/sbatch/dljob-preemptible.sbatch") || fail "sbatch preemptible"
t=0
until grep -qx waiting log/rank0.0 2>/dev/null && grep -qx waiting log/rank1.0 2>/dev/null; do
	sleep 0.2
	t=$((t + 1))
	[ $t -lt 300 ] || fail "preemptible job did not start its tasks: $(cat pre.out 2>/dev/null)"
done
scancel --batch --signal=USR1 "$jid" || fail "scancel --batch --signal=USR1"
# Slurm holds a requeued job back (BeginTime) for a while; the test does
# not wait for that.
t=0
until [ "$(squeue -h -j "$jid" -o %T 2>/dev/null)" = PENDING ]; do
	sleep 0.2
	t=$((t + 1))
	[ $t -lt 300 ] || fail "job $jid was not requeued: $(cat pre.out); $(squeue -j "$jid")"
done
scontrol update JobId="$jid" StartTime=now || fail "scontrol update StartTime=now"
t=0
until [ -f log/rank0.1 ] && [ -f log/rank1.1 ]; do
	sleep 0.5
	t=$((t + 1))
	[ $t -lt 120 ] || fail "job $jid did not run again: $(cat pre.out); $(squeue -j "$jid")"
done
job_done "$jid" 60
grep -qx usr1=1 log/rank0.0 && grep -qx usr1=1 log/rank1.0 || fail "tasks did not get USR1: $(cat log/rank0.0)"
grep -qx SLURM_RESTART_COUNT=1 log/rank0.1 || fail "second run: $(cat log/rank0.1)"
grep -qx "arg10=$WORK/dljob-$jid" log/rank0.1 || fail "second run's --out differs: $(cat log/rank0.1)"
grep -q "requeueing job $jid" pre.out || fail "no requeue message: $(cat pre.out)"
echo "ok   contrib/sbatch/dljob-preemptible.sbatch: USR1 -> checkpoint -> requeue -> same --out"
# A job array with #SBATCH --dl-* lines: its tasks run at once on the same
# nodes, each a job of its own (SLURM_JOB_ID), so each step is its own world
# on its own derived MASTER_PORT (default range: 29500 + (job*31 + step) % 500).
cat >arr.sbatch <<'EOS'
#!/bin/bash
#SBATCH -N2 -n2 --dl-job=env
srun bash -c 'echo "$SLURM_ARRAY_TASK_ID $SLURM_JOB_ID $RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT"' | sort
EOS
jid=$(sbatch --parsable --array=0-1 -o 'arr-%a.out' arr.sbatch) || fail "sbatch --array=0-1"
job_done "$jid" 90
jobs=""
for a in 0 1; do
	j=$(awk '{print $2; exit}' "arr-$a.out")
	[ -n "$j" ] || fail "array task $a: $(cat "arr-$a.out")"
	p=$((29500 + (j * 31) % 500))
	[ "$(cat "arr-$a.out")" = "$a $j 0 2 n1 $p
$a $j 1 2 n1 $p" ] || fail "array task $a (job $j): $(cat "arr-$a.out")"
	jobs="$jobs $j"
done
[ "$(tr ' ' '\n' <<<"$jobs" | sort -u | grep -c .)" -eq 2 ] || fail "array tasks share a job id:$jobs"
echo "ok   sbatch --array=0-1 with #SBATCH --dl-job=env: each task its own world and MASTER_PORT (jobs$jobs)"
nodes_idle
