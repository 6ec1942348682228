#!/bin/bash
# Preemption the way Slurm delivers it, with the real runtime under the
# plugin: 'scancel --signal=USR1' reaches both tasks of a 2-node step, which
# checkpoint and exit 0; the requeued run (SLURM_RESTART_COUNT=1, same
# --dl-out) resumes by itself, is stopped again by SIGTERM (what preemption
# and, from Slurm 26.05, a failed task's step send first) and checkpoints
# the same way; a third run resumes and finishes; its weights equal, bit
# for bit, those of a run that was never interrupted (training uses batch statistics
# only, so rank 1 resuming with rank 0's running stats changes nothing).
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
[ -x "${DLJOB_BIN:-}" ] || fail "DLJOB_BIN=${DLJOB_BIN:-} is not built"
spank_cluster_up
cd "$WORK" || fail "cd $WORK"

# 2 classes x 4 PNGs per split: 2 steps per epoch at 2 ranks x batch 2.
"${TORCH_PYTHON:-/usr/bin/python3}" "$DLJOB_SRCDIR/tests/tiny_imagefolder.py" data/tiny 4 12 ||
	fail "cannot write the tiny dataset"
cluster_plugstack "runtime=$DLJOB_BIN data_allow=$WORK/data"

epochs=10
train() { # OUT NAME: one 2-node training step through the plugin
	srun -N2 -n2 -J "$2" --dl-job=resnet20 --dl-data=data/tiny --dl-epochs=$epochs --dl-batch=2 \
		--dl-lr=0.1 --dl-out="$1" "$DLJOB_BIN"
}
epochs_done() { local n; n=$(grep -c '"top1"' "$1/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }

train full full >full.log 2>&1 || fail "uninterrupted run: $(cat full.log)"
[ -s full/model.safetensors ] || fail "no full/model.safetensors"

# interrupt LOG SIGNAL MIN RESTARTS NAME: run the step into LOG (as the
# job's RESTARTS-th requeue), send SIGNAL to the job once MIN epochs are
# done; the ranks checkpoint, rank 0 says so naming the signal (NAME), all
# exit 0.
interrupt() {
	local log=$1 sig=$2 min=$3 pid t=0 jid
	( [ "$4" = 0 ] || export SLURM_RESTART_COUNT=$4; train part part ) >"$log" 2>&1 &
	pid=$!
	while [ "$(epochs_done part)" -lt "$min" ]; do
		kill -0 $pid 2>/dev/null || fail "run ended before epoch $min: $(cat "$log")"
		sleep 0.1; t=$((t + 1)); [ $t -lt 1000 ] || fail "no epoch $min within 100 s: $(cat "$log")"
	done
	jid=$(squeue -h -n part -o %i | head -n 1)
	[ -n "$jid" ] || fail "cannot find the job of the running step"
	scancel --signal="$sig" "$jid" || fail "scancel --signal=$sig $jid"
	wait $pid || fail "the step stopped by SIG$sig did not exit 0: $(cat "$log")"
	grep -q "$5: stopped after step" "$log" || fail "no stop line for SIG$sig: $(cat "$log")"
	[ "$(grep -c "stopped after step" "$log")" -eq 1 ] || fail "more than rank 0 printed the stop line: $(cat "$log")"
	if [ ! -s part/checkpoint.safetensors ] || [ -e part/model.safetensors ]; then fail "after SIG$sig: $(ls part)"; fi
	[ "$(epochs_done part)" -lt $epochs ] || fail "SIG$sig came too late to test anything"
	echo "ok   scancel --signal=$sig: $(grep -o 'stopped after step [0-9]*' "$log")"
}
# resumed_at LOG PREV: LOG's run resumed where PREV's stopped.
resumed_at() {
	stopped=$(grep -o 'stopped after step [0-9]*' "$2" | grep -o '[0-9]*$')
	if ! grep -q "resuming from" "$1" || ! grep -q "resumed from .* at step $stopped " "$1"; then
		fail "the requeued run did not resume at step $stopped: $(cat "$1")"
	fi
}
interrupt part1.log USR1 3 0 "User defined signal 1"
# What a requeued job sees: same command line, same --dl-out, restart count
# 1; stopped again, by SIGTERM this time.
interrupt part2.log TERM 6 1 "Terminated"
resumed_at part2.log part1.log
echo "ok   the requeued run resumed at step $stopped"
SLURM_RESTART_COUNT=2 train part part >part3.log 2>&1 || fail "requeued run: $(cat part3.log)"
resumed_at part3.log part2.log
# Only the CPU backend promises bit-for-bit reproducibility (on a GPU node
# the plugin's command line picks cuda, whose cuDNN algorithms may not).
if grep -q " cpu backend," full.log; then
	cmp full/model.safetensors part/model.safetensors || fail "resumed weights differ from the uninterrupted run"
else
	echo "note: $(grep -o '[a-z]* backend,' full.log | head -n 1) not compared bit for bit"
fi
[ "$(epochs_done part)" -eq $epochs ] || fail "want $epochs eval records, got $(epochs_done part)"
echo "ok   requeued run resumed at step $stopped and finished"
nodes_idle
