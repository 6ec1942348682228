#!/bin/bash
# The engine trains resnet20 end to end from a JPEG ImageFolder made from
# real Fashion-MNIST images (Debian's dataset-fashion-mnist: 5000 training
# images as grayscale JPEG, some as PNG, 1000 held-out), through the whole
# pipeline: scan, decode, RandomResizedCrop + flip, loader, and again from
# the shards `dljob pack` makes of the same folder.  Learning is checked, not
# just running: top-1 far above chance (10 %) after a few epochs.
. "$DLJOB_SRCDIR/tests/lib.sh"
FMNIST=/usr/share/datasets/fashion-mnist
need_file "$FMNIST/train-images-idx3-ubyte.gz" "Debian package dataset-fashion-mnist"
need_file "$DLJOB_BIN"
work=$(mktemp -d /tmp/dljob-ifx.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

"$TORCH_PYTHON" - "$FMNIST" <<'PY' || { fail "cannot write the ImageFolder"; finish; }
import gzip, os, sys
import numpy as np
from PIL import Image
src = sys.argv[1]
names = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]
def idx(path, off):
    return np.frombuffer(gzip.open(path).read(), np.uint8, offset=off)
for split, stem, per in (("train", "train", 500), ("val", "t10k", 100)):
    x = idx(f"{src}/{stem}-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    y = idx(f"{src}/{stem}-labels-idx1-ubyte.gz", 8)
    for c, name in enumerate(names):
        d = f"data/{split}/{name}"
        os.makedirs(d)
        for j, i in enumerate(np.flatnonzero(y == c)[:per]):
            img = Image.fromarray(x[i], "L")
            if j % 10 == 9:
                img.save(f"{d}/{i}.png")
            else:
                img.save(f"{d}/{i}.jpg", quality=90)
PY
check "ImageFolder of 5000+1000 Fashion-MNIST JPEG/PNG files" test "$(find data -type f | wc -l)" -eq 6000

train() { # out data
	OMP_NUM_THREADS=1 timeout 600 "$DLJOB_BIN" --model resnet20 --data "$2" --image-size 28 --epochs 4 \
		--batch 64 --lr 0.4 --warmup-epochs 0.5 --seed 1 --threads 1 --out "$1" >"$1.log" 2>&1
}
top1() { sed -n 's/.*"top1":\([0-9.]*\).*/\1/p' "$1/metrics.jsonl" 2>/dev/null | tail -1; }
above() { "$TORCH_PYTHON" -c "import sys; sys.exit(0 if float('${1:-0}') >= $2 else 1)"; }

check "resnet20 trains from the folder" train folder "$work/data"
t=$(top1 folder)
check "folder: top-1 after 4 epochs ${t:-none}% >= 60% (chance 10%)" above "$t" 60
check "folder: no bad samples" grep -q '"bad_samples":0' folder/metrics.jsonl

check "dljob pack makes shards of the folder" "$DLJOB_BIN" pack data shards
check "resnet20 trains from the shards" train fromshards "$work/shards"
s=$(top1 fromshards)
check "shards: top-1 ${s:-none}% >= 60%" above "$s" 60
# Same images, labels, order and augmentation: the two runs see the same
# samples (JPEG bytes are stored as they are; PNGs are re-encoded, so not
# bit-identical), so their accuracy is close.
check "folder and shards agree within 5 points ($t vs $s)" \
	"$TORCH_PYTHON" -c "import sys; sys.exit(0 if abs(float('${t:-0}') - float('${s:-100}')) <= 5 else 1)"
[ "$_failed" -eq 0 ] || tail -n 3 ./*.log
finish
