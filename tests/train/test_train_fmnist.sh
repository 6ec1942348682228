#!/bin/bash
# One epoch of ResNet-20 on the real Fashion-MNIST must reach >= 85 % top-1
# on the 10000 test images, and metrics.jsonl must hold well-formed records.
# Takes a few minutes on 2 cores.
set -u
bin=${DLJOB_BIN:?DLJOB_BIN not set}
py=${TORCH_PYTHON:-/usr/bin/python3}
data=${DLJOB_FMNIST:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-fmnist.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# Fashion-MNIST is a declared build dependency of the tests: no skipping.
[ -r "$data/train-images-idx3-ubyte.gz" ] || [ -r "$data/train-images-idx3-ubyte" ] ||
	{ echo "FAIL: no Fashion-MNIST in $data (apt install dataset-fashion-mnist)"; exit 1; }

# One epoch as a short one-cycle: warm up to the peak (0.8 x 128/256 = 0.4)
# over a fifth of the epoch, then cosine down to 0.  One compute thread: it
# is as fast as two on a shared 2-core machine and keeps OpenMP from
# spinning against the loader.
"$bin" --model resnet20 --data "fashion-mnist:$data" --epochs 1 --batch 128 --lr 0.8 \
	--warmup-epochs 0.2 --weight-decay 5e-4 --seed 1 --threads 1 --print-every 50 \
	--out "$work/out" 2>"$work/log"
rc=$?
cat "$work/log"
[ $rc -eq 0 ] || { echo "FAIL: dljob exited with $rc"; exit 1; }

"$py" - "$work/out/metrics.jsonl" <<'PYEOF'
import json, sys
need = ["step", "epoch", "loss", "lr", "img_per_s", "loader_stall_s", "compute_s", "comm_s",
        "exposed_comm_s", "bad_samples", "wall_s"]
recs = [json.loads(line) for line in open(sys.argv[1])]
for r in recs:
    missing = [k for k in need if k not in r]
    assert not missing, f"{r} lacks {missing}"
    assert r["bad_samples"] == 0, r
    # One rank: nothing to reduce.  The phases are per record, so they fit
    # in the record's share of the wall clock.
    assert r["comm_s"] == 0 and r["exposed_comm_s"] == 0, r
    assert r["loader_stall_s"] >= 0, r
train = [r for r in recs if "top1" not in r]
for a, b in zip(train, train[1:]):
    assert 0 < b["compute_s"] <= b["wall_s"] - a["wall_s"] + 1e-3, (a, b)
evals = [r for r in recs if "top1" in r]
assert len(evals) == 1, f"want one eval record, got {len(evals)}"
e = evals[0]
assert e["eval_samples"] == 10000 and e["step"] == 468 and e["epoch"] == 1, e
print(f"top1 {e['top1']:.2f} %  top5 {e['top5']:.2f} %  eval loss {e['eval_loss']:.4f}  "
      f"{recs[-2]['img_per_s']:.0f} img/s  {e['wall_s']:.0f} s")
if e["top1"] < 85.0:
    print(f"FAIL: top-1 {e['top1']:.2f} % < 85 %")
    sys.exit(1)
PYEOF
