#!/bin/bash
# A --dl-job=MODEL task is set up by Slurm exactly like any other task: the
# soft open-files limit srun propagates (ulimit -Sn), TMPDIR, and the
# task_init of a SPANK plugin listed after dljob.so
# (tests/slurm/marker_spank.c) are the same in model mode as in env mode
# and without dljob at all.  (Before, the plugin execve'd the runtime from
# its own task_init, ahead of all of these.)
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
fake=$DLJOB_SRCDIR/tests/slurm/test_spank_fake_runtime.sh
mkdir -p data log || fail mkdir
export FAKE_RUNTIME_LOG=$WORK/log
runtime_on_path "$fake"
plugstack_with_marker "runtime=$fake data_allow=$WORK/data"
probe='printf "nofile=%s\nTMPDIR=%s\nDLJOB_TEST_MARKER=%s\n" "$(ulimit -Sn)" "${TMPDIR-unset}" "${DLJOB_TEST_MARKER-unset}"'

(
	ulimit -Sn 777 || exit 1
	srun -N1 -n1 bash -c "$probe" >plain.out 2>err.txt || exit 1
	srun -N1 -n1 --dl-job=env bash -c "$probe" >env.out 2>>err.txt || exit 1
	srun -N1 -n1 --dl-job=resnet20 --dl-data=data dljob 2>>err.txt
) || fail "srun with ulimit -Sn 777: $(cat err.txt)"
grep -E '^(nofile|TMPDIR|DLJOB_TEST_MARKER)=' log/rank0.0 >model.out
sort -o plain.out plain.out
grep -qx nofile=777 plain.out || fail "the limit did not reach a plain task: $(cat plain.out)"
grep -qx DLJOB_TEST_MARKER=task_init plain.out || fail "the marker plugin did not run: $(cat plain.out)"
grep -qx 'TMPDIR=unset' plain.out && fail "Slurm set no TMPDIR: $(cat plain.out)"
for mode in env model; do
	sort -o $mode.out $mode.out
	diff plain.out $mode.out >/dev/null || fail "$mode mode task set up differently from a plain task:
$(diff plain.out $mode.out)"
done
echo "ok   ulimit -Sn 777, TMPDIR and a later plugin's task_init: the same in model mode, env mode and without dljob"
nodes_idle
