#!/bin/bash
# Preemption the way Slurm delivers it, with the real runtime under the
# plugin: 'scancel --signal=USR1' reaches both tasks of a 2-node step, which
# checkpoint and exit 0; the requeued run (SLURM_RESTART_COUNT=1, same
# --dl-out) resumes by itself and finishes; its weights equal, bit for bit,
# those of a run that was never interrupted (training uses batch statistics
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

train part part >part1.log 2>&1 &
pid=$!
t=0
while [ "$(epochs_done part)" -lt 3 ]; do
	kill -0 $pid 2>/dev/null || fail "run ended before epoch 3: $(cat part1.log)"
	sleep 0.1; t=$((t + 1)); [ $t -lt 1000 ] || fail "no epoch 3 within 100 s: $(cat part1.log)"
done
jid=$(squeue -h -n part -o %i | head -n 1)
[ -n "$jid" ] || fail "cannot find the job of the running step"
scancel --signal=USR1 "$jid" || fail "scancel --signal=USR1 $jid"
wait $pid || fail "the preempted step did not exit 0: $(cat part1.log)"
grep -q "User defined signal 1: stopped after step" part1.log || fail "no stop line: $(cat part1.log)"
[ "$(grep -c "stopped after step" part1.log)" -eq 1 ] || fail "more than rank 0 printed the stop line: $(cat part1.log)"
if [ ! -s part/checkpoint.safetensors ] || [ -e part/model.safetensors ]; then fail "after USR1: $(ls part)"; fi
[ "$(epochs_done part)" -lt $epochs ] || fail "USR1 came too late to test anything"
echo "ok   scancel --signal=USR1: $(grep -o 'stopped after step [0-9]*' part1.log)"

# What a requeued job sees: same command line, same --dl-out, restart count 1.
SLURM_RESTART_COUNT=1 train part part >part2.log 2>&1 || fail "requeued run: $(cat part2.log)"
stopped=$(grep -o 'stopped after step [0-9]*' part1.log | grep -o '[0-9]*$')
if ! grep -q "resuming from" part2.log || ! grep -q "resumed from .* at step $stopped " part2.log; then
	fail "the requeued run did not resume at step $stopped: $(cat part2.log)"
fi
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
