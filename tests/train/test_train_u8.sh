#!/bin/bash
# The trainer's uint8 feed (what the CUDA backend gets: uint8 NHWC batches,
# normalized by the backend) against its float feed, on the CPU.  The ref
# backend takes uint8 batches (takes_u8), the cpu backend float ones, so the
# same run through each must give the same losses and the same eval:
#  - Fashion-MNIST, whose pixels are uint8 to begin with (both feeds exact);
#  - a tiny ImageFolder of solid-colour PNGs (resampling a constant image is
#    exact too), with the eval pass on, which goes through the uint8 feed as
#    well.
# Direct convolutions on the cpu side, so the two differ only by float32 vs
# float64 arithmetic.
. "$DLJOB_SRCDIR/tests/lib.sh"
FMNIST=/usr/share/datasets/fashion-mnist
need_file "$FMNIST/train-images-idx3-ubyte.gz" "Debian package dataset-fashion-mnist"
need_file "$DLJOB_BIN"
work=$(mktemp -d /tmp/dljob-u8.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

run() { # out backend args...
	local out=$1 be=$2; shift 2
	local extra=()
	[ "$be" = cpu ] && extra=(--conv-algo direct)
	timeout 300 "$DLJOB_BIN" --backend "$be" "${extra[@]}" --model convnet --seed 5 --threads 2 \
		--print-every 1 --out "$out" "$@" 2>"$out.log"
}

# compare A B TOL: the losses of every step and the eval records agree.
compare() {
	"$TORCH_PYTHON" - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
tol = float(sys.argv[3])
sa = {r["step"]: r["loss"] for r in a if "top1" not in r}
sb = {r["step"]: r["loss"] for r in b if "top1" not in r}
assert sa and sa.keys() == sb.keys(), f"steps differ: {sorted(sa)} vs {sorted(sb)}"
worst = max(abs(sa[k] - sb[k]) / abs(sb[k]) for k in sa)
ea = [(r["top1"], r["top5"], r["eval_samples"]) for r in a if "top1" in r]
eb = [(r["top1"], r["top5"], r["eval_samples"]) for r in b if "top1" in r]
print(f"{len(sa)} steps, worst loss rel diff {worst:.2e} (limit {tol:g}); eval {ea} vs {eb}")
sys.exit(0 if worst < tol and ea == eb else 1)
PY
}

run fm-u8 ref --data "$FMNIST" --batch 32 --steps 6 --eval 0
check "ref backend trains Fashion-MNIST" test -s fm-u8/metrics.jsonl
check "ref backend runs on uint8 batches" grep -q "ref backend (uint8 batches)" fm-u8.log
run fm-f32 cpu --data "$FMNIST" --batch 32 --steps 6 --eval 0
check "cpu backend trains Fashion-MNIST" test -s fm-f32/metrics.jsonl
check "cpu backend runs on float batches" grep -q "cpu backend, " fm-f32.log
check "Fashion-MNIST: uint8 and float feeds give the same losses" compare fm-u8 fm-f32 1e-4

"$TORCH_PYTHON" "$DLJOB_SRCDIR/tests/tiny_imagefolder.py" tiny 6 10 red,blue,green ||
	{ fail "cannot write the tiny ImageFolder"; finish; }
run if-u8 ref --data tiny --image-size 32 --batch 6 --epochs 2 --lr 0.05
check "ref backend trains the ImageFolder on uint8 batches" grep -q "ref backend (uint8 batches)" if-u8.log
run if-f32 cpu --data tiny --image-size 32 --batch 6 --epochs 2 --lr 0.05
check "both ImageFolder runs evaluated every epoch" \
	test "$(grep -c top1 if-u8/metrics.jsonl)" -eq 2 -a "$(grep -c top1 if-f32/metrics.jsonl)" -eq 2
check "ImageFolder: uint8 and float feeds give the same losses and eval" compare if-u8 if-f32 1e-4
finish
