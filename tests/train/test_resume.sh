#!/bin/bash
# Preemption and resume: a run stopped by SIGTERM (mid-epoch) and then by
# SIGUSR1 (in the next epoch), resumed each time with --resume, must end with
# the same weights, bit for bit, as a run that was never interrupted; and its
# metrics.jsonl must log the same per-step losses.
set -u
bin=${DLJOB_BIN:?DLJOB_BIN not set}
py=${TORCH_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-resume.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1

# 32 steps per epoch, 2 epochs, stop after 48: crosses one epoch boundary
# (eval + checkpoint) and ends mid-epoch.  One thread: oneDNN is
# deterministic for fixed shapes and thread count.  Steps take ~0.1 s, so
# the signals below land mid-run.
args=(--model resnet20 --backend cpu --data "synthetic:1,32,32,4,1024" --batch 32
      --epochs 2 --steps 48 --lr 0.4 --warmup-epochs 0.5 --seed 7 --threads 1 --loader-threads 1
      --print-every 1)

fail() { echo "FAIL: $*"; exit 1; }

"$bin" "${args[@]}" --out full 2>full.log || { cat full.log; fail "uninterrupted run"; }

# Last step logged in DIR/metrics.jsonl (0 if none yet).
last_step() {
	local s
	s=$(tail -n 1 "$1/metrics.jsonl" 2>/dev/null | sed -n 's/^{"step":\([0-9]*\),.*/\1/p')
	echo "${s:-0}"
}

# run_until SIG STEP [ARGS...]: start dljob, send SIG once metrics reach STEP,
# and check that it stops cleanly: exit 0, one line saying so, a checkpoint.
run_until() {
	local sig=$1 at=$2; shift 2
	"$bin" "${args[@]}" --out part "$@" 2>run.log &
	pid=$!
	local t=0
	while [ "$(last_step part)" -lt "$at" ]; do
		kill -0 "$pid" 2>/dev/null || { cat run.log; fail "dljob ended before step $at"; }
		sleep 0.05
		t=$((t + 1))
		[ $t -lt 2400 ] || fail "no step $at within 120 s"
	done
	kill "-$sig" "$pid"
	wait "$pid"
	local rc=$?
	pid=
	cat run.log >>part.log
	[ $rc -eq 0 ] || { cat run.log; fail "exit status $rc after SIG$sig, want 0"; }
	grep -q "stopped after step .*checkpoint written" run.log || { cat run.log; fail "no stop line after SIG$sig"; }
	[ -s part/checkpoint.safetensors ] || fail "no checkpoint after SIG$sig"
	[ ! -e part/model.safetensors ] || fail "model.safetensors written by a preempted run"
	local stopped
	stopped=$(last_step part)
	[ "$stopped" -lt 48 ] || fail "SIG$sig arrived too late to test anything (step $stopped)"
	echo "SIG$sig: stopped at step $stopped"
	# The checkpoint records where it stopped, and holds the optimizer and
	# BN state (safetensors: u64 header length, JSON header).
	"$py" - part/checkpoint.safetensors "$stopped" <<'PYEOF' || fail "checkpoint contents after SIG$sig"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n, = struct.unpack("<Q", f.read(8))
    h = json.loads(f.read(n))
m, step = h["__metadata__"], int(sys.argv[2])
assert m["format"] == "dljob-checkpoint-1" and m["model"] == "resnet20", m
assert int(m["step"]) == step, (m, step)
assert int(m["epoch"]) * 32 + int(m["epoch_step"]) == step, m
assert m["seed"] == "7" and m["global_batch"] == "32" and m["epochs"] == "2", m
for k in ["conv1.weight", "conv1.weight.momentum_buffer", "bn1.running_var", "fc.bias.momentum_buffer"]:
    assert h[k]["dtype"] == "F32", (k, h.get(k))
assert h["bn1.num_batches_tracked"]["dtype"] == "I64", h.get("bn1.num_batches_tracked")
PYEOF
}

run_until TERM 5
run_until USR1 38 --resume
"$bin" "${args[@]}" --out part --resume=part/checkpoint.safetensors 2>>part.log || { cat part.log; fail "final resume"; }
grep -c "resumed from" part.log | grep -qx 2 || fail "expected two 'resumed from' lines"
[ -s part/checkpoint.prev.safetensors ] || fail "no checkpoint.prev.safetensors kept"

cmp full/model.safetensors part/model.safetensors || fail "resumed weights differ from the uninterrupted run"

# metrics.jsonl: JSON lines with every field; the resumed log continues the
# step count and repeats the uninterrupted run's losses exactly.
"$py" - full/metrics.jsonl part/metrics.jsonl <<'PYEOF' || fail "metrics.jsonl"
import json, sys
need = ["step", "epoch", "loss", "lr", "img_per_s", "loader_stall_s", "bad_samples", "wall_s"]
logs = []
for path in sys.argv[1:]:
    recs = [json.loads(line) for line in open(path)]
    for r in recs:
        missing = [k for k in need if k not in r]
        assert not missing, f"{path}: {r} lacks {missing}"
    evals = [r for r in recs if "top1" in r]
    assert len(evals) == 1 and evals[0]["step"] == 32, f"{path}: want one eval at step 32, got {evals}"
    assert 0 <= evals[0]["top1"] <= evals[0]["top5"] <= 100, evals
    steps = [r["step"] for r in recs if "top1" not in r]
    assert steps == list(range(1, 49)), f"{path}: steps {steps}"
    logs.append([(r["step"], r["loss"], r["lr"]) for r in recs])
assert logs[0] == logs[1], f"losses differ:\n{logs[0]}\n{logs[1]}"
print("metrics ok:", len(logs[0]), "records, eval", [r for r in recs if "top1" in r][0]["top1"])
PYEOF
exit 0
