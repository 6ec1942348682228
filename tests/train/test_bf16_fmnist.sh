#!/bin/bash
# --precision bf16 trains like fp32: ResNet-20 on the real Fashion-MNIST,
# the same seed and 200 steps of batch 64 in both precisions (run side by
# side, one compute thread each), and the bf16 run's loss over its last 50
# steps must be within 15 % of fp32's (+0.03 for noise) and well below the
# starting 2.30.  A bf16 path that computes garbage, or drops the gradient
# updates, stays near 2.3.
set -u
bin=${DLJOB_BIN:?DLJOB_BIN not set}
py=${TORCH_PYTHON:-/usr/bin/python3}
data=${DLJOB_FMNIST:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-bf16.XXXXXX") || exit 1
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

[ -r "$data/train-images-idx3-ubyte.gz" ] || [ -r "$data/train-images-idx3-ubyte" ] ||
	{ echo "FAIL: no Fashion-MNIST in $data (apt install dataset-fashion-mnist)"; exit 1; }

# Bad values and backends without bf16 are refused with one clear line.
mkdir -p "$work/x" || exit 1
"$bin" --backend cpu --precision fp16 --model resnet20 --synthetic --out "$work/x" 2>"$work/x.log" &&
	{ echo "FAIL: --precision fp16 was accepted"; exit 1; }
grep -q "precision fp16 is not supported by the cpu backend" "$work/x.log" ||
	{ cat "$work/x.log"; echo "FAIL: no message for fp16"; exit 1; }
"$bin" --backend ref --precision bf16 --model resnet20 --synthetic --steps 1 --out "$work/x" 2>"$work/x.log" &&
	{ echo "FAIL: --backend ref --precision bf16 was accepted"; exit 1; }
grep -q "precision bf16 is not supported by the ref backend" "$work/x.log" ||
	{ cat "$work/x.log"; echo "FAIL: no message for ref + bf16"; exit 1; }

for p in fp32 bf16; do
	mkdir -p "$work/$p" || exit 1
	"$bin" --model resnet20 --data "fashion-mnist:$data" --epochs 1 --batch 64 --lr 0.4 \
		--schedule constant --weight-decay 5e-4 --seed 1 --threads 1 --loader-threads 1 \
		--steps 200 --eval 0 --print-every 10 --precision "$p" --out "$work/$p" \
		2>"$work/$p.log" &
	pids+=($!)
done
rc=0
for i in 0 1; do
	wait "${pids[$i]}" || rc=$?
done
pids=()
tail -n 3 "$work/fp32.log" "$work/bf16.log"
grep -q "cpu backend (bf16)" "$work/bf16.log" || { echo "FAIL: the bf16 run did not say bf16"; exit 1; }
[ $rc -eq 0 ] || { echo "FAIL: dljob exited with $rc"; exit 1; }

"$py" - "$work/fp32/metrics.jsonl" "$work/bf16/metrics.jsonl" <<'PYEOF'
import json, sys
def tail_loss(path):
    recs = [json.loads(l) for l in open(path)]
    losses = [r["loss"] for r in recs if "loss" in r and "top1" not in r and r["step"] > 150]
    assert len(losses) == 5, f"{path}: want 5 loss records after step 150, got {losses}"
    return sum(losses) / len(losses)
f, b = tail_loss(sys.argv[1]), tail_loss(sys.argv[2])
print(f"mean loss over steps 160-200: fp32 {f:.4f}  bf16 {b:.4f}  (bf16/fp32 {b / f:.3f})")
ok = b <= 1.15 * f + 0.03 and b < 1.2 and f < 1.2
print("ok" if ok else "FAIL: bf16 does not train like fp32 (or neither trained)")
sys.exit(0 if ok else 1)
PYEOF
