#!/bin/bash
# An ImageFolder's scan is cached next to the output (--out) and reused by the
# next run (a resume, a requeued job) while the tree is unchanged; a changed
# tree is scanned again.  A run refused by its checks writes nothing.
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN"
work=$(mktemp -d /tmp/dljob-idx.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
# A tiny ImageFolder made here: 2 classes x 3 PNGs per split.
"$TORCH_PYTHON" "$DLJOB_SRCDIR/tests/tiny_imagefolder.py" data 3 20 || { fail "cannot write the dataset"; finish; }
# a scan of directories changed less than 2 s before it is not cached (the
# tree may still be changing within their mtime's clock tick): age the tree
find data -type d -exec touch -d '1 minute ago' {} +
run() { OMP_NUM_THREADS=1 "$DLJOB_BIN" --model resnet20 --data "$work/data" --image-size 32 --batch 2 --steps 1 --eval 0 --out "$work/out" "$@" >>log 2>&1; }

"$DLJOB_BIN" --model resnet20 --data "$work/data" --batch 999 --out "$work/refused" >>log 2>&1
check "a refused run (batch larger than the split) creates no --out" test ! -e refused
check "first run" run
idx=$(ls out/imagefolder-*.idx 2>/dev/null)
check "the scan index is cached in --out ($idx)" test -n "$idx"
m1=$(stat -c %Y.%y "$idx")
sleep 1.1
check "second run in the same --out" run
check "unchanged tree: the index was reused, not rewritten" test "$(stat -c %Y.%y "$idx")" = "$m1"
"$TORCH_PYTHON" -c 'from PIL import Image; Image.new("RGB", (32, 32)).save("data/train/red/3.png")'
touch -d '30 seconds ago' data/train/red
check "third run after adding an image" run
check "changed tree: the index was rewritten" test "$(stat -c %Y.%y "$idx")" != "$m1"
out=$("$DLJOB_BIN" --model resnet20 --data "$work/data" --batch 8 --out "$work/x" 2>&1)
check "the rescan sees the new image (7 training samples): $out" grep -q "(7 samples)" <<<"$out"
finish
